"""Argument values read from a task's words (issue 52, item 2), over the shipped tabular catalog and
small CSV files written here: columns from the file's probe, choices, conditions, counts, output paths."""

import json
import subprocess
import sys

import pytest

from toolpath.planner import Workspace
from toolpath.planner.planning.plans import plan_to_run
from toolpath.planner.tasks.arguments import bind_arguments
from toolpath.planner.tasks.task import UnboundParametersError

SALES = """\
date,month,region,product,revenue,units
2024-01-05,2024-01,North,Widget,1200.5,3
2024-01-20,2024-01,South,Gadget,800,2
2024-02-03,2024-02,North,Gadget,950,5
2024-02-17,2024-02,East,Widget,,1
2024-03-09,2024-03,West,Widget,1500,4
"""


@pytest.fixture(scope="module")
def graph():
    return Workspace.open().graph


@pytest.fixture()
def folder(tmp_path):
    (tmp_path / "sales.csv").write_text(SALES)
    return tmp_path


def read(graph, folder, tool, words, inputs=None, directory="folder"):
    """``({parameter: value bound}, {parameter: why not bound}, arguments)`` for a plan that runs ``tool`` on sales.csv."""
    plan = plan_to_run(graph, f"tabular.{tool}", held={"tabular.file_given"})
    arguments = bind_arguments(graph, words, (), plan, {"path": "sales.csv", **(inputs or {})}, folder if directory == "folder" else directory)
    bound = {reading.parameter: reading.value for reading in arguments.bound if reading.tool == tool}
    reasons = {reading.parameter: reading.why for reading in arguments.not_bound if reading.tool == tool}
    return bound, reasons, arguments


def test_y_by_x_gives_a_line_plot_its_axes(graph, folder):
    bound, _, arguments = read(graph, folder, "plot_line", "plot revenue by month")
    assert bound == {"x": "month", "y": "revenue"}
    (reading,) = [reading for reading in arguments.bound if reading.parameter == "x"]
    assert reading.input == "tabular.plot_line.x" and "horizontal axis" in reading.why
    assert arguments.inputs({"path": "sales.csv"})["tabular.plot_line.y"] == "revenue"


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        ("total revenue per region", {"by": "region", "columns": ["revenue"], "how": "sum"}),
        ("sum revenue and units by region", {"by": "region", "columns": ["revenue", "units"], "how": "sum"}),
        ("the average units for each product", {"by": "product", "columns": ["units"], "how": "mean"}),
        ("Revenues per Region, the largest", {"by": "region", "columns": ["revenue"], "how": "max"}),
    ],
)
def test_grouping_reads_the_group_the_columns_and_the_aggregate(graph, folder, words, expected):
    bound, _, _ = read(graph, folder, "group_and_aggregate", words)
    assert bound == expected


def test_two_aggregates_named_leave_the_choice_unbound_and_say_why(graph, folder):
    bound, reasons, _ = read(graph, folder, "group_and_aggregate", "sum and average revenue by region")
    assert "how" not in bound
    assert "'sum'" in reasons["how"] and "'mean'" in reasons["how"]


@pytest.mark.parametrize(
    ("words", "by", "order"),
    [("sort by revenue descending", ["revenue"], "descending"), ("sort by region and units, largest first", ["region", "units"], "descending")],
)
def test_sorting_reads_the_columns_after_by_and_the_order(graph, folder, words, by, order):
    bound, _, _ = read(graph, folder, "sort_rows", words)
    assert bound == {"by": by, "order": order}


def test_keeping_columns_names_them_in_order(graph, folder):
    bound, _, _ = read(graph, folder, "select_columns", "keep date and revenue")
    assert bound == {"columns": ["date", "revenue"]}
    # A column a comparison follows is a condition's, not one to keep.
    assert read(graph, folder, "select_columns", "keep units and date where region is North")[0] == {"columns": ["units", "date"]}


