"""`--input` on the command line: what each command advises, unknown input names."""

import json
import re
import subprocess
import sys

import pytest

from toolpath.planner.interfaces.cli.main import build_parser

pytestmark = pytest.mark.integration

ASPIRIN = "CC(=O)Oc1ccccc1C(=O)O"
LIPINSKI = "is aspirin drug-like? check Lipinski's rule of five"


def run_cli(*arguments, stdin=None):
    """``(exit status, stdout, stderr)`` of the ``toolpath`` command."""
    completed = subprocess.run([sys.executable, "-m", "toolpath.planner.interfaces.cli", *arguments], input=stdin, capture_output=True, text=True, timeout=300)
    return completed.returncode, completed.stdout, completed.stderr


def options_of(command):
    parser = build_parser()
    commands = next(action for action in parser._actions if action.dest == "command")
    return set(commands.choices[command]._option_string_actions)


#: "toolpath cell or run with --input ..." in a message: options meant for other commands.
OTHER_COMMANDS = re.compile(r"toolpath (\w+)(?: (?:or|and) (\w+))? (?:with|take)[^;)]*")


def assert_advice_fits(command, message):
    """Every ``--option`` ``message`` names is one ``command`` accepts, or one of the commands the
    message names for it ("use toolpath cell or run with --input ...")."""
    for clause in OTHER_COMMANDS.finditer(message):
        for other in filter(None, clause.groups()):
            assert set(re.findall(r"--[a-z][a-z-]*", clause.group())) <= options_of(other), (other, message)
    own = OTHER_COMMANDS.sub("", message)
    assert set(re.findall(r"--[a-z][a-z-]*", own)) <= options_of(command), (command, message)


@pytest.mark.parametrize(
    "arguments",
    [
        ["plan", "--goal", "trip.flights_found"],
        ["plan", "--goal", "trip.flights_found", "--json"],
        ["graph", "--format", "mermaid", "--goal", "trip.flights_found"],
        ["cell", "--goal", "trip.flights_found"],
        ["run", "search flights for the traveller"],
    ],
    ids=["plan", "plan-json", "graph", "cell", "run"],
)
def test_each_command_advises_only_options_it_accepts_for_an_input_state(tmp_path, trip_catalog, arguments):
    catalog = trip_catalog(tmp_path / "trip.yaml")
    status, out, err = run_cli(*arguments, "--catalog", str(catalog))
    assert status == 2
    message = out if "--json" in arguments else err
    assert "trip.request_given is given by the user" in message and "--have trip.request_given" in message
    assert_advice_fits(arguments[0], message)
    if arguments[0] in ("cell", "run"):
        assert "pass --input request=VALUE" in message
    else:  # plan and graph take held states, and say which commands take the value
        assert "toolpath cell or run with --input request=VALUE" in message


def test_the_library_message_names_no_command_line_option(tmp_path, trip_catalog):
    from toolpath.planner import NoPlanError, Workspace

    workspace = Workspace.open([trip_catalog(tmp_path / "trip.yaml")])
    with pytest.raises(NoPlanError, match="give it as the input 'request', or hold trip.request_given") as refused:
        workspace.plan_goal(["trip.flights_found"])
    assert "--" not in str(refused.value)


def test_unbound_parameter_advice_fits_cell_and_run():
    _, _, cell_err = run_cli("cell", "--goal", "chemistry.descriptors_computed")
    assert "--input smiles=VALUE" in cell_err
    assert_advice_fits("cell", cell_err)
    status, _, run_err = run_cli("run", "compute the descriptors of a molecule")
    assert status == 2 and "--input smiles=VALUE" in run_err
    assert_advice_fits("run", run_err)


def test_a_misspelled_input_is_refused_with_the_inputs_the_plan_takes():
    status, out, err = run_cli("cell", "--goal", "chemistry.descriptors_computed", "--input", "smile=CCO")
    assert status == 2 and out == ""
    assert "--input smile: no tool on the plan takes an input of that name (did you mean --input smiles=...?)" in err
    assert "The plan takes: smiles (required)" in err


def test_a_misspelled_input_stops_run_before_any_kernel_starts():
    status, out, err = run_cli("run", "cluster these molecules by structural similarity", "--input", 'smile_list=["CCO","CCCO"]')
    assert status == 2 and "Running" not in out
    assert "--input smile_list:" in err and "did you mean --input smiles_list=...?" in err
    assert "smiles_list (required)" in err and "cluster_molecules.distance_threshold (optional)" in err


def test_an_optional_parameter_given_by_its_plain_name_is_refused_with_its_qualified_name():
    status, _, err = run_cli("cell", "--goal", "chemistry.molecules_clustered", "--input", 'smiles_list=["CCO"]', "--input", "radius=3")
    assert status == 2
    assert "--input radius:" in err and "compute_fingerprints.radius" in err


def test_input_values_come_from_files_and_standard_input_and_an_at_sign_is_escaped(tmp_path, monkeypatch):
    import io

    from toolpath.planner.interfaces.cli.shared import parse_inputs

    (tmp_path / "molecules.json").write_text('["CCO", "CCCO"]\n')
    (tmp_path / "smiles.txt").write_text("CCO\n")
    (tmp_path / "radius.txt").write_text("3\n")
    monkeypatch.setattr("sys.stdin", io.StringIO('{"a": 1}\n'))
    inputs = parse_inputs(
        [
            f"smiles_list=@{tmp_path / 'molecules.json'}",
            f"smiles=@{tmp_path / 'smiles.txt'}",
            f"compute_fingerprints.radius=@{tmp_path / 'radius.txt'}",
            "options=@-",
            "handle=@@alice",
        ]
    )
    assert inputs == {"smiles_list": ["CCO", "CCCO"], "smiles": "CCO", "compute_fingerprints.radius": 3, "options": {"a": 1}, "handle": "@alice"}


