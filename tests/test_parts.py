"""Tasks with several parts: splitting, matching each part, one joint plan (shipped chemistry catalog)."""

import json
import re
import subprocess
import sys

import pytest

from toolpath.planner import plan
from toolpath.planner.planning.inputs import InputError
from toolpath.planner.search.skills import QueryError
from toolpath.planner.tasks.clauses import split_task
from toolpath.planner.tasks.goals import NoMatchingSkillError

ASPIRIN = "CC(=O)Oc1ccccc1C(=O)O"


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("load people.csv and compute summary statistics", ["load people.csv", "compute summary statistics"]),
        (
            "caption this image, translate the caption to French and then read it aloud",
            ["caption this image", "translate the caption to French", "read it aloud"],
        ),
        ("Parse the molecule. Then compute its descriptors; finally cluster them", ["Parse the molecule", "compute its descriptors", "cluster them"]),
        ("1. parse the molecule 2) find its groups", ["parse the molecule", "find its groups"]),
        ("- parse the molecule\n- find its groups\n- check Lipinski", ["parse the molecule", "find its groups", "check Lipinski"]),
        ("set the alarm to 7. Then sleep", ["set the alarm to 7", "sleep"]),
        ("first, fingerprint the library, after that rank it by similarity", ["fingerprint the library", "rank it by similarity"]),
        ("is aspirin drug-like?", ["is aspirin drug-like?"]),
        # A named value is an argument of the action before it in its sentence (of the next one when it comes first).
        ("log in with ID 123456 and password abc123, then check the balance", ["log in with ID 123456 and password abc123", "check the balance"]),
        ("password abc123, log in with ID 123456", ["password abc123, log in with ID 123456"]),
        # A sentence that tells a value is a fact of its own: sentences never join.
        ("My account ID is 123456. Buy 'Golden Profit Treasure' with it", ["My account ID is 123456", "Buy 'Golden Profit Treasure' with it"]),
        # A lone verb shares the object of the next clause; a lone last word is still a part.
        ("inquire and inform me of the balance", ["inquire me of the balance", "inform me of the balance"]),
        ("I need to find and compare all flights", ["I need to find all flights", "compare all flights"]),
        ("book the flight and pay", ["book the flight", "pay"]),
        # Apostrophes are not quotes, and a value needs a digit, an "@" or quotes.
        ("compute descriptors and check Lipinski's rule of five", ["compute descriptors", "check Lipinski's rule of five"]),
    ],
)
def test_split_task_cuts_at_sentences_enumerations_and_connectives(text, parts):
    assert split_task(text) == parts


def tool_names(task_plan):
    return [step.tool.name for step in task_plan.plan.steps]


def test_a_two_part_task_plans_both_parts_from_text_and_from_steps(workspace):
    text = workspace.plan_task("identify the functional groups of this molecule and check Lipinski's rule of five", inputs={"smiles": ASPIRIN})
    assert [part.text for part in text.parts] == ["identify the functional groups of this molecule", "check Lipinski's rule of five"]
    assert [sorted(part.goal) for part in text.parts] == [["chemistry.groups_identified"], ["chemistry.descriptors_computed"]]
    assert tool_names(text) == ["parse_molecule", "identify_functional_groups", "compute_descriptors"]
    assert text.plan.optimal and text.cell.unbound == ()
    assert "functional_groups = await chemistry.identify_functional_groups(molecule=molecule)" in text.cell.code

    steps = workspace.plan_task(["identify the functional groups of this molecule", "check Lipinski's rule of five"], inputs={"smiles": ASPIRIN})
    assert tool_names(steps) == tool_names(text) and steps.cell.code.split("\n", 1)[1] == text.cell.code.split("\n", 1)[1]
    # The parts' order decides what data flow leaves open.
    swapped = workspace.plan_task(["check Lipinski's rule of five", "identify the functional groups of this molecule"], inputs={"smiles": ASPIRIN})
    assert tool_names(swapped) == ["parse_molecule", "compute_descriptors", "identify_functional_groups"]