@pytest.mark.parametrize(
    ("words", "conditions"),
    [
        ("keep only rows where region is North", [["region", "==", "North"]]),
        ("rows where region is north", [["region", "==", "North"]]),  # the data's spelling
        ("keep rows where region = North", [["region", "==", "North"]]),
        ("rows with revenue over 1,000", [["revenue", ">", 1000]]),
        ("rows with units at least 3", [["units", ">=", 3]]),
        ("rows with units below 3", [["units", "<", 3]]),
        ("rows with revenue between 800 and 1200.5", [["revenue", "between", [800, 1200.5]]]),
        ("rows where region is North or South", [["region", "in", ["North", "South"]]]),
        ("every region except South", [["region", "!=", "South"]]),
        ("all rows but not South and East", [["region", "not in", ["South", "East"]]]),
        ("the rows with missing revenue", [["revenue", "is missing", None]]),
        ("where region is North and revenue over 900", [["region", "==", "North"], ["revenue", ">", 900]]),
    ],
)
def test_conditions_are_read_into_column_operator_value(graph, folder, words, conditions):
    bound, reasons, _ = read(graph, folder, "filter_rows", words)
    assert bound == {"conditions": conditions}, reasons


def test_rows_without_missing_values_need_every_column_present(graph, folder):
    bound, _, _ = read(graph, folder, "filter_rows", "keep the rows without missing values")
    assert bound["conditions"] == [[column, "is not missing", None] for column in ("date", "month", "region", "product", "revenue", "units")]


@pytest.mark.parametrize(
    ("words", "said"),
    [
        ("keep rows where country is France", "no condition could be read"),  # no column 'country': never bound
        ("rows where region is over 5", "holds text"),
        ("rows where revenue is high", "'high' is not one"),
    ],
)
def test_a_condition_that_cannot_be_read_is_left_unbound_with_the_reason(graph, folder, words, said):
    bound, reasons, _ = read(graph, folder, "filter_rows", words)
    assert "conditions" not in bound
    assert said in reasons["conditions"]


def test_counts_and_the_end_of_the_table(graph, folder):
    assert read(graph, folder, "show_rows", "show the last 2 rows")[0] == {"count": 2, "end": "last"}
    assert read(graph, folder, "top_rows", "the top 3 by revenue")[0] == {"count": 3, "by": "revenue"}
    assert read(graph, folder, "plot_histogram", "a histogram of units with 7 bins")[0] == {"column": "units", "bins": 7}


def test_an_output_path_is_taken_only_when_its_suffix_suits_the_tool(graph, folder):
    assert read(graph, folder, "write_report", "write a report to summary.md")[0] == {"path": "summary.md"}
    assert read(graph, folder, "save_table", "save it in totals.xlsx")[0] == {"path": "totals.xlsx"}
    assert "path" not in read(graph, folder, "write_report", "write a report to summary.png")[0]
    # The file the task reads is never where a tool writes.
    assert "path" not in read(graph, folder, "save_table", "save the table as sales.csv")[0]


def test_two_columns_and_no_pattern_leave_the_axes_unbound(graph, folder):
    bound, reasons, _ = read(graph, folder, "plot_scatter", "plot revenue and units")
    assert "x" not in bound and "y" not in bound
    assert "Y by X" in reasons["x"]


def test_a_name_that_is_no_column_of_the_file_is_never_bound(graph, folder):
    bound, reasons, _ = read(graph, folder, "plot_line", "plot profit by week")
    assert bound == {}
    assert "revenue" in reasons["x"]  # the reason lists the file's columns


def test_the_callers_input_wins_and_the_plan_says_so(graph, folder):
    bound, reasons, _ = read(graph, folder, "plot_line", "plot revenue by month", {"tabular.plot_line.x": "date"})
    assert bound == {"y": "revenue"}
    assert "wins" in reasons["x"] and "'month'" in reasons["x"]


def test_without_a_directory_to_read_no_file_is_probed_and_no_column_bound(graph, folder):
    bound, reasons, arguments = read(graph, folder, "plot_line", "plot revenue by month", directory=None)
    assert bound == {}
    (probe,) = arguments.probes
    assert probe.found is None and "not probed" in probe.problem
    assert "not probed" in reasons["x"]


# -- through the planner --------------------------------------------------------------------------------


