"""Tool plot_histogram: the distribution of one numeric column, as a PNG shown in the cell."""

from __future__ import annotations

import pandas

from toolpath.catalogs.tabular._common import PNG_SUFFIXES, check_columns, checked_output_path, new_figure, show_figure


def plot_histogram(table: pandas.DataFrame, column: str, bins: int = 20, output_path: str = "histogram.png") -> str:
    """Draw a histogram of ``column`` with ``bins`` bins, save it at ``output_path`` and show it.

    Returns:
        The PNG's path.

    Raises:
        KeyError: a column the table does not have.
        OutputPathError: ``output_path`` is not a ``.png``, is a directory, or is a file this kernel read as data.
    """
    output_path = checked_output_path(output_path, "plot_histogram", PNG_SUFFIXES, "histogram.png")
    check_columns(table, column)
    figure, axes = new_figure()
    axes.hist(table[column].dropna(), bins=bins, color="#4c6ef5", edgecolor="white")
    axes.set_xlabel(column)
    axes.set_ylabel("rows")
    return show_figure(figure, output_path)
