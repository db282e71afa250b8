"""Data flow of planned cells: every argument has one stated source, inputs go only where they are
meant, refinements chain, ties break toward the task, and no cell writes over the user's data.

The reproductions of issue 29 each have a test here; the data-flow suite
(``benchmarks/dataflow_cases.yaml``, ``tests/test_dataflow.py``) runs many more tasks in kernels.
"""

import hashlib
import shutil
import subprocess
import sys
import textwrap

import pytest

from toolpath.catalogs.tabular import SAMPLE_DATA
from toolpath.planner import Workspace, plan, render_cell
from toolpath.planner.tasks.cell import InputError, KernelView
from toolpath.registry import State, ToolDefinition, ToolRegistry

#: A type-level catalog: one type (a text) flows through several tools.
TEXT_CATALOG = """\
domain: words
package: {package}
states:
  - {{token: words.text, description: A text is known., input: true}}
  - {{token: words.summary, description: A summary of a text is written., affordances: [summarize this text, write a short summary]}}
  - {{token: words.speech, description: A text is read aloud as audio., affordances: [read the text aloud, turn text into speech]}}
tools:
  - name: expand_text
    description: Expand a text with more detail.
    affordances: [expand the text, make the text longer]
    required_parameters: [{{name: text, type: str, state: words.text}}]
    return_spec: {{name: expanded, type: str, state: words.text}}
    state_transition: {{requires: [words.text], produces: [words.text]}}
  - name: simplify_text
    description: Simplify a text into plain words.
    affordances: [simplify the text, rewrite it in plain words]
    required_parameters: [{{name: text, type: str, state: words.text}}]
    return_spec: {{name: simplified, type: str, state: words.text}}
    state_transition: {{requires: [words.text], produces: [words.text]}}
  - name: summarize_text
    description: Summarize a text.
    required_parameters: [{{name: text, type: str, state: words.text}}]
    return_spec: {{name: summary, type: str, state: words.summary}}
    state_transition: {{requires: [words.text], produces: [words.summary]}}
  - name: speak_text
    description: Read a text aloud.
    required_parameters: [{{name: text, type: str, state: words.text}}]
    return_spec: {{name: speech, type: str, state: words.speech}}
    state_transition: {{requires: [words.text], produces: [words.speech]}}
"""


@pytest.fixture(scope="module")
def shipped(embedder):
    return Workspace.open(embedder=embedder)


@pytest.fixture(scope="module")
def words(tmp_path_factory, embedder):
    directory = tmp_path_factory.mktemp("words")
    package = directory / "words_tools"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name, body in {
        "expand_text": "text + ' More.'",
        "simplify_text": "text.lower()",
        "summarize_text": "text[:20]",
        "speak_text": "'spoken: ' + text",
    }.items():
        (package / f"{name}.py").write_text(f"def {name}(text: str) -> str:\n    return {body}\n")
    (package / "catalog.yaml").write_text(TEXT_CATALOG.format(package="words_tools"))
    return Workspace.open([package / "catalog.yaml"], embedder=embedder)


def labels(task_plan):
    """``[(tool, {parameter: source label})]`` per step."""
    return [
        (step.tool.name, {name: source.label for name, source in arguments.items()}) for step, arguments in zip(task_plan.plan.steps, task_plan.cell.arguments)
    ]


def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_report_never_takes_the_path_of_the_table_it_reports_on(shipped, tmp_path):
    data = shutil.copy(SAMPLE_DATA / "compounds.csv", tmp_path / "compounds.csv")
    task_plan = shipped.plan_task("load the table and write a report", inputs={"path": str(data)})
    assert labels(task_plan) == [("load_table", {"path": "input path"}), ("write_report", {"table": "step 1", "path": "default", "title": "default"})]
    asked = shipped.plan_task("load the table and write a report", inputs={"path": str(data), "write_report.path": str(tmp_path / "out.md")})
    assert labels(asked)[1][1]["path"] == "input write_report.path"
    with pytest.raises(InputError, match="which input 'path' gives as data"):
        shipped.plan_task("load the table and write a report", inputs={"path": str(data), "write_report.path": str(data)})


def test_a_destination_the_user_names_is_refused_not_swapped_for_another_tool(shipped, tmp_path):
    data = shutil.copy(SAMPLE_DATA / "compounds.csv", tmp_path / "compounds.csv")
    with pytest.raises(InputError, match="write over it"):
        shipped.plan_task("plot a histogram of price_per_gram", inputs={"path": str(data), "column": "price_per_gram", "plot_histogram.output_path": str(data)})
    # A hard link is the same file under another name (and another suffix).
    link = tmp_path / "compounds.md"
    link.hardlink_to(data)
    with pytest.raises(InputError, match="which input 'path' gives as data"):
        shipped.plan_task("load the table and write a report", inputs={"path": str(data), "write_report.path": str(link)})
    # A NUL byte names no file: no crash, and the kernel's open() refuses it later.
    cell = shipped.plan_task("load the table and write a report", inputs={"path": str(data), "write_report.path": "report\x00.md"}).cell
    assert cell.arguments[1]["path"].label == "input write_report.path"