@pytest.mark.integration
def test_plan_task_binds_the_filter_and_the_axes_from_each_parts_words(embedder, folder, monkeypatch):
    monkeypatch.chdir(folder)
    workspace = Workspace.open(embedder=embedder)
    task = workspace.plan_task("keep only rows where region is North, then plot revenue by month", {"path": "sales.csv"})
    assert [step.tool.name for step in task.plan.steps] == ["load_table", "filter_rows", "plot_line"]
    assert not task.cell.unbound
    assert "tabular_filter_rows_conditions = [['region', '==', 'North']]" in task.cell.code
    assert "x=tabular_plot_line_x, y=tabular_plot_line_y" in task.cell.code
    listed = task.to_dict()["arguments"]
    assert {(entry["tool"], entry["parameter"], json.dumps(entry["value"])) for entry in listed} == {
        ("filter_rows", "conditions", '[["region", "==", "North"]]'),
        ("plot_line", "x", '"month"'),
        ("plot_line", "y", '"revenue"'),
    }
    assert next(entry for entry in listed if entry["parameter"] == "x")["words"] == "plot revenue by month"


@pytest.mark.integration
def test_an_unbound_parameter_says_why_the_words_did_not_give_it(embedder, folder, monkeypatch):
    monkeypatch.chdir(folder)
    workspace = Workspace.open(embedder=embedder)
    task = workspace.plan_task("plot a line chart of revenue and units", {"path": "sales.csv"})
    assert {parameter.parameter for parameter in task.cell.unbound} == {"x", "y"}
    with pytest.raises(UnboundParametersError, match="do not say which is on which axis"):
        workspace.run_task(task)


