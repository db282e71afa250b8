"""Everyday data requests reach the tabular state that serves them (issue 52, item 5).

Each request is one a person might type about a sales file, in my own wording, with the state its plan
must reach; the shipped catalogs and the real embedding model plan it. Requests whose tool needs a
value the words only describe (a filter's conditions) pass it as an input, as a user of the Python API
or ``--input`` does: which condition "over 1000" means is the job of argument binding, not of the
affordances tested here. The first list tuned the affordances in ``catalogs/tabular/catalog.yaml``; the
second was written afterwards and not tuned for, so it shows how far the wording carries.
"""

import pytest

from toolpath.catalogs.tabular import SAMPLE_DATA

SALES = str(SAMPLE_DATA / "sales.csv")

TUNED = [
    ("how many rows does this file have", "rows_counted"),
    ("count the records in the spreadsheet", "rows_counted"),
    ("show me the first 10 rows", "rows_shown"),
    ("preview the data", "rows_shown"),
    ("show the last 3 rows", "rows_shown"),
    ("sort the sales by revenue, highest first", "rows_sorted"),
    ("order the rows by date", "rows_sorted"),
    ("keep only the region and revenue columns", "columns_selected"),
    ("remove the month column", "columns_dropped"),
    ("drop the rows with missing values", "missing_dropped"),
    ("get rid of incomplete rows", "missing_dropped"),
    ("keep only the sales from the North region", "rows_filtered", {"conditions": [["region", "==", "North"]]}),
    ("only the rows where revenue is over 1000", "rows_filtered", {"conditions": [["revenue", ">", 1000]]}),
    ("filter to the Widget sales", "rows_filtered", {"conditions": [["product", "==", "Widget"]]}),
    ("total revenue per region", "groups_aggregated"),
    ("average units per product", "groups_aggregated"),
    ("how many sales in each region", "groups_aggregated"),
    ("what is the median revenue for each product", "groups_aggregated"),
    ("sum of revenue by month", "groups_aggregated"),
    ("make a pivot table of revenue by month and product", "table_pivoted"),
    ("cross-tabulate region against product", "table_pivoted"),
    ("join with regions.csv on region", "tables_joined"),
    ("add the manager of each region from another file", "tables_joined"),
    ("describe the data", "table_described"),
    ("summary statistics of each column", "table_described"),
    ("is revenue correlated with units", "correlations_computed"),
    ("correlation matrix of the numeric columns", "correlations_computed"),
    ("the top 5 sales by revenue", "top_rows_selected"),
    ("bar chart of revenue by region", "bar_plotted"),
    ("compare total units across products in a chart", "bar_plotted"),
    ("line chart of revenue by month", "line_plotted"),
    ("plot the revenue trend over time", "line_plotted"),
    ("scatter plot of units against revenue", "scatter_plotted"),
    ("histogram of revenue", "histogram_plotted"),
    ("show the distribution of units", "histogram_plotted"),
    ("save the table as an Excel file", "table_saved"),
    ("export to parquet", "table_saved"),
    ("write the data to a CSV", "table_saved"),
    ("write a report about this data", "report_written"),
    # Issue 52's words about keeping columns, joining "them" and how two columns relate.
    ("I only need the product and revenue columns", "columns_selected"),
    ("join them on region", "tables_joined"),
    ("do units and revenue move together", "correlations_computed"),
    ("is there a relationship between revenue and units", "correlations_computed"),
]

UNTUNED = [
    ("what is the row count", "rows_counted"),
    ("give me a peek at the top of the file", "rows_shown"),
    ("arrange the rows alphabetically by product", "rows_sorted"),
    ("just the date and units columns please", "columns_selected"),
    ("delete the date column", "columns_dropped"),
    ("remove rows that have blanks", "missing_dropped"),
    ("mean revenue for every month", "groups_aggregated"),
    ("the maximum units per product", "groups_aggregated"),
    ("a pivot of units with regions as rows and products as columns", "table_pivoted"),
    ("merge regions.csv into this table", "tables_joined"),
    ("give me basic statistics for the table", "table_described"),
    ("the ten largest sales", "top_rows_selected"),
    ("plot total revenue for each product as bars", "bar_plotted"),
    ("how are the revenue values distributed", "histogram_plotted"),
    ("save it as sales_clean.xlsx", "table_saved"),
    ("export the table to a csv file", "table_saved"),
    ("keep the rows where units is at least 10", "rows_filtered", {"conditions": [["units", ">=", 10]]}),
    # "plot" names only tools that write charts, and "Y versus X" of two columns of numbers is a scatter's.
    ("plot units versus revenue", "scatter_plotted"),
]


def _cases(requests):
    """One test per request: its words, the state, and its inputs beyond the file (none unless given)."""
    return [pytest.param(task, state, extra[0] if extra else {}, id=task) for task, state, *extra in requests]


@pytest.mark.integration
@pytest.mark.parametrize(("task", "state", "inputs"), _cases(TUNED + UNTUNED))
def test_an_everyday_request_reaches_the_state_that_serves_it(workspace, task, state, inputs):
    plan = workspace.plan_task(task, {"path": SALES, **inputs})
    assert [sorted(part.goal) for part in plan.parts] == [[f"tabular.{state}"]]
    assert plan.plan.steps[0].tool.name == "load_table"  # a plain table, not the chemistry bridge


#: Requests the state search does not place clearly once the words must all be used and a tool with
#: effects needs a clear match (issue 52): each must end in a question or a refusal, never in a plan
#: that runs with a word dropped ("3" of "which 3 sales") or on a weak match for a chart.
UNPLACED = [
    "which 3 sales had the smallest revenue",
    "the biggest orders",
    "chart how revenue changes month by month",
]


@pytest.mark.integration
@pytest.mark.parametrize("task", UNPLACED)
def test_a_request_not_placed_clearly_is_asked_about_or_refused_not_run(workspace, task):
    from toolpath.planner import NoMatchingSkillError

    try:
        plan = workspace.plan_task(task, {"path": SALES})
    except NoMatchingSkillError as refusal:
        assert "not understood" in str(refusal)
        return
    assert plan.unmatched or plan.cell.unbound, [sorted(part.goal) for part in plan.parts]
