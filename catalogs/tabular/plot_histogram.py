"""Tool plot_histogram: the distribution of one numeric column, as a PNG shown in the cell."""

from __future__ import annotations

import pandas

from catalogs.tabular._common import check_columns, new_figure, show_figure


def plot_histogram(table: pandas.DataFrame, column: str, bins: int = 20, output_path: str = "histogram.png") -> str:
    """Draw a histogram of ``column`` with ``bins`` bins, save it at ``output_path`` and show it.

    Returns:
        The PNG's path.

    Raises:
        KeyError: a column the table does not have.
    """
    check_columns(table, column)
    figure, axes = new_figure()
    axes.hist(table[column].dropna(), bins=bins, color="#4c6ef5", edgecolor="white")
    axes.set_xlabel(column)
    axes.set_ylabel("rows")
    return show_figure(figure, output_path)