@pytest.mark.integration
def test_the_command_line_probes_in_its_working_directory_and_shows_the_arguments(folder):
    completed = subprocess.run(
        [sys.executable, "-m", "toolpath.planner.interfaces.cli", "cell", "keep only rows where region is North, then plot revenue by month"]
        + ["--input", "path=sales.csv", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=folder,
    )
    assert completed.returncode == 0, completed.stderr
    payload = json.loads(completed.stdout)
    assert {entry["parameter"]: entry["value"] for entry in payload["arguments"]} == {"conditions": [["region", "==", "North"]], "x": "month", "y": "revenue"}
    assert payload["probes"][0]["columns"]["revenue"] == "number" and payload["probes"][0]["problem"] is None
    assert payload["unbound"] == []


# -- every word of the data accounted for ----------------------------------------------------------------


@pytest.mark.integration
@pytest.mark.parametrize(
    ("task", "tools", "bound"),
    [
        # Counting rows matches "3 rows of" best; showing them uses the 3.
        ("first 3 rows of sales.csv", ["load_table", "show_rows"], {("show_rows", "count"): 3, ("show_rows", "end"): "first"}),
        # Loading matches "save sales.csv" best; saving uses the file name the words give.
        ("save sales.csv as sales.parquet", ["load_table", "save_table"], {("save_table", "path"): "sales.parquet"}),
    ],
)
def test_a_goal_whose_plan_uses_every_word_of_the_data_wins_over_a_better_hit(embedder, folder, monkeypatch, task, tools, bound):
    monkeypatch.chdir(folder)
    planned = Workspace.open(embedder=embedder).plan_task(task)
    assert [step.tool.name for step in planned.plan.steps] == tools
    assert {(reading.tool, reading.parameter): reading.value for reading in planned.arguments.bound} == bound


@pytest.mark.integration
@pytest.mark.parametrize(
    ("task", "dropped"),
    [
        # Words no condition is read from stay dropped words: no filtering step is guessed for them.
        ("how many rows of sales.csv mention revenue 1000?", "the column 'revenue', the number 1000"),
        ("the rows of sales.csv with revenue near 1000", "the column 'revenue', the number 1000"),
    ],
)
def test_a_part_whose_plan_drops_words_of_the_data_is_not_understood_and_nothing_runs(embedder, folder, monkeypatch, task, dropped):
    from toolpath.planner import PartsNotUnderstoodError

    monkeypatch.chdir(folder)
    workspace = Workspace.open(embedder=embedder)
    planned = workspace.plan_task(task)
    (part,) = planned.parts
    assert part.fate == "not understood" and dropped in part.problem and "does not use" in part.problem
    assert not planned.plan.steps
    with pytest.raises(PartsNotUnderstoodError):
        workspace.run_task(planned)


@pytest.mark.integration
def test_a_quoted_value_is_the_one_text_parameter_the_plan_lacks_but_a_quoted_file_is_not(embedder, folder, monkeypatch):
    monkeypatch.chdir(folder)
    workspace = Workspace.open(embedder=embedder)
    planned = workspace.plan_task("what is the molecular weight of 'CC(=O)Oc1ccccc1C(=O)O'?")
    assert [step.tool.name for step in planned.plan.steps] == ["parse_molecule"]
    assert not planned.cell.unbound
    assert {(reading.tool, reading.parameter): reading.value for reading in planned.arguments.bound} == {("parse_molecule", "smiles"): "CC(=O)Oc1ccccc1C(=O)O"}
    quoted_file = workspace.plan_task("compute the molecular weight of every molecule in 'sales.csv'")
    assert all(reading.value != "sales.csv" or reading.parameter != "smiles" for reading in quoted_file.arguments.bound)


@pytest.mark.integration
def test_a_fragment_joined_to_the_part_before_keeps_its_words_for_the_arguments(embedder, folder, monkeypatch):
    # "highest first" chooses the same goal as the words before it; the part they make together once
    # kept only the first clause's words, and the order was left at its default (ascending).
    monkeypatch.chdir(folder)
    planned = Workspace.open(embedder=embedder).plan_task("rank the rows of sales.csv by revenue, highest first")
    (part,) = planned.parts
    assert part.text == "rank the rows of sales.csv by revenue, highest first"
    assert {(reading.parameter, str(reading.value)) for reading in planned.arguments.bound} == {("by", "['revenue']"), ("order", "descending")}


def test_words_that_name_a_file_are_not_a_column_of_it(graph, folder):
    # "the suppliers file" is suppliers.csv, though the file has a column "supplier".
    (folder / "suppliers.csv").write_text("name,supplier,country\nWidget,Acme,France\n")
    plan = plan_to_run(graph, "tabular.join_tables", held={"tabular.file_given"})
    words = "join the suppliers file on name"
    arguments = bind_arguments(graph, words, (), plan, {"path": "sales.csv", "other_path": "suppliers.csv"}, folder)
    assert arguments.unused_words(words, {"path": "sales.csv", "other_path": "suppliers.csv"}) == []
    assert arguments.unused_words("join the suppliers file on name per country", {"path": "sales.csv", "other_path": "suppliers.csv"}) == [
        "the column 'country'"
    ]


@pytest.mark.integration
def test_a_file_the_callers_input_replaces_is_accounted_for_not_dropped(embedder, folder, monkeypatch):
    monkeypatch.chdir(folder)
    (folder / "other.csv").write_text(SALES)
    planned = Workspace.open(embedder=embedder).plan_task("count the rows of sales.csv", {"path": "other.csv"})
    (part,) = planned.parts
    assert part.fate == "planned" and [(override.named, override.given) for override in part.overridden] == [("sales.csv", "other.csv")]
    assert [step.tool.name for step in planned.plan.steps] == ["load_table", "count_rows"]


@pytest.mark.integration
def test_two_files_named_in_one_part_are_the_table_and_the_one_to_join(embedder, folder, monkeypatch):
    monkeypatch.chdir(folder)
    (folder / "regions.csv").write_text("region,manager\nNorth,Ada\nSouth,Bo\n")
    planned = Workspace.open(embedder=embedder).plan_task("merge sales.csv and regions.csv on region, keeping all rows of both")
    (part,) = planned.parts  # "keeping all rows of both" names join's how: an argument of the part, not a part
    assert [step.tool.name for step in planned.plan.steps] == ["load_table", "join_tables"]
    assert planned.inputs["tabular.load_table.path"] == "sales.csv"
    assert {(reading.parameter, reading.value) for reading in planned.arguments.bound} == {("other_path", "regions.csv"), ("on", "region"), ("how", "outer")}


REGIONS = "region,manager\nNorth,Ada\nSouth,Bo\nEast,Cy\nWest,Di\n"


@pytest.mark.parametrize(
    ("words", "values"),
    [
        ("bring the managers over from regions.csv into sales.csv", ["sales.csv", "regions.csv"]),
        ("copy the country of each supplier from suppliers.xlsx onto the table orders.csv", ["orders.csv", "suppliers.xlsx"]),
        ("fold lookup.xlsx into facts.xlsx on id", ["facts.xlsx", "lookup.xlsx"]),
        # No file is brought into another: nothing to reorder.
        ("join sales.csv with regions.csv on region", []),
        ("save sales.csv", []),
        # Two destinations: which one is extended is not said.
        ("send a.csv to b.csv and to c.csv", []),
    ],
)
def test_the_file_something_is_brought_into_comes_first(words, values):
    from toolpath.planner.tasks.matching import extending_values

    assert extending_values(words) == values


def test_columns_only_the_file_joined_in_has_are_what_the_join_brings(graph, folder):
    (folder / "regions.csv").write_text(REGIONS)
    plan = plan_to_run(graph, "tabular.join_tables", held={"tabular.file_given"})
    inputs = {"path": "sales.csv", "other_path": "regions.csv", "on": "region"}  # every parameter bound: the words are all checked
    words = "bring in the manager of every region"
    arguments = bind_arguments(graph, words, (), plan, inputs, folder)
    assert arguments.brought_columns == {"manager"}  # region is in both files: the key, not brought
    assert arguments.unused_words(words, inputs) == []
    # A column of the first table that no step uses is still a word dropped.
    assert arguments.unused_words("bring in the manager of every region, per product", inputs) == ["the column 'product'"]
    # Named to group or compare by, such a column asks for more than the join does.
    assert arguments.unused_words("bring in the manager of every region, per manager", inputs) == ["the column 'manager'"]
    assert arguments.unused_words("bring in the manager of every region where manager is Ada", inputs) != []


@pytest.mark.integration
def test_a_part_bringing_a_column_from_one_file_into_another_joins_them_that_way_round(embedder, folder, monkeypatch):
    monkeypatch.chdir(folder)
    (folder / "regions.csv").write_text(REGIONS)
    planned = Workspace.open(embedder=embedder).plan_task("add the manager of each region from regions.csv into sales.csv, joined on region")
    assert not planned.unmatched
    assert [step.tool.name for step in planned.plan.steps] == ["load_table", "join_tables"]
    assert planned.inputs["tabular.load_table.path"] == "sales.csv"  # the table extended, though named second
    bound = {(reading.parameter, reading.value) for reading in planned.arguments.bound}
    assert {("other_path", "regions.csv"), ("on", "region")} <= bound


@pytest.mark.integration
def test_a_file_after_to_stays_a_destination_when_the_plan_writes(embedder, folder, monkeypatch):
    monkeypatch.chdir(folder)
    planned = Workspace.open(embedder=embedder).plan_task("save sales.csv to copy.csv")
    assert planned.inputs["tabular.load_table.path"] == "sales.csv"
    assert planned.inputs["tabular.save_table.path"] == "copy.csv"


@pytest.mark.integration
@pytest.mark.parametrize("task", ["open sales.csv and regions.csv, then merge them by region", "read sales.csv and regions.csv, and join them using region"])
def test_two_files_loaded_then_merged_as_them_are_one_join(embedder, folder, monkeypatch, task):
    monkeypatch.chdir(folder)
    (folder / "regions.csv").write_text(REGIONS)
    planned = Workspace.open(embedder=embedder).plan_task(task)
    assert not planned.unmatched
    assert [step.tool.name for step in planned.plan.steps] == ["load_table", "join_tables"]
    assert planned.inputs["tabular.load_table.path"] == "sales.csv"
    assert {(reading.parameter, reading.value) for reading in planned.arguments.bound} >= {("other_path", "regions.csv"), ("on", "region")}


@pytest.mark.integration
def test_two_files_loaded_then_a_step_that_reads_one_table_leaves_the_other_asked_about(embedder, folder, monkeypatch):
    monkeypatch.chdir(folder)
    (folder / "regions.csv").write_text(REGIONS)
    planned = Workspace.open(embedder=embedder).plan_task("load sales.csv and regions.csv and summarise them")
    (loading,) = planned.unmatched  # describing reads one table: regions.csv would be dropped, so it is asked about
    assert "regions.csv" in loading.problem


# -- which column goes where: axes, pivot parts, "number of", counts per group ------------------------------


@pytest.mark.parametrize(
    ("tool", "words", "expected"),
    [
        # A role phrase names the axis, whichever order the columns come in.
        ("plot_scatter", "revenue on the vertical axis and units on the horizontal axis", {"x": "units", "y": "revenue"}),
        ("plot_scatter", "x axis: units, y axis: revenue", {"x": "units", "y": "revenue"}),
        # The column after a grouping word, or named by an adjective of time, runs along the horizontal axis.
        ("plot_line", "draw the units sold for every region as a line", {"x": "region", "y": "units"}),
        ("plot_line", "a line of the monthly units", {"x": "month", "y": "units"}),
        # Two columns and nothing else: dates along the bottom, numbers up the side; numbers measured per text value.
        ("plot_line", "a line chart of units and date", {"x": "date", "y": "units"}),
        ("plot_bar", "bars of product and revenue", {"x": "product", "y": "revenue"}),
    ],
)
def test_chart_axes_come_from_role_phrases_grouping_words_and_column_kinds(graph, folder, tool, words, expected):
    bound, _, _ = read(graph, folder, tool, words)
    assert {name: bound[name] for name in ("x", "y") if name in bound} == expected


@pytest.mark.parametrize(
    ("tool", "words"),
    [
        ("plot_scatter", "a scatter of units and revenue"),  # two columns of numbers: nothing says which is which
        ("plot_line", "a line of units over time"),  # the table has two date columns (date, month)
    ],
)
def test_axes_the_words_do_not_decide_are_left_to_ask(graph, folder, tool, words):
    bound, reasons, _ = read(graph, folder, tool, words)
    assert "x" not in bound and reasons["x"]


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        (
            "put regions down the rows, one column for each month, and the total revenue",
            {"rows": "region", "columns": "month", "values": "revenue", "how": "sum"},
        ),
        ("cross-tabulate product by region showing average units", {"rows": "product", "columns": "region", "values": "units", "how": "mean"}),
        ("the largest revenue pivoted by region and product", {"rows": "region", "columns": "product", "values": "revenue", "how": "max"}),
    ],
)
def test_a_pivot_reads_its_rows_columns_and_cells(graph, folder, words, expected):
    bound, _, _ = read(graph, folder, "pivot_table", words)
    assert bound == expected


