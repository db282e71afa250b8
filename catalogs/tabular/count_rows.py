"""Tool count_rows: the number of rows of a table."""

from __future__ import annotations

import pandas


def count_rows(table: pandas.DataFrame) -> int:
    """The number of rows of ``table`` (rows with missing values included)."""
    return len(table)
