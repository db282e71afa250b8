"""Tool drop_columns: a table without the named columns."""

from __future__ import annotations

import pandas

from toolpath.catalogs.tabular._common import check_columns, column_list


def drop_columns(table: pandas.DataFrame, columns: list[str]) -> pandas.DataFrame:
    """``table`` without ``columns``; the other columns keep their order.

    Raises:
        KeyError: a column the table does not have. ValueError: no columns.
    """
    columns = column_list(columns, "columns", "drop_columns")
    check_columns(table, *columns)
    return table.drop(columns=columns)