def test_a_pivot_whose_cells_are_not_named_asks_for_them(graph, folder):
    bound, reasons, _ = read(graph, folder, "pivot_table", "pivot product by month")
    assert bound == {"rows": "product", "columns": "month"}
    assert "values" in reasons


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        # "number of" before a column of numbers names that column; the aggregate is the other word.
        ("the median number of units for each region", {"by": "region", "columns": ["units"], "how": "median"}),
        ("largest number of units per product", {"by": "product", "columns": ["units"], "how": "max"}),
        # Before a noun that is no column of numbers it counts rows, and counting needs no column measured.
        ("the number of entries per region", {"by": "region", "columns": ["region"], "how": "count"}),
        ("tally the rows for each product", {"by": "product", "columns": ["product"], "how": "count"}),
    ],
)
def test_number_of_a_column_names_it_and_a_count_per_group_needs_no_column(graph, folder, words, expected):
    bound, _, _ = read(graph, folder, "group_and_aggregate", words)
    assert bound == expected


def test_number_of_a_column_with_no_aggregate_asks_which(graph, folder):
    bound, reasons, arguments = read(graph, folder, "group_and_aggregate", "number of units by product")
    assert "how" not in bound and "'number of units' names the column 'units'" in reasons["how"]
    assert any(reading.conflicting for reading in arguments.not_bound if reading.parameter == "how")


