"""Conditions on rows for a goal that takes none (issue 52): a filtering step planned before it, or the
filter as the goal; the words that decide between filtering and removing rows; a value that is no
file name never taken as a file's path. Over the shipped tabular catalog and a small CSV written here."""

import pytest

from toolpath.planner import Workspace
from toolpath.planner.planning.plans import plan_to_run
from toolpath.planner.tasks.arguments import bind_arguments
from toolpath.planner.tasks.clauses import is_file_name, source_file_names
from toolpath.planner.tasks.condition_steps import filtering_tools

SALES = """\
date,month,region,product,revenue,units
2024-01-05,2024-01,North,Widget,1200.5,3
2024-01-20,2024-01,South,Gadget,800,
2024-02-03,2024-02,North,Gadget,950,5
2024-02-17,2024-02,East,Widget,,1
2024-03-09,2024-03,West,Widget,1500,12
2024-03-21,2024-03,South,Gizmo,400,14
"""


@pytest.fixture(scope="module")
def graph():
    return Workspace.open().graph


@pytest.fixture()
def folder(tmp_path):
    (tmp_path / "sales.csv").write_text(SALES)
    return tmp_path


def read(graph, folder, tool, words):
    """``({parameter: value bound}, {parameter: why not bound})`` for a plan that runs ``tool`` on sales.csv."""
    plan = plan_to_run(graph, f"tabular.{tool}", held={"tabular.file_given"})
    arguments = bind_arguments(graph, words, (), plan, {"path": "sales.csv"}, folder)
    bound = {reading.parameter: reading.value for reading in arguments.bound if reading.tool == tool}
    reasons = {reading.parameter: reading.why for reading in arguments.not_bound if reading.tool == tool}
    return bound, reasons


# -- reading the words ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("words", "conditions"),
    [
        ("which entries have an empty units value?", [["units", "is missing", None]]),
        ("the rows that have no revenue", [["revenue", "is missing", None]]),
        ("sales without units", [["units", "is missing", None]]),
        ("the ones for the South or the East region", [["region", "in", ["South", "East"]]]),
        ("rows whose month contains '2024-02'", [["month", "contains", "2024-02"]]),
    ],
)
def test_conditions_said_in_everyday_words(graph, folder, words, conditions):
    bound, reasons = read(graph, folder, "filter_rows", words)
    assert bound == {"conditions": conditions}, reasons


@pytest.mark.parametrize("words", ["remove the rows where region is South", "get rid of the entries with revenue under 900"])
def test_words_that_remove_rows_give_a_filter_no_conditions(graph, folder, words):
    # A filter keeps the rows its conditions match: read as conditions, these words would keep the
    # very rows the person asked to remove.
    bound, reasons = read(graph, folder, "filter_rows", words)
    assert "conditions" not in bound
    assert "which rows to remove" in reasons["conditions"]


def test_removing_rows_with_a_missing_column_names_the_column_to_check(graph, folder):
    assert read(graph, folder, "drop_missing", "delete the entries where units is empty")[0] == {"columns": ["units"]}
    # Asking which rows have a gap names no column to clean: drop_missing takes nothing from these words.
    assert "columns" not in read(graph, folder, "drop_missing", "which entries have a missing units value")[0]


def test_only_file_names_are_file_names():
    assert is_file_name("sales.csv") and is_file_name("data/q1.parquet")
    assert not is_file_name("2024-03") and not is_file_name("North") and not is_file_name("e.g.")
    assert source_file_names("the rows of q1.xlsx whose date contains '2024-03', saved to out.csv") == ["q1.xlsx"]


def test_the_filter_is_found_in_the_catalog_by_what_it_takes_and_makes(graph):
    tools = list(graph.registry)
    count_rows = next(tool for tool in tools if tool.name == "count_rows")
    assert [tool.name for tool in filtering_tools(tools, count_rows, graph.refinements)] == ["filter_rows"]
    # The filter's result is a table: a chemistry tool reads no such thing, and gets no tabular filter.
    lipinski = next(tool for tool in tools if tool.server_name == "chemistry" and tool.required_parameters and tool.required_parameters[0].state)
    assert filtering_tools(tools, lipinski, graph.refinements) == [] or all(
        tool.server_name == "chemistry" for tool in filtering_tools(tools, lipinski, graph.refinements)
    )


# -- through the planner --------------------------------------------------------------------------------


