"""Tool show_rows: the first or last few rows of a table."""

from __future__ import annotations

from typing import Literal

import pandas

from toolpath.catalogs.tabular._common import check_choice, check_count


def show_rows(table: pandas.DataFrame, count: int = 5, end: Literal["first", "last"] = "first") -> pandas.DataFrame:
    """The first (``end='first'``) or last ``count`` rows of ``table``, in the table's order; all of
    them when it has fewer.

    Raises:
        ValueError: a ``count`` that is not a whole number 0 or more, or another ``end``.
    """
    check_count(count, "count", "show_rows")
    check_choice(end, ("first", "last"), "end", "show_rows")
    if count == 0:
        return table.iloc[0:0]
    return table.head(count) if end == "first" else table.tail(count)
