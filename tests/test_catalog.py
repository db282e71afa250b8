import contextlib
import json
import os
import textwrap
import threading

import pytest

from toolpath.catalogs import default_catalog_paths
from toolpath.registry import CatalogError, lint_catalogs, load_catalogs, read_catalog
from toolpath.registry.catalog_packages import module_paths

GOOD = """\
domain: demo
package: demo_tools
states:
  - token: demo.done
    description: done
    affordances: [finish the job]
tools:
  - name: finish
    description: Finish.
    state_transition: {requires: [], produces: [demo.done]}
"""


def write(directory, name, text):
    path = directory / name
    path.write_text(textwrap.dedent(text))
    return path


def test_shipped_chemistry_catalog_loads(chemistry):
    assert len(chemistry.registry) == 8
    expected = {
        "molecule_parsed",
        "groups_identified",
        "descriptors_computed",
        "candidates_filtered",
        "fingerprints_computed",
        "similarity_computed",
        "molecules_clustered",
        "descriptors_tabulated",
    }
    assert set(chemistry.states) == {f"chemistry.{name}" for name in expected} | {"tabular.file_given", "tabular.table_loaded"}
    parse = chemistry.registry.get_tool_by_server_and_name("chemistry", "parse_molecule")
    assert parse.module == "toolpath.catalogs.chemistry.parse_molecule"
    assert all(state.description and (state.affordances or state.input) for state in chemistry.states.values())


def test_server_defaults_to_domain_and_module_to_package(tmp_path):
    catalog = read_catalog(write(tmp_path, "demo.yaml", GOOD))
    (finish,) = catalog.tools
    assert finish.server_name == "demo" and finish.module == "demo_tools.finish"


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_a_loaded_catalog_points_at_its_lines_while_its_file_is_unchanged(tmp_path, suffix):
    import yaml

    text = GOOD if suffix == ".yaml" else json.dumps(yaml.safe_load(GOOD), indent=2)
    path = tmp_path / f"demo{suffix}"
    path.write_text(text)
    first_loaded, second_loaded = load_catalogs([path]), load_catalogs([path])
    (catalog,) = first_loaded.catalogs
    expected_line = next(number for number, line in enumerate(text.splitlines(), start=1) if "finish" in line and "name" in line)
    assert catalog.problem(["tools", 0, "name"], "a problem").line == expected_line
    assert first_loaded.registry.get_tool_by_name("finish") is catalog.tools[0]
    path.write_text("\n\n" + text)  # every line moves down two
    (changed,) = second_loaded.catalogs
    assert changed.problem(["tools", 0, "name"], "a problem").line is None  # not a line of the new text


def test_json_catalog_loads(tmp_path):
    import yaml

    path = tmp_path / "demo.json"
    path.write_text(json.dumps(yaml.safe_load(GOOD)))
    assert read_catalog(path).tools[0].name == "finish"


def test_yaml_syntax_error_names_line_and_column(tmp_path):
    path = write(tmp_path, "bad.yaml", "domain: demo\nstates: [\n  {token: a\n")
    with pytest.raises(CatalogError) as caught:
        read_catalog(path)
    (problem,) = caught.value.problems
    assert problem.path == str(path) and problem.line is not None
    assert "invalid YAML" in str(caught.value)


def test_validation_error_names_field_path_and_line(tmp_path):
    text = GOOD.replace("state_transition: {requires: [], produces: [demo.done]}", "state_transition: {requires: demo.start, produces: [demo.done]}")
    path = write(tmp_path, "bad.yaml", text)
    with pytest.raises(CatalogError) as caught:
        read_catalog(path)
    (problem,) = caught.value.problems
    assert problem.field == "tools[0].state_transition.requires"
    assert problem.line == 10
    assert "demo.start" in problem.message


