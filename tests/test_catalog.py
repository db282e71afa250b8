import json
import textwrap

import pytest

from catalogs import default_catalog_paths
from registry import CatalogError, load_catalogs, read_catalog

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
    assert len(chemistry.registry) == 7
    expected = {"molecule_parsed", "groups_identified", "descriptors_computed", "candidates_filtered", "fingerprints_computed", "similarity_computed", "molecules_clustered"}
    assert set(chemistry.states) == {f"chemistry.{name}" for name in expected}
    parse = chemistry.registry.get_tool_by_server_and_name("chemistry", "parse_molecule")
    assert parse.module == "catalogs.chemistry.parse_molecule"
    assert all(state.description and state.affordances for state in chemistry.states.values())


def test_server_defaults_to_domain_and_module_to_package(tmp_path):
    catalog = read_catalog(write(tmp_path, "demo.yaml", GOOD))
    (finish,) = catalog.tools
    assert finish.server_name == "demo" and finish.module == "demo_tools.finish"


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
    assert [path.parent.name for path in paths] == ["chemistry"]


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


def test_agora_workbench_catalog_json(tmp_path):
    served = {
        "server_name": "weather",
        "tools": [
            {
                "name": "get_forecast",
                "description": "Forecast for a city.",
                "required_parameters": [{"name": "city", "type": "builtins.str", "description": "city name"}],
                "optional_parameters": [{"name": "days", "type": "builtins.int", "default": 3}],
                "return_spec": {"name": "forecast", "type": "builtins.list[builtins.dict]"},
                "module": "weather_tools.forecast",
                "state_transition": {"requires": [], "produces": ["weather.forecast_ready"]},
            }
        ],
        "skills": [{"name": "weather.forecast_ready", "description": "A forecast is known.", "affordances": ["plan a trip"]}],
    }
    path = tmp_path / "agora.json"
    path.write_text(json.dumps(served))
    catalog = read_catalog(path)
    (tool,) = catalog.tools
    assert catalog.domain == "weather" and tool.server_name == "weather"
    assert [parameter.type for parameter in tool.parameters] == ["str", "int"]
    assert tool.return_spec.type == "list[dict]"
    assert catalog.states[0].token == "weather.forecast_ready" and catalog.states[0].affordances == ("plan a trip",)


def test_agora_workbench_errors_point_at_skills(tmp_path):
    path = tmp_path / "agora.json"
    path.write_text(json.dumps({"server_name": "w", "tools": [], "skills": [{"name": "w.a", "affordances": "not a list"}]}))
    with pytest.raises(CatalogError) as caught:
        read_catalog(path)
    (problem,) = caught.value.problems
    assert problem.field == "skills[0].affordances"


def test_shipped_schema_is_current_and_shipped_catalogs_validate_against_it():
    import jsonschema
    import yaml
    from pathlib import Path

    from registry import catalog_json_schema

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
