"""The main job end to end: the `toolpath` command on the shipped catalog, in real kernels."""

import importlib.metadata
import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from toolpath.catalogs import default_catalog_paths
from toolpath.planner import NoPlanError, Workspace

pytestmark = pytest.mark.integration

ASPIRIN = "CC(=O)Oc1ccccc1C(=O)O"


def toolpath(*arguments, cwd=None, env=None):
    return subprocess.run([sys.executable, "-m", "toolpath.planner.interfaces.cli", *arguments], capture_output=True, text=True, timeout=300, cwd=cwd, env=env)


def kernels_marked(marker):
    """ipykernel processes whose environment carries ``marker`` (kernels inherit the CLI's environment)."""
    found = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                if b"ipykernel_launcher" not in handle.read():
                    continue
            with open(f"/proc/{pid}/environ", "rb") as handle:
                if marker.encode() in handle.read():
                    found.add(int(pid))
        except OSError:
            continue
    return found


def test_run_aspirin_json_reports_weight_and_lipinski_pass():
    marker = f"TOOLPATH_TEST_RUN={uuid.uuid4().hex}"
    name, value = marker.split("=")
    completed = toolpath(
        "run", "is aspirin drug-like? check Lipinski's rule of five", "--input", f"smiles={ASPIRIN}", "--json", env={**os.environ, name: value}
    )
    assert completed.returncode == 0, completed.stderr
    payload = json.loads(completed.stdout)
    assert {"task", "goal", "plan", "cell", "result"} <= set(payload)
    assert [step["tool"] for step in payload["plan"]["steps"]] == ["parse_molecule", "compute_descriptors"]
    assert {"tool", "requires", "produces"} <= set(payload["plan"]["steps"][0]) and payload["plan"]["cost"] == 2
    result = payload["result"]
    assert set(result) >= {"status", "stdout", "stderr", "result", "result_text", "error"}
    assert result["status"] == "ok"
    # The value itself, as JSON, and its repr beside it.
    assert result["result_is_json"] and result["result"]["molecular_weight"] == 180.16
    assert result["result"]["lipinski"]["passes"] is True
    assert "'lipinski': {'passes': True" in result["result_text"]
    assert not kernels_marked(marker), "an ipykernel outlived the CLI command"


def test_run_clustering_prints_the_clusters():
    completed = toolpath("run", "cluster these molecules by structural similarity", "--input", 'smiles_list=["CCO","CCCO","c1ccccc1","c1ccccc1C"]')
    assert completed.returncode == 0, completed.stderr
    assert "Goal: chemistry.molecules_clustered" in completed.stdout
    assert "'members': ['CCCO', 'CCO']" in completed.stdout


def test_task_no_catalog_serves_exits_non_zero_without_traceback():
    completed = toolpath("run", "book a flight to Paris next Tuesday")
    assert completed.returncode == 2
    assert "no catalog can serve the task" in completed.stderr and "load a catalog for this domain with --add-catalog PATH" in completed.stderr
    assert "Traceback" not in completed.stderr


@pytest.mark.parametrize(
    "arguments",
    [("plan", "--goal", "chemistry.descriptors_computed", "--json"), ("cell", "--goal", "chemistry.descriptors_computed", "--json"), ("--version",)],
)
def test_a_result_that_cannot_be_written_to_a_closed_standard_output_exits_74_saying_so(arguments):
    # As a shell runs `toolpath ... >&-`: the command starts with its standard output closed.
    command = ["sh", "-c", 'exec "$@" >&-', "sh", sys.executable, "-m", "toolpath.planner.interfaces.cli", *arguments]
    completed = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=300)
    assert completed.returncode == 74
    assert completed.stderr.strip().endswith(
        "toolpath: standard output is closed, so nothing could be written; run the command with standard output open (a file, a pipe or a terminal)"
    )
    assert "Traceback" not in completed.stderr


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
def test_a_result_that_cannot_be_written_to_a_full_device_exits_74_saying_so():
    with open("/dev/full", "w") as full:
        completed = subprocess.run(
            [sys.executable, "-m", "toolpath.planner.interfaces.cli", "plan", "--goal", "chemistry.descriptors_computed", "--json"],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=300,
        )
    assert completed.returncode == 74
    assert completed.stderr.strip() == "toolpath: writing to standard output failed: No space left on device"


