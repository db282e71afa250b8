"""A table file of molecules named in a task's words (issue 52, chemistry): the request about every
molecule of the file tabulates its descriptors instead of asking for one SMILES, when the file's
probe reads it; other readings of the words are kept (shipped tabular and chemistry catalogs)."""

import json
import re
import subprocess
import sys

import pytest

from toolpath.planner import Workspace
from toolpath.planner.planning.plans import plan_to_run
from toolpath.planner.tasks.arguments import bind_arguments

COMPOUNDS = """\
compound,smiles,potency
acetone,CC(C)=O,1.2
phenol,Oc1ccccc1,2.5
benzene,c1ccccc1,0.4
"""


@pytest.fixture()
def folder(tmp_path):
    (tmp_path / "compounds.csv").write_text(COMPOUNDS)
    return tmp_path


def tools(planned):
    return [step.tool.name for step in planned.plan.steps]


@pytest.mark.integration
@pytest.mark.parametrize("task", ["work out the descriptors of each compound listed in compounds.csv", "is every compound in compounds.csv drug-like?"])
def test_a_table_file_of_molecules_is_tabulated_rather_than_one_smiles_asked_for(embedder, folder, monkeypatch, task):
    monkeypatch.chdir(folder)
    planned = Workspace.open(embedder=embedder).plan_task(task)
    assert tools(planned) == ["tabulate_descriptors"]
    assert not planned.cell.unbound
    assert planned.inputs["chemistry.tabulate_descriptors.path"] == "compounds.csv"
    (part,) = planned.parts
    assert part.fate == "planned" and "'compounds.csv' is the tabular.file_given" in part.why and "probe reads it" in part.why


@pytest.mark.integration
def test_a_file_name_the_probe_cannot_read_is_not_taken_for_a_table(embedder, tmp_path, monkeypatch):
    # No compounds.csv where the planner may read: nothing shows the name is a table of molecules.
    monkeypatch.chdir(tmp_path)
    planned = Workspace.open(embedder=embedder).plan_task("work out the descriptors of each compound listed in compounds.csv")
    assert "tabulate_descriptors" not in tools(planned)


@pytest.mark.integration
@pytest.mark.parametrize(
    "task",
    [
        # Similarity over the file's molecules: no shipped plan does it, and a table of descriptors
        # would drop what the words ask for.
        "show me which compounds in compounds.csv resemble 'CCO' the most",
    ],
)
def test_words_that_ask_for_more_than_the_table_of_descriptors_are_not_tabulated_alone(embedder, folder, monkeypatch, task):
    monkeypatch.chdir(folder)
    planned = Workspace.open(embedder=embedder).plan_task(task)
    assert tools(planned) != ["tabulate_descriptors"]
    assert planned.cell.unbound or any(part.fate != "planned" for part in planned.parts)


@pytest.mark.integration
def test_a_count_per_category_of_a_table_of_molecules_counts_the_rows_of_each_category(tmp_path):
    """The words ask for a count per category of the file: the file's name ("compounds") and the
    placeholder "a file" drew the search to chemistry (one molecule parsed, the file unread and a
    SMILES asked for), so the count was dropped. The command line plans and runs the count."""
    (tmp_path / "compounds.csv").write_text(
        "name,smiles,category\naspirin,CC(=O)Oc1ccccc1C(=O)O,analgesic\nparacetamol,CC(=O)Nc1ccc(O)cc1,analgesic\n"
        "caffeine,Cn1cnc2c1c(=O)n(C)c(=O)n2C,stimulant\nibuprofen,CC(C)Cc1ccc(cc1)C(C)C(=O)O,analgesic\n"
    )
    command = [sys.executable, "-m", "toolpath.planner.interfaces.cli", "run", "--json", "count the compounds in each category of compounds.csv"]
    completed = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr
    ran = json.loads(completed.stdout)
    assert [step["tool"] for step in ran["plan"]["steps"]] == ["load_table", "group_and_aggregate"]
    assert {(argument["parameter"], str(argument["value"])) for argument in ran["arguments"]} >= {("by", "category"), ("how", "count")}
    assert ran["result"]["status"] == "ok"
    assert re.findall(r"(analgesic|stimulant)\s+(\d+)", ran["result"]["result"]) == [("analgesic", "3"), ("stimulant", "1")]


@pytest.mark.integration
def test_a_quoted_smiles_is_still_one_molecule_beside_a_table_file(embedder, folder, monkeypatch):
    monkeypatch.chdir(folder)
    planned = Workspace.open(embedder=embedder).plan_task("compute the descriptors of 'Oc1ccccc1'")
    assert tools(planned) == ["parse_molecule", "compute_descriptors"]
    assert {(reading.tool, reading.parameter): reading.value for reading in planned.arguments.bound} == {("parse_molecule", "smiles"): "Oc1ccccc1"}


