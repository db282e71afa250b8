"""Helpers shared by the tabular tools: reading files by suffix (and remembering them), output paths
checked before writing, column checks with clear errors, the aggregates and choices the tools take,
dates held as text, and figures that are saved as PNG and shown in the cell."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path

import pandas

#: File suffixes load_table reads, and how.
READERS = {
    ".csv": pandas.read_csv,
    ".tsv": lambda path: pandas.read_csv(path, sep="\t"),
    ".parquet": pandas.read_parquet,
    ".xlsx": pandas.read_excel,
    ".xls": pandas.read_excel,
}


#: File suffixes the plots write.
PNG_SUFFIXES = (".png",)

# Every file read as data, by its identity (device, inode: the same through any symbolic or hard link)
# → its resolved path and the tool that read it. Module-level on purpose: the tools run in one kernel
# process per session, so this remembers the session's inputs for as long as it lasts.
_read_as_data: dict[tuple[int, int], tuple[Path, str]] = {}


class OutputPathError(ValueError):
    """A writing tool was given a path it must not write: the wrong kind of file, a directory, or a
    file this process read as data."""


def read_table(path: str | Path, tool_name: str) -> pandas.DataFrame:
    """Read a CSV, TSV, Parquet or Excel file by its suffix, and remember it (with ``tool_name``, the
    tool reading it) so that no tool writes over it afterwards.

    Raises:
        FileNotFoundError: no such file.
        ValueError: a suffix none of the readers handles, or an empty file (no header, no rows).
    """
    path = Path(path)
    reader = READERS.get(path.suffix.lower())
    if reader is None:
        raise ValueError(f"cannot read {path.name}: use a file ending in {', '.join(READERS)}")
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    status = path.stat()
    _read_as_data[(status.st_dev, status.st_ino)] = (path.resolve(), tool_name)
    if status.st_size == 0:
        # pandas raises EmptyDataError ("No columns to parse from file") for CSV and a zip error for Excel.
        raise ValueError(f"{path.name} is empty: no header, no rows; give a file with at least a header line")
    try:
        return reader(path)
    except pandas.errors.EmptyDataError as error:  # a file of blank lines only
        raise ValueError(f"{path.name} is empty: no header, no rows; give a file with at least a header line") from error


def checked_output_path(path: str | Path, tool_name: str, suffixes: tuple[str, ...], example: str) -> Path:
    """``path`` as a ``Path``, once it is safe for ``tool_name`` to write: it ends in one of ``suffixes``,
    is not a directory, and is not (through any link or relative spelling) a file this process read as
    data. ``example`` is a file name to suggest, such as ``report.md``.

    Raises:
        OutputPathError: naming the path and what to pass instead.
    """
    path = Path(path)
    status = path.stat() if path.exists() else None
    read = _read_as_data.get((status.st_dev, status.st_ino)) if status is not None else None
    if read is not None:
        read_path, reader = read
        raise OutputPathError(f"{tool_name} refuses to write over {read_path}: this kernel read it as data ({reader}); pass another path, such as {example}")
    if path.is_dir():
        raise OutputPathError(f"{tool_name} cannot write to {path}: it is a directory; pass a file path in it, such as {path / example}")
    if path.suffix.lower() not in suffixes:
        kinds = f"{', '.join(suffixes[:-1])} or {suffixes[-1]}" if len(suffixes) > 1 else suffixes[0]
        raise OutputPathError(f"{tool_name} writes {kinds} files, not {path.name!r}: pass a path such as {example}")
    return path


def check_columns(table: pandas.DataFrame, *columns: str) -> None:
    """Raise ``KeyError`` naming each missing column and the table's columns."""
    missing = [column for column in columns if column not in table.columns]
    if missing:
        raise KeyError(f"no column {', '.join(map(repr, missing))} in the table; its columns are {', '.join(map(str, table.columns))}")


def column_list(columns: str | Sequence[str], parameter: str, tool_name: str) -> list[str]:
    """``columns`` as a list of column names: a single name becomes a list of one.

    Raises:
        ValueError: an empty list, or items that are not names (naming ``tool_name``'s ``parameter``).
    """
    if isinstance(columns, str):
        return [columns]
    if not isinstance(columns, Sequence) or not columns or not all(isinstance(column, str) for column in columns):
        raise ValueError(f"{tool_name}: {parameter} must be a list of column names, such as ['revenue'], not {columns!r}")
    return list(columns)