def test_unknown_field_and_missing_domain_are_both_reported(tmp_path):
    text = GOOD.replace("domain: demo\n", "").replace("description: Finish.", "descripton: Finish.")
    with pytest.raises(CatalogError) as caught:
        read_catalog(write(tmp_path, "bad.yaml", text))
    fields = {problem.field for problem in caught.value.problems}
    assert {"domain", "tools[0].descripton"} <= fields


def test_tool_without_module_or_package_is_an_error(tmp_path):
    text = GOOD.replace("package: demo_tools\n", "")
    with pytest.raises(CatalogError, match="package"):
        read_catalog(write(tmp_path, "bad.yaml", text))


def test_loading_is_atomic_across_files(tmp_path):
    good = write(tmp_path, "good.yaml", GOOD)
    bad = write(tmp_path, "bad.yaml", "domain: other\ntools: [{name: x, cost: cheap}]\n")
    with pytest.raises(CatalogError) as caught:
        load_catalogs([good, bad])
    assert all(problem.path == str(bad) for problem in caught.value.problems)


def test_conflicting_state_definitions_across_files(tmp_path):
    first = write(tmp_path, "one.yaml", GOOD)
    second = write(tmp_path, "two.yaml", "domain: other\npackage: other\nstates: [{token: demo.done, description: different}]\n")
    with pytest.raises(CatalogError, match="declared, differently"):
        load_catalogs([first, second])


def test_missing_file_is_a_catalog_error(tmp_path):
    with pytest.raises(CatalogError, match="cannot read"):
        load_catalogs([tmp_path / "nope.yaml"])


def test_default_catalog_paths_are_shipped_yaml():
    paths = default_catalog_paths()
    assert [path.parent.name for path in paths] == ["chemistry", "tabular"]


def test_duplicate_yaml_keys_are_an_error_not_last_one_wins(tmp_path):
    text = GOOD.replace("    description: Finish.\n", "    description: Finish.\n    description: Again.\n")
    with pytest.raises(CatalogError, match="duplicate key 'description'") as caught:
        read_catalog(write(tmp_path, "dup.yaml", text))
    assert caught.value.problems[0].line == 10


def test_duplicate_json_keys_are_an_error(tmp_path):
    path = tmp_path / "dup.json"
    path.write_text('{"domain": "a", "domain": "b"}')
    with pytest.raises(CatalogError, match="duplicate key 'domain'"):
        read_catalog(path)


def test_alias_bomb_is_refused_quickly(tmp_path):
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * 10) + "]" for level in range(1, 9)]
    with pytest.raises(CatalogError, match="expands to"):
        read_catalog(write(tmp_path, "bomb.yaml", "\n".join(lines) + "\ndomain: demo\n"))


def test_recursive_alias_is_refused(tmp_path):
    with pytest.raises(CatalogError, match="refers to a node that contains it"):
        read_catalog(write(tmp_path, "loop.yaml", "domain: &d [*d]\n"))


def test_same_file_twice_loads_once(tmp_path):
    path = write(tmp_path, "demo.yaml", GOOD)
    loaded = load_catalogs([path, tmp_path / "." / "demo.yaml"])
    assert len(loaded.registry) == 1


