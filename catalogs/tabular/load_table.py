"""Tool load_table: read a CSV, TSV, Parquet or Excel file into a pandas DataFrame."""

from __future__ import annotations

import pandas

from toolpath.catalogs.tabular._common import read_table


def load_table(path: str) -> pandas.DataFrame:
    """Read the file at ``path`` (``.csv``, ``.tsv``, ``.parquet``, ``.xlsx``/``.xls``, by suffix).

    Raises:
        FileNotFoundError: no such file. ValueError: a suffix it cannot read.
    """
    return read_table(path, "load_table")
