"""Agent sessions end to end: one persistent kernel across tasks and free cells (real kernels)."""

import asyncio
import json
import os
import re

import pytest

from toolpath.kernel import CodeMode, KernelError
from toolpath.planner import SessionState, StalePlanError, Workspace

pytestmark = pytest.mark.integration

ASPIRIN = "CC(=O)Oc1ccccc1C(=O)O"


@pytest.fixture()
def workspace(chemistry_catalog, sheets_catalog, embedder):
    return Workspace.open([chemistry_catalog, sheets_catalog], embedder=embedder)


def handle_calls(instructions):
    """The ``handle.tool`` names an instruction text advertises."""
    return sorted(set(re.findall(r"^  (\w+)\.(\w+)\(", instructions, flags=re.MULTILINE)))


def test_one_session_through_three_tasks_and_free_cells(workspace):
    with workspace.session("agent-1") as session:
        first = session.run_task("parse this molecule", inputs={"smiles": ASPIRIN})
        assert first.result.status == "ok", first.result.error
        assert session.held == {"chemistry.molecule_parsed"}
        assert session.artifacts == {"molecule": "chemistry.molecule_parsed"}
        first_instructions = session.instructions()
        advertised = handle_calls(first_instructions)
        assert ("chemistry", "cluster_molecules") in advertised  # the whole domain, not only the plan's tool

        # Task 2 reuses the first task's artifact: nothing is unbound, nothing re-parsed.
        second = session.plan_task("check Lipinski's rule of five for it")
        assert [step.tool.name for step in second.plan.steps] == ["compute_descriptors"]
        assert second.cell.unbound == ()
        assert second.cell.used_artifacts == {"molecule": "chemistry.molecule_parsed"}
        assert "compute_descriptors(molecule=molecule)" in second.cell.code
        ran = session.run_task(second)
        assert ran.result.status == "ok" and "'passes': True" in ran.result.result

        free = session.execute("formula = molecule['formula']\nformula")
        assert free.status == "ok" and free.result == "'C9H8O4'"

        # Task 3, in the mixed host/kernel domain, fails at its second step.
        third = session.run_task("write a report on the table", inputs={"path": "empty.csv"})
        assert [step.tool.name for step in third.task_plan.plan.steps] == ["load_csv", "write_report"]
        assert third.result.status == "error" and "has no rows" in third.result.error["evalue"]
        assert (third.completed_steps, third.failed_step) == ((0,), 1)
        assert json.loads(json.dumps(third.to_dict()))["failed_step"] == {"index": 1, "tool": "write_report"}
        assert "sheets.table_loaded" in session.held and "sheets.report_written" not in session.held
        assert session.artifacts["table"] == "sheets.table_loaded"

        # The mixed domain is one handle: its kernel tool runs in the kernel, its host tool here.
        mixed = session.execute("fixed = {**table, 'path': 'people.csv'}\n(sorted(dir(sheets)), table['loaded_by'], await sheets.write_report(table=fixed))")
        assert mixed.status == "ok", mixed.error
        names, loaded_by, report = eval(mixed.result)
        assert names == ["load_csv", "write_report"]
        assert loaded_by != os.getpid() and report.endswith(f"written by {os.getpid()}")

        # Every tool the first instructions named is still callable after the third task.
        check = session.execute("[(handle, tool) for handle, tool in " + repr(advertised) + " if not callable(getattr(globals()[handle], tool))]")
        assert check.status == "ok" and check.result == "[]"
        again = session.execute(f"(await chemistry.parse_molecule(smiles={ASPIRIN!r}))['formula']")
        assert again.result == "'C9H8O4'"

        instructions = session.instructions()
        assert "  chemistry.molecule_parsed: molecule" in instructions
        assert "  sheets.table_loaded: table" in instructions
        assert "  chemistry.identify_functional_groups(molecule=molecule) -> chemistry.groups_identified" in instructions
        assert "  sheets.write_report(table=table) -> sheets.report_written" in instructions
        assert handle_calls(instructions) == sorted({*advertised, ("sheets", "load_csv"), ("sheets", "write_report")})

        # Held states are reused until forgotten; then the table is loaded again from the new path.
        session.forget("sheets.table_loaded")
        retried = session.run_task("write a report on the table", inputs={"path": "people.csv"})
        assert retried.result.status == "ok", retried.result.error
        assert retried.result.result.startswith("'3 rows from people.csv")
        assert retried.task_plan.cell.step_variables == ("table_2", "report")  # the old table is not overwritten
        assert {"sheets.table_loaded", "sheets.report_written"} <= session.held


