"""Tool group_and_aggregate: one row per group with an aggregate of a column."""

from __future__ import annotations

from typing import Literal

import pandas

from toolpath.catalogs.tabular._common import check_columns


def group_and_aggregate(
    table: pandas.DataFrame, by: str, column: str, how: Literal["mean", "sum", "min", "max", "count", "median"] = "mean"
) -> pandas.DataFrame:
    """Group the rows by ``by`` and aggregate ``column`` in each group (``how``: mean, sum, min, max,
    count or median); one row per group, largest aggregate first.

    Raises:
        KeyError: a column the table does not have. ValueError: another ``how``.
    """
    check_columns(table, by, column)
    if how not in ("mean", "sum", "min", "max", "count", "median"):
        raise ValueError(f"cannot aggregate by {how!r}: use mean, sum, min, max, count or median")
    grouped = table.groupby(by)[column].agg(how).rename(f"{how}_{column}")
    return grouped.sort_values(ascending=False).reset_index()