# The shape agora-workbench 0.2's chemistry example server serves at GET /catalog (its
# code_execution/server.py serializer): return_spec is a list of named values, server_name is null
# on each tool, tools have an id, skills are workflow skills, and no state is declared.
AGORA_CHEMISTRY = {
    "server_name": "chemistry",
    "tools": [
        {
            "name": "parse_molecule",
            "description": "Parse a SMILES string.",
            "required_parameters": [{"name": "smiles", "type": "builtins.str", "description": "SMILES string to parse", "default": None}],
            "optional_parameters": [],
            "return_spec": [
                {"name": "canonical_smiles", "type": "builtins.str", "description": "Canonical SMILES"},
                {"name": "molecular_weight", "type": "builtins.float", "description": "Molecular weight in Da"},
            ],
            "module": "chemistry_tools.parse_molecule",
            "server_name": None,
            "state_transition": {"requires": [], "produces": ["chemistry.molecule_parsed"]},
            "affordances": ["parse a SMILES string", "get the molecular weight of a compound"],
            "id": 0,
        },
        {
            "name": "compute_descriptors",
            "description": "Compute descriptors of a molecule.",
            "required_parameters": [{"name": "smiles", "type": "builtins.str", "description": "SMILES string", "default": None}],
            "optional_parameters": [{"name": "include_3d", "type": "builtins.bool", "description": "also 3D descriptors", "default": False}],
            "return_spec": [{"name": "descriptors", "type": "builtins.dict", "description": "descriptor values"}],
            "module": "chemistry_tools.compute_descriptors",
            "server_name": None,
            "state_transition": {"requires": ["chemistry.molecule_parsed"], "produces": ["chemistry.descriptors_computed"]},
            "affordances": ["compute LogP", "check Lipinski's rule of five"],
            "id": 1,
        },
    ],
    "skills": [
        {
            "name": "chemistry-rdkit",
            "description": "Molecular analysis with RDKit.",
            "domain": "chemistry",
            "states": ["chemistry.molecule_parsed", "chemistry.descriptors_computed", "chemistry.molecules_clustered"],
        }
    ],
}


def test_agora_workbench_served_catalog_loads_as_served(tmp_path):
    path = tmp_path / "agora.json"
    path.write_text(json.dumps(AGORA_CHEMISTRY))
    # The skill lists a state no tool of this payload produces: a warning, not a failure to load.
    assert [(finding.code, "chemistry.molecules_clustered" in finding.message) for finding in lint_catalogs([path])] == [("TP002", True)]
    catalog = read_catalog(path)
    parse, describe = catalog.tools
    assert catalog.domain == "chemistry" and {parse.server_name, describe.server_name} == {"chemistry"}
    assert parse.module == "chemistry_tools.parse_molecule" and [parameter.type for parameter in describe.parameters] == ["str", "bool"]
    # several named values become one dict carrying the produced state; one keeps its name
    assert (parse.return_spec.name, parse.return_spec.type, parse.return_spec.state) == ("molecule_parsed", "dict", "chemistry.molecule_parsed")
    assert "molecular_weight (float): Molecular weight in Da" in parse.return_spec.description
    assert (describe.return_spec.name, describe.return_spec.type, describe.return_spec.state) == ("descriptors", "dict", "chemistry.descriptors_computed")
    states = {state.token: state for state in catalog.states}
    assert set(states) == {"chemistry.molecule_parsed", "chemistry.descriptors_computed", "chemistry.molecules_clustered"}
    assert states["chemistry.descriptors_computed"].affordances == ("compute LogP", "check Lipinski's rule of five")
    assert "compute_descriptors" in states["chemistry.descriptors_computed"].description
    (skill,) = catalog.skills
    assert (skill.name, skill.domain) == ("chemistry-rdkit", "chemistry") and len(skill.states) == 3


def test_agora_workbench_errors_point_at_the_served_fields(tmp_path):
    served = json.loads(json.dumps(AGORA_CHEMISTRY))
    served["tools"][1]["required_parameters"][0]["type"] = "builtins.str["
    del served["tools"][0]["id"]  # optional
    served["tools"][0]["cost"] = "cheap"
    path = tmp_path / "agora.json"
    path.write_text(json.dumps(served))
    findings = {finding.code: finding for finding in lint_catalogs([path])}
    assert findings["TP006"].field == "tools[1].required_parameters[0].type"
    assert findings["TP101"].field == "tools[0].cost" and findings["TP101"].line is not None


def test_a_skill_listing_an_undeclared_state_is_tp001(tmp_path):
    path = tmp_path / "skills.yaml"
    path.write_text(
        "domain: d\npackage: p\nstates: [{token: d.ready, description: ready}]\n"
        "tools: [{name: t, description: t, state_transition: {produces: [d.ready]}}]\n"
        "skills: [{name: getting-ready, states: [d.ready, d.redy]}]\n"
    )
    (finding,) = lint_catalogs([path])
    assert (finding.code, finding.field) == ("TP001", "skills[0].states[1]") and "did you mean 'd.ready'?" in finding.message