def test_the_few_rows_ranked_lowest_give_a_count_and_an_order(graph, folder):
    bound, _, _ = read(graph, folder, "top_rows", "the 2 sales with the smallest units")
    assert bound == {"by": "units", "count": 2, "order": "ascending"}


@pytest.mark.integration
@pytest.mark.parametrize(
    ("task", "tools", "bound"),
    [
        # The grouping state scores below the search's threshold for these wordings; only its plan uses both columns.
        (
            "mean units by product for sales.csv",
            ["load_table", "group_and_aggregate"],
            {("group_and_aggregate", "by"): "product", ("group_and_aggregate", "columns"): ["units"], ("group_and_aggregate", "how"): "mean"},
        ),
        (
            "the biggest revenue for every region in sales.csv",
            ["load_table", "group_and_aggregate"],
            {("group_and_aggregate", "by"): "region", ("group_and_aggregate", "columns"): ["revenue"], ("group_and_aggregate", "how"): "max"},
        ),
        # "and average units in the cells" completes the pivot its first words leave without cells: one step, not a grouping too.
        (
            "build a pivot table from sales.csv with products as rows, regions as columns and average units in the cells",
            ["load_table", "pivot_table"],
            {
                ("pivot_table", "rows"): "product",
                ("pivot_table", "columns"): "region",
                ("pivot_table", "values"): "units",
                ("pivot_table", "how"): "mean",
            },
        ),
    ],
)
def test_the_words_about_the_data_choose_the_step_that_uses_them(embedder, folder, monkeypatch, task, tools, bound):
    monkeypatch.chdir(folder)
    planned = Workspace.open(embedder=embedder).plan_task(task)
    assert [step.tool.name for step in planned.plan.steps] == tools
    assert {(reading.tool, reading.parameter): reading.value for reading in planned.arguments.bound} == bound


