"""A tool that writes or sends runs only on a clear match (issue 52, item 3).

The ledger catalog below has no tool that sorts or orders rows, and one that writes a report: "order
the table by date" matches keeping rows and writing a report about equally weakly, and must write
nothing. A request that plainly asks for the report still gets it.
"""

import io
import json
import os
import subprocess
import sys
import textwrap
import uuid

import pytest

from toolpath.planner import Workspace
from toolpath.planner.tasks.goals import NoMatchingSkillError

LEDGER_CATALOG = """\
domain: ledger
package: {package}
states:
  - token: ledger.file_given
    description: The path of a spreadsheet file is known.
    input: true
    affordances: [a spreadsheet file the user has]
  - token: ledger.table_loaded
    description: A spreadsheet is read into a table.
    affordances: [read a spreadsheet file]
  - token: ledger.rows_kept
    description: Only the rows matching a condition are kept.
    affordances: [keep the rows that match a condition, filter the rows of a table]
  - token: ledger.summary_computed
    description: Summary statistics of each column are computed.
    affordances: [summary statistics of a table]
  - token: ledger.report_written
    description: A report about a table is written to a file.
    affordances: [write a report about a table]
tools:
  - name: read_sheet
    description: Read a spreadsheet file into a table.
    required_parameters: [{{name: path, type: str, state: ledger.file_given}}]
    return_spec: {{name: table, type: dict, state: ledger.table_loaded}}
    state_transition: {{requires: [ledger.file_given], produces: [ledger.table_loaded]}}
  - name: keep_rows
    description: Keep the rows of a table that match a condition.
    required_parameters: [{{name: table, type: dict, state: ledger.table_loaded}}, {{name: condition, type: str}}]
    return_spec: {{name: rows, type: dict, state: ledger.rows_kept}}
    state_transition: {{requires: [ledger.table_loaded], produces: [ledger.rows_kept]}}
  - name: summarize_columns
    description: Summary statistics of each column of a table.
    required_parameters: [{{name: table, type: dict, state: ledger.table_loaded}}]
    return_spec: {{name: summary, type: dict, state: ledger.summary_computed}}
    state_transition: {{requires: [ledger.table_loaded], produces: [ledger.summary_computed]}}
  - name: write_report
    description: Write a Markdown report about a table to a file.
    required_parameters: [{{name: table, type: dict, state: ledger.table_loaded}}]
    optional_parameters: [{{name: destination, type: str, default: report.md, role: output}}]
    return_spec: {{name: report_path, type: str, state: ledger.report_written}}
    state_transition: {{requires: [ledger.table_loaded], produces: [ledger.report_written]}}
"""

MODULES = {
    "read_sheet": """
        def read_sheet(path: str) -> dict:
            with open(path) as handle:
                return {"lines": handle.read().splitlines()}
        """,
    "keep_rows": """
        def keep_rows(table: dict, condition: str) -> dict:
            return {"lines": [line for line in table["lines"] if condition in line]}
        """,
    "summarize_columns": """
        def summarize_columns(table: dict) -> dict:
            return {"rows": len(table["lines"]) - 1}
        """,
    "write_report": """
        def write_report(table: dict, destination: str = "report.md") -> str:
            with open(destination, "w") as handle:
                handle.write(f"# Report\\n{len(table['lines']) - 1} rows\\n")
            return destination
        """,
}

UNCLEAR = "order the table by date"


@pytest.fixture(scope="module")
def ledger(tmp_path_factory):
    """The ledger catalog in its own package, and a small sales file: ``(catalog path, sales path)``."""
    root = tmp_path_factory.mktemp("ledger")
    package_name = f"ledger_{uuid.uuid4().hex[:8]}"
    package = root / package_name
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name, source in MODULES.items():
        (package / f"{name}.py").write_text(textwrap.dedent(source))
    catalog = package / "catalog.yaml"
    catalog.write_text(LEDGER_CATALOG.format(package=package_name))
    sales = root / "sales.csv"
    sales.write_text("date,region,revenue\n2024-03-01,North,120\n2024-01-15,South,80\n2024-02-10,North,95\n")
    return catalog, sales


@pytest.fixture(scope="module")
def ledger_workspace(ledger, embedder):
    return Workspace.open([ledger[0]], embedder=embedder)


def test_a_weak_tie_between_a_report_and_keeping_rows_is_not_understood_and_names_both(ledger, ledger_workspace):
    _, sales = ledger
    with pytest.raises(NoMatchingSkillError) as refused:
        ledger_workspace.plan_task(UNCLEAR, {"path": str(sales)})
    message = str(refused.value)
    assert "not understood" in message and "ledger.write_report (writes)" in message
    assert "state ledger.report_written" in message and "state ledger.rows_kept" in message


