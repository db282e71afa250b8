"""Tool sort_rows: the rows of a table sorted by one or more columns."""

from __future__ import annotations

from typing import Literal

import pandas

from toolpath.catalogs.tabular._common import check_choice, check_columns, column_list, ordering_key


def sort_rows(table: pandas.DataFrame, by: list[str], order: Literal["ascending", "descending"] = "ascending") -> pandas.DataFrame:
    """The rows of ``table`` sorted by the columns ``by`` (the first decides, the next break ties),
    smallest first (``ascending``) or largest first (``descending``). Text that reads as dates in every
    row sorts as dates; rows with a missing value come last; equal rows keep their order.

    Raises:
        KeyError: a column the table does not have.
        ValueError: no columns, or another ``order``.
    """
    by = column_list(by, "by", "sort_rows")
    check_columns(table, *by)
    check_choice(order, ("ascending", "descending"), "order", "sort_rows")
    return table.sort_values(by, ascending=order == "ascending", kind="stable", na_position="last", key=ordering_key)
