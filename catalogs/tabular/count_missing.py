"""Tool count_missing: the missing values of a table, per column or in all."""

from __future__ import annotations

from typing import Literal

import pandas

from toolpath.catalogs.tabular._common import check_choice


def count_missing(table: pandas.DataFrame, per: Literal["column", "total"] = "column") -> pandas.Series | int:
    """The number of missing values (empty cells, ``NaN``, ``None``, ``NaT``) of ``table``.

    Returns:
        With ``per="column"``, a Series of whole numbers indexed by the table's columns, in their
        order (0 for a complete column); with ``per="total"``, the number over the whole table.

    Raises:
        ValueError: ``per`` other than column or total.
    """
    check_choice(per, ("column", "total"), "per", "count_missing")
    counts = table.isna().sum()
    return int(counts.sum()) if per == "total" else counts
