"""Tool drop_missing: the rows of a table with no missing value."""

from __future__ import annotations

import pandas

from toolpath.catalogs.tabular._common import check_columns, column_list


def drop_missing(table: pandas.DataFrame, columns: list[str] | None = None) -> pandas.DataFrame:
    """The rows of ``table`` with no missing value (an empty cell) in any column, or in ``columns`` when
    given; the table's order and index are kept.

    Raises:
        KeyError: a column the table does not have. ValueError: an empty list of columns.
    """
    if columns is None:
        return table.dropna()
    columns = column_list(columns, "columns", "drop_missing")
    check_columns(table, *columns)
    return table.dropna(subset=columns)