def test_planning_reserves_no_name_and_a_run_says_what_it_made(workspace):
    with workspace.session("names-are-real") as session:
        never_run = session.plan_task("parse this molecule", inputs={"smiles": ASPIRIN})
        assert never_run.cell.step_variables == ("molecule",)
        run = session.run_task("parse this molecule", inputs={"smiles": ASPIRIN})
        assert run.task_plan.cell.step_variables == ("molecule",)  # no `molecule_2` for a plan never run
        assert run.variables == {"molecule": "chemistry.molecule_parsed"}
        assert run.text().endswith("Variables made: molecule (chemistry.molecule_parsed)")
        assert session.execute("molecule['formula']").result == "'C9H8O4'"
        # A plan made before the kernel took its name is given a new one when it runs: nothing is overwritten.
        stale_names = session.plan_task("parse this molecule", inputs={"smiles": "CCO"}, held=[])
        session.execute("molecule_2 = 'mine'")
        ran = session.run_task(stale_names)
        assert ran.result.status == "ok" and ran.task_plan.cell.step_variables == ("molecule_3",)
        assert session.execute("molecule_2").result == "'mine'"


def test_a_lost_kernel_takes_the_held_states_but_not_the_handles(workspace):
    with workspace.session("agent-2") as session:
        session.run_task("parse this molecule", inputs={"smiles": ASPIRIN})
        stale = session.plan_task("check Lipinski's rule of five for it")
        died = session.execute("import os\nos._exit(1)")
        assert died.status == "dead"
        assert "states it held are gone: chemistry.molecule_parsed" in died.notice
        assert session.held == frozenset() and session.artifacts == {}
        with pytest.raises(StalePlanError, match="chemistry.molecule_parsed"):
            session.run_task(stale)
        fresh = session.execute(f"(await chemistry.parse_molecule(smiles={ASPIRIN!r}))['formula']")
        assert fresh.status == "ok" and fresh.result == "'C9H8O4'"
        replanned = session.plan_task("check Lipinski's rule of five for it", inputs={"smiles": ASPIRIN})
        assert [step.tool.name for step in replanned.plan.steps] == ["parse_molecule", "compute_descriptors"]


def test_declared_variables_feed_plans_and_deleted_ones_stop_counting(workspace):
    with workspace.session("agent-3") as session:
        with pytest.raises(ValueError, match="no loaded catalog has the domain"):
            session.bind_domains(["chemistri"])
        session.bind_domains(["chemistry"])
        session.execute(f"mine = await chemistry.parse_molecule(smiles={ASPIRIN!r})")
        with pytest.raises(ValueError, match="not defined"):
            session.declare("chemistry.molecule_parsed", "nothing_here")
        session.declare("chemistry.molecule_parsed", "mine")
        planned = session.plan_task("find the functional groups of this molecule")
        assert "identify_functional_groups(molecule=mine)" in planned.cell.code and not planned.cell.unbound
        deleted = session.execute("del mine")
        assert "Variables that carried held states are gone: mine (chemistry.molecule_parsed)" in deleted.notice
        assert session.artifacts == {} and session.held == frozenset()
        replanned = session.plan_task("find the functional groups of this molecule", inputs={"smiles": ASPIRIN})
        assert [step.tool.name for step in replanned.plan.steps] == ["parse_molecule", "identify_functional_groups"]


def test_a_free_cell_reads_the_variables_in_its_own_round_trip_and_a_failing_one_still_counts(workspace):
    with workspace.session("agent-round-trips") as session:
        session.bind_domains(["chemistry"])
        # Every execute request the kernel handles, silent housekeeping cells included.
        session.execute("import IPython\n_requests = []\nIPython.get_ipython().events.register('pre_execute', lambda: _requests.append(1))")
        session.execute(f"mine = await chemistry.parse_molecule(smiles={ASPIRIN!r})")
        session.declare("chemistry.molecule_parsed", "mine")
        for code in ("a = 1", "b = a + 1", "del b"):
            assert session.execute(code).status == "ok"
        # Four cells, the declare's check, and the read below: one request each (ten when each cell
        # was followed by a cell asking for the variables).
        assert session.code_mode.value("_requests", session.session_id, session.user_id) == [1] * 6
        # A failing cell answers no variables in its reply: the session asks, and still sees the deletion.
        failed = session.execute("del mine\n1 / 0")
        assert failed.status == "error" and failed.error["ename"] == "ZeroDivisionError"
        assert "Variables that carried held states are gone: mine (chemistry.molecule_parsed)" in failed.notice
        assert session.artifacts == {} and session.held == frozenset()


