import textwrap

from catalogs import default_catalog_paths
from registry import lint_catalogs


def catalog(tmp_path, text, name="catalog.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def codes(findings):
    return sorted(finding.code for finding in findings)


def test_shipped_catalogs_lint_clean_even_with_imports():
    assert lint_catalogs(default_catalog_paths(), import_modules=True) == []


def test_each_rule_fires_with_file_line_and_field(tmp_path):
    path = catalog(
        tmp_path,
        """\
        domain: demo
        package: demo_pkg
        states:
          - token: demo.start
            description: held from the start
          - token: demo.silent
          - token: demo.done
            affordances: [finish]
        tools:
          - name: finish
            description: Finish the job.
            required_parameters: [{name: items, type: "list[str"}]
            state_transition: {requires: [demo.start, demo.typo], produces: [demo.done]}
          - name: noop
            state_transition: {requires: [], produces: []}
        """,
    )
    findings = lint_catalogs([path])
    by_code = {finding.code: finding for finding in findings}
    assert codes(findings) == ["TP001", "TP002", "TP002", "TP003", "TP004", "TP005", "TP005", "TP006"]
    assert by_code["TP001"].severity == "error" and "'demo.typo'" in by_code["TP001"].message
    assert by_code["TP001"].line == 13 and by_code["TP001"].field == "tools[0].state_transition.requires"
    assert by_code["TP006"].field == "tools[0].required_parameters[0].type" and by_code["TP006"].line == 12
    assert by_code["TP004"].severity == "warning" and "noop" in by_code["TP004"].message
    assert all(finding.path == str(path) for finding in findings)


def test_tokens_declared_in_another_catalog_count(tmp_path):
    states = catalog(tmp_path, "domain: shared\nstates: [{token: shared.ready, description: ready}]\n", "states.yaml")
    tools = catalog(
        tmp_path,
        """\
        domain: work
        package: work_pkg
        tools:
          - name: make_ready
            description: Make things ready.
            state_transition: {produces: [shared.ready]}
        """,
        "tools.yaml",
    )
    assert lint_catalogs([states, tools]) == []
    assert "TP001" in codes(lint_catalogs([tools]))


def test_load_problems_become_findings_and_other_files_are_still_linted(tmp_path):
    broken = catalog(tmp_path, "domain: demo\ntools: [\n", "broken.yaml")
    weak = catalog(tmp_path, "domain: other\npackage: p\ntools: [{name: t, state_transition: {produces: [x.y]}}]\n", "weak.yaml")
    findings = lint_catalogs([broken, weak])
    assert [finding.code for finding in findings if finding.path == str(broken)] == ["TP100"]
    assert "TP001" in codes(finding for finding in findings if finding.path == str(weak))


def test_import_check_names_the_missing_module_and_function(tmp_path, monkeypatch):
    (tmp_path / "lintpkg").mkdir()
    (tmp_path / "lintpkg" / "__init__.py").write_text("")
    (tmp_path / "lintpkg" / "present.py").write_text("def other():\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    path = catalog(
        tmp_path,
        """\
        domain: demo
        package: lintpkg
        states: [{token: demo.a, description: a}, {token: demo.b, description: b}]
        tools:
          - {name: present, description: wrong function name, state_transition: {produces: [demo.a]}}
          - {name: absent, description: no module, state_transition: {produces: [demo.b]}}
        """,
    )
    findings = [finding for finding in lint_catalogs([path], import_modules=True) if finding.code == "TP007"]
    messages = " ".join(finding.message for finding in findings)
    assert len(findings) == 2
    assert "has no function 'present'" in messages and "'lintpkg.absent' cannot be imported" in messages