@pytest.mark.integration
def test_run_writes_the_report_beside_and_leaves_the_users_csv_alone(tmp_path):
    data = shutil.copy(SAMPLE_DATA / "compounds.csv", tmp_path / "compounds.csv")
    before = digest(data)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "toolpath.planner.interfaces.cli",
            "run",
            "load the table and write a report",
            "--input",
            f"path={data}",
            "--output-dir",
            str(tmp_path / "out"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert digest(data) == before and (tmp_path / "out" / "report.md").read_text().startswith("# Table report")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["compounds.csv", "out"]  # nothing lands beside the user's file
    assert "Variables made: table (tabular.table_loaded), report_path (tabular.report_written)" in done.stdout


def test_filtered_rows_feed_what_takes_a_table(shipped):
    task_plan = shipped.plan_task(
        "filter the rows to analgesics then plot a histogram of year_introduced",
        inputs={"path": "compounds.csv", "conditions": [["category", "==", "analgesic"]], "column": "year_introduced"},
    )
    assert [name for name, _ in labels(task_plan)] == ["load_table", "filter_rows", "plot_histogram"]
    assert labels(task_plan)[2][1] == {"table": "step 2", "column": "input column", "bins": "default", "output_path": "default"}
    assert "plot_histogram(table=rows, column=column)" in task_plan.cell.code
    wiring = task_plan.to_dict()["wiring"]
    assert wiring[2]["arguments"]["table"] == {"source": "step", "label": "step 2", "variable": "rows", "step": 2, "state": "tabular.rows_filtered"}


def test_a_plot_of_a_plain_table_loads_it_with_the_tabular_tool(shipped):
    task_plan = shipped.plan_task("plot a histogram of price_per_gram", inputs={"path": "suppliers.csv", "column": "price_per_gram"})
    assert [step.tool.name for step in task_plan.plan.steps] == ["load_table", "plot_histogram"]
    tie = task_plan.to_dict()["plan"]["tie_breaks"][0]
    assert tie == {"step": 1, "chosen": "tabular.load_table", "over": ["chemistry.tabulate_descriptors"], "because": "the task is about tabular, not chemistry"}
    # When the task asks for what the bridge adds, the bridge serves.
    bridged = shipped.plan_task("compute descriptors of the molecules in this CSV file", inputs={"path": "compounds.csv"})
    assert [step.tool.name for step in bridged.plan.steps] == ["tabulate_descriptors"]


def test_a_state_an_input_carries_stays_held(words):
    # The caller holds the text and gives it: nothing "replaces" it, so the summary has a start.
    task_plan = words.plan_task("summarize this text", inputs={"text": "A long text."}, held=["words.text"])
    assert labels(task_plan) == [("summarize_text", {"text": "input text"})]


def test_one_type_flows_through_a_chain_of_tools_in_the_order_asked(words):
    steps = ["expand the text", "simplify the text", "read the text aloud"]
    task_plan = words.plan_task(steps, inputs={"text": "Hello World."})
    assert labels(task_plan) == [("expand_text", {"text": "input text"}), ("simplify_text", {"text": "step 1"}), ("speak_text", {"text": "step 2"})]
    assert [step.satisfied_by for step in task_plan.plan.steps] == [{"words.text": None}, {"words.text": 0}, {"words.text": 1}]
    reverse = words.plan_task(["simplify the text", "expand the text", "read the text aloud"], inputs={"text": "Hello World."})
    assert labels(reverse) == [("simplify_text", {"text": "input text"}), ("expand_text", {"text": "step 1"}), ("speak_text", {"text": "step 2"})]


@pytest.mark.integration
def test_the_chain_runs_each_step_on_the_previous_output(words):
    task_plan = words.plan_task(["expand the text", "simplify the text", "read the text aloud"], inputs={"text": "Hello World."})
    run = words.run_task(task_plan)
    assert run.result.status == "ok"
    assert run.result.result == "{'expanded': 'Hello World. More.',\n 'simplified': 'hello world. more.',\n 'speech': 'spoken: hello world. more.'}"
    assert run.variables == {"expanded": "words.text", "simplified": "words.text", "speech": "words.speech"}


def test_one_input_may_not_feed_a_parameter_read_and_one_written():
    registry = ToolRegistry(package="files_tools")
    registry.register_tool(
        ToolDefinition(
            name="load",
            server_name="files",
            required_parameters=[{"name": "path", "type": "str"}],
            return_spec={"name": "table", "type": "dict", "state": "files.loaded"},
            state_transition={"produces": ["files.loaded"]},
        )
    )
    registry.register_tool(
        ToolDefinition(
            name="save",
            server_name="files",
            required_parameters=[{"name": "table", "type": "dict", "state": "files.loaded"}, {"name": "path", "type": "str", "role": "output"}],
            state_transition={"requires": ["files.loaded"], "produces": ["files.saved"]},
        )
    )
    from toolpath.planner import StateGraph

    graph = StateGraph(registry, [State("files.loaded"), State("files.saved")])
    saving = plan(graph, ["files.saved"])
    with pytest.raises(
        InputError, match=r"input 'path' would be both read as data and written over \(step 1 load.path reads it; step 2 save.path writes to it\)"
    ):
        render_cell(saving, {"path": "data.csv"})
    cell = render_cell(saving, {"path": "data.csv", "save.path": "copy.csv"})
    assert cell.arguments[1]["path"].label == "input save.path" and "save(table=table, path=save_path)" in cell.code
    # An output parameter takes no kernel variable of its name: a session's `path` is the user's data.
    session_cell = render_cell(saving, {"load.path": "data.csv"}, kernel=KernelView(variables={"path"}))
    assert session_cell.arguments[1]["path"].label == "unbound"
    # Nor an earlier step's return, even one carrying its state: the file a step found may be data.
    registry.register_tool(
        ToolDefinition(
            name="find",
            server_name="files",
            return_spec={"name": "found", "type": "str", "state": "files.found"},
            state_transition={"produces": ["files.found"]},
        )
    )
    registry.register_tool(
        ToolDefinition(
            name="export",
            server_name="files",
            required_parameters=[
                {"name": "table", "type": "dict", "state": "files.loaded"},
                {"name": "dest", "type": "str", "state": "files.found", "role": "output"},
            ],
            state_transition={"requires": ["files.loaded", "files.found"], "produces": ["files.exported"]},
        )
    )
    graph = StateGraph(registry, [State("files.loaded"), State("files.saved"), State("files.found"), State("files.exported")])
    exporting = render_cell(plan(graph, ["files.exported"]), {"path": "data.csv"})
    assert exporting.arguments[-1]["dest"].label == "unbound"


def test_a_parameter_named_by_a_soft_keyword_takes_its_input(tmp_path):
    registry = ToolRegistry(package="grep_tools")
    registry.register_tool(
        ToolDefinition(name="grep", server_name="text", required_parameters=[{"name": "match", "type": "str"}], state_transition={"produces": ["text.found"]})
    )
    from toolpath.planner import StateGraph

    cell = render_cell(plan(StateGraph(registry, [State("text.found")]), ["text.found"]), {"match": "needle"})
    assert cell.arguments[0]["match"].label == "input match" and cell.unbound == ()


def test_refinement_cycles_and_unknown_refined_states_are_lint_errors(tmp_path):
    from toolpath.registry import lint_catalogs

    catalog = tmp_path / "loop.yaml"
    catalog.write_text(
        textwrap.dedent(
            """\
            domain: loop
            states:
              - {token: loop.a, description: A., refines: loop.b}
              - {token: loop.b, description: B., refines: loop.a}
              - {token: loop.c, description: C., refines: loop.missing}
            tools:
              - name: save
                description: Save a file.
                module: loop_tools.save
                required_parameters: [{name: dest, type: str, role: output, state: loop.a}]
                state_transition: {produces: [loop.b]}
            """
        )
    )
    findings = {(finding.code, finding.line) for finding in lint_catalogs([catalog])}
    assert {("TP014", 3), ("TP014", 4), ("TP001", 5), ("TP015", 10)} <= findings


@pytest.mark.integration
def test_a_session_follow_up_takes_the_filtered_rows_it_holds(shipped, tmp_path):
    data = shutil.copy(SAMPLE_DATA / "compounds.csv", tmp_path / "compounds.csv")
    with shipped.session("filtered-follow-up", cwd=str(tmp_path), snapshot=False) as session:
        first = session.run_task("filter the rows to analgesics", inputs={"path": str(data), "conditions": [["category", "==", "analgesic"]]})
        assert first.result.status == "ok" and session.artifacts == {"table": "tabular.table_loaded", "rows": "tabular.rows_filtered"}
        assert "tabular.plot_histogram(table=rows) -> tabular.histogram_plotted" in session.instructions()
        follow_up = session.plan_task("plot a histogram of year_introduced", inputs={"column": "year_introduced"})
        assert labels(follow_up) == [("plot_histogram", {"table": "held rows", "column": "input column", "bins": "default", "output_path": "default"})]
        assert session.run_task(follow_up).result.status == "ok" and (tmp_path / "histogram.png").exists()


def test_a_destination_equal_to_some_text_that_names_no_file_is_allowed(shipped, tmp_path):
    data = shutil.copy(SAMPLE_DATA / "compounds.csv", tmp_path / "compounds.csv")
    destination = str(tmp_path / "summary.md")
    # An unused input counts as the user's data only when it names a file that exists.
    cell = shipped.plan_task("load the table and write a report", inputs={"path": str(data), "write_report.path": destination, "caption": destination}).cell
    assert cell.arguments[1]["path"].label == "input write_report.path" and cell.unused_inputs == ("caption",)
    with pytest.raises(InputError, match="which input 'backup' gives as data"):
        shipped.plan_task(
            "load the table and write a report", inputs={"path": str(SAMPLE_DATA / "suppliers.csv"), "write_report.path": str(data), "backup": str(data)}
        )