def test_session_state_is_plain_data_and_restores_on_a_shared_code_mode(workspace):
    with CodeMode(pool_size=0) as shared:
        session = workspace.session("agent-4", code_mode=shared)
        session.run_task("parse this molecule", inputs={"smiles": ASPIRIN})
        saved = json.loads(json.dumps(session.state().to_dict()))
        assert saved["held"] == ["chemistry.molecule_parsed"] and saved["domains"] == ["chemistry"]

        restored = workspace.session("agent-4", code_mode=shared, state=SessionState.from_dict(saved))
        assert restored.held == session.held and restored.artifacts == session.artifacts
        assert restored.plan_task("check Lipinski's rule of five for it").cell.unbound == ()

        restored.shutdown()  # ends the session's kernel, not the shared CodeMode
        assert shared.kernel_id("agent-4") is None
        back = workspace.session("agent-4", code_mode=shared, state=SessionState.from_dict(saved))
        assert back.held == frozenset()
        result = back.execute("sorted(dir(chemistry))[0]")  # handles bound from the saved domains
        assert result.result == "'cluster_molecules'"
        assert "the states it held are gone: chemistry.molecule_parsed" in result.notice

    with pytest.raises(ValueError, match="'held' must be a list of strings"):
        SessionState.from_dict({"session_id": "x", "held": "chemistry.molecule_parsed"})
    with pytest.raises(ValueError, match=r"'outputs', hits.tmdb.person_id: output path 'results\[0\]\.' is not"):
        SessionState.from_dict({"session_id": "x", "outputs": {"hits": {"tmdb.person_id": {"path": "results[0].", "tool": "search"}}}})
    with pytest.raises(ValueError, match="'outputs' must map variable names.*'1st' is not a variable name"):
        SessionState.from_dict({"session_id": "x", "outputs": {"1st": {}}})


def test_plans_of_other_sessions_or_of_the_workspace_are_refused(workspace):
    with CodeMode(pool_size=0) as shared:
        mine = workspace.session("mine", code_mode=shared)
        theirs = workspace.session("theirs", code_mode=shared)
        mine.run_task("parse this molecule", inputs={"smiles": ASPIRIN})
        with pytest.raises(ValueError, match="made by Workspace.plan_task"):
            mine.run_task(workspace.plan_task("parse this molecule", inputs={"smiles": "c1ccccc1"}))
        with pytest.raises(ValueError, match="made by session 'mine'"):
            theirs.run_task(mine.plan_task("check Lipinski's rule of five for it"))
        with pytest.raises(ValueError, match="belongs to session 'mine'"):
            workspace.run_task(mine.plan_task("check Lipinski's rule of five for it"))
        assert mine.execute("molecule['formula']").result == "'C9H8O4'"  # untouched

        theirs.shutdown()
        with pytest.raises(KernelError, match="has been shut down"):
            theirs.execute("1")
        assert mine.execute("1").status == "ok"  # the shared CodeMode serves the other session still


def test_a_cell_that_ignores_its_interrupt_comes_back_as_a_result_not_an_exception(workspace):
    with workspace.session("stubborn", timeout=1, interrupt_grace=0.5, busy_wait=0.2) as session:
        session.run_task("parse this molecule", inputs={"smiles": ASPIRIN})
        aborted = session.execute("import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(4)")
        assert aborted.status == "aborted"
        busy = session.run_task("check Lipinski's rule of five for it")
        assert busy.result.status == "busy" and busy.completed_steps == () and busy.failed_step == 0
        assert "chemistry.descriptors_computed" not in session.held and "chemistry.molecule_parsed" in session.held


def test_concurrent_tasks_of_one_session_never_share_a_variable(workspace):
    async def two_at_once(session):
        return await asyncio.gather(
            session.arun_task("parse this molecule", inputs={"smiles": "CCN"}),
            session.arun_task("parse this molecule", inputs={"smiles": "c1ccccc1"}),
        )

    with workspace.session("busy-agent") as session:
        first, second = asyncio.run(two_at_once(session))
        variables = {first.task_plan.cell.step_variables[0], second.task_plan.cell.step_variables[0]}
        assert len(variables) == 2 and set(session.artifacts) == variables
        formulas = session.execute(f"sorted(v['formula'] for v in ({', '.join(sorted(variables))}))")
        assert formulas.result == "['C2H7N', 'C6H6']"


