"""Tool plot_bar: a bar per value of a column, its height an aggregate of another, as a PNG shown in the cell."""

from __future__ import annotations

from typing import Literal

import pandas

from toolpath.catalogs.tabular._common import PNG_SUFFIXES, aggregate_per_group, checked_output_path, group_labels, new_figure, ordered_groups, show_figure


def plot_bar(
    table: pandas.DataFrame, x: str, y: str, how: Literal["sum", "mean", "median", "count", "min", "max"] = "sum", output_path: str = "bar.png"
) -> str:
    """Draw one bar per value of column ``x``, its height the ``how`` (sum by default: revenue per
    region is each region's total; count counts rows) of column ``y`` over that value's rows, in the
    order of ``x`` (dates as dates); save it at ``output_path`` and show it.

    Returns:
        The PNG's path.

    Raises:
        KeyError: a column the table does not have.
        ValueError: another ``how``, or sum, mean or median of a column that does not hold numbers.
        OutputPathError: ``output_path`` is not a ``.png``, is a directory, or is a file this kernel read as data.
    """
    output_path = checked_output_path(output_path, "plot_bar", PNG_SUFFIXES, "bar.png")
    heights = ordered_groups(aggregate_per_group(table, x, y, how, "plot_bar"))
    figure, axes = new_figure()
    axes.bar(group_labels(heights), heights.to_numpy(), color="#4c6ef5")
    axes.set_xlabel(x)
    axes.set_ylabel(f"{how} of {y}")
    axes.tick_params(axis="x", labelrotation=45 if len(heights) > 6 else 0)
    return show_figure(figure, output_path)
