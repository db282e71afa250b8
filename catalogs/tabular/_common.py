"""Helpers shared by the tabular tools: reading files by suffix (and remembering them), output paths
checked before writing, column checks with clear errors, and figures that are saved as PNG and shown in
the cell."""

from __future__ import annotations

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
        ValueError: a suffix none of the readers handles.
    """
    path = Path(path)
    reader = READERS.get(path.suffix.lower())
    if reader is None:
        raise ValueError(f"cannot read {path.name}: use a file ending in {', '.join(READERS)}")
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    status = path.stat()
    _read_as_data[(status.st_dev, status.st_ino)] = (path.resolve(), tool_name)
    return reader(path)


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
