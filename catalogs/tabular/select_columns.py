"""Tool select_columns: only the named columns of a table."""

from __future__ import annotations

import pandas

from toolpath.catalogs.tabular._common import check_columns, column_list


def select_columns(table: pandas.DataFrame, columns: list[str]) -> pandas.DataFrame:
    """``table`` with only ``columns``, in the order given.

    Raises:
        KeyError: a column the table does not have. ValueError: no columns.
    """
    columns = column_list(columns, "columns", "select_columns")
    check_columns(table, *columns)
    return table[columns]