def check_choice(value: str, choices: Sequence[str], parameter: str, tool_name: str) -> None:
    """Raise ``ValueError`` naming ``tool_name``'s ``parameter`` and its choices when ``value`` is none of them."""
    if value not in choices:
        raise ValueError(f"{tool_name}: {parameter} must be one of {', '.join(choices)}, not {value!r}")


def check_count(count: int, parameter: str, tool_name: str) -> None:
    """Raise ``ValueError`` unless ``count`` is a whole number of rows, 0 or more."""
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ValueError(f"{tool_name}: {parameter} must be a whole number of rows, 0 or more, not {count!r}")


#: The aggregates the grouping, pivot and chart tools take. ``count`` counts the rows of each group (missing
#: values included); the others skip missing values, as pandas does.
AGGREGATES = ("sum", "mean", "median", "count", "min", "max")

# The aggregates that need numbers (min and max also order text).
_NUMERIC_AGGREGATES = ("sum", "mean", "median")


def aggregate_per_group(table: pandas.DataFrame, by: str | list[str], column: str, how: str, tool_name: str) -> pandas.Series:
    """``column`` aggregated with ``how`` (one of :data:`AGGREGATES`) per value of ``by`` (a column, or a
    list of columns for one level each); rows whose ``by`` is missing form a group of their own rather than
    vanishing from the totals. The series' index is the groups, sorted.

    Raises:
        KeyError: a column the table does not have.
        ValueError: another ``how``, or sum, mean or median of a column that does not hold numbers.
    """
    by_columns = [by] if isinstance(by, str) else list(by)
    check_columns(table, *by_columns, column)
    check_choice(how, AGGREGATES, "how", tool_name)
    if how in _NUMERIC_AGGREGATES and not is_number_column(table[column]):
        raise ValueError(
            f"{tool_name}: cannot take the {how} of column {column!r}: it holds {table[column].dtype} values, not numbers; use count, min or max, or another column"
        )
    grouped = table.groupby(by if isinstance(by, str) else by_columns, dropna=False)[column]
    return grouped.size() if how == "count" else grouped.agg(how)


def is_number_column(column: pandas.Series) -> bool:
    """Whether ``column`` holds numbers (true/false columns do not count)."""
    return pandas.api.types.is_numeric_dtype(column) and not pandas.api.types.is_bool_dtype(column)


def dates_of(column: pandas.Series) -> pandas.Series | None:
    """The values of a text column as dates when every value present reads as one (``2024-03-01``,
    ``03/01/2024``, ``2024-03``, ``Mar``), else ``None``; a date column as it is. CSV files hold dates as
    text, and text order is not date order (``03/01/2024`` sorts after ``12/01/2023``)."""
    if pandas.api.types.is_datetime64_any_dtype(column):
        return column
    if is_number_column(column) or pandas.api.types.is_bool_dtype(column) or column.notna().sum() == 0:
        return None
    with warnings.catch_warnings():  # pandas warns when it falls back to parsing each value on its own
        warnings.simplefilter("ignore")
        parsed = pandas.to_datetime(column, errors="coerce", format="mixed")
    return parsed if parsed.notna().sum() == column.notna().sum() else None


def ordering_key(column: pandas.Series) -> pandas.Series:
    """What to sort ``column`` by: its dates when it holds dates as text, else its values."""
    dates = dates_of(column)
    return column if dates is None else dates


def ordered_groups(groups: pandas.Series) -> pandas.Series:
    """``groups`` (one value per group, as :func:`aggregate_per_group` gives) in the order of their
    labels: dates as dates, others by value; a group of rows with a missing label last."""
    return groups.sort_index(key=lambda labels: ordering_key(labels.to_series()), na_position="last", kind="stable")


def group_labels(groups: pandas.Series) -> list[str]:
    """The labels of ``groups`` as text for a chart's axis, a missing one as ``(missing)``."""
    return ["(missing)" if pandas.isna(label) else str(label) for label in groups.index]


def show_figure(figure, path: str | Path) -> str:
    """Save ``figure`` as a PNG at ``path``, show it in the cell (its PNG comes back among the cell's
    images), and return the path."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(figure)
    figure.tight_layout()
    figure.savefig(path, format="png", dpi=100)
    try:
        from IPython.display import Image, display
    except ImportError:  # outside IPython: the file is the result
        return str(path)
    display(Image(filename=str(path)))
    return str(path)


def new_figure():
    """A figure with one axes, made without pyplot (no global state, no GUI backend)."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6, 4))
    return figure, figure.add_subplot()