@pytest.fixture(scope="module")
def graph():
    return Workspace.open().graph


def read_tabulation(graph, folder, file, words):
    """``(bound {parameter: value}, not bound {parameter: reading})`` of tabulate_descriptors on ``file``."""
    plan = plan_to_run(graph, "chemistry.tabulate_descriptors", held={"tabular.file_given"})
    arguments = bind_arguments(graph, words, (), plan, {"path": file}, folder)
    return {reading.parameter: reading.value for reading in arguments.bound}, {reading.parameter: reading for reading in arguments.not_bound}


def test_the_smiles_column_is_the_one_the_words_name_else_its_default_when_the_file_has_it(graph, folder):
    (folder / "structures.csv").write_text("label,structure\nethanol,CCO\n")
    bound, _ = read_tabulation(graph, folder, "structures.csv", "descriptors of the molecules in the structure column of structures.csv")
    assert bound == {"smiles_column": "structure"}
    bound, not_bound = read_tabulation(graph, folder, "compounds.csv", "descriptors of every compound in compounds.csv")
    assert bound == {} and "smiles_column" not in not_bound  # compounds.csv has a 'smiles' column: the default serves


def test_a_table_without_the_default_smiles_column_leaves_its_part_not_understood(graph, folder):
    (folder / "structures.csv").write_text("label,structure\nethanol,CCO\n")
    _, not_bound = read_tabulation(graph, folder, "structures.csv", "descriptors of every compound in structures.csv")
    reading = not_bound["smiles_column"]
    assert reading.conflicting and "no column 'smiles'" in reading.why and "label, structure" in reading.why


def test_a_column_the_words_are_about_is_not_guessed_to_hold_the_molecules(graph, folder):
    # products.csv has no 'smiles' column; 'item' is what the words speak of, not where SMILES are.
    (folder / "products.csv").write_text("item,price\nkettle,20\n")
    bound, not_bound = read_tabulation(graph, folder, "products.csv", "translate the item names of products.csv")
    assert "smiles_column" not in bound and not_bound["smiles_column"].conflicting


@pytest.mark.integration
def test_a_request_about_a_table_without_molecules_never_tabulates_descriptors(embedder, folder, monkeypatch):
    monkeypatch.chdir(folder)
    (folder / "products.csv").write_text("item,price\nkettle,20\ntoaster,35\n")
    from toolpath.errors import Refusal

    try:
        planned = Workspace.open(embedder=embedder).plan_task("translate the item names in products.csv into Japanese")
    except Refusal:  # refused outright: as good as a part not understood
        return
    assert planned.unmatched or planned.cell.unbound, [step.tool.name for step in planned.plan.steps]


@pytest.mark.integration
def test_a_chart_of_a_column_only_tabulating_adds_is_planned_through_tabulating(embedder, folder, monkeypatch):
    # compounds.csv has no molecular weight; tabulate_descriptors adds the column (its return_spec.adds_columns).
    monkeypatch.chdir(folder)
    planned = Workspace.open(embedder=embedder).plan_task("draw a histogram of the molecular weights in compounds.csv")
    assert tools(planned) == ["tabulate_descriptors", "plot_histogram"]
    assert {(reading.tool, reading.parameter): reading.value for reading in planned.arguments.bound}[("plot_histogram", "column")] == "molecular_weight"


def read_filter(graph, folder, tools_before, words):
    """The conditions ``words`` give filter_rows planned after ``tools_before`` on compounds.csv (``None`` when none)."""
    steps = [plan_to_run(graph, name, held={"tabular.file_given"}) for name in tools_before]
    held = {"tabular.file_given"}.union(*(step.goal for step in steps))
    filtering = plan_to_run(graph, "tabular.filter_rows", held=held)
    whole = type(filtering)(filtering.goal, frozenset({"tabular.file_given"}), (*[s for step in steps for s in step.steps], *filtering.steps), 2.0, True)
    arguments = bind_arguments(graph, words, (), whole, {"path": "compounds.csv"}, folder)
    return next((reading.value for reading in arguments.bound if reading.parameter == "conditions"), None)


@pytest.mark.parametrize(
    ("words", "conditions"),
    [
        ("keep the compounds whose molecular weight is below 100", [["molecular_weight", "<", 100]]),
        ("only the compounds passing Lipinski's rule of five", [["lipinski_passes", "==", True]]),
        ("the compounds which do not pass Lipinski", [["lipinski_passes", "==", False]]),
    ],
)
def test_a_filter_after_tabulating_reads_the_columns_tabulating_adds(graph, folder, words, conditions):
    assert read_filter(graph, folder, ["chemistry.tabulate_descriptors"], words) == conditions


def test_a_filter_on_the_file_as_loaded_knows_no_added_column(graph, folder):
    assert read_filter(graph, folder, ["tabular.load_table"], "keep the compounds whose molecular weight is below 100") is None


