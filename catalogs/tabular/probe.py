"""The tabular catalog's input probe: a table file's columns, their kinds and a few of their values,
read from the start of the file only, so that a task's words can be matched to what the table holds
("plot revenue by month" → the columns ``revenue`` and ``month``; "where region is North" → a value
of ``region``).

The catalog declares it on ``tabular.file_given`` (``probe: toolpath.catalogs.tabular.probe:probe_table``);
:mod:`toolpath.planner.tasks.probes` calls it, only on a regular file inside the directory it may read.
It reads a bounded amount and never writes: see :data:`MAX_BYTES` and :data:`MAX_ROWS`.
"""

from __future__ import annotations

import datetime
import io
import zipfile
from pathlib import Path
from typing import Any, Literal

Kind = Literal["number", "text", "date", "bool"]

#: Bytes read from the start of a CSV or TSV file. 64 KiB holds the header and a few hundred rows of
#: an ordinary table, and reading them takes well under a millisecond.
MAX_BYTES = 64 * 1024
#: Rows read (after the header), whatever the format.
MAX_ROWS = 200
#: Distinct values kept per text column: enough to recognise "North" or "South" in a task's words.
MAX_VALUES = 20

#: The suffixes read, and how (CSV and TSV by pandas, Parquet by pyarrow, Excel by openpyxl).
SUFFIXES = (".csv", ".tsv", ".parquet", ".xlsx", ".xlsm")


def probe_table(path: str) -> dict[str, Any]:
    """The columns of the table in the file at ``path``, their kinds, and the distinct values of its
    text columns, from the start of the file.

    Returns:
        ``{"columns": {name: "number" | "text" | "date" | "bool"}, "values": {text column: [up to
        MAX_VALUES distinct values, in the order seen]}, "rows_read": n}``. A column whose read
        values are all missing is ``"text"``.

    Raises:
        ValueError: a suffix other than :data:`SUFFIXES` (``.xls`` included: openpyxl reads only
            the newer format), or a file that cannot be read as a table (the message says why).
    """
    file = Path(path)
    suffix = file.suffix.lower()
    if suffix not in SUFFIXES:
        raise ValueError(f"cannot probe {file.name}: a table file ends in {', '.join(SUFFIXES)}")
    try:
        if suffix in (".csv", ".tsv"):
            frame = _delimited(file, "\t" if suffix == ".tsv" else ",")
        elif suffix == ".parquet":
            frame = _parquet(file)
        else:
            frame = _excel(file)
    except (OSError, ValueError, KeyError, IndexError, zipfile.BadZipFile) as error:  # pandas', pyarrow's and openpyxl's parse errors
        raise ValueError(f"cannot read {file.name} as a table: {error}") from error
    return _described(frame)


def _delimited(file: Path, separator: str) -> Any:
    """The first :data:`MAX_ROWS` rows in the first :data:`MAX_BYTES` bytes of a CSV or TSV file."""
    import pandas

    with file.open("rb") as stream:
        head = stream.read(MAX_BYTES + 1)
    if len(head) > MAX_BYTES:
        # Only whole lines: a row cut at the byte limit would read as a row of missing values.
        head = head[: head.rfind(b"\n", 0, MAX_BYTES) + 1]
    if not head.strip():
        raise ValueError("the file is empty: no header, no rows")
    return pandas.read_csv(io.BytesIO(head), sep=separator, nrows=MAX_ROWS)


def _parquet(file: Path) -> Any:
    """The first :data:`MAX_ROWS` rows of a Parquet file's first row group (its schema gives every column)."""
    import pyarrow.parquet

    parquet = pyarrow.parquet.ParquetFile(file)
    if parquet.metadata.num_row_groups == 0:
        return parquet.schema_arrow.empty_table().to_pandas()
    batch = next(parquet.iter_batches(batch_size=MAX_ROWS, row_groups=[0]), None)
    return (batch if batch is not None else parquet.schema_arrow.empty_table()).to_pandas()


def _excel(file: Path) -> Any:
    """The header and first :data:`MAX_ROWS` rows of an Excel workbook's active sheet (openpyxl's read-only mode streams them)."""
    import openpyxl
    import pandas

    workbook = openpyxl.load_workbook(file, read_only=True, data_only=True)
    try:
        rows = list(workbook.active.iter_rows(max_row=MAX_ROWS + 1, values_only=True))
    finally:
        workbook.close()
    if not rows:
        raise ValueError("the sheet is empty")
    header = [str(name) if name is not None else f"Unnamed: {position}" for position, name in enumerate(rows[0])]
    return pandas.DataFrame(rows[1:], columns=header)


def _described(frame: Any) -> dict[str, Any]:
    columns: dict[str, Kind] = {}
    values: dict[str, list[Any]] = {}
    for name in frame.columns:
        kind = _kind(frame[name])
        columns[str(name)] = kind
        if kind == "text":
            seen = [value for value in frame[name].dropna().unique()[:MAX_VALUES]]
            values[str(name)] = [value if isinstance(value, str) else str(value) for value in seen]
    return {"columns": columns, "values": values, "rows_read": len(frame)}


def _kind(column: Any) -> Kind:
    """A column's kind: its pandas dtype, or for text (``object``) whether every value is a date
    (ISO 8601 text, or ``date`` objects as Parquet and Excel give them) or a bool."""
    import pandas

    if pandas.api.types.is_bool_dtype(column):
        return "bool"
    if pandas.api.types.is_numeric_dtype(column):
        return "number"
    if pandas.api.types.is_datetime64_any_dtype(column):
        return "date"
    present = column.dropna()
    if present.empty:
        return "text"
    if all(isinstance(value, (datetime.date, pandas.Timestamp)) for value in present):
        return "date"
    if all(isinstance(value, bool) for value in present):
        return "bool"
    if all(isinstance(value, (int, float)) and not isinstance(value, bool) for value in present):
        return "number"
    if all(isinstance(value, str) for value in present) and pandas.to_datetime(present, format="ISO8601", errors="coerce").notna().all():
        return "date"
    return "text"