def test_data_flow_orders_steps_before_the_parts_order(workspace):
    task_plan = workspace.plan_task(
        ["cluster these molecules by structural similarity", "compute Morgan fingerprints of the molecules"], inputs={"smiles_list": ["CCO", "CCN"]}
    )
    assert tool_names(task_plan) == ["compute_fingerprints", "cluster_molecules"]
    assert task_plan.plan.steps[1].satisfied_by == {"chemistry.fingerprints_computed": 0}


def test_free_text_never_drops_a_clause(workspace):
    task_plan = workspace.plan_task("book a flight to Paris and check Lipinski's rule of five", inputs={"smiles": ASPIRIN})
    assert [(part.text, part.status) for part in task_plan.parts] == [("book a flight to Paris", "unmatched"), ("check Lipinski's rule of five", "matched")]
    weak_clause = workspace.plan_task("parse the molecule, then check Lipinski", inputs={"smiles": ASPIRIN})
    assert tool_names(weak_clause) == ["parse_molecule", "compute_descriptors"]
    # A bare comma between arguments does not make a part of its own.
    arguments = workspace.plan_task("check Lipinski's rule of five for aspirin, SMILES CC(=O)Oc1ccccc1C(=O)O", inputs={"smiles": ASPIRIN})
    assert len(arguments.parts) == 1 and tool_names(arguments) == ["parse_molecule", "compute_descriptors"]


@pytest.mark.parametrize("bad", [["parse this molecule", None], [], "   ", 5, b"parse", {"parse": 1}])
def test_a_task_that_is_neither_text_nor_steps_is_refused(workspace, bad):
    from toolpath.planner.search.skills import QueryError

    with pytest.raises(QueryError):
        workspace.plan_task(bad)


def test_a_part_that_matches_nothing_is_named_not_dropped(workspace):
    task_plan = workspace.plan_task(["check Lipinski's rule of five", "book a flight to Paris next Tuesday"], inputs={"smiles": ASPIRIN})
    assert [part.status for part in task_plan.parts] == ["matched", "unmatched"]
    (unmatched,) = task_plan.unmatched
    assert unmatched.text == "book a flight to Paris next Tuesday" and "no state or tool matches it" in unmatched.problem
    assert tool_names(task_plan) == ["parse_molecule", "compute_descriptors"]
    reported = json.loads(json.dumps(task_plan.to_dict()))
    assert reported["parts"][1] == {**reported["parts"][1], "part": "book a flight to Paris next Tuesday", "status": "unmatched", "matched": None, "goal": []}


def test_a_part_already_held_says_so_and_states_the_caller_holds_stay_held(workspace):
    held = ["chemistry.molecule_parsed", "chemistry.groups_identified"]
    task_plan = workspace.plan_task(["find the functional groups of the molecule", "check Lipinski's rule of five"], held=held)
    assert [part.status for part in task_plan.parts] == ["held", "matched"]
    assert tool_names(task_plan) == ["compute_descriptors"]
    # The caller's word that a state is held stands, inputs or not: the SMILES goes unused, and says so.
    kept = workspace.plan_task(["find the functional groups of the molecule", "check Lipinski's rule of five"], held=held, inputs={"smiles": ASPIRIN})
    assert [part.status for part in kept.parts] == ["held", "matched"] and kept.cell.unused_inputs == ("smiles",)


