"""Tool describe_table: summary statistics of every column."""

from __future__ import annotations

import pandas


def describe_table(table: pandas.DataFrame) -> pandas.DataFrame:
    """Count, mean, spread and quartiles of the numeric columns; count, distinct values and the most
    frequent one of the others (``DataFrame.describe(include="all")``)."""
    return table.describe(include="all")
