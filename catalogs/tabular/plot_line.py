"""Tool plot_line: one column against another as a line, sorted by the first, as a PNG shown in the cell."""

from __future__ import annotations

import pandas

from toolpath.catalogs.tabular._common import PNG_SUFFIXES, check_columns, checked_output_path, new_figure, show_figure


def plot_line(table: pandas.DataFrame, x: str, y: str, output_path: str = "line.png") -> str:
    """Draw column ``y`` against column ``x`` as a line (rows sorted by ``x``), save it at ``output_path``
    and show it.

    Returns:
        The PNG's path.

    Raises:
        KeyError: a column the table does not have.
        OutputPathError: ``output_path`` is not a ``.png``, is a directory, or is a file this kernel read as data.
    """
    output_path = checked_output_path(output_path, "plot_line", PNG_SUFFIXES, "line.png")
    check_columns(table, x, y)
    ordered = table.sort_values(x)
    figure, axes = new_figure()
    axes.plot(ordered[x], ordered[y], marker="o", color="#2f9e44")
    axes.set_xlabel(x)
    axes.set_ylabel(y)
    return show_figure(figure, output_path)
