"""Tool top_rows: the rows with the largest (or smallest) values of a column."""

from __future__ import annotations

from typing import Literal

import pandas

from toolpath.catalogs.tabular._common import check_choice, check_columns, check_count, ordering_key


def top_rows(table: pandas.DataFrame, by: str, count: int = 5, order: Literal["ascending", "descending"] = "descending") -> pandas.DataFrame:
    """The ``count`` rows with the largest values of column ``by`` (``descending``, the default), or
    the smallest (``ascending``), best first. Rows where ``by`` is missing never rank; ties keep the
    table's order; text that reads as dates ranks as dates (the latest first).

    Raises:
        KeyError: a column the table does not have.
        ValueError: a ``count`` that is not a whole number 0 or more, or another ``order``.
    """
    check_columns(table, by)
    check_count(count, "count", "top_rows")
    check_choice(order, ("ascending", "descending"), "order", "top_rows")
    ranked = table[table[by].notna()].sort_values(by, ascending=order == "ascending", kind="stable", key=ordering_key)
    return ranked.head(count)
