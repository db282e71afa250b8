"""The record of use: what the command line, the Python API and ``toolpath serve`` record, in real
SQLite stores; redaction of values to their kinds; the settings that turn it off or keep values;
retention; a store that fails never fails a task; what ``labelled_examples`` teaches; and two users
of one server never seeing each other's record."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from test_learning import TABULAR, WordHashEmbedder
from test_serve import over_http, serve_over_http  # noqa: F401  (serve_over_http is a fixture)

from toolpath.planner import learn
from toolpath.planner.learning.record_examples import CORRECTION_WINDOW_SECONDS, labelled_examples
from toolpath.planner.tasks.record_of_use import Edits, Recorder, RecordSettings, clear, history, local_user
from toolpath.registry.database import forget_database

ROOT = Path(__file__).resolve().parent.parent
ASPIRIN = "CC(=O)Oc1ccccc1C(=O)O"


def toolpath(store, *arguments, record="on", limit=None):
    environment = {**os.environ, "TOOLPATH_STORE": str(store), "TOOLPATH_RECORD": record}
    if limit is not None:
        environment["TOOLPATH_RECORD_LIMIT"] = str(limit)
    return subprocess.run(
        [sys.executable, "-m", "toolpath.planner.interfaces.cli", *arguments], capture_output=True, text=True, timeout=300, env=environment, cwd=ROOT
    )


def cli_history(store, *options):
    completed = toolpath(store, "history", "--json", *options)
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)["entries"]


@pytest.fixture()
def store(tmp_path):
    path = tmp_path / "record.db"
    yield path
    forget_database(str(path))


def test_cli_runs_and_plans_are_listed_newest_first_with_values_as_their_kinds(store, tmp_path):
    ran = toolpath(store, "run", "is aspirin drug-like? check Lipinski's rule of five", "--input", f"smiles={ASPIRIN}")
    assert ran.returncode == 0, ran.stderr
    table = tmp_path / "quarterly_sales.csv"
    table.write_text("region,units\nNorth,3\nSouth,5\n")
    planned = toolpath(store, "cell", f"plot a histogram of units in {table} with 17 bins")
    assert planned.returncode == 0, planned.stderr
    refused = toolpath(store, "plan", "--goal", "chemistry.descriptors_computed", "--avoid", "compute_descriptors")
    assert refused.returncode == 2

    newest, middle, oldest = cli_history(store)
    assert oldest["outcome"] == "ran" and oldest["interface"] == "cli" and oldest["user"] == local_user()
    assert oldest["request"] == "is aspirin drug-like? check Lipinski's rule of five"
    assert oldest["ran"] == ["chemistry/parse_molecule", "chemistry/compute_descriptors"] == oldest["shown"]
    assert oldest["inputs"] == {"smiles": "<text>"}

    assert middle["outcome"] == "planned" and middle["ran"] == [] and "tabular/plot_histogram" in middle["shown"]
    stored = json.dumps(middle)
    # Neither the file's name nor the number the user wrote is kept; their kinds are.
    assert "quarterly_sales" not in stored and not re.search(r"\b17\b", stored) and str(tmp_path) not in stored
    assert "<file .csv>" in middle["request"] and "<number> bins" in middle["request"]

    assert newest["outcome"] == "refused" and newest["edits"] == {"avoid": ["compute_descriptors"], "goal": ["chemistry.descriptors_computed"]}
    assert newest["detail"].startswith("NoPlanError: no plan reaches the goal")

    assert [entry["outcome"] for entry in cli_history(store, "--limit", "1")] == ["refused"]
    shown = toolpath(store, "history")
    assert shown.returncode == 0 and shown.stdout.index("refused") < shown.stdout.index("planned") < shown.stdout.index("ran ")


def test_values_setting_keeps_the_words_and_off_records_nothing(store, tmp_path):
    table = tmp_path / "quarterly_sales.csv"
    table.write_text("region,units\nNorth,3\nSouth,5\n")
    assert toolpath(store, "cell", f"plot a histogram of units in {table} with 17 bins", record="values").returncode == 0
    (kept,) = cli_history(store)
    assert kept["request"] == f"plot a histogram of units in {table} with 17 bins" and kept["redaction"] == "none"

    assert toolpath(store, "cell", f"plot a histogram of units in {table} with 12 bins", record="off").returncode == 0
    assert toolpath(store, "run", "is aspirin drug-like?", "--input", f"smiles={ASPIRIN}", record="off").returncode == 0
    assert len(cli_history(store)) == 1


def test_retention_keeps_the_newest_entries_of_each_user_only(store):
    other = Recorder("python", str(store), RecordSettings(limit=2))
    other_entry = other.refused("someone else", "an old task", ValueError("refused"))
    goals = ("chemistry.molecule_parsed", "chemistry.descriptors_computed", "chemistry.similarity_computed")
    for goal in goals:
        planned = toolpath(store, "plan", "--goal", goal, limit=2)
        assert planned.returncode == 0, planned.stderr
    # The oldest of three is gone.
    assert [entry["edits"]["goal"] for entry in cli_history(store)] == [[goals[2]], [goals[1]]]
    assert [entry.entry_id for entry in history(str(store), "someone else")] == [other_entry]  # another user's are not counted


def test_clear_deletes_only_this_users_entries_and_says_how_many(store):
    Recorder("python", str(store)).refused("someone else", "their task", ValueError("no"))
    assert toolpath(store, "plan", "--goal", "chemistry.descriptors_computed").returncode == 0
    assert toolpath(store, "plan", "--goal", "chemistry.molecule_parsed").returncode == 0
    cleared = toolpath(store, "history", "--clear")
    assert cleared.returncode == 0 and cleared.stdout.startswith("deleted 2 entries")
    assert cli_history(store) == [] and len(history(str(store), "someone else")) == 1


def test_a_store_that_cannot_be_written_warns_once_and_the_task_goes_on(tmp_path):
    blocked = tmp_path / "a directory"
    blocked.mkdir()
    ran = toolpath(blocked, "run", "is aspirin drug-like?", "--input", f"smiles={ASPIRIN}")
    assert ran.returncode == 0 and "Result (ok)" in ran.stdout
    assert ran.stderr.count("could not record this task") == 1 and "TOOLPATH_RECORD=off" in ran.stderr


def test_python_workspace_records_a_plan_and_its_run_as_one_entry(store, monkeypatch):
    from toolpath.planner import Workspace

    workspace = Workspace.open()
    workspace.recorder = Recorder("python", str(store))
    task_plan = workspace.plan_task("is aspirin drug-like?", inputs={"smiles": ASPIRIN})
    (planned,) = history(str(store), local_user())
    assert planned.outcome == "planned" and planned.entry_id == task_plan.record_entry
    run = workspace.run_task(task_plan)
    assert run.result.status == "ok"
    entry = next(entry for entry in history(str(store), local_user()) if entry.entry_id == task_plan.record_entry)
    assert entry.outcome == "ran" and entry.ran == ("chemistry/parse_molecule", "chemistry/compute_descriptors")


def _entry(recorder, user, outcome, *, request=None, steps=(), shown=(), ran=(), parts=(), edits=None, at=None):
    """Write an entry as the recorder does, for the labelling rules (times chosen by the test)."""
    entry = {
        "request": request,
        "steps": list(steps) or None,
        "parts": list(parts),
        "shown": list(shown),
        "ran": list(ran),
        "inputs": {},
        "redaction": "kinds",
        "edits": (edits or Edits()).to_dict(),
        "detail": None,
        "session": None,
    }
    with sqlite3.connect(recorder.store) as connection:
        connection.execute("insert into record_of_use values (?, ?, ?, ?, ?, ?)", [f"{outcome}-{at}", user, at, recorder.interface, outcome, json.dumps(entry)])
    connection.close()


def test_labelled_examples_come_from_accepted_and_corrected_runs_only(store):
    recorder = Recorder("cli", str(store))
    recorder.refused("ann", "make the schema", ValueError("so the table exists"))  # makes the table
    clear(str(store), "ann")
    chain = ["tabular/load_table", "tabular/plot_histogram"]
    # Accepted: ran as planned.
    _entry(recorder, "ann", "ran", request="plot a histogram of <column>", shown=chain, ran=chain, at=1000.0)
    # Failed and refused requests label nothing.
    _entry(recorder, "ann", "failed", request="summarise <file .csv>", shown=chain, ran=chain[:1], at=1100.0)
    _entry(recorder, "ann", "refused", request="fly me to the moon", at=1200.0)
    # Corrected: a request planned, then steps given instead that ran.
    _entry(recorder, "ann", "planned", request="chart the units", shown=["tabular/plot_scatter"], at=2000.0)
    parts = [{"text": "load the table", "tools": ["tabular/load_table"]}, {"text": "draw a histogram", "tools": ["tabular/plot_histogram"]}]
    _entry(recorder, "ann", "ran", steps=["load the table", "draw a histogram"], parts=parts, shown=chain, ran=chain, at=2100.0)
    # A request followed only much later by a run of steps: no correction.
    _entry(recorder, "ann", "planned", request="count the rows", shown=["tabular/describe_table"], at=3000.0)
    late = 3000.0 + CORRECTION_WINDOW_SECONDS + 1
    _entry(recorder, "ann", "ran", edits=Edits(goal=("tabular.table_described",)), shown=["tabular/describe_table"], ran=["tabular/describe_table"], at=late)
    # A tool that ran but was never shown is no label.
    _entry(
        recorder,
        "ann",
        "ran",
        request="plot <column> against <column>",
        shown=["tabular/plot_scatter"],
        ran=["tabular/plot_scatter", "tabular/hidden"],
        at=9000.0,
    )
    # Another user's accepted run is not ann's.
    _entry(recorder, "bob", "ran", request="bob's request", shown=chain, ran=chain, at=1500.0)

    examples = labelled_examples(str(store), "ann")
    assert [(example.request, example.steps, example.tools) for example in examples] == [
        ("plot a histogram of <column>", (), tuple(chain)),
        (None, ("load the table", "draw a histogram"), tuple(chain)),
        ("chart the units", (), tuple(chain)),
        ("plot <column> against <column>", (), ("tabular/plot_scatter",)),
    ]
    assert "corrected by" in examples[2].source


def test_two_users_of_one_server_never_see_each_others_record(serve_over_http, tmp_path):  # noqa: F811  (the fixture imported above)
    store = tmp_path / "home" / "toolpath.db"
    url, tokens = serve_over_http("--kernels", "plain")

    async def scenario():
        async with over_http(url, tokens["alice"]) as alice, over_http(url, tokens["bob"]) as bob:
            ran = await alice.call_tool("run_task", {"task": "is aspirin drug-like?", "inputs": {"smiles": ASPIRIN}})
            assert not ran.is_error, ran.content
            planned = await bob.call_tool("plan_task", {"task": "cluster these molecules by structural similarity"})
            assert not planned.is_error, planned.content

    asyncio.run(scenario())
    (alices,) = history(str(store), "alice")
    (bobs,) = history(str(store), "bob")
    assert alices.interface == "mcp" and alices.outcome == "ran" and alices.request == "is aspirin drug-like?"
    assert bobs.outcome == "planned" and "aspirin" not in json.dumps(bobs.to_dict())
    assert labelled_examples(str(store), "bob") == [] and len(labelled_examples(str(store), "alice")) == 1
    forget_database(str(store))


def test_a_request_from_the_record_teaches_the_state_its_chain_ends_with_not_its_first_tools(store, tmp_path):
    recorder = Recorder("cli", str(store))
    recorder.refused("ann", "make the schema", ValueError("so the table exists"))  # makes the table
    clear(str(store), "ann")
    chain = ["tabular/load_table", "tabular/plot_histogram"]
    _entry(recorder, "ann", "ran", request="show how lopsided <column> is in <file .csv>", shown=chain, ran=chain, at=1000.0)
    # A correction: the request was refused, then steps that ran.
    _entry(recorder, "ann", "refused", request="read <file .csv> and tell me how skewed <column> is", at=2000.0)
    parts = [{"text": "load <file .csv>", "tools": ["tabular/load_table"]}, {"text": "draw a histogram of <column>", "tools": ["tabular/plot_histogram"]}]
    _entry(recorder, "ann", "ran", steps=["load <file .csv>", "draw a histogram of <column>"], parts=parts, shown=chain, ran=chain, at=2100.0)

    examples = labelled_examples(str(store), "ann")
    learn([TABULAR], examples, tmp_path / "learned.yaml", embedder=WordHashEmbedder())
    states = {state["token"]: state["phrasings"] for state in yaml.safe_load((tmp_path / "learned.yaml").read_text())["states"]}
    # Loading the table is how the chain starts, not what the person asked for.
    assert states == {
        "tabular.histogram_plotted": ["show how lopsided <column> is in <file .csv>", "read <file .csv> and tell me how skewed <column> is"],
    }


def test_an_email_address_in_the_words_is_kept_as_its_kind_not_its_name(store):
    recorder = Recorder("cli", str(store))
    request = "email the summary to ada.lovelace@example.com and cc bob+sales@mail.example.co.uk"
    recorder.refused("ann", request, ValueError(f"no tool can serve {request!r}"))
    (entry,) = history(str(store), "ann")
    assert entry.request == "email the summary to <email> and cc <email>"
    for written in (entry.request, entry.detail):
        assert "ada" not in written and "lovelace" not in written and "bob" not in written and "example" not in written


@pytest.mark.parametrize(
    ("words", "kept", "gone"),
    [
        ("is c1ccccc1O drug-like?", "is <text> drug-like?", "c1ccccc1O"),
        ("use the key sk-ABCDEF123456 for sample42", "use the key <text> for <text>", "ABCDEF"),
        ("open ~/data/sales then C:\\Users\\ada\\q.xlsx", "open <path> then <path>", "ada"),
        ("compare version v1.2.3 with the mean price per region", "compare version <text> with the mean price per region", "v1.2.3"),
    ],
)
def test_identifiers_keys_molecules_and_paths_in_the_words_are_kept_as_kinds(words, kept, gone):
    from toolpath.planner.tasks.redaction import redacted

    assert redacted(words) == kept and gone not in redacted(words)