def test_new_inputs_replace_what_a_session_held_but_not_the_state_they_carry(workspace):
    from toolpath.planner.tasks.cell_writers import FreshKernelCells
    from toolpath.planner.tasks.pipeline import TaskContext, plan_request

    def planned(task, inputs, session_held):
        return plan_request(TaskContext(workspace.graph, lambda: workspace.index, FreshKernelCells(workspace.graph), frozenset(session_held)), task, inputs)

    # A session's held states are another matter: a new SMILES means a new molecule, so what was
    # parsed before, and made from it, is planned again.
    session_held = ["chemistry.molecule_parsed", "chemistry.groups_identified"]
    steps = ["find the functional groups of the molecule", "check Lipinski's rule of five"]
    replaced = planned(steps, {"smiles": ASPIRIN}, session_held)
    assert [part.status for part in replaced.parts] == ["matched", "matched"]
    assert tool_names(replaced) == ["parse_molecule", "identify_functional_groups", "compute_descriptors"]
    # An input that carries a held state is that state's value: the state stays held.
    loaded = planned(["describe the table"], {"path": "data.csv"}, ["tabular.file_given"])
    assert "tabular.file_given" in loaded.plan.held and tool_names(loaded) == ["load_table", "describe_table"]


def test_a_tool_that_must_run_runs_even_when_its_state_is_held(chemistry_graph):
    held = ["chemistry.molecule_parsed", "chemistry.descriptors_computed"]
    again = plan(chemistry_graph, [], held=held, must_run=["compute_descriptors"])
    assert [step.tool.name for step in again.steps] == ["compute_descriptors"] and again.must_run == {"chemistry.compute_descriptors"}
    both = plan(chemistry_graph, ["chemistry.groups_identified"], must_run=["compute_descriptors"])
    assert sorted(step.tool.name for step in both.steps) == ["compute_descriptors", "identify_functional_groups", "parse_molecule"] and both.cost == 3
    with pytest.raises(ValueError, match="must run and is avoided"):
        plan(chemistry_graph, [], must_run=["compute_descriptors"], avoid=["compute_descriptors"])


def test_cli_takes_steps_and_reports_parts(tmp_path):
    def toolpath(*arguments):
        return subprocess.run([sys.executable, "-m", "toolpath.planner.interfaces.cli", *arguments], capture_output=True, text=True, timeout=300)

    completed = toolpath(
        "cell",
        "--step",
        "identify the functional groups of this molecule",
        "--step",
        "check Lipinski's rule of five",
        "--step",
        "book a flight to Paris",
        "--input",
        f"smiles={ASPIRIN}",
        "--json",
        "--partial",  # without it, the part not understood stops the task (exit 3: tests/test_fates.py)
    )
    assert completed.returncode == 0, completed.stderr
    report = json.loads(completed.stdout)
    assert [(part["part"], part["status"], part["goal"]) for part in report["parts"]] == [
        ("identify the functional groups of this molecule", "matched", ["chemistry.groups_identified"]),
        ("check Lipinski's rule of five", "matched", ["chemistry.descriptors_computed"]),
        ("book a flight to Paris", "unmatched", []),
    ]
    assert "the part 'book a flight to Paris' of the task was not understood" in completed.stderr
    both = toolpath("cell", "check it", "--step", "check Lipinski's rule of five")
    assert both.returncode == 2 and "not both" in both.stderr


def test_a_tool_asked_for_twice_is_called_twice_in_the_order_asked(workspace):
    steps = ["call parse_molecule on the first SMILES", "call compute_descriptors on that molecule", "call parse_molecule again to check it"]
    task_plan = workspace.plan_task(steps, inputs={"smiles": ASPIRIN})
    assert tool_names(task_plan) == ["parse_molecule", "compute_descriptors", "parse_molecule"]
    assert task_plan.plan.cost == 3 and task_plan.cell.step_variables == ("molecule", "descriptors", "molecule_2")
    assert "descriptors = await chemistry.compute_descriptors(molecule=molecule)" in task_plan.cell.code


@pytest.mark.parametrize(
    ("task", "message"),
    [
        ("parse this\x00 molecule", "the task holds the control character U+0000 at character 10"),
        ("parse \x1b[31mthis molecule", "the task holds the control character U+001B at character 6"),
        ("parse this \udcff molecule", "the task is not valid UTF-8: byte 0xff at character 11"),
        (["parse this molecule", "check \x07 it"], "step 2 holds the control character U+0007"),
    ],
)
def test_tasks_with_control_characters_or_bytes_that_were_not_utf8_are_refused(workspace, task, message):
    with pytest.raises(QueryError, match=re.escape(message)):
        workspace.plan_task(task, inputs={"smiles": ASPIRIN})