def test_shipped_schema_is_current_and_shipped_catalogs_validate_against_it():
    from pathlib import Path

    import jsonschema
    import yaml

    from toolpath.registry import catalog_json_schema

    shipped = Path(default_catalog_paths()[0]).parent.parent / "catalog.schema.json"
    schema = json.loads(shipped.read_text())
    assert schema == catalog_json_schema(), "catalogs/catalog.schema.json is stale: regenerate it with `toolpath schema`"
    for path in default_catalog_paths():
        text = path.read_text()
        assert text.startswith("# yaml-language-server: $schema=../catalog.schema.json")
        jsonschema.validate(yaml.safe_load(text), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"domain": "x", "tools": [{"name": "t", "cost": "cheap"}]}, schema)


def test_json_positions_survive_tab_indentation_and_duplicate_keys(tmp_path):
    import yaml

    document = yaml.safe_load(GOOD)
    document["tools"][0]["cost"] = "cheap"
    path = tmp_path / "tabs.json"
    path.write_text(json.dumps(document, indent="\t"))
    with pytest.raises(CatalogError) as caught:
        read_catalog(path)
    (problem,) = caught.value.problems
    assert problem.field == "tools[0].cost" and problem.line is not None
    assert path.read_text().splitlines()[problem.line - 1].strip().startswith('"cost"')
    duplicated = tmp_path / "dup_lines.json"
    duplicated.write_text('{\n\t"domain": "a",\n\t"tools": [],\n\t"domain": "b"\n}')
    with pytest.raises(CatalogError) as caught:
        read_catalog(duplicated)
    assert (caught.value.problems[0].line, caught.value.problems[0].column) == (4, 2)


def test_cost_must_be_a_number_not_a_string_or_boolean(tmp_path):
    for value in ('"3"', "true"):
        with pytest.raises(CatalogError, match="cost"):
            read_catalog(write(tmp_path, "cost.yaml", GOOD.replace("    description: Finish.\n", f"    description: Finish.\n    cost: {value}\n")))


def refused_without_waiting(read, seconds=10):
    """Run ``read()`` in a thread and return the exception it raised; fail if it is still running
    after ``seconds`` (a read that blocks on a pipe would otherwise hang the whole test run)."""
    outcome = {}

    def target():
        try:
            read()
        except BaseException as error:  # whatever it is, the test asserts on it
            outcome["error"] = error

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"reading the catalog was still blocked after {seconds} s"
    return outcome.get("error")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes need POSIX")
def test_named_pipe_is_refused_at_once(tmp_path):
    fifo = tmp_path / "catalog.yaml"
    os.mkfifo(fifo)
    try:
        error = refused_without_waiting(lambda: read_catalog(fifo))
    finally:
        # If a read is blocked on the pipe, opening its other end lets it finish.
        with contextlib.suppress(OSError):
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    assert isinstance(error, CatalogError)
    (problem,) = error.problems
    assert problem.code == "TP100" and "named pipe" in problem.message and "not a regular file" in problem.message


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_device_is_refused_without_reading_it():
    error = refused_without_waiting(lambda: load_catalogs(["/dev/zero"]))
    assert isinstance(error, CatalogError)
    (problem,) = error.problems
    assert problem.code == "TP100" and "character device" in problem.message


def test_directory_is_refused_as_not_a_regular_file(tmp_path):
    with pytest.raises(CatalogError, match="a directory, not a regular file") as caught:
        read_catalog(tmp_path)
    assert caught.value.problems[0].code == "TP100"


