"""Tool join_tables: join a second table, read from a file, on a shared column."""

from __future__ import annotations

from typing import Literal

import pandas

from toolpath.catalogs.tabular._common import check_columns, read_table


def join_tables(table: pandas.DataFrame, other_path: str, on: str, how: Literal["inner", "left", "right", "outer"] = "inner") -> pandas.DataFrame:
    """Join the table read from ``other_path`` on column ``on`` (``how``: inner, left, right or outer).

    Raises:
        KeyError: ``on`` missing from either table. FileNotFoundError, ValueError: as for load_table.
    """
    other = read_table(other_path, "join_tables")
    check_columns(table, on)
    check_columns(other, on)
    return table.merge(other, on=on, how=how)
