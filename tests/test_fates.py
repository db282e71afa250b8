"""Every part of a task accounted for (issue 52, items 1 and 6): values named in one part serve the
parts after it, each part ends as planned, a fact/context or not understood, a task with a part not
understood does not run as if done, a named file and the same --input agree, and a task not in
English is refused saying so."""

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from toolpath.catalogs import default_catalog_paths
from toolpath.planner import NotEnglishError, PartsNotUnderstoodError, Workspace
from toolpath.planner.tasks.goals import NoMatchingSkillError
from toolpath.planner.tasks.language import check_english, detect_language

ROOT = Path(__file__).resolve().parent.parent
TABULAR = next(path for path in default_catalog_paths() if path.parent.name == "tabular")


def toolpath(*arguments, cwd=None):
    return subprocess.run([sys.executable, "-m", "toolpath.planner.interfaces.cli", *arguments], capture_output=True, text=True, timeout=300, cwd=cwd)


@pytest.fixture(scope="module")
def tabular(embedder):
    return Workspace.open(TABULAR, embedder=embedder)


def tools(task_plan):
    return [step.tool.name for step in task_plan.plan.steps]


# ------------------------------------------------------------------ values carried to later parts


@pytest.mark.parametrize(
    ("task", "expected"),
    [
        ("load sales.csv and plot revenue by month", ["load_table", "plot_line"]),
        ("load sales.csv and describe it", ["load_table", "describe_table"]),
        (["load sales.csv", "describe it"], ["load_table", "describe_table"]),
    ],
)
def test_a_file_named_in_one_part_is_the_file_of_the_parts_after_it(tabular, task, expected):
    task_plan = tabular.plan_task(task)
    assert [part.fate for part in task_plan.parts] == ["planned", "planned"]
    assert tools(task_plan) == expected
    assert "sales.csv" in task_plan.inputs.values()
    assert "load_table(path=" in task_plan.cell.code and "'sales.csv'" in task_plan.cell.code
    assert task_plan.parts[1].why == "it works on 'sales.csv', which an earlier part names (tabular.file_given)"


def test_a_later_part_that_names_its_own_file_is_not_given_the_earlier_one(tabular):
    # Describing regions.csv with the table of sales.csv would be silently wrong: two files for one
    # input are refused, as before.
    with pytest.raises(Exception, match="two values for the input"):
        tabular.plan_task("load sales.csv and describe regions.csv")


# ------------------------------------------------------------------ fates


def test_every_part_has_one_fate_and_a_part_not_understood_says_why_with_its_closest_candidates(tabular):
    task_plan = tabular.plan_task("load sales.csv, then book a flight to Paris")
    fates = [(part.text, part.fate) for part in task_plan.parts]
    assert fates == [("load sales.csv", "planned"), ("book a flight to Paris", "not understood")]
    lost = task_plan.parts[1]
    assert "no state or tool matches it" in lost.problem and lost.closest and "similarity" in lost.closest[0]
    listed = task_plan.to_dict()["parts"]
    assert [part["fate"] for part in listed] == ["planned", "not understood"] and listed[1]["closest"]


def test_the_python_api_refuses_to_run_a_task_with_a_part_not_understood_unless_partial(tabular, tmp_path):
    task_plan = tabular.plan_task("load sales.csv, then book a flight to Paris")
    with pytest.raises(PartsNotUnderstoodError) as refused:
        tabular.run_task(task_plan)
    assert [part.text for part in refused.value.parts] == ["book a flight to Paris"]
    message = str(refused.value)
    assert "'book a flight to Paris': not understood: no catalog can serve" in message and "'load sales.csv': planned" in message
    assert "partial=True" in message
    (tmp_path / "sales.csv").write_text("month,revenue\n2024-01,10\n2024-02,20\n")
    run = tabular.run_task(tabular.plan_task(f"load {tmp_path / 'sales.csv'}, then book a flight to Paris"), partial=True)
    assert run.result.status == "ok" and "2024-02" in run.result.result


def test_an_agent_session_refuses_a_task_with_a_part_not_understood_before_it_runs(tabular):
    with tabular.session("fates-session") as session:
        with pytest.raises(PartsNotUnderstoodError, match="book a flight to Paris"):
            session.run_task("load sales.csv, then book a flight to Paris")
        assert session.held == frozenset()


