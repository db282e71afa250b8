"""Tool filter_rows: keep the rows a query selects."""

from __future__ import annotations

import pandas


def filter_rows(table: pandas.DataFrame, query: str) -> pandas.DataFrame:
    """The rows for which ``query`` holds, e.g. ``"category == 'analgesic' and year_introduced > 1950"``
    (pandas' ``DataFrame.query`` syntax; column names as in the table).

    Raises:
        ValueError: a query pandas cannot evaluate, with its reason.
    """
    try:
        return table.query(query)
    except Exception as error:  # pandas raises several kinds for a bad query; one clear message
        raise ValueError(f"cannot filter by {query!r}: {error}; the columns are {', '.join(map(str, table.columns))}") from error