def test_missing_input_is_refused_before_starting_a_kernel():
    completed = toolpath("run", "cluster these molecules by structural similarity", "--json")
    assert completed.returncode == 2
    assert "--input smiles_list=VALUE" in json.loads(completed.stdout)["error"]


def test_a_failing_tool_returns_its_traceback_and_exit_1(tmp_path):
    completed = toolpath("run", "cluster these molecules by structural similarity", "--input", 'smiles_list=["CCO","C1CC"]', "--json")
    assert completed.returncode == 1
    error = json.loads(completed.stdout)["result"]["error"]
    assert error["ename"] == "InvalidSmilesError" and "'C1CC'" in error["evalue"]


def test_plan_verb_json_and_unreachable_goal():
    completed = toolpath("plan", "--goal", "chemistry.molecules_clustered", "--json")
    assert completed.returncode == 0
    assert [step["tool"] for step in json.loads(completed.stdout)["steps"]] == ["compute_fingerprints", "cluster_molecules"]
    with_alternatives = json.loads(toolpath("plan", "--goal", "chemistry.molecules_clustered", "--k", "3", "--json").stdout)
    assert with_alternatives["steps"][-1]["tool"] == "cluster_molecules" and isinstance(with_alternatives["alternatives"], list)
    blocked = toolpath("plan", "--goal", "chemistry.molecules_clustered", "--avoid", "compute_fingerprints", "--json")
    assert blocked.returncode == 2
    assert json.loads(blocked.stdout)["missing"] == {"chemistry.molecules_clustered": ["chemistry.fingerprints_computed"]}


def test_version_names_the_installed_release():
    completed = toolpath("--version")
    assert completed.returncode == 0
    assert completed.stdout.strip() == f"toolpath {importlib.metadata.version('toolpath')}"


def test_graph_draws_pictures_and_asks_for_a_file_for_images(tmp_path):
    missing = toolpath("graph", "--format", "png")
    assert missing.returncode == 2 and "--output FILE" in missing.stderr
    drawn = toolpath("graph", "--format", "svg", "--goal", "chemistry.molecules_clustered", "--output", str(tmp_path / "plan.svg"))
    assert drawn.returncode == 0, drawn.stderr
    assert "<svg" in (tmp_path / "plan.svg").read_text()
    mermaid = toolpath("graph", "--format", "mermaid")
    assert mermaid.returncode == 0 and mermaid.stdout.startswith("flowchart LR")
    stray = toolpath("graph", "--goal", "chemistry.molecules_clustered")
    assert stray.returncode == 2 and "go with --format" in stray.stderr


def test_init_writes_a_catalog_package_that_validates_runs_and_tests_as_generated(tmp_path):
    created = toolpath("init", "lab_notes", "--directory", str(tmp_path))
    assert created.returncode == 0, created.stderr
    catalog = tmp_path / "lab_notes" / "catalog.yaml"
    assert toolpath("validate", str(catalog), "--import", cwd=tmp_path.parent).returncode == 0
    run = toolpath("run", "summarise a text", "--add-catalog", str(catalog), "--input", "text=Plans are cells. Cells run.", "--json", cwd=tmp_path.parent)
    assert run.returncode == 0, run.stdout + run.stderr
    assert json.loads(run.stdout)["result"]["result"] == "Plans are cells."
    tested = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "lab_notes"], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
    again = toolpath("init", "lab_notes", "--directory", str(tmp_path))
    assert again.returncode == 2 and "already exists" in again.stderr
    assert toolpath("init", "Not-A-Name", "--directory", str(tmp_path)).returncode == 2
    assert sorted(path.name for path in tmp_path.iterdir()) == ["lab_notes"]  # nothing half written