def test_the_command_line_exits_3_for_a_part_not_understood_and_lists_every_fate(tmp_path):
    (tmp_path / "sales.csv").write_text("month,revenue\n2024-01,10\n2024-02,20\n")
    task = "load sales.csv, then book a flight to Paris"
    refused = toolpath("run", task, "--catalog", str(TABULAR), "--json", cwd=tmp_path)
    assert refused.returncode == 3, refused.stderr
    payload = json.loads(refused.stdout)
    assert [(part["part"], part["fate"]) for part in payload["parts"]] == [("load sales.csv", "planned"), ("book a flight to Paris", "not understood")]
    assert "give --partial" in payload["error"] and "result" not in payload  # nothing ran
    cell = toolpath("cell", task, "--catalog", str(TABULAR), cwd=tmp_path)
    assert cell.returncode == 3 and "toolpath: 1 part of the task was not understood, so nothing runs" in cell.stderr
    partial = toolpath("run", task, "--catalog", str(TABULAR), "--partial", cwd=tmp_path)
    assert partial.returncode == 0, partial.stderr
    assert "warning: the part 'book a flight to Paris' of the task was not understood" in partial.stderr and "2024-02" in partial.stdout


def test_the_exit_statuses_are_in_the_command_line_help():
    helped = toolpath("--help")
    assert "3  some parts of the task were not understood" in helped.stdout
    assert "exits 3 before anything runs" in " ".join(toolpath("run", "--help").stdout.split())


def test_mcp_run_task_refuses_a_task_with_a_part_not_understood_unless_partial(tmp_path):
    from mcp import Client, StdioServerParameters

    (tmp_path / "sales.csv").write_text("month,revenue\n2024-01,10\n2024-02,20\n")
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "toolpath.planner.interfaces.cli", "serve", "--catalog", str(TABULAR)],
        env={**os.environ, "TOOLPATH_HOME": str(tmp_path / "home")},
        cwd=str(tmp_path),
    )
    task = {"task": f"load {tmp_path / 'sales.csv'}, then book a flight to Paris"}

    async def scenario():
        async with Client(server) as client:
            planned = await client.call_tool("plan_task", task)
            assert [part["fate"] for part in planned.structured_content["parts"]] == ["planned", "not understood"]
            refused = await client.call_tool("run_task", task)
            assert refused.is_error
            text = refused.content[0].text
            assert "'book a flight to Paris': not understood" in text and "partial=true" in text and "': planned" in text
            ran = await client.call_tool("run_task", {**task, "partial": True})
            assert not ran.is_error and ran.structured_content["result"]["status"] == "ok"

    asyncio.run(scenario())


# A table catalog without a tool that counts rows, in the shape of the tabular catalog before issue 52.
COUNTLESS_CATALOG = """\
domain: tabular
package: tabular_countless
states:
  - token: tabular.file_given
    description: The path of a data file (CSV or Excel) is known.
    input: true
    affordances: [a data file the user has (a CSV or Excel spreadsheet)]
  - token: tabular.table_loaded
    description: A table is loaded as a pandas DataFrame.
    affordances: [load a CSV file, open a spreadsheet of data]
  - token: tabular.table_described
    description: Summary statistics of every column of a table are computed.
    affordances: [summarise the columns of a table, describe a data set]
tools:
  - name: load_table
    description: Load a CSV or Excel file into a table.
    required_parameters:
      - {name: path, type: str, description: path of the table's file, state: tabular.file_given}
    return_spec: {name: table, type: pandas.DataFrame, description: the table, state: tabular.table_loaded}
    state_transition: {requires: [tabular.file_given], produces: [tabular.table_loaded]}
    affordances: [load a CSV file into a table]
  - name: describe_table
    description: Summary statistics of every column.
    required_parameters:
      - {name: table, type: pandas.DataFrame, description: the table, state: tabular.table_loaded}
    return_spec: {name: statistics, type: dict, description: per column statistics, state: tabular.table_described}
    state_transition: {requires: [tabular.table_loaded], produces: [tabular.table_described]}
    affordances: [describe the columns of a table]
"""