def test_a_missing_catalog_is_refused_naming_where_it_was_looked_for(tmp_path):
    with pytest.raises(CatalogError) as caught:
        read_catalog(tmp_path / "nope.yaml")
    (problem,) = caught.value.problems
    assert problem.code == "TP100" and f"it does not exist (looked for {tmp_path / 'nope.yaml'}); check the path" in problem.message
    assert "Errno" not in problem.message


def test_oversize_catalog_is_refused_with_how_to_raise_the_limit(tmp_path, monkeypatch):
    from toolpath.registry import load_checked

    path = write(tmp_path, "big.yaml", GOOD)
    size = path.stat().st_size
    assert read_catalog(path, max_bytes=size).tools  # exactly at the limit loads
    for load in (lambda: read_catalog(path, max_bytes=size - 1), lambda: load_catalogs([path], max_bytes=100), lambda: load_checked([path], max_bytes=100)):
        with pytest.raises(CatalogError) as caught:
            load()
        (problem,) = caught.value.problems
        assert problem.code == "TP100" and f"{size:,} bytes" in problem.message
        assert "TOOLPATH_MAX_CATALOG_BYTES" in problem.message and "max_bytes" in problem.message
    monkeypatch.setenv("TOOLPATH_MAX_CATALOG_BYTES", "100")
    with pytest.raises(CatalogError, match="over the limit of 100 bytes"):
        load_catalogs([path])
    assert len(load_catalogs([path], max_bytes=size).registry) == 1  # the argument wins over the variable
    monkeypatch.setenv("TOOLPATH_MAX_CATALOG_BYTES", str(size))
    assert len(load_catalogs([path]).registry) == 1
    if os.path.exists("/proc/self/status"):  # a regular file whose size reads as 0: the read itself stops
        with pytest.raises(CatalogError, match="over the limit of 10 bytes"):
            read_catalog("/proc/self/status", max_bytes=10)
    monkeypatch.setenv("TOOLPATH_MAX_CATALOG_BYTES", "lots")
    with pytest.raises(CatalogError, match="TOOLPATH_MAX_CATALOG_BYTES='lots' is not a positive number"):
        read_catalog(path)


def test_validate_cli_honours_the_size_limit_variable(tmp_path, monkeypatch, capsys):
    from toolpath.planner.interfaces.cli.main import main

    path = write(tmp_path, "demo.yaml", GOOD)
    monkeypatch.setenv("TOOLPATH_MAX_CATALOG_BYTES", "64")
    assert main(["validate", str(path)]) == 1
    assert "TP100" in capsys.readouterr().out
    monkeypatch.setenv("TOOLPATH_MAX_CATALOG_BYTES", str(2**20))
    assert main(["validate", str(path)]) == 0


TOO_MANY_DIGITS = "7" * 5000


@pytest.mark.parametrize(
    "value",
    [TOO_MANY_DIGITS, "-" + TOO_MANY_DIGITS, "0x" + "f" * 5000, "0b" + "1" * 20000, "1" + ":30" * 3000],
    ids=["decimal", "negative", "hexadecimal", "binary", "sexagesimal"],
)
def test_yaml_integer_longer_than_python_allows_is_an_error_at_its_position(tmp_path, value):
    text = GOOD.replace("    description: Finish.\n", f"    description: Finish.\n    cost: {value}\n")
    with pytest.raises(CatalogError) as caught:
        read_catalog(write(tmp_path, "huge.yaml", text))
    (problem,) = caught.value.problems
    assert (problem.line, problem.column, problem.code) == (10, 11, "TP100")
    assert "4,300 digits" in problem.message and "quote it" in problem.message


def test_yaml_default_too_large_to_print_is_refused(tmp_path):
    # 0xfff... of 4,000 digits parses, but no one could print it (or a signature showing it).
    text = GOOD.replace(
        "    description: Finish.\n", "    description: Finish.\n    optional_parameters: [{name: size, type: int, default: 0x" + "f" * 4000 + "}]\n"
    )
    with pytest.raises(CatalogError) as caught:
        read_catalog(write(tmp_path, "huge.yaml", text))
    (problem,) = caught.value.problems
    assert (problem.line, problem.column) == (10, 60) and "4,300 digits" in problem.message