@pytest.mark.parametrize(
    ("columns", "message"),
    [({"": "number"}, "column name is empty"), ({"weight": "float"}, "'weight' has kind 'float'"), ({}, "adds_columns is empty")],
)
def test_a_catalog_declaring_added_columns_badly_is_refused_naming_the_field(columns, message):
    from pydantic import ValidationError

    from toolpath.registry.tools import ReturnSpec

    with pytest.raises(ValidationError, match="adds_columns") as raised:
        ReturnSpec(name="table", type="pandas.DataFrame", adds_columns=columns)
    assert message in str(raised.value)


# -- a part after tabulating that keeps some of its rows; a file after "to" that is the table --------


def test_the_filter_for_a_later_part_is_the_one_tool_taking_conditions_on_what_earlier_parts_made(graph):
    from toolpath.planner.tasks.condition_steps import filtering_tools_reading

    tools = list(graph.registry)
    assert [tool.name for tool in filtering_tools_reading(tools, {"tabular.table_loaded", "chemistry.descriptors_tabulated"}, graph.refinements)] == [
        "filter_rows"
    ]
    # A parsed molecule is no table: nothing keeps rows of it.
    assert filtering_tools_reading(tools, {"chemistry.molecule_parsed"}, graph.refinements) == []


@pytest.mark.integration
@pytest.mark.parametrize(
    ("task", "conditions"),
    [
        ("work out descriptors for compounds.csv, and then retain only the compounds whose logp is above 1", [["logp", ">", 1]]),
        ("append descriptor columns to compounds.csv, then only keep the compounds passing Lipinski's rule", [["lipinski_passes", "==", True]]),
    ],
)
def test_a_later_part_that_only_states_conditions_on_the_tabulated_columns_filters_that_table(embedder, folder, monkeypatch, task, conditions):
    monkeypatch.chdir(folder)
    planned = Workspace.open(embedder=embedder).plan_task(task)
    assert tools(planned) == ["tabulate_descriptors", "filter_rows"]
    assert all(part.fate == "planned" for part in planned.parts) and not planned.cell.unbound
    bound = {(reading.tool, reading.parameter): reading.value for reading in planned.arguments.bound}
    assert planned.inputs["chemistry.tabulate_descriptors.path"] == "compounds.csv" and bound[("filter_rows", "conditions")] == conditions
    assert "filter_rows(table=table" in planned.cell.code  # it keeps rows of the tabulated table, not of the file as loaded
    assert "the filter is its goal" in planned.parts[-1].why


@pytest.mark.integration
@pytest.mark.parametrize(
    "task",
    [
        # Removing rows is no condition to keep them by: a filter would keep the very rows meant to go.
        "work out descriptors for compounds.csv, then get rid of the compounds with a logp above 1",
        # "close to" is no comparison the conditions read: the number 1 would be dropped.
        "work out descriptors for compounds.csv, then keep the compounds whose logp is close to 1",
    ],
)
def test_a_later_part_whose_words_are_not_read_in_full_as_conditions_stays_not_understood(embedder, folder, monkeypatch, task):
    monkeypatch.chdir(folder)
    planned = Workspace.open(embedder=embedder).plan_task(task)
    assert "filter_rows" not in tools(planned)
    assert planned.parts[-1].fate == "not understood" and "logp" in planned.parts[-1].problem


def test_only_a_lone_file_after_to_that_is_there_to_read_may_be_the_table_added_to(folder):
    from toolpath.planner.tasks.matching import added_to_file

    assert added_to_file("append descriptor columns to compounds.csv", folder) == "compounds.csv"
    assert added_to_file("append descriptor columns to missing.csv", folder) is None  # nothing there to read: only writable
    assert added_to_file("copy other.csv to compounds.csv", folder) is None  # another file is named to read
    assert added_to_file("descriptors of compounds.csv", folder) is None  # not after "to"


@pytest.mark.integration
def test_a_file_after_to_is_the_table_added_to_only_when_the_plan_writes_nothing(embedder, folder, monkeypatch):
    monkeypatch.chdir(folder)
    workspace = Workspace.open(embedder=embedder)
    added = workspace.plan_task("append descriptor columns to compounds.csv")
    assert tools(added) == ["tabulate_descriptors"] and added.inputs["chemistry.tabulate_descriptors.path"] == "compounds.csv"
    assert "not where to write" in added.parts[0].why
    # An existing file after "to" with a plan that writes is still where to write: overwriting it is asked.
    (folder / "older.csv").write_text(COMPOUNDS)
    for task in ("copy older.csv to compounds.csv", "load older.csv, then save it to compounds.csv"):
        saved = workspace.plan_task(task)
        assert tools(saved) == ["load_table", "save_table"], task
        assert saved.inputs["tabular.load_table.path"] == "older.csv", task
        assert saved.inputs["tabular.save_table.path"] == "compounds.csv", task
