import json
import textwrap

from toolpath.catalogs import default_catalog_paths
from toolpath.registry import lint_catalogs


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
    assert (by_code["TP001"].line, by_code["TP001"].column) == (13, 47) and by_code["TP001"].field == "tools[0].state_transition.requires[1]"
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


def test_import_check_uses_the_package_roots_and_survives_noisy_or_exiting_modules(tmp_path, capsys):
    package = tmp_path / "noisy"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "talk.py").write_text("print('NOISE')\ndef talk():\n    pass\n")
    (package / "quit.py").write_text("import sys\nsys.exit(3)\n")
    path = catalog(
        package,
        """\
        domain: noisy
        package: noisy
        states: [{token: noisy.a, description: a}, {token: noisy.b, description: b}]
        tools:
          - {name: talk, description: prints on import, state_transition: {produces: [noisy.a]}}
          - {name: quit, description: exits on import, state_transition: {produces: [noisy.b]}}
        """,
    )
    findings = lint_catalogs([path], import_modules=True)
    assert [(finding.code, "SystemExit" in finding.message) for finding in findings] == [("TP007", True)]
    assert "NOISE" not in capsys.readouterr().out


def test_a_parameter_state_no_catalog_declares_is_an_error(tmp_path):
    path = catalog(
        tmp_path,
        """\
        domain: p
        package: p
        states: [{token: p.a, description: a}, {token: p.b, description: b}]
        tools:
          - {name: first, description: makes a, return_spec: {name: item, type: str, state: p.a}, state_transition: {produces: [p.a]}}
          - name: second
            description: uses a
            required_parameters: [{name: item, type: str, state: p.aa}]
            state_transition: {requires: [p.a], produces: [p.b]}
        """,
    )
    (finding,) = lint_catalogs([path])
    assert finding.code == "TP001" and finding.field == "tools[1].required_parameters[0].state" and "'p.aa'" in finding.message


def test_two_tools_sharing_one_function_is_an_error(tmp_path):
    path = catalog(
        tmp_path,
        """\
        domain: w
        states: [{token: w.a, description: a}, {token: w.b, description: b}]
        tools:
          - {name: get-forecast, description: dash, module: onemod, state_transition: {produces: [w.a]}}
          - {name: get_forecast, description: underscore, module: onemod, state_transition: {produces: [w.b]}}
        """,
    )
    (finding,) = lint_catalogs([path])
    assert finding.code == "TP105" and "'get-forecast' and 'get_forecast'" in finding.message


def test_workspaces_refuse_catalogs_with_lint_errors(tmp_path):
    import pytest

    from toolpath.planner import Workspace
    from toolpath.registry import CatalogError

    path = catalog(tmp_path, "domain: d\npackage: p\ntools: [{name: t, description: t, state_transition: {produces: [d.ghost]}}]\n")
    with pytest.raises(CatalogError, match="TP001"):
        Workspace.open([path])
    warned_only = catalog(
        tmp_path, "domain: d\npackage: p\nstates: [{token: d.a, description: a}]\ntools: [{name: t, state_transition: {produces: [d.a]}}]\n", "warned.yaml"
    )
    assert len(Workspace.open([warned_only]).loaded.registry) == 1


def test_an_error_in_one_file_does_not_blame_another_for_its_states(tmp_path):
    broken = catalog(
        tmp_path, "domain: a\npackage: a\nstates: [{token: x.s, description: s}]\ntools: [{name: t, cost: -1, state_transition: {produces: [x.s]}}]\n", "a.yaml"
    )
    user = catalog(
        tmp_path,
        "domain: b\npackage: b\nstates: [{token: x.t, description: t}]\ntools: [{name: u, description: u, state_transition: {requires: [x.s], produces: [x.t]}}]\n",
        "b.yaml",
    )
    findings = lint_catalogs([broken, user])
    assert "TP001" not in codes(findings) and "TP101" in codes(findings)


def test_one_invalid_item_does_not_hide_the_problems_of_the_others(tmp_path):
    path = catalog(
        tmp_path,
        """\
        domain: e
        package: e
        states: [{token: e.a, description: a}]
        tools:
          - {name: broken, cost: -1, state_transition: {produces: [e.a]}}
          - {name: typo, description: t, state_transition: {requires: [e.ghost], produces: [e.a]}}
          - {name: typed, description: t, required_parameters: [{name: x, type: "list[int"}], state_transition: {produces: [e.a]}}
        """,
    )
    assert {"TP101", "TP001", "TP006"} <= set(codes(lint_catalogs([path])))