def test_saved_state_and_declare_accept_only_plain_variable_names(workspace):
    with pytest.raises(ValueError, match="not a Python variable name"):
        SessionState.from_dict({"session_id": "x", "artifacts": {"__import__('os').system('true')": "chemistry.molecule_parsed"}})
    with workspace.session("names") as session:
        session.bind_domains("chemistry")  # one domain may be given as a plain string
        session.execute(f"mine = await chemistry.parse_molecule(smiles={ASPIRIN!r})")
        with pytest.raises(ValueError, match="is a tool handle"):
            session.declare("chemistry.molecule_parsed", "chemistry")
        with pytest.raises(ValueError, match="not a variable name"):
            session.declare("chemistry.molecule_parsed", "mine['formula']")
        with pytest.raises(TypeError, match="state token"):
            session.declare(None)


def test_a_part_already_held_shows_its_artifact_beside_the_new_results(workspace):
    with workspace.session("parts") as session:
        session.run_task(["parse this molecule", "identify the functional groups of this molecule"], inputs={"smiles": ASPIRIN})
        follow_up = session.plan_task("identify the functional groups of this molecule and check Lipinski's rule of five")
        assert [part.status for part in follow_up.parts] == ["held", "matched"]
        assert [step.tool.name for step in follow_up.plan.steps] == ["compute_descriptors"]
        assert follow_up.cell.code.rstrip().endswith("{'descriptors': descriptors, 'functional_groups': functional_groups}")
        ran = session.run_task(follow_up)
        assert ran.result.status == "ok" and "'carboxylic_acid': 1" in ran.result.result and "'lipinski'" in ran.result.result


def test_a_task_missing_inputs_is_refused_with_the_inputs_of_its_cheapest_plan_first(workspace):
    from toolpath.planner.tasks.task import UnboundParametersError

    with workspace.session("agent-inputs") as session:
        with pytest.raises(UnboundParametersError) as refused:
            session.run_task("is aspirin drug-like? check Lipinski's rule of five")
        assert [option.names for option in refused.value.options] == [("smiles",), ("smiles_list", "smiles")]
        assert str(refused.value).startswith(
            "the plan needs inputs that were not given: give the inputs {'smiles': ...} for the plan parse_molecule -> compute_descriptors (cost 2); or, for"
        )
        assert session.held == set()


def test_a_file_the_request_says_the_user_has_is_what_the_session_loads(tmp_path, embedder):
    """A fact ("I have a CSV file '…'") holds the file for this task only, and its value is the
    path the cell loads: the session neither invents a table nor keeps the fact's state."""
    table = tmp_path / "people.csv"
    table.write_text("name,age\nAda,36\nAlan,41\n")
    with Workspace.open(embedder=embedder).session("facts") as session:
        ran = session.run_task(f"I have a CSV file '{table}'. Load it and compute summary statistics")
        assert ran.result.status == "ok", ran.result.error
        assert [part.kind for part in ran.task_plan.parts][:1] == ["fact"]
        assert [step.tool.name for step in ran.task_plan.plan.steps] == ["load_table", "describe_table"]
        assert ran.task_plan.inputs == {"tabular.load_table.path": str(table)}
        assert "tabular.file_given" not in session.held and "tabular.table_loaded" in session.held


COMPOUNDS = "name,smiles,category,weight\naspirin,CC(=O)Oc1ccccc1C(=O)O,nsaid,180.2\nibuprofen,CC(C)CC1=CC=C(C=C1)C(C)C(=O)O,nsaid,206.3\ncaffeine,Cn1cnc2c1c(=O)n(C)c(=O)n2C,stimulant,194.2\n"
KEEP_NAME_AND_CATEGORY = "keep only the name and category columns of {}"


def step_tools(task_plan):
    return [step.tool.name for step in task_plan.plan.steps]


@pytest.fixture()
def tables(tmp_path):
    """``(compounds.csv, classes.csv, sales.csv)`` in ``tmp_path``."""
    compounds, classes, sales = tmp_path / "compounds.csv", tmp_path / "classes.csv", tmp_path / "sales.csv"
    compounds.write_text(COMPOUNDS)
    classes.write_text("category,class\nnsaid,analgesic\nstimulant,psychoactive\n")
    sales.write_text("region,revenue\nNorth,10\nSouth,20\nNorth,5\n")
    return compounds, classes, sales