@pytest.mark.parametrize(
    ("content", "value", "message"),
    [
        ('{"a": 1,}', "@{path}.json", "--input x=@{path}.json: not JSON at line 1, column 9"),
        (
            "",
            "@{path}/missing.json",
            "--input x=@{path}/missing.json: cannot read the file: No such file or directory (write @@... for a value that starts with @)",
        ),
        (b"\xff\xfe", "@{path}.txt", "--input x=@{path}.txt: the file is not UTF-8 text (byte 0)"),
    ],
    ids=["bad-json", "missing", "not-utf8"],
)
def test_an_input_file_that_cannot_be_read_is_named_in_the_error(tmp_path, content, value, message):
    from toolpath.planner.interfaces.cli.shared import CommandLineError, parse_inputs

    path = tmp_path / "value"
    if content:
        target = path.with_suffix(".json" if value.endswith(".json") else ".txt")
        target.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(CommandLineError) as refused:
        parse_inputs([f"x={value.format(path=path)}"])
    assert str(refused.value).startswith(message.format(path=path))


def test_standard_input_is_read_by_one_input_only(monkeypatch):
    import io

    from toolpath.planner.interfaces.cli.shared import CommandLineError, parse_inputs

    monkeypatch.setattr("sys.stdin", io.StringIO("CCO"))
    with pytest.raises(CommandLineError, match="--input b=@-: standard input is read by another --input already"):
        parse_inputs(["a=@-", "b=@-"])


def test_run_reads_a_large_input_from_a_file_and_shows_it_cut_short(tmp_path):
    molecules = ["C" * length + "O" for length in range(1, 41)]
    (tmp_path / "molecules.json").write_text(json.dumps(molecules))
    status, out, err = run_cli("run", "cluster these molecules by structural similarity", "--input", f"smiles_list=@{tmp_path / 'molecules.json'}")
    assert status == 0, err
    cell, result = out.split("Result (ok):")
    assert "characters, cut short here; the cell runs the whole value" in cell and f"'{molecules[-1]}'" not in cell
    assert f"'{molecules[-1]}'" in result  # the kernel had every molecule


def test_cell_reads_an_input_from_standard_input():
    status, out, err = run_cli("cell", "--goal", "chemistry.descriptors_computed", "--input", "smiles=@-", stdin=ASPIRIN + "\n")
    assert status == 0, err
    assert f"smiles = {ASPIRIN!r}\n" in out


def test_run_without_inputs_names_the_inputs_of_the_cheapest_plan_then_the_alternatives():
    status, out, err = run_cli("run", LIPINSKI)
    assert status == 2 and out == ""
    assert err == (
        "toolpath: the plan needs inputs that were not given: pass --input smiles=VALUE (str, for parse_molecule) for the plan parse_molecule -> compute_descriptors (cost 2); "
        "or, for the plan filter_drug_like -> parse_molecule -> compute_descriptors (cost 3), "
        "pass --input smiles_list=VALUE (list[str], for filter_drug_like) --input smiles=VALUE (str, for parse_molecule)\n"
    )
    assert_advice_fits("run", err)
    status, out, _ = run_cli("run", LIPINSKI, "--json")
    assert status == 2
    options = json.loads(out)["input_options"]
    assert [[given["name"] for given in option["inputs"]] for option in options] == [["smiles"], ["smiles_list", "smiles"]]
    assert options[0] == {
        "inputs": [{"name": "smiles", "type": "str", "tool": "parse_molecule"}],
        "plan": ["parse_molecule", "compute_descriptors"],
        "cost": 2.0,
    }


def test_cell_without_inputs_warns_that_one_input_gives_a_smaller_plan():
    status, out, err = run_cli("cell", LIPINSKI)
    assert status == 0 and "filter_drug_like(smiles_list=smiles_list)" in out
    assert (
        "warning: the task plans otherwise with inputs: pass --input smiles=VALUE (str, for parse_molecule) for the plan parse_molecule -> compute_descriptors (cost 2)"
        in err
    )
    assert_advice_fits("cell", err)
    # When the inputs it lacks are just the unbound parameters, the per-parameter warnings say it all.
    _, _, single = run_cli("cell", "cluster these molecules by structural similarity")
    assert "plans otherwise" not in single and "smiles_list (list[str], for compute_fingerprints) is unbound" in single


def test_a_carriage_return_in_the_task_cannot_hide_the_start_of_the_task_line():
    status, stdout, stderr = run_cli("run", "is aspirin drug-like?\rcheck Lipinski's rule", "--input", "smiles=CC(=O)Oc1ccccc1C(=O)O")
    assert status == 0, stderr
    # Text mode reads a carriage return as a line end: the whole task on the Task line means none was printed.
    assert re.findall(r"^Task: (.*)$", stdout, re.MULTILINE) == ["is aspirin drug-like? check Lipinski's rule"]