@pytest.mark.parametrize(
    ("words", "conditions"),
    [
        # Two equalities of one column joined by "or" are one membership test.
        ("rows where product is Widget or product is Gadget", [["product", "in", ["Widget", "Gadget"]]]),
        # Words after the number turn it into a bound, either way.
        ("rows where units is 4 or above", [["units", ">=", 4]]),
        ("rows where revenue is 950 and under", [["revenue", "<=", 950]]),
        ("rows where units is 2 or fewer", [["units", "<=", 2]]),
        ("rows with revenue not greater than 900", [["revenue", "<=", 900]]),
        ("rows with units not fewer than 3", [["units", ">=", 3]]),
        # A comma between groups of three digits is a thousands separator, not two numbers.
        ("rows with revenue under 1,200.50", [["revenue", "<", 1200.5]]),
        ("rows with revenue at least 1,000", [["revenue", ">=", 1000]]),
    ],
)
def test_or_between_one_columns_values_bounds_after_the_number_and_thousands(graph, folder, words, conditions):
    bound, reasons, _ = read(graph, folder, "filter_rows", words)
    assert bound == {"conditions": conditions}, reasons


@pytest.mark.parametrize(
    "words",
    [
        "rows where units is under 2 or revenue is above 1400",
        "rows where region is West or product is Gadget",
        "rows in the North or with units over 4",
    ],
)
def test_conditions_joined_by_or_over_different_columns_are_never_read_as_all_of_them(graph, folder, words):
    bound, reasons, arguments = read(graph, folder, "filter_rows", words)
    assert "conditions" not in bound
    assert "either condition" in reasons["conditions"] and "all of its conditions" in reasons["conditions"]
    (reading,) = [reading for reading in arguments.not_bound if reading.parameter == "conditions"]
    assert reading.conflicting  # the part is not understood, not asked about


def test_a_bound_contradicted_by_the_words_after_its_number_is_not_read(graph, folder):
    bound, reasons, _ = read(graph, folder, "filter_rows", "rows where units is above 3 or less")
    assert "conditions" not in bound and "give one comparison" in reasons["conditions"]


@pytest.mark.integration
@pytest.mark.parametrize(
    ("task", "said"),
    [
        # A comparison whose other side is no value: no top-N or plain listing stands in for it.
        ("show the rows of sales.csv with revenue below the median", "'the median' is not one"),
        ("which sales in sales.csv have units higher than last month", "is not one"),
        # A where clause that defines a column instead of picking rows.
        ("sum the revenue per region in sales.csv, where revenue means units times price", "no condition could be read"),
        # A grouping by a word that is no column ('date' holds the dates, but 'week' is none).
        ("how many sales per week are in sales.csv", "groups by 'week'"),
        ("the average units for every store in sales.csv", "groups by 'store'"),
        # Conditions joined by "or" across columns, whatever step the words match.
        ("total revenue of sales.csv where region is East or units is over 4", "either condition"),
    ],
)
def test_words_about_the_data_that_cannot_be_read_leave_the_part_not_understood(embedder, folder, monkeypatch, task, said):
    monkeypatch.chdir(folder)
    planned = Workspace.open(embedder=embedder).plan_task(task)
    (part,) = planned.parts
    assert part.fate == "not understood" and said in part.problem, part.problem
    assert not planned.plan.steps


@pytest.mark.integration
@pytest.mark.parametrize(
    ("task", "tools"),
    [
        ("plot units over time from sales.csv", ["load_table", "plot_line"]),
        ("keep the rows of sales.csv where revenue is less than 1,000", ["load_table", "filter_rows"]),
    ],
)
def test_axis_words_and_thousands_still_plan(embedder, folder, monkeypatch, task, tools):
    monkeypatch.chdir(folder)
    planned = Workspace.open(embedder=embedder).plan_task(task)
    assert [step.tool.name for step in planned.plan.steps] == tools