def test_an_action_that_matches_only_the_file_it_names_is_not_understood_rather_than_done(tmp_path, embedder):
    # The words match "a data file is given", which the file name itself holds: nothing would run,
    # and the task passed as answered ("Nothing to run: the goal is already held", exit 0).
    catalog = tmp_path / "countless.yaml"
    catalog.write_text(COUNTLESS_CATALOG)
    countless = Workspace.open(catalog, embedder=embedder)
    with pytest.raises(NoMatchingSkillError, match="matches only tabular.file_given, which the user gives"):
        countless.plan_task("how many rows are in sales.xlsx")
    task_plan = countless.plan_task("load sales.xlsx, then tell me how many rows are in sales.xlsx")
    assert [part.fate for part in task_plan.parts] == ["planned", "not understood"]
    refused = toolpath("cell", "how many rows are in sales.xlsx", "--catalog", str(catalog), cwd=tmp_path)
    assert refused.returncode == 2 and "Nothing to run" not in refused.stdout and "matches only tabular.file_given" in refused.stderr


# ------------------------------------------------------------------ a named file and the same --input


def test_a_file_named_in_the_task_and_the_same_input_agree(tmp_path):
    same = toolpath("cell", "load sales.csv and plot revenue by month", "--catalog", str(TABULAR), "--input", "path=sales.csv", "--json", cwd=tmp_path)
    assert same.returncode == 0, same.stderr
    payload = json.loads(same.stdout)
    assert [step["tool"] for step in payload["plan"]["steps"]] == ["load_table", "plot_line"]
    assert all(part["overridden"] == [] for part in payload["parts"]) and "warning: the task names" not in same.stderr


def test_an_input_that_differs_from_the_file_the_task_names_wins_and_says_so(tabular, tmp_path):
    task_plan = tabular.plan_task("load sales.csv", {"path": "other.csv"})
    [override] = task_plan.parts[0].overridden
    assert (override.input, override.named, override.given) == ("path", "sales.csv", "other.csv")
    assert "path = 'other.csv'" in task_plan.cell.code and "sales.csv" not in task_plan.cell.code.split("\n", 1)[1]
    cli = toolpath("cell", "load sales.csv", "--catalog", str(TABULAR), "--input", "path=other.csv", "--json", cwd=tmp_path)
    assert cli.returncode == 0, cli.stderr
    listed = json.loads(cli.stdout)["parts"][0]["overridden"]
    assert listed == [
        {
            "input": "path",
            "named": "sales.csv",
            "given": "other.csv",
            "used": "given",
            "why": "a value given as an input is meant for this parameter, so it is used rather than the one the task's words name",
        }
    ]
    assert "warning: the task names 'sales.csv' in 'load sales.csv', and --input path gives 'other.csv': the --input is used" in cli.stderr


def test_an_input_that_differs_from_the_file_a_fact_names_wins_and_says_so(tabular):
    task_plan = tabular.plan_task("I have a file 'sales.csv'. Describe it", {"path": "other.csv"})
    assert [part.fate for part in task_plan.parts] == ["fact", "planned"]
    assert [(override.input, override.named, override.given) for override in task_plan.parts[0].overridden] == [("path", "sales.csv", "other.csv")]
    assert "path = 'other.csv'" in task_plan.cell.code and "'sales.csv'" not in task_plan.cell.code.split("\n", 1)[1]  # past the task's own line


# ------------------------------------------------------------------ the value a goal step reads

# Video -> audio -> clean audio; the user may give either the video or the audio.
AUDIO_CATALOG = """\
domain: av
package: av_{suffix}
states:
  - {{token: av.video, description: A video clip is at hand as a file., input: true, affordances: [a video file, a video clip]}}
  - {{token: av.audio, description: A sound recording is at hand as an audio file., input: true, affordances: [an audio file, a sound recording]}}
  - {{token: av.clean_audio, description: A sound recording with its background noise removed., affordances: [audio without background noise]}}
  - {{token: av.transcript, description: "The words spoken in a recording, as text.", affordances: [a transcript of speech]}}
tools:
  - name: extract_audio
    description: Extract the sound track of a video as an audio file.
    required_parameters: [{{name: video, type: str, description: path of the video, state: av.video}}]
    return_spec: {{name: audio, type: str, description: path of the audio file, state: av.audio}}
    state_transition: {{requires: [av.video], produces: [av.audio]}}
    affordances: [extract the audio from a video, get the sound track of a clip]
  - name: reduce_noise
    description: Remove the background noise from an audio recording.
    required_parameters: [{{name: audio, type: str, description: path of the audio, state: av.audio}}]
    return_spec: {{name: clean, type: str, description: path of the cleaned audio, state: av.clean_audio}}
    state_transition: {{requires: [av.audio], produces: [av.clean_audio]}}
    affordances: [reduce the noise of an audio recording, remove background noise from a sound file]
  - name: transcribe
    description: Write down the words spoken in an audio recording.
    required_parameters: [{{name: audio, type: str, description: path of the audio, state: av.audio}}]
    return_spec: {{name: text, type: str, description: the transcript, state: av.transcript}}
    state_transition: {{requires: [av.audio], produces: [av.transcript]}}
    affordances: [transcribe a recording, turn speech into text]
"""