def test_findings_after_an_invalid_item_point_at_their_own_item(tmp_path):
    path = catalog(
        tmp_path,
        """\
        domain: e
        package: e
        states:
          - {token: e.bad, description: 3}
          - {token: e.lonely, description: no tool makes it}
        tools:
          - {name: bad, cost: "x"}
          - {name: good, description: fine, state_transition: {requires: [e.ghost]}}
        """,
    )
    found = {(finding.code, finding.field, finding.line) for finding in lint_catalogs([path])}
    assert ("TP002", "states[1].token", 5) in found  # not states[0], line 4
    assert ("TP004", "tools[1].state_transition", 8) in found  # not tools[0], line 7
    assert ("TP001", "tools[1].state_transition.requires[0]", 8) in found


def test_drift_between_catalog_and_code_gets_a_rule_each(tmp_path):
    package = tmp_path / "drift_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "load_table.py").write_text("def load_table(path: str, sep: str) -> dict:\n    return {}\n")
    (package / "describe.py").write_text("def describe(table: dict) -> str:\n    return ''\n")
    path = catalog(
        tmp_path,
        """\
        domain: drift
        package: drift_pkg
        states:
          - {token: drift.loaded, description: A table is loaded.}
          - {token: drift.described, description: A table is described.}
        tools:
          - name: load_table
            description: Load a table.
            required_parameters: [{name: csv_path, type: str}]
            state_transition: {requires: [], produces: [drift.loaded]}
          - name: describe
            description: Describe a table.
            required_parameters: [{name: table, type: strng, state: drift.loaded}]
            return_spec: {name: summary, type: str, state: drift.loaded}
            state_transition: {requires: [drift.loaded], produces: [drift.described]}
        """,
    )
    without_import = lint_catalogs([path])
    assert codes(without_import) == ["TP008", "TP009"]
    with_import = {finding.code: finding for finding in lint_catalogs([path], import_modules=True)}
    assert sorted(with_import) == ["TP008", "TP009", "TP010", "TP011", "TP012"]
    assert (
        "no parameter 'csv_path'; did you mean 'path'?" in with_import["TP010"].message and with_import["TP010"].field == "tools[0].required_parameters[0].name"
    )
    assert "requires 'sep', which the catalog does not declare" in with_import["TP011"].message
    assert "'strng' is not a builtin" in with_import["TP012"].message and "did you mean 'str'?" in with_import["TP012"].message
    assert "does not produce that state" in with_import["TP008"].message and with_import["TP008"].line == 14
    assert "declares no return_spec" in with_import["TP009"].message and "drift.loaded" in with_import["TP009"].message


def test_a_cycle_nothing_starts_is_named_once_and_the_tools_it_blocks_point_to_it(tmp_path):
    path = catalog(
        tmp_path,
        """\
        domain: loop
        package: loop_pkg
        states:
          - {token: loop.a, description: a}
          - {token: loop.b, description: b}
          - {token: loop.done, description: done}
        tools:
          - {name: make_a, description: a, state_transition: {requires: [loop.b], produces: [loop.a]}}
          - {name: make_b, description: b, state_transition: {requires: [loop.a], produces: [loop.b]}}
          - {name: finish, description: f, state_transition: {requires: [loop.a], produces: [loop.done]}}
        """,
    )
    findings = lint_catalogs([path])
    assert codes(findings) == ["TP003", "TP003", "TP003", "TP013"]
    (cycle,) = [finding for finding in findings if finding.code == "TP013"]
    assert "loop.a, loop.b form a cycle" in cycle.message and cycle.line == 4
    assert all("in a cycle nothing starts" in finding.message for finding in findings if finding.code == "TP003")


def test_misspelled_tokens_and_fields_get_the_closest_name(tmp_path):
    path = catalog(
        tmp_path,
        """\
        domain: tab
        package: tab_pkg
        states: [{token: tab.table_loaded, description: loaded}]
        tools:
          - {name: load, description: l, state_transition: {requires: [], produces: [tab.table_loaded]}}
          - {name: use, description: u, state_transition: {requires: [tab.table_loadd], produces: [tab.table_loaded]}}
          - {name: odd, description: o, state_transition: {require: [], produces: [tab.table_loaded]}}
        """,
    )
    by_code = {finding.code: finding for finding in lint_catalogs([path])}
    assert "did you mean 'tab.table_loaded'?" in by_code["TP001"].message
    assert "unknown field; did you mean 'requires'?" in by_code["TP101"].message
    assert "TP003" not in by_code  # the misspelled requirement is reported once, as TP001


def test_an_item_left_out_for_its_own_problem_sets_off_no_cascade(tmp_path):
    path = catalog(
        tmp_path,
        """\
        domain: cas
        package: cas_pkg
        states:
          - {token: cas.ready, description: ready, affordances: {a: 1}}
          - {token: cas.made, description: made}
          - {token: cas.used, description: used}
        tools:
          - {name: make, description: m, cost: cheap, state_transition: {requires: [], produces: [cas.made]}}
          - {name: use, description: u, state_transition: {requires: [cas.made, cas.ready], produces: [cas.used]}}
        """,
    )
    findings = lint_catalogs([path])
    # Only the two invalid fields: no TP001 for the dropped state, no TP002 for what the dropped tool
    # produces, no TP003 for the tool that needs it.
    assert codes(findings) == ["TP101", "TP101"], [str(finding) for finding in findings]


