"""Tool plot_line: a column against another as a line, one point per value of the first, as a PNG shown in the cell."""

from __future__ import annotations

from typing import Literal

import pandas

from toolpath.catalogs.tabular._common import (
    PNG_SUFFIXES,
    aggregate_per_group,
    checked_output_path,
    group_labels,
    is_number_column,
    new_figure,
    ordered_groups,
    show_figure,
)


def plot_line(
    table: pandas.DataFrame, x: str, y: str, how: Literal["sum", "mean", "median", "count", "min", "max"] = "sum", output_path: str = "line.png"
) -> str:
    """Draw column ``y`` against column ``x`` as a line with one point per value of ``x``: the ``how``
    (sum by default, so revenue by month is each month's total; count counts rows) of ``y`` over the
    rows with that value, sorted by ``x`` (text that reads as dates sorts as dates). Save it at
    ``output_path`` and show it.

    Returns:
        The PNG's path.

    Raises:
        KeyError: a column the table does not have.
        ValueError: another ``how``, or sum, mean or median of a column that does not hold numbers.
        OutputPathError: ``output_path`` is not a ``.png``, is a directory, or is a file this kernel read as data.
    """
    output_path = checked_output_path(output_path, "plot_line", PNG_SUFFIXES, "line.png")
    points = ordered_groups(aggregate_per_group(table, x, y, how, "plot_line"))
    # Numbers and dates are spaced by their values; other labels evenly, in the order above.
    positions = points.index if is_number_column(table[x]) or pandas.api.types.is_datetime64_any_dtype(table[x]) else group_labels(points)
    figure, axes = new_figure()
    axes.plot(positions, points.to_numpy(), marker="o", color="#2f9e44")
    axes.set_xlabel(x)
    axes.set_ylabel(f"{how} of {y}")
    axes.tick_params(axis="x", labelrotation=45 if len(points) > 6 else 0)
    return show_figure(figure, output_path)