def test_a_named_audio_file_is_the_audio_the_goal_step_reads_not_the_video_before_it(tmp_path, embedder):
    catalog = tmp_path / "av.yaml"
    catalog.write_text(AUDIO_CATALOG.format(suffix=tmp_path.name.replace("-", "_")))
    audio = Workspace.open(catalog, embedder=embedder)
    task_plan = audio.plan_task("reduce the noise of the audio 'b.wav'")
    assert tools(task_plan) == ["reduce_noise"]
    assert task_plan.inputs == {"audio": "b.wav"} and task_plan.parts[0].holds == frozenset({"av.audio"})
    assert "video" not in task_plan.cell.code


# ------------------------------------------------------------------ language


@pytest.mark.parametrize(
    ("task", "language", "name"),
    [
        ("charge le fichier ventes.csv et trace le chiffre d'affaires par mois", "fr", "French"),
        ("lade die Datei umsatz.csv und zeichne den Umsatz pro Monat", "de", "German"),
        ("carga el archivo ventas.csv y dibuja los ingresos por mes", "es", "Spanish"),
        ("检查这个分子是否符合利平斯基五规则并且计算它的描述符", "zh", "Chinese"),
        ("sales.csv を読み込んで月ごとの売上をプロットして", "ja", "Japanese"),
    ],
)
def test_a_task_not_in_english_is_refused_naming_its_language(tabular, task, language, name):
    with pytest.raises(NotEnglishError) as refused:
        tabular.plan_task(task)
    assert str(refused.value).startswith(f"toolpath reads tasks in English; this one looks {name} ({language},")
    assert refused.value.language == language


def test_steps_not_in_english_are_refused_too(tabular):
    with pytest.raises(NotEnglishError, match="looks German"):
        tabular.plan_task(["lade die Datei umsatz.csv", "zeichne den Umsatz pro Monat als Linie"])


def test_the_command_line_refuses_a_french_task_naming_french():
    refused = toolpath("cell", "charge le fichier ventes.csv et trace le chiffre d'affaires par mois", "--catalog", str(TABULAR))
    assert refused.returncode == 2 and "toolpath: toolpath reads tasks in English; this one looks French (fr," in refused.stderr


@pytest.mark.parametrize(
    "task",
    [
        "translate 'Bonjour, ça va ? Je voudrais un café, s'il vous plaît' into English",
        'translate "Ich möchte bitte einen Kaffee mit Milch und Zucker" into French',
        "describe it",
        "rendez-vous",
        "CC(=O)Oc1ccccc1C(=O)O",
        "is CC(=O)Oc1ccccc1C(=O)O drug-like?",
        "ventes_2024_régions.csv",
        "plot revenue by mois from ventes.csv",
    ],
)
def test_short_tasks_values_and_quoted_foreign_text_are_never_refused(task):
    check_english(task)  # raises NotEnglishError when refused


def _english_tasks():
    for name in ("requests_cases.yaml", "dataflow_cases.yaml"):
        for case in yaml.safe_load((ROOT / "benchmarks" / name).read_text(encoding="utf-8")):
            for key in ("request", "task"):
                if isinstance(case.get(key), str):
                    yield case[key]
            yield from (step for step in case.get("steps") or () if isinstance(step, str))


def test_no_english_task_of_the_benchmarks_is_refused():
    tasks = list(_english_tasks())
    assert len(tasks) > 100
    refused = [(task, detect_language(task)) for task in tasks if detect_language(task).foreign]
    assert refused == []
