"""Tool drop_duplicates: the rows of a table, each once."""

from __future__ import annotations

import pandas

from toolpath.catalogs.tabular._common import check_columns, column_list


def drop_duplicates(table: pandas.DataFrame, columns: list[str] | None = None) -> pandas.DataFrame:
    """The rows of ``table`` without those that repeat an earlier row in every column, or in
    ``columns`` when given (``DataFrame.drop_duplicates``, keeping the first); the table's order and
    index are kept. Two missing values count as the same.

    Raises:
        KeyError: a column the table does not have. ValueError: an empty list of columns.
    """
    if columns is None:
        return table.drop_duplicates()
    columns = column_list(columns, "columns", "drop_duplicates")
    check_columns(table, *columns)
    return table.drop_duplicates(subset=columns)