def test_a_fact_holds_its_input_state_and_its_value_never_becomes_a_destination(workspace):
    """write_report's ``path`` is an output: the file the user has is given to load_table only."""
    task_plan = workspace.plan_task("I have a spreadsheet called 'sales.xlsx'. Write a report of it.")
    fact, action = task_plan.parts
    assert (fact.kind, fact.status, action.kind) == ("fact", "fact", "action")
    assert fact.holds == {"tabular.file_given"} and "tabular.file_given" in task_plan.plan.held
    assert dict(fact.values) == {"chemistry.tabulate_descriptors.path": "sales.xlsx", "tabular.load_table.path": "sales.xlsx"}
    assert tool_names(task_plan) == ["load_table", "write_report"]
    assert "load_table(path=tabular_load_table_path)" in task_plan.cell.code
    assert "write_report(table=table)" in task_plan.cell.code and task_plan.cell.code.split("\n", 1)[1].count("'sales.xlsx'") == 1
    # The caller's own input wins over the fact's value.
    given = workspace.plan_task("I have a spreadsheet called 'sales.xlsx'. Write a report of it.", inputs={"path": "other.csv"})
    assert given.parts[0].values == () and "'other.csv'" in given.cell.code and "sales.xlsx" not in given.cell.code.split("\n", 1)[1]


def test_a_fact_that_names_no_input_state_holds_nothing(workspace):
    task_plan = workspace.plan_task("I parsed aspirin yesterday. Check Lipinski's rule of five", inputs={"smiles": ASPIRIN})
    assert task_plan.parts[0].kind == "fact" and task_plan.parts[0].holds == frozenset()
    assert tool_names(task_plan) == ["parse_molecule", "compute_descriptors"]
    assert "it names no input state" in task_plan.to_dict()["parts"][0]["why"]


def test_a_destination_is_never_taken_for_a_file_the_user_holds(workspace):
    task_plan = workspace.plan_task("I have a CSV file 'people.csv'. The output file is 'out.csv'. Describe the table")
    assert [part.kind for part in task_plan.parts] == ["fact", "fact", "action"]
    assert task_plan.parts[1].holds == frozenset() and "where to write" in task_plan.parts[1].why
    assert task_plan.inputs == {"tabular.load_table.path": "people.csv"} and "out.csv" not in task_plan.cell.code.split("\n", 1)[1]


def test_a_value_in_an_action_is_the_file_its_plan_needs(workspace):
    task_plan = workspace.plan_task("Write a report of 'people.csv' to 'notes.md'")
    assert tool_names(task_plan) == ["load_table", "write_report"]
    # The source is read; the destination is no input of load_table but write_report's (issue 52: "to report.md"
    # writes ./report.md; writing over an existing file is issue 35's approval).
    assert task_plan.inputs == {"tabular.load_table.path": "people.csv", "tabular.write_report.path": "notes.md"}
    assert task_plan.parts[0].holds == {"tabular.file_given"}


def test_two_values_for_one_input_are_refused_naming_both(workspace):
    with pytest.raises(InputError, match=r"two values for the input \S+path: 'a.csv' .* and 'b.csv'"):
        workspace.plan_task("I have a CSV file 'a.csv'. I have a CSV file 'b.csv'. Describe the table")


def test_a_task_that_only_tells_is_refused(workspace):
    with pytest.raises(QueryError, match="only tells .* and asks for nothing"):
        workspace.plan_task("I have a CSV file 'people.csv'.")


def test_a_refusal_quotes_the_users_words_not_the_searched_ones(workspace):
    with pytest.raises(NoMatchingSkillError, match="no catalog can serve the task 'book a flight to Rome'"):
        workspace.plan_task("book a flight to Rome")