def test_json_integer_longer_than_python_allows_is_an_error_at_its_position(tmp_path):
    import yaml

    path = tmp_path / "huge.json"
    document = yaml.safe_load(GOOD)
    document["tools"][0]["cost"] = 1
    path.write_text(json.dumps(document, indent=2).replace('"cost": 1', f'"cost": {TOO_MANY_DIGITS}'))
    with pytest.raises(CatalogError) as caught:
        read_catalog(path)
    (problem,) = caught.value.problems
    line = next(number for number, text in enumerate(path.read_text().splitlines(), 1) if '"cost"' in text)
    assert (problem.line, problem.column) == (line, 15) and "4,300 digits" in problem.message


def test_impossible_yaml_date_is_an_error_at_its_position(tmp_path):
    text = GOOD.replace("    description: Finish.\n", "    description: Finish.\n    cost: 2024-13-45\n")
    with pytest.raises(CatalogError, match="not a valid date") as caught:
        read_catalog(write(tmp_path, "date.yaml", text))
    assert (caught.value.problems[0].line, caught.value.problems[0].column) == (10, 11)


@pytest.mark.parametrize(
    "old, new, field, character",
    [
        ("- token: demo.done", '- token: "demo.do\\0ne"', "states[0].token", "U+0000"),
        ("produces: [demo.done]", 'produces: ["demo.done\\r"]', "tools[0].state_transition.produces", "U+000D"),
        ("- name: finish", '- name: "fin\\tish"', "tools[0].name", "U+0009"),
        ("    description: Finish.", '    description: Finish.\n    server_name: "demo\\e"', "tools[0].server_name", "U+001B"),
        ("domain: demo", 'domain: "de\\x7fmo"', "domain", "U+007F"),
        ("package: demo_tools", 'package: "demo\\ntools"', "package", "U+000A"),
        (
            "    description: Finish.",
            '    description: Finish.\n    required_parameters: [{name: "smi\\0les", type: str}]',
            "tools[0].required_parameters[0].name",
            "U+0000",
        ),
        (
            "    description: Finish.",
            '    description: Finish.\n    return_spec: {name: done, type: str, state: "demo.\\x85done"}',
            "tools[0].return_spec.state",
            "U+0085",
        ),
        ("    description: Finish.", '    description: Finish.\n    module: "demo_tools.\\0finish"', "tools[0].module", "U+0000"),
        ("    description: Finish.", '    description: Finish.\n    module_override: "demo_tools.fin\\aish"', "tools[0].module_override", "U+0007"),
    ],
)
def test_control_character_in_a_name_or_token_is_refused_with_its_position(tmp_path, old, new, field, character):
    text = GOOD.replace(old, new)
    path = write(tmp_path, "control.yaml", text)
    with pytest.raises(CatalogError) as caught:
        load_catalogs([path])
    (problem,) = caught.value.problems
    assert (problem.code, problem.field) == ("TP101", field)
    assert f"control character {character}; names and tokens must be printable" in problem.message
    key = field.rsplit(".", 1)[-1].split("[")[0]
    assert f"{key}:" in path.read_text().splitlines()[problem.line - 1]


def test_control_character_in_a_json_tool_name_is_refused(tmp_path):
    import yaml

    document = yaml.safe_load(GOOD)
    document["tools"][0]["name"] = "fin\x00ish"
    path = tmp_path / "control.json"
    path.write_text(json.dumps(document, indent=2))
    with pytest.raises(CatalogError) as caught:
        read_catalog(path)
    (problem,) = caught.value.problems
    assert (problem.code, problem.field) == ("TP101", "tools[0].name") and "U+0000" in problem.message
    assert '"name": "fin\\u0000ish"' in path.read_text().splitlines()[problem.line - 1]