def test_a_plain_request_for_the_report_still_writes_it(ledger, ledger_workspace):
    _, sales = ledger
    for task in ("write a report about the table", "report on the sales"):
        planned = ledger_workspace.plan_task(task, {"path": str(sales)})
        assert [step.tool.name for step in planned.plan.steps] == ["read_sheet", "write_report"], task


def test_the_persons_answer_chooses_the_candidate_or_none(ledger, ledger_workspace):
    from toolpath.planner.tasks.goals import NeitherMeantError

    inputs = {"path": str(ledger[1])}
    report = ledger_workspace.plan_task(UNCLEAR, inputs, meant={UNCLEAR: "state ledger.report_written"})
    assert [step.tool.name for step in report.plan.steps] == ["read_sheet", "write_report"]
    kept = ledger_workspace.plan_task(UNCLEAR, inputs, meant={UNCLEAR: "state ledger.rows_kept"})
    assert [step.tool.name for step in kept.plan.steps] == ["read_sheet", "keep_rows"]
    with pytest.raises(NeitherMeantError, match="none of the candidates"):
        ledger_workspace.plan_task(UNCLEAR, inputs, meant={UNCLEAR: ""})


def test_a_task_that_names_the_tool_runs_it_however_weak_the_match(ledger, ledger_workspace):
    planned = ledger_workspace.plan_task("order the table by date with write_report", {"path": str(ledger[1])})
    assert [step.tool.name for step in planned.plan.steps] == ["read_sheet", "write_report"]


def test_an_unclear_part_of_a_longer_task_is_not_understood_and_lists_its_candidates(ledger, ledger_workspace):
    planned = ledger_workspace.plan_task(f"compute summary statistics of the table, then {UNCLEAR}", {"path": str(ledger[1])})
    assert "write_report" not in [step.tool.name for step in planned.plan.steps]
    unclear = [part.to_dict() for part in planned.parts if part.status == "unmatched"]
    assert len(unclear) == 1 and unclear[0]["part"] == UNCLEAR
    assert unclear[0]["candidates"][0] == "state ledger.report_written" and "state ledger.rows_kept" in unclear[0]["candidates"]


class Terminal(io.StringIO):
    """Standard input on a terminal, holding the person's answers."""

    def isatty(self):
        return True


def test_on_a_terminal_the_person_is_asked_which_candidate_they_meant(ledger, ledger_workspace):
    from toolpath.planner.interfaces.terminal_meaning import plan_asking

    meant: dict[str, str] = {}
    questions = io.StringIO()
    planned = plan_asking(lambda: ledger_workspace.plan_task(UNCLEAR, {"path": str(ledger[1])}, meant=meant), meant, Terminal("2\n"), questions)
    asked = questions.getvalue()
    assert "Which did you mean?" in asked and "0. none of these" in asked
    assert "1. state ledger.report_written" in asked and "2. state ledger.rows_kept" in asked
    assert [step.tool.name for step in planned.plan.steps] == ["read_sheet", "keep_rows"]
    assert meant == {UNCLEAR: "state ledger.rows_kept"}


def test_without_a_terminal_toolpath_run_refuses_and_writes_nothing(ledger, tmp_path):
    catalog, sales = ledger
    output = tmp_path / "out"
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(catalog.parent.parent), os.environ.get("PYTHONPATH", "")])}
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "toolpath.planner.interfaces.cli",
            "run",
            UNCLEAR,
            "--input",
            f"path={sales}",
            "--catalog",
            str(catalog),
            "--output-dir",
            str(output),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
        env=environment,
        cwd=tmp_path,
    )
    assert completed.returncode == 2, completed.stdout + completed.stderr
    error = json.loads(completed.stdout)["error"]
    assert "ledger.report_written" in error and "ledger.rows_kept" in error
    assert not list(tmp_path.rglob("report.md"))


def test_shipped_catalogs_never_write_for_a_sort_or_a_deletion(workspace, tmp_path):
    sales = tmp_path / "sales.csv"
    sales.write_text("month,region,revenue\n2024-01,North,100\n2024-02,South,250\n")
    sorted_plan = workspace.plan_task("sort the table by revenue descending", {"path": str(sales)})
    assert all(step.tool.side_effect == "none" for step in sorted_plan.plan.steps)
    with pytest.raises(NoMatchingSkillError, match="not understood"):
        workspace.plan_task("delete the file", {"path": str(sales)})
    saved = workspace.plan_task("save the table as an Excel file", {"path": str(sales)})
    assert saved.plan.steps[-1].tool.name == "save_table"
