"""Tool save_table: a table saved as CSV, Excel or Parquet, by the file's suffix."""

from __future__ import annotations

import pandas

from toolpath.catalogs.tabular._common import checked_output_path

#: File suffixes save_table writes.
TABLE_SUFFIXES = (".csv", ".xlsx", ".parquet")


def save_table(table: pandas.DataFrame, path: str = "table.csv") -> str:
    """Write ``table`` to ``path``: CSV for ``.csv``, Excel for ``.xlsx`` (openpyxl), Parquet for
    ``.parquet`` (pyarrow). Row numbers (an index of whole numbers) are left out, since load_table would
    read them back as a column; row labels (a correlation matrix's column names) are kept. Parquet needs
    text column names, so other names (a pivot's years) are written as text.

    Returns:
        The file's path.

    Raises:
        OutputPathError: ``path`` has another suffix, is a directory, or is a file this kernel read as data.
    """
    path = checked_output_path(path, "save_table", TABLE_SUFFIXES, "table.csv")
    suffix = path.suffix.lower()
    labelled = not pandas.api.types.is_integer_dtype(table.index)
    if suffix == ".csv":
        table.to_csv(path, index=labelled)
    elif suffix == ".xlsx":
        table.to_excel(path, index=labelled)
    else:
        table.rename(columns=str).to_parquet(path, index=labelled)
    return str(path)