def test_unquoted_on_off_yes_no_keys_are_refused_at_their_line_with_quote_it(tmp_path):
    # YAML 1.1 (PyYAML) reads them as True/False, which no catalog field or name can be.
    text = GOOD.replace("    description: done\n", "    description: done\n    no: 3\n") + "mcp_servers:\n  search: {command: srv, env: {on: '1', y: '2'}}\n"
    with pytest.raises(CatalogError) as caught:
        read_catalog(write(tmp_path, "catalog.yaml", text))
    problems = caught.value.problems
    assert [(problem.code, problem.field, problem.line, problem.column) for problem in problems] == [
        ("TP101", "states[0].no", 6, 5),
        ("TP101", "mcp_servers.search.env.on", 13, 32),
    ]
    assert "`no` unquoted is YAML 1.1's boolean False" in problems[0].message and "quote it ('no')" in problems[0].message
    assert "`on` unquoted is YAML 1.1's boolean True" in problems[1].message


def test_quoted_on_key_loads(tmp_path):
    text = GOOD + "mcp_servers:\n  search: {command: srv, env: {'on': '1', \"off\": '0'}}\n"
    assert read_catalog(write(tmp_path, "catalog.yaml", text)).mcp_servers["search"].env == {"on": "1", "off": "0"}


def test_unquoted_boolean_word_where_text_is_expected_says_quote_it(tmp_path):
    text = GOOD.replace("    description: Finish.\n", "    description: Finish.\n    required_parameters: [{name: on, type: str}]\n")
    text = text.replace("requires: []", "requires: [yes]")
    with pytest.raises(CatalogError) as caught:
        read_catalog(write(tmp_path, "catalog.yaml", text))
    by_field = {problem.field: problem for problem in caught.value.problems}
    assert by_field["tools[0].required_parameters[0].name"].line == 10
    assert "`on` unquoted is YAML 1.1's boolean True, not the text 'on': quote it ('on')" in by_field["tools[0].required_parameters[0].name"].message
    assert "quote it ('yes')" in by_field["tools[0].state_transition.requires"].message


def test_a_state_field_name_that_is_not_text_is_a_problem_not_a_crash(tmp_path):
    text = GOOD.replace("    description: done\n", "    description: done\n    3: three\n")
    with pytest.raises(CatalogError) as caught:
        read_catalog(write(tmp_path, "catalog.yaml", text))
    ((field, message),) = [(problem.field, problem.message) for problem in caught.value.problems]
    assert field == "states[0]" and "field names are text, not 3" in message


PARSER_CASES = {
    "valid": GOOD,
    "duplicate key": GOOD.replace("    description: Finish.\n", "    description: Finish.\n    description: Again.\n"),
    "unclosed flow": "domain: demo\nstates: [\n  {token: a\n",
    "bad indentation": "domain: demo\n  states: []\n",
    "tab indentation": "domain: demo\ntools:\n\t- name: x\n",
    "integer too long": GOOD.replace("    description: Finish.\n", f"    description: Finish.\n    cost: {TOO_MANY_DIGITS}\n"),
    "impossible date": GOOD.replace("    description: Finish.\n", "    description: Finish.\n    cost: 2024-02-30\n"),
    "alias and merge": GOOD.replace(
        "    description: Finish.\n",
        "    description: &text Finish.\n    affordances: [*text]\n    return_spec: {<<: {name: done, type: str}, state: demo.done}\n",
    ),
    "recursive alias": "domain: &d [*d]\n",
    "undefined alias": "domain: *nowhere\n",
    "invalid field": GOOD.replace("produces: [demo.done]", "produces: demo.done"),
    "boolean word key": GOOD.replace("    description: Finish.\n", "    description: Finish.\n    on: 1\n"),
    "boolean word value": GOOD.replace("    description: Finish.\n", "    description: Finish.\n    required_parameters: [{name: off, type: str}]\n"),
}


