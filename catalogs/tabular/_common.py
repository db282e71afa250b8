"""Helpers shared by the tabular tools: reading files by suffix, column checks with clear errors,
and figures that are saved as PNG and shown in the cell."""

from __future__ import annotations

from pathlib import Path

import pandas

#: File suffixes load_table reads, and how.
READERS = {".csv": pandas.read_csv, ".tsv": lambda path: pandas.read_csv(path, sep="\t"), ".parquet": pandas.read_parquet, ".xlsx": pandas.read_excel, ".xls": pandas.read_excel}


def read_table(path: str | Path) -> pandas.DataFrame:
    """Read a CSV, TSV, Parquet or Excel file by its suffix.

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
    return reader(path)


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