def test_validate_reports_file_line_and_field(tmp_path):
    catalog = tmp_path / "broken.yaml"
    catalog.write_text("domain: demo\npackage: demo\ntools:\n  - name: t\n    cost: cheap\n")
    completed = toolpath("validate", str(catalog), "--json")
    assert completed.returncode == 1
    (finding,) = json.loads(completed.stdout)["findings"]
    assert (finding["line"], finding["code"], finding["field"]) == (5, "TP101", "tools[0].cost")


def greetings_catalog(tmp_path, domain, greet_source, binding=""):
    """A user package ``domain`` with one tool, ``greet(name)``, and its catalog; returns the catalog path."""
    package = tmp_path / domain
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "greet.py").write_text(greet_source)
    (package / "catalog.yaml").write_text(
        textwrap.dedent(
            f"""\
            domain: {domain}
            package: {domain}
            states:
              - token: {domain}.greeted
                description: Someone has been greeted.
                affordances: [say hello to a person]
            tools:
              - name: greet
                description: Greet a person by name.
                {binding}
                required_parameters: [{{name: name, type: str}}]
                return_spec: {{name: greeting, type: str, state: {domain}.greeted}}
                state_transition: {{requires: [], produces: [{domain}.greeted]}}
            """
        )
    )
    return package / "catalog.yaml"


def test_added_catalogs_load_with_the_shipped_ones_and_catalog_loads_only_its_own(tmp_path):
    catalog = greetings_catalog(tmp_path, "greetings", "def greet(name: str) -> str:\n    return f'hello, {name}'\n")
    both_goals = ("plan", "--goal", "greetings.greeted", "--goal", "chemistry.molecules_clustered", "--json")
    added = toolpath(*both_goals, "--add-catalog", str(catalog))
    assert added.returncode == 0, added.stderr
    assert {step["tool"] for step in json.loads(added.stdout)["steps"]} == {"greet", "compute_fingerprints", "cluster_molecules"}
    listed = toolpath(*both_goals, env={**os.environ, "TOOLPATH_CATALOGS": str(catalog)})
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["steps"] == json.loads(added.stdout)["steps"]
    only = toolpath(*both_goals, "--catalog", str(catalog), env={**os.environ, "TOOLPATH_CATALOGS": str(catalog)})
    assert only.returncode == 2 and "chemistry.molecules_clustered" in json.loads(only.stdout)["error"]


def test_a_missing_file_in_toolpath_catalogs_is_named_with_the_variable(tmp_path):
    missing = tmp_path / "gone.yaml"
    completed = toolpath("plan", "--goal", "chemistry.molecules_clustered", env={**os.environ, "TOOLPATH_CATALOGS": str(missing)})
    assert completed.returncode == 2
    assert str(missing) in completed.stderr and "TOOLPATH_CATALOGS" in completed.stderr and "Traceback" not in completed.stderr


def test_user_catalog_with_its_own_package_runs_in_the_kernel(tmp_path, embedder):
    catalog = greetings_catalog(tmp_path, "greetings", "def greet(name: str) -> str:\n    '''Say hello.'''\n    return f'hello, {name}'\n")
    workspace = Workspace.open([catalog], embedder=embedder)
    task = workspace.plan_task("say hello to Ada", inputs={"name": "Ada"})
    run = workspace.run_task(task)
    assert run.result.status == "ok", run.result.error
    assert run.result.result == "'hello, Ada'"


