"""Tool correlate_columns: the correlation of every pair of numeric columns."""

from __future__ import annotations

import pandas

from toolpath.catalogs.tabular._common import check_columns, column_list, is_number_column


def correlate_columns(table: pandas.DataFrame, columns: list[str] | None = None) -> pandas.DataFrame:
    """The Pearson correlation (-1 to 1) of every pair of ``columns``, or of every numeric column when
    none are named, as a square table (rows and columns the column names). Each pair uses the rows
    where both are present (``DataFrame.corr``).

    Raises:
        KeyError: a column the table does not have.
        ValueError: a named column that is not numeric, or fewer than two numeric columns.
    """
    if columns is None:
        numeric = [column for column in table.columns if is_number_column(table[column])]
    else:
        numeric = column_list(columns, "columns", "correlate_columns")
        check_columns(table, *numeric)
        other = [column for column in numeric if not is_number_column(table[column])]
        if other:
            raise ValueError(f"correlate_columns: {', '.join(map(repr, other))} do not hold numbers; correlation needs numeric columns")
    if len(numeric) < 2:
        found = f"only {', '.join(map(repr, numeric))}" if numeric else "none"
        raise ValueError(f"correlate_columns needs at least two numeric columns; the table has {found} (its columns are {', '.join(map(str, table.columns))})")
    return table[numeric].corr(method="pearson")