def test_variables_earlier_cells_left_neither_choose_the_goal_nor_bind_a_parameter(tables, embedder):
    """The same words plan the same tools whether or not unrelated cells ran before: a variable that
    merely has a parameter's name (an earlier task's `by` and `columns`, an agent's own `on` and
    `other_path`) is no value given for this task. (It made join_tables look fully bound, and the
    column selection read the earlier task's columns.)"""
    compounds, classes, _ = tables
    words = KEEP_NAME_AND_CATEGORY.format(compounds)
    workspace = Workspace.open(embedder=embedder)
    with workspace.session("leftovers-fresh") as fresh:
        alone = fresh.plan_task(words)
    assert step_tools(alone) == ["load_table", "select_columns"]
    with workspace.session("leftovers") as session:
        assert session.execute(f"on = 'category'\nother_path = {str(classes)!r}").status == "ok"
        assert step_tools(session.plan_task(words)) == step_tools(alone)  # not load_table -> join_tables

        grouped = session.run_task(f"group {compounds} by category and average the weight", inputs={"by": "category", "columns": ["weight"]})
        assert grouped.result.status == "ok", grouped.result.error
        assert {"by", "columns", "on", "other_path"} <= session.holdings.variables
        later = session.plan_task(words)
        assert step_tools(later) == step_tools(alone)
        assert later.inputs == alone.inputs == {"tabular.load_table.path": str(compounds)}
        # The columns are the user's to give (a session reads no file while planning), not the earlier task's.
        assert [parameter.parameter for parameter in later.cell.unbound] == ["columns"]
        assert "columns=columns)" not in later.cell.code

        ran = session.run_task(words, inputs={"columns": ["name", "category"]})
        assert ran.result.status == "ok", ran.result.error
        assert step_tools(ran.task_plan) == ["load_table", "select_columns"]
        assert (
            session.execute(f"list({ran.task_plan.cell.step_variables[-1]}.columns), len({ran.task_plan.cell.step_variables[-1]})").result
            == "(['name', 'category'], 3)"
        )


def test_a_file_the_words_name_is_read_rather_than_a_table_the_session_holds(tables, embedder):
    """A table held from an earlier task (here aggregated from another file) does not stand in for
    the file the words name; words that name no file still work on the held table."""
    compounds, _, sales = tables
    with Workspace.open(embedder=embedder).session("named-file") as session:
        grouped = session.run_task(f"group {sales} by region and sum the revenue", inputs={"by": "region", "columns": ["revenue"], "how": "sum"})
        assert grouped.result.status == "ok", grouped.result.error
        assert {"tabular.table_loaded", "tabular.groups_aggregated"} <= session.held

        later = session.plan_task(KEEP_NAME_AND_CATEGORY.format(compounds))
        assert step_tools(later) == ["load_table", "select_columns"]
        assert later.inputs == {"tabular.load_table.path": str(compounds)}
        assert later.cell.used_artifacts == {}

        loaded = session.run_task(f"load {compounds}")
        assert loaded.result.status == "ok", loaded.result.error
        assert step_tools(loaded.task_plan) == ["load_table"] and loaded.task_plan.inputs == {"tabular.load_table.path": str(compounds)}
        assert "aspirin" in loaded.result.result

        counted = session.plan_task("count the rows of the table")
        assert step_tools(counted) == ["count_rows"] and counted.cell.used_artifacts == {loaded.task_plan.cell.step_variables[0]: "tabular.table_loaded"}


def test_a_quoted_value_is_read_rather_than_the_molecule_the_session_holds(workspace):
    """A molecule held from an earlier task does not stand in for the one the words quote: the
    quoted SMILES is parsed and described, and --json says why the held one was not used."""
    with workspace.session("quoted-value") as session:
        first = session.run_task("parse this molecule", inputs={"smiles": ASPIRIN})
        assert first.result.status == "ok", first.result.error

        quoted = session.plan_task("compute the descriptors of the molecule 'CCO'")
        assert [step.tool.name for step in quoted.plan.steps] == ["parse_molecule", "compute_descriptors"]
        assert quoted.cell.used_artifacts == {}
        assert "made again, not used" in quoted.parts[0].why
        ran = session.run_task(quoted)
        assert ran.result.status == "ok", ran.result.error
        assert "C2H6O" in session.execute(f"{ran.task_plan.cell.step_variables[0]}['formula']").result

        # Words that quote nothing still work on the held molecule.
        held = session.plan_task("check Lipinski's rule of five for it")
        assert [step.tool.name for step in held.plan.steps] == ["compute_descriptors"]