def test_a_catalog_beside_its_package_validates_and_runs_from_any_directory(tmp_path):
    inside = greetings_catalog(tmp_path, "greetings", "def greet(name: str) -> str:\n    return f'hello, {name}'\n")
    beside = tmp_path / "catalog.yaml"
    inside.rename(beside)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    validated = toolpath("validate", str(beside), "--import", cwd=elsewhere)
    assert validated.returncode == 0, validated.stdout + validated.stderr
    run = toolpath("run", "say hello to a person", "--input", "name=Ada", "--catalog", str(beside), "--json", cwd=elsewhere)
    assert run.returncode == 0, run.stdout + run.stderr
    assert json.loads(run.stdout)["result"]["result_text"] == "'hello, Ada'"


def test_run_over_its_timeout_says_the_limit_and_how_to_raise_it_not_where_the_interrupt_landed(tmp_path):
    slow = "import time\n\n\ndef greet(name: str) -> str:\n    time.sleep(60)\n    return f'hello, {name}'\n"
    catalog = greetings_catalog(tmp_path, "slowgreetings", slow)
    run = toolpath("run", "say hello to a person", "--input", "name=Ada", "--catalog", str(catalog), "--timeout", "2", cwd=tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    shown = run.stdout.split("Result (timeout):")[1]
    assert "the cell ran over 2 s and was interrupted; --timeout SECONDS gives it longer" in shown
    assert "Traceback" not in shown and "KeyboardInterrupt" not in shown


def test_a_parameter_named_by_a_python_keyword_is_passed_by_its_python_name(tmp_path, embedder):
    package = tmp_path / "flights"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "book_flight.py").write_text("def book_flight(from_: str, to: str) -> str:\n    return f'{from_} -> {to}'\n")
    (package / "catalog.yaml").write_text(
        textwrap.dedent(
            """\
            domain: flights
            package: flights
            states:
              - {token: flights.booked, description: A flight is booked., affordances: [book a flight between two airports]}
            tools:
              - name: book_flight
                description: Book a flight.
                required_parameters: [{name: from, type: str}, {name: to, type: str}]
                return_spec: {name: booking, type: str, state: flights.booked}
                state_transition: {requires: [], produces: [flights.booked]}
            """
        )
    )
    workspace = Workspace.open([package / "catalog.yaml"], embedder=embedder)
    task = workspace.plan_task("book a flight", inputs={"from_": "LHR", "to": "JFK"})
    assert "book_flight(from_=from_, to=to)" in task.cell.code
    run = workspace.run_task(task)
    assert run.result.status == "ok", run.result.error
    assert run.result.result == "'LHR -> JFK'"


def test_an_input_state_is_held_when_the_input_that_carries_it_is_given(tmp_path, trip_catalog):
    path = trip_catalog(tmp_path / "trip.yaml")
    workspace = Workspace.open([path])
    goal_plan, cell = workspace.plan_goal(["trip.flights_found"], inputs={"request": "LHR to JFK"})
    assert [step.tool.name for step in goal_plan.steps] == ["search_flights"] and "trip.request_given" in goal_plan.held
    assert "search_flights(request=request)" in cell.code and "request = 'LHR to JFK'" in cell.code
    with pytest.raises(NoPlanError, match="trip.request_given is given by the user: give it as the input .request., or hold trip.request_given"):
        workspace.plan_goal(["trip.flights_found"])


def test_validate_cli_on_the_three_classic_mistakes(tmp_path):
    unknown_token = tmp_path / "unknown_token.yaml"
    unknown_token.write_text(
        "domain: d\npackage: p\nstates: [{token: d.a, description: a}]\ntools:\n  - {name: t, description: t, state_transition: {requires: [d.typo], produces: [d.a]}}\n"
    )
    wrong_type = tmp_path / "wrong_type.yaml"
    wrong_type.write_text(
        "domain: d2\npackage: p\nstates: [{token: d.a, description: a}]\ntools:\n  - name: t\n    required_parameters: [{name: x, type: 'dict[str'}]\n    state_transition: {produces: [d.a]}\n"
    )
    syntax = tmp_path / "syntax.yaml"
    syntax.write_text("domain: d3\ntools:\n  - name: t\n   description: misindented\n")
    results = {}
    for path in (unknown_token, wrong_type, syntax):
        completed = toolpath("validate", str(path), "--json")
        assert completed.returncode == 1, completed.stdout
        results[path.stem] = [(finding["code"], finding["line"]) for finding in json.loads(completed.stdout)["findings"] if finding["severity"] == "error"]
    assert results == {"unknown_token": [("TP001", 5)], "wrong_type": [("TP006", 6)], "syntax": [("TP100", 4)]}
    clean = toolpath("validate", *[str(path) for path in default_catalog_paths()])
    assert clean.returncode == 0 and "ok: 0 error(s), 0 warning(s)" in clean.stdout


