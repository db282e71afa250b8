"""Tool plot_scatter: one column against another, as a PNG shown in the cell."""

from __future__ import annotations

import pandas

from toolpath.catalogs.tabular._common import PNG_SUFFIXES, check_columns, checked_output_path, new_figure, show_figure


def plot_scatter(table: pandas.DataFrame, x: str, y: str, output_path: str = "scatter.png") -> str:
    """Draw column ``y`` against column ``x``, one point per row, save it at ``output_path`` and show it.

    Returns:
        The PNG's path.

    Raises:
        KeyError: a column the table does not have.
        OutputPathError: ``output_path`` is not a ``.png``, is a directory, or is a file this kernel read as data.
    """
    output_path = checked_output_path(output_path, "plot_scatter", PNG_SUFFIXES, "scatter.png")
    check_columns(table, x, y)
    figure, axes = new_figure()
    axes.scatter(table[x], table[y], color="#e8590c")
    axes.set_xlabel(x)
    axes.set_ylabel(y)
    return show_figure(figure, output_path)
