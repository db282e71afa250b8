"""Tool group_and_aggregate: one row per group with an aggregate of each named column."""

from __future__ import annotations

from typing import Literal

import pandas

from toolpath.catalogs.tabular._common import aggregate_per_group, check_columns, column_list


def group_and_aggregate(
    table: pandas.DataFrame, by: str, columns: list[str], how: Literal["sum", "mean", "median", "count", "min", "max"] = "mean"
) -> pandas.DataFrame:
    """Group the rows by column ``by`` and aggregate each of ``columns`` per group with ``how`` (sum,
    mean, median, count, min or max; ``count`` counts each group's rows, so every count column holds
    the same numbers).

    Returns:
        One row per group (rows whose ``by`` is missing form a group of their own): the ``by`` column,
        then one column per aggregated column named ``{how}_{column}`` (``sum_revenue``); largest first
        by the first aggregated column.

    Raises:
        KeyError: a column the table does not have.
        ValueError: another ``how``, no columns, or sum, mean or median of a column that is not numbers.
    """
    columns = column_list(columns, "columns", "group_and_aggregate")
    check_columns(table, by, *columns)
    aggregated = pandas.concat([aggregate_per_group(table, by, column, how, "group_and_aggregate").rename(f"{how}_{column}") for column in columns], axis=1)
    return aggregated.sort_values(f"{how}_{columns[0]}", ascending=False, kind="stable").reset_index()