def test_a_host_bound_catalog_tool_runs_in_this_process(tmp_path, embedder):
    greet_source = "import os\n\ndef greet(name: str) -> str:\n    '''Say hello.'''\n    return f'hello, {name}, from {os.getpid()}'\n"
    catalog = greetings_catalog(tmp_path, "hostgreetings", greet_source, binding="binding: host")
    workspace = Workspace.open([catalog], embedder=embedder)
    task = workspace.plan_task("say hello to Ada", inputs={"name": "Ada"})
    assert "host_toolkit('hostgreetings')" in task.cell.code
    run = workspace.run_task(task)
    assert run.result.status == "ok", run.result.error
    assert run.result.result == f"'hello, Ada, from {os.getpid()}'"


def test_search_cli_reports_reachability_and_plans():
    result = toolpath("search", "group similar molecules", "--k", "3", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["mode"] == "hybrid" and len(report["hits"]) == 3
    clustered = next(hit for hit in report["hits"] if hit["name"] == "chemistry.molecules_clustered")
    assert clustered["reachable"] and clustered["plan"][-1] == "cluster_molecules"
    only_tools = json.loads(toolpath("search", "group similar molecules", "--kind", "tool", "--json").stdout)
    assert {hit["kind"] for hit in only_tools["hits"]} == {"tool"}
    refused = toolpath("search", "molecules", "--have", "chemistry.no_such_state")
    assert refused.returncode != 0 and "unknown state" in refused.stderr


def test_search_shows_similarities_and_marks_hits_no_task_would_match():
    related = toolpath("search", "group similar molecules", "--k", "2")
    assert related.returncode == 0, related.stderr
    first = related.stdout.splitlines()[1].split()
    assert float(first[0]) > 0.5 and first[2] == "chemistry.molecules_clustered" and "weak" not in related.stdout
    unrelated = toolpath("search", "book a flight to Paris", "--k", "3")
    lines = unrelated.stdout.splitlines()[1:]
    assert len(lines) == 3 and all("weak: below 0.35" in line and float(line.split()[0]) < 0.35 for line in lines)
    report = json.loads(toolpath("search", "book a flight to Paris", "--k", "3", "--json").stdout)
    assert report["min_score"] == 0.35 and not any(hit["matches"] for hit in report["hits"])


def test_commands_that_neither_search_nor_run_load_no_model_and_no_kernel_code():
    probe = (
        "import contextlib, io, json, sys\n"
        "from toolpath.planner.interfaces.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    main(sys.argv[1:])\n"
        "heavy = ('torch', 'sentence_transformers', 'onnxruntime', 'bm25s', 'jupyter_client', 'toolpath.kernel.kernels.ipython_kernel', 'toolpath.kernel.codemode.facade', 'networkx')\n"
        "print(json.dumps(sorted(name for name in heavy if name in sys.modules)))\n"
    )
    catalog = str(default_catalog_paths()[0])
    for arguments in (
        ["plan", "--goal", "chemistry.molecules_clustered"],
        ["validate", catalog],
        ["schema"],
        ["--help"],
        ["cell", "--goal", "chemistry.descriptors_computed", "--input", "smiles=CCO"],
    ):
        completed = subprocess.run([sys.executable, "-c", probe, *arguments], capture_output=True, text=True, timeout=120)
        assert completed.returncode == 0, completed.stderr
        assert json.loads(completed.stdout.splitlines()[-1]) == [], arguments


def test_search_with_a_corrupt_cache_file_warns_in_one_line_and_still_answers(tmp_path):
    (tmp_path / "toolpath.db").write_bytes(b"not a database")
    result = toolpath("search", "group similar molecules", "--k", "1", env={**os.environ, "TOOLPATH_HOME": str(tmp_path)})
    assert result.returncode == 0 and "cluster" in result.stdout
    assert f"toolpath: warning: the embedding cache at {tmp_path / 'toolpath.db'} is unusable" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_domain_with_host_and_kernel_tools_is_one_handle(sheets_catalog, embedder, monkeypatch):
    workspace = Workspace.open([sheets_catalog], embedder=embedder)
    task = workspace.plan_task("write a report on the table", inputs={"path": "people.csv"})
    assert [step.tool.name for step in task.plan.steps] == ["load_csv", "write_report"]
    assert task.cell.code.count("sheets = ") == 1
    run = workspace.run_task(task)
    assert run.result.status == "ok", run.result.error
    assert run.result.result == f"'3 rows from people.csv, written by {os.getpid()}'"

    root = str(sheets_catalog.parent.parent)
    monkeypatch.syspath_prepend(root)  # the host tool's module, for CodeMode given the registry directly
    from toolpath.kernel import CodeMode

    with CodeMode(list(workspace.loaded.registry), pool_size=0, env={"PYTHONPATH": root}) as code_mode:
        both = code_mode.run(
            "table = await sheets.load_csv(path='a.csv')\n(sorted(dir(sheets)), table['loaded_by'], await sheets.write_report(table=table))", "mixed"
        )
        assert both.status == "ok", both.error
        names, loaded_by, report = eval(both.result)
        assert names == ["load_csv", "write_report"] and loaded_by != os.getpid()  # loaded in the kernel
        assert report == f"3 rows from a.csv, written by {os.getpid()}"


COMPOUNDS = Path(__file__).resolve().parent.parent / "catalogs" / "tabular" / "data" / "compounds.csv"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_run_shows_a_table_cut_to_its_first_and_last_rows_with_its_shape_and_json_keeps_it_whole():
    task = ("run", "compute descriptors of the molecules in a table file", "--input", f"path={COMPOUNDS}")
    shown = toolpath(*task)
    assert shown.returncode == 0, shown.stderr
    assert "[20 rows x 13 columns]" in shown.stdout
    assert "metformin" not in shown.stdout.split("Result (ok):")[1]  # row 9 of 20: cut from the middle
    assert "--json" in shown.stdout  # says where the whole value is
    whole = toolpath(*task, "--json")
    assert whole.returncode == 0, whole.stderr
    assert "metformin" in json.loads(whole.stdout)["result"]["result_text"]


def test_run_says_how_many_images_it_made_and_images_writes_them_as_png_files(tmp_path):
    task = ("run", "plot a histogram of a column", "--input", f"path={COMPOUNDS}", "--input", "column=year_introduced")
    told = toolpath(*task, cwd=tmp_path)
    assert told.returncode == 0, told.stderr
    assert "1 image (PNG): --images DIR writes it as a file, --json gives it in base64" in told.stdout
    written = toolpath(*task, "--images", "pictures", cwd=tmp_path)
    assert written.returncode == 0, written.stderr
    image = tmp_path / "pictures" / "image-1.png"
    assert f"image 1: {image}" in written.stdout and image.read_bytes()[:8] == PNG_SIGNATURE
    again = toolpath(*task, "--images", "pictures", cwd=tmp_path)
    assert f"image 1: {tmp_path / 'pictures' / 'image-2.png'}" in again.stdout  # never over an earlier one
    assert image.read_bytes()[:8] == PNG_SIGNATURE


def test_run_refuses_an_images_path_it_cannot_write_in_before_anything_runs(tmp_path, toolpath_home):
    report = tmp_path / "report.md"
    report.write_text("the user's report")
    task = ("run", "plot a histogram of a column", "--input", f"path={COMPOUNDS}", "--input", "column=year_introduced")
    histograms_before = set((toolpath_home / "runs").rglob("*.png"))
    refused = toolpath(*task, "--images", "report.md", cwd=tmp_path)
    assert refused.returncode == 2 and "--images report.md" in refused.stderr
    assert "Running in a fresh IPython kernel" not in refused.stdout  # refused before the run, not after it
    assert report.read_text() == "the user's report"
    assert set((toolpath_home / "runs").rglob("*.png")) == histograms_before  # the cell never ran


def test_run_writes_files_in_a_fresh_output_directory_and_leaves_a_file_of_the_same_name_in_the_working_directory_alone(tmp_path, toolpath_home):
    mine = tmp_path / "histogram.png"
    mine.write_bytes(b"the user's own histogram")
    task = ("run", "plot a histogram of a column", "--input", f"path={COMPOUNDS}", "--input", "column=year_introduced")
    first, second = (toolpath(*task, "--json", cwd=tmp_path) for _ in range(2))
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    directories = [Path(json.loads(completed.stdout)["output_directory"]) for completed in (first, second)]
    assert directories[0] != directories[1] and all(directory.parent == toolpath_home / "runs" for directory in directories)
    for directory in directories:
        assert (directory / "histogram.png").read_bytes()[:8] == PNG_SIGNATURE
    assert mine.read_bytes() == b"the user's own histogram" and sorted(tmp_path.iterdir()) == [mine]
    shown = toolpath(*task, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert f"Files written in {toolpath_home / 'runs'}" in shown.stdout and "histogram.png" in shown.stdout.split("Files written in")[1]
    assert sorted(tmp_path.iterdir()) == [mine]


def test_run_output_dir_takes_a_new_or_empty_directory_only(tmp_path):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "notes.txt").write_text("keep me")
    task = ("run", "plot a histogram of a column", "--input", f"path={COMPOUNDS}", "--input", "column=year_introduced")
    refused = toolpath(*task, "--output-dir", "full", cwd=tmp_path)
    assert refused.returncode == 2 and "--output-dir full is not empty" in refused.stderr
    chosen = toolpath(*task, "--output-dir", "plots", cwd=tmp_path)
    assert chosen.returncode == 0, chosen.stderr
    assert (tmp_path / "plots" / "histogram.png").read_bytes()[:8] == PNG_SIGNATURE
    assert f"Files written in {tmp_path / 'plots'}: histogram.png" in chosen.stdout


def test_the_first_search_over_new_catalogs_says_on_standard_error_that_it_embeds_them_and_how_many(tmp_path):
    home = {**os.environ, "TOOLPATH_HOME": str(tmp_path)}
    first = toolpath("search", "group similar molecules", "--k", "1", "--json", env=home)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["hits"]  # standard output holds the answer alone
    (line,) = [line for line in first.stderr.splitlines() if "new catalog texts" in line]
    assert line.startswith("toolpath: embedding ") and int(line.split()[2]) > 50
    again = toolpath("search", "group similar molecules", "--k", "1", "--json", env=home)
    assert again.returncode == 0 and "new catalog text" not in again.stderr


def test_run_refuses_an_output_dir_for_a_kernel_on_another_machine(tmp_path):
    refused = toolpath("run", "plot a histogram of a column", "--gateway-url", "http://127.0.0.1:9", "--output-dir", "plots", cwd=tmp_path)
    assert refused.returncode == 2 and "--output-dir is for kernels on this machine" in refused.stderr
    assert list(tmp_path.iterdir()) == []