def planned(embedder, folder, monkeypatch, task):
    monkeypatch.chdir(folder)
    return Workspace.open(embedder=embedder).plan_task(task)


@pytest.mark.integration
@pytest.mark.parametrize(
    ("task", "tools", "conditions"),
    [
        ("count the entries of sales.csv where units is at least 10", ["load_table", "filter_rows", "count_rows"], [["units", ">=", 10]]),
        ("how many sales.csv rows are in the South region?", ["load_table", "filter_rows", "count_rows"], [["region", "==", "South"]]),
        ("give me the sales.csv rows where product is Gizmo", ["load_table", "filter_rows"], [["product", "==", "Gizmo"]]),
        ("the entries of sales.csv with units under 4", ["load_table", "filter_rows"], [["units", "<", 4]]),
    ],
)
def test_conditions_a_goal_does_not_take_run_as_a_filter_before_it_or_as_the_goal(embedder, folder, monkeypatch, task, tools, conditions):
    plan = planned(embedder, folder, monkeypatch, task)
    assert [step.tool.name for step in plan.plan.steps] == tools
    assert all(part.fate == "planned" for part in plan.parts)
    assert {(reading.tool, reading.parameter): reading.value for reading in plan.arguments.bound}[("filter_rows", "conditions")] == conditions
    assert not plan.cell.unbound
    if tools[-1] == "count_rows":
        # The count reads the filtered rows, not the loaded table.
        assert "count_rows(table=tabular_filter_rows_" in plan.cell.code or "count_rows(table=rows" in plan.cell.code
        said = [part.to_dict()["why"] for part in plan.parts if "step was added before tabular.count_rows" in (part.why or "")]
        assert said and "takes no conditions" in said[0]
    else:
        assert "the filter is its goal" in plan.parts[0].why


@pytest.mark.integration
def test_saving_some_rows_saves_the_filtered_rows_where_the_words_say(embedder, folder, monkeypatch):
    plan = planned(embedder, folder, monkeypatch, "write the South rows of sales.csv to south.csv")
    assert [step.tool.name for step in plan.plan.steps] == ["load_table", "filter_rows", "save_table"]
    bound = {(reading.tool, reading.parameter): reading.value for reading in plan.arguments.bound}
    assert bound == {("filter_rows", "conditions"): [["region", "==", "South"]], ("save_table", "path"): "south.csv"}


@pytest.mark.integration
def test_asking_which_rows_have_a_gap_filters_them_and_removing_them_drops_them(embedder, folder, monkeypatch):
    which = planned(embedder, folder, monkeypatch, "which entries of sales.csv have an empty units value?")
    assert [step.tool.name for step in which.plan.steps] == ["load_table", "filter_rows"]
    assert which.arguments.bound[-1].value == [["units", "is missing", None]]
    removed = planned(embedder, folder, monkeypatch, "remove the rows of sales.csv where units is empty")
    assert [step.tool.name for step in removed.plan.steps] == ["load_table", "drop_missing"]
    assert {(reading.tool, reading.parameter): reading.value for reading in removed.arguments.bound}[("drop_missing", "columns")] == ["units"]


@pytest.mark.integration
def test_removing_rows_by_a_value_never_keeps_those_rows(embedder, folder, monkeypatch):
    from toolpath.errors import Refusal

    try:
        plan = planned(embedder, folder, monkeypatch, "delete the rows of sales.csv where region is North")
    except Refusal:  # not understood as a whole (the tabular catalog's words never say "delete"): nothing kept
        return
    kept_north = [reading for reading in plan.arguments.bound if reading.parameter == "conditions" and ["region", "==", "North"] in reading.value]
    assert not kept_north
    assert any(part.fate == "not understood" for part in plan.parts) or plan.cell.unbound


@pytest.mark.integration
def test_a_quoted_value_that_is_no_file_name_is_never_the_files_path(embedder, folder, monkeypatch):
    plan = planned(embedder, folder, monkeypatch, "the rows of sales.csv whose month contains '2024-02'")
    assert plan.inputs.get("path") == "sales.csv" or plan.inputs.get("tabular.load_table.path") == "sales.csv"
    assert "2024-02" not in {str(value) for value in plan.inputs.values() if value != [["month", "contains", "2024-02"]]}
    assert [step.tool.name for step in plan.plan.steps] == ["load_table", "filter_rows"]
