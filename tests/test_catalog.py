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