@pytest.mark.parametrize("text", PARSER_CASES.values(), ids=PARSER_CASES.keys())
def test_libyaml_and_the_pure_python_fallback_agree(tmp_path, monkeypatch, text):
    from toolpath.registry import catalog_yaml

    if catalog_yaml.yaml_parser() != "libyaml":
        pytest.skip("PyYAML has no libyaml here: the fallback is the only parser")
    path = write(tmp_path, "catalog.yaml", text)
    outcomes = []
    for loader in (catalog_yaml._YAML_LOADER, catalog_yaml._PurePythonLoader):
        monkeypatch.setattr(catalog_yaml, "_YAML_LOADER", loader)
        try:
            catalog = read_catalog(path)
        except CatalogError as error:
            # The parsers word syntax errors differently ("invalid YAML: ..."); where they point must agree.
            outcomes.append(
                [
                    (problem.code, problem.field, problem.line, problem.column, "invalid YAML" in problem.message or problem.message)
                    for problem in error.problems
                ]
            )
        else:
            outcomes.append([tool.model_dump() for tool in catalog.tools])
    assert outcomes[0] == outcomes[1]


def test_a_sandbox_sees_a_catalogs_own_package_files_not_the_checkout_around_it(tmp_path):
    # A checkout named like the package root (a clone called "project" holding project/catalogs/demo):
    # its .venv, tests and the catalog file are not the package's and stay out of the sandbox.
    checkout = tmp_path / "project"
    package = checkout / "catalogs" / "demo"
    package.mkdir(parents=True)
    for path in (
        checkout / "catalogs" / "__init__.py",
        package / "__init__.py",
        package / "helpers.py",
        checkout / ".venv" / "lib.py",
        checkout / "tests" / "test_x.py",
    ):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
    (package / "greet.py").write_text("def greet(name: str) -> str:\n    return name\n")
    (package / "words.txt").write_text("hello")
    (package / "notes.md").write_text("private")
    catalog = package / "catalog.yaml"
    catalog.write_text(
        "domain: demo\npackage: project.catalogs.demo\npackage_data: [words.txt, '**/*', '.']\n"
        "states:\n  - {token: demo.greeted, description: greeted}\n"
        "tools:\n  - name: greet\n    description: Greet.\n    required_parameters: [{name: name, type: str}]\n    state_transition: {produces: [demo.greeted]}\n"
    )
    seen = {os.path.relpath(path, checkout) for path in module_paths([read_catalog(catalog)])}
    # '**/*' and '.' name the package's files, so notes.md is shown as its author asked; never the catalog, a directory or the checkout.
    assert seen == {
        "catalogs/__init__.py",
        "catalogs/demo/__init__.py",
        "catalogs/demo/helpers.py",
        "catalogs/demo/greet.py",
        "catalogs/demo/words.txt",
        "catalogs/demo/notes.md",
    }


def test_a_catalog_over_the_default_limit_is_refused_naming_the_file_its_size_the_limit_and_the_variable(tmp_path, monkeypatch, capsys):
    import re

    import yaml

    from toolpath.planner.interfaces.cli.main import main

    monkeypatch.delenv("TOOLPATH_MAX_CATALOG_BYTES", raising=False)
    path = tmp_path / "big.json"
    text = json.dumps(yaml.safe_load(GOOD))
    path.write_text(text + " " * (16 * 2**20 + 1 - len(text)))  # one byte over 16 MiB, still a valid catalog
    assert main(["validate", str(path)]) == 1
    shown = capsys.readouterr().out
    assert f"{path}: TP100" in shown and "the file is 16,777,217 bytes" in shown and "over the limit of 16,777,216 bytes (16 MiB)" in shown
    raised = re.search(r"set the environment variable TOOLPATH_MAX_CATALOG_BYTES=(\d+)", shown)
    assert raised, shown
    monkeypatch.setenv("TOOLPATH_MAX_CATALOG_BYTES", raised.group(1))  # doing what the message says loads it
    assert main(["validate", str(path)]) == 0