def test_input_states_need_no_producer_and_unblock_the_tools_that_need_them(tmp_path, trip_catalog):
    assert codes(lint_catalogs([trip_catalog(tmp_path / "plain.yaml", input_state=False)])) == ["TP002", "TP003"]
    assert lint_catalogs([trip_catalog(tmp_path / "inputs.yaml")]) == []


def test_a_default_written_yes_for_a_text_parameter_is_tp016_with_quote_it(tmp_path):
    path = catalog(
        tmp_path,
        """\
        domain: demo
        package: demo_pkg
        states:
          - {token: demo.done, description: done}
        tools:
          - name: finish
            description: Finish the job.
            optional_parameters:
              - {name: answer, type: str, default: yes}
              - {name: loud, type: bool, default: off}
              - {name: quoted, type: str, default: 'no'}
            state_transition: {requires: [], produces: [demo.done]}
        """,
    )
    (finding,) = lint_catalogs([path])
    assert (finding.code, finding.severity, finding.field, finding.line) == ("TP016", "warning", "tools[0].optional_parameters[0].default", 9)
    assert "type 'str'" in finding.message and "quote it ('yes')" in finding.message


def test_validate_suggests_names_of_the_right_kind(tmp_path, capsys):
    # A type typo gets type names, a function typo the module's functions, a module typo its
    # package's modules, a state typo the declared states: each from real files, through the CLI.
    from toolpath.planner.interfaces.cli.main import main

    package = tmp_path / "suggestpkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "numbers.py").write_text("def parse_number(text: str) -> int:\n    return int(text)\n\ndef parse_word(text: str) -> str:\n    return text\n")
    path = catalog(
        tmp_path,
        """\
        domain: demo
        package: suggestpkg
        states:
          - {token: demo.text, description: text, input: true}
          - {token: demo.number, description: a number}
        tools:
          - name: parse_numbr
            module: suggestpkg.numbers
            description: Parse a number.
            required_parameters: [{name: text, type: str, state: demo.txt}]
            return_spec: {name: number, type: int, state: demo.number}
            state_transition: {requires: [demo.text], produces: [demo.number]}
          - name: parse_word
            module: suggestpkg.numbrs
            description: Parse a word.
            required_parameters: [{name: text, type: str}]
            state_transition: {requires: [demo.text], produces: [demo.number]}
          - name: parse_number
            module: suggestpkg.numbers
            description: Parse a number, typed.
            required_parameters: [{name: text, type: string}]
            return_spec: {name: number, type: "collections.OrderedDic[str, integer]", state: demo.number}
            state_transition: {requires: [demo.text], produces: [demo.number]}
        """,
    )
    assert main(["validate", "--import", "--json", str(path)]) == 1
    findings = json.loads(capsys.readouterr().out)["findings"]
    messages = {(finding["code"], finding["line"]): finding["message"] for finding in findings}
    assert "has no function 'parse_numbr'; did you mean 'parse_number'?" in messages["TP007", 7]
    assert "did you mean 'demo.text'?" in messages["TP001", 10]
    assert "No module named 'suggestpkg.numbrs'); did you mean 'suggestpkg.numbers'?" in messages["TP007", 13]
    assert "'string' is not a builtin" in messages["TP012", 21] and "did you mean 'str'?" in messages["TP012", 21]
    return_type = [finding["message"] for finding in findings if (finding["code"], finding["line"]) == ("TP012", 22)]
    assert any("'integer'" in message and "did you mean 'int'?" in message for message in return_type)
    assert any("'collections.OrderedDic'" in message and "did you mean 'collections.OrderedDict'?" in message for message in return_type)


def test_approval_always_on_a_tool_that_runs_in_the_kernel_is_an_error_and_on_the_host_is_not(tmp_path):
    path = catalog(
        tmp_path,
        """\
        domain: demo
        package: demo_pkg
        states:
          - {token: demo.paid, description: paid}
        tools:
          - name: pay
            description: Pay an invoice.
            approval: always
            state_transition: {requires: [], produces: [demo.paid]}
          - name: pay_on_host
            description: Pay an invoice from the host.
            approval: always
            binding: host
            state_transition: {requires: [], produces: [demo.paid]}
        """,
    )
    (finding,) = lint_catalogs([path])
    assert (finding.code, finding.severity, finding.field) == ("TP017", "error", "tools[0].approval")
    assert "binding: host" in finding.message
