"""Tool pivot_table: a table reshaped to one row per value of a column and one column per value of another."""

from __future__ import annotations

from typing import Literal

import pandas

from toolpath.catalogs.tabular._common import aggregate_per_group


def pivot_table(
    table: pandas.DataFrame, rows: str, columns: str, values: str, how: Literal["sum", "mean", "median", "count", "min", "max"] = "sum"
) -> pandas.DataFrame:
    """A pivot table: one row per value of column ``rows`` (the first column, sorted), one column per
    value of column ``columns`` (sorted), each cell the ``how`` (sum, mean, median, count, min or max;
    count counts rows) of column ``values`` over the rows with that pair. A pair with no rows is 0 for
    sum and count, and empty (NaN) for the others.

    Raises:
        KeyError: a column the table does not have.
        ValueError: another ``how``, or sum, mean or median of a column that does not hold numbers.
    """
    cells = aggregate_per_group(table, [rows, columns], values, how, "pivot_table")
    pivot = cells.unstack(columns, fill_value=0) if how in ("sum", "count") else cells.unstack(columns)
    pivot.columns.name = None
    return pivot.reset_index()
