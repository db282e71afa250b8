"""Catalog snapshots (issue 57): a large catalog set loaded once is read back by later loads without
parsing or validating it, and behaves exactly as the catalogs loaded from their files."""

from __future__ import annotations

import array
import json
import os
import shutil
import stat
import warnings
from pathlib import Path

import pytest

from toolpath.catalogs import default_catalog_paths
from toolpath.planner import Workspace
from toolpath.planner.planning.plans import NoPlanError, plan
from toolpath.registry import AmbiguousToolNameError, CatalogError, ToolDefinition, catalog_snapshot, import_roots, load_checked
from toolpath.registry.catalog_packages import CatalogSkippedWarning
from toolpath.registry.catalog_snapshot import DamagedSnapshotError, StoredToolRegistry
from toolpath.registry.states import StateTransition

# An HTTP API, an MCP server and a tool name another catalog shares: what a snapshot must keep.
LIBRARY = """\
domain: library
package: library_tools
http_apis:
  shelves:
    base_url: "https://shelves.example.org/api"
    auth: {scheme: api_key, env: SHELVES_KEY, in: header, name: X-Key}
mcp_servers:
  archive: {command: archive-server, args: ["--read-only"], env: {ARCHIVE_MODE: quiet}}
states:
  - {token: library.title_given, description: "A book title the reader has.", input: true, affordances: ["a book title"]}
  - {token: library.book_found, description: "The shelf record of a book.", affordances: ["find a book on the shelves"]}
  - {token: library.loan_drafted, description: "A loan slip ready to sign.", affordances: ["borrow a book", "lend a book to a reader"]}
tools:
  - name: find_book
    description: "Look a book up on the shelves by its title"
    http: {api: shelves, method: GET, path: /books, query: [title]}
    required_parameters: [{name: title, type: str, state: library.title_given}]
    state_transition: {requires: [library.title_given], produces: [library.book_found]}
  - name: draft_loan
    description: "Draft a loan slip for a book that was found"
    mcp_server: archive
    required_parameters: [{name: book, type: dict, state: library.book_found}]
    optional_parameters: [{name: weeks, type: int, default: 3}]
    state_transition: {requires: [library.book_found], produces: [library.loan_drafted]}
  - name: summarize
    description: "Summarize the shelf record of a book in two lines"
    mcp_server: archive
    required_parameters: [{name: book, type: dict, state: library.book_found}]
    cost: 2
    state_transition: {requires: [library.book_found], produces: [library.loan_drafted]}
"""

# A second catalog whose tool shares a name with one above, and which needs a module.
NOTES = """\
domain: notes
package: notes_tools
requirements: {modules: [snapshot_test_notes_module]}
states:
  - {token: notes.text_given, description: "Some text the user wrote.", input: true}
  - {token: notes.summary_written, description: "A short summary of a text.", affordances: ["summarize my notes"]}
tools:
  - name: summarize
    description: "Summarize a text in a few sentences"
    module: snapshot_test_notes_module
    required_parameters: [{name: text, type: str, state: notes.text_given}]
    state_transition: {requires: [notes.text_given], produces: [notes.summary_written]}
"""


@pytest.fixture()
def snapshot_home(tmp_path, monkeypatch):
    """A home of its own, and every load large enough for a snapshot; the notes' module importable."""
    home = tmp_path / "home"
    monkeypatch.setenv("TOOLPATH_HOME", str(home))
    monkeypatch.setattr(catalog_snapshot, "SNAPSHOT_FROM_BYTES", 0)
    modules = tmp_path / "modules"
    modules.mkdir()
    (modules / "snapshot_test_notes_module.py").write_text("def summarize(text):\n    return text[:40]\n")
    monkeypatch.syspath_prepend(str(modules))
    return home


@pytest.fixture()
def catalog_files(tmp_path):
    library = tmp_path / "library.yaml"
    library.write_text(LIBRARY)
    notes = tmp_path / "notes.yaml"
    notes.write_text(NOTES)
    return [*default_catalog_paths(), library, notes]


def _snapshots(home: Path) -> list[Path]:
    directory = home / "catalogs"
    return sorted(child for child in directory.iterdir() if child.is_dir() and not child.name.startswith(".")) if directory.is_dir() else []


def _catalog_fields(loaded) -> list[dict]:
    return [
        {
            "path": catalog.path,
            "domain": catalog.domain,
            "package": catalog.package,
            "states": catalog.states,
            "tools": [tool.model_dump() for tool in catalog.tools],
            "mcp_servers": catalog.mcp_servers,
            "http_apis": catalog.http_apis,
            "skills": catalog.skills,
            "requirements": catalog.requirements,
            "package_data": catalog.package_data,
            "vocabulary": catalog.vocabulary,
        }
        for catalog in loaded.catalogs
    ]


def test_a_catalog_set_loads_from_its_snapshot_as_it_loaded_from_its_files(snapshot_home, catalog_files):
    first = load_checked(catalog_files)
    assert type(first.registry).__name__ == "ToolRegistry" and first.registry.content_key is not None
    assert len(_snapshots(snapshot_home)) == 1

    second = load_checked(catalog_files)
    assert isinstance(second.registry, StoredToolRegistry) and second.registry.content_key == first.registry.content_key
    assert len(second.registry) == len(first.registry)
    assert [tool.model_dump() for tool in second.registry] == [tool.model_dump() for tool in first.registry]
    assert [tool.model_fields_set for tool in second.registry] == [tool.model_fields_set for tool in first.registry]
    assert _catalog_fields(second) == _catalog_fields(first)
    assert second.states == first.states
    # What a kernel needs on its import path, known without reading every tool.
    assert [catalog.top_modules() for catalog in second.catalogs] == [catalog.top_modules() for catalog in first.catalogs]
    assert [catalog.has_host_tools() for catalog in second.catalogs] == [catalog.has_host_tools() for catalog in first.catalogs]
    assert {catalog.domain: catalog.has_host_tools() for catalog in second.catalogs}["library"]  # its HTTP and MCP tools
    assert import_roots(second.catalogs) == import_roots(first.catalogs)
    # One definition per tool, shared by the registry and its catalog.
    library = next(catalog for catalog in second.catalogs if catalog.domain == "library")
    assert library.tools[0] is second.registry.get_tool_by_server_and_name("library", "find_book")
    assert library.tools[-1].name == "summarize" and [tool.name for tool in library.tools[1:]] == ["draft_loan", "summarize"]
    with pytest.raises(IndexError):
        library.tools[3]


def test_a_position_asked_later_is_read_from_the_file_while_it_is_unchanged(snapshot_home, catalog_files):
    def library(loaded):
        return next(catalog for catalog in loaded.catalogs if catalog.domain == "library")

    from_file = library(load_checked(catalog_files)).locator.position(["tools", 1, "name"])
    assert from_file[0] is not None
    assert library(load_checked(catalog_files)).locator.position(["tools", 1, "name"]) == from_file
    stale = library(load_checked(catalog_files))
    catalog_files[-2].write_text(LIBRARY.replace("tools:\n", "\ntools:\n"))
    assert stale.locator.position(["tools", 1, "name"]) == (None, None)  # never a line of another text


def test_lookups_on_a_snapshot_registry_answer_as_on_the_loaded_one(snapshot_home, catalog_files):
    load_checked(catalog_files)
    registry = load_checked(catalog_files).registry
    assert isinstance(registry, StoredToolRegistry)
    with pytest.raises(AmbiguousToolNameError) as caught:
        registry.get_tool_by_name("summarize")
    assert caught.value.servers == ["library", "notes"]
    assert registry.get_tool_by_name("draft_loan").optional_parameters[0].default == 3
    assert registry.get_tool_by_server_and_name("notes", "summarize").module == "snapshot_test_notes_module"
    assert registry.get_name_by_id(0) == next(iter(load_checked(catalog_files).registry)).name
    with pytest.raises(ValueError, match="no tool with id 999999"):
        registry.get_tool_by_id(999999)


def test_a_snapshot_registry_that_changes_is_an_ordinary_registry_from_then_on(snapshot_home, catalog_files):
    load_checked(catalog_files)
    registry = load_checked(catalog_files).registry
    count = len(registry)
    new_id = registry.register_tool(
        ToolDefinition(name="shelve_book", module="library_tools.shelve", state_transition=StateTransition(requires=["library.book_found"]))
    )
    assert new_id == count and len(registry) == count + 1 and registry.content_key is None
    assert registry.get_tool_by_name("shelve_book").id == new_id
    removed = registry.remove_tool_by_name("draft_loan")
    assert removed.name == "draft_loan" and len(registry) == count
    assert [tool.id for tool in registry] == sorted(tool.id for tool in registry)
    assert "draft_loan" not in {tool.name for tool in registry}


def test_plans_and_search_over_a_snapshot_are_those_over_the_files(snapshot_home, catalog_files, monkeypatch, toolpath_home):
    # The session's home holds the shipped catalogs' embeddings: the stored skill indexes go there too.
    monkeypatch.setenv("TOOLPATH_HOME", str(toolpath_home))
    from_files = Workspace.open(catalog_files)
    from_snapshot = Workspace.open(catalog_files)
    assert isinstance(from_snapshot.loaded.registry, StoredToolRegistry)

    def outcome(workspace: Workspace, goal: str) -> object:
        try:
            found = plan(workspace.graph, [goal])
        except NoPlanError as error:
            return str(error)
        return [(step.tool.server_name, step.tool.name) for step in found.steps], found.cost, found.optimal

    for goal in from_files.graph.tokens:
        assert outcome(from_snapshot, goal) == outcome(from_files, goal), goal
    for query, held in [("is this molecule drug-like?", ()), ("borrow a book", ("library.title_given",)), ("plot a column", ())]:
        expected = [hit.to_dict() for hit in from_files.search(query, k=5, held=held)]
        assert [hit.to_dict() for hit in from_snapshot.search(query, k=5, held=held)] == expected
    assert from_snapshot.index.stored is not None and from_snapshot.index.stored.loaded


def test_a_changed_catalog_file_loads_from_itself_not_from_the_old_snapshot(snapshot_home, catalog_files):
    load_checked(catalog_files)
    catalog_files[-2].write_text(LIBRARY.replace("Look a book up on the shelves by its title", "Find a book on the shelves from its title"))
    changed = load_checked(catalog_files)
    assert type(changed.registry).__name__ == "ToolRegistry"
    assert changed.registry.get_tool_by_name("find_book").description == "Find a book on the shelves from its title"
    again = load_checked(catalog_files)
    assert isinstance(again.registry, StoredToolRegistry) and again.registry.get_tool_by_name("find_book").description.startswith("Find a book")
    assert len(_snapshots(snapshot_home)) == 2


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (lambda directory: (directory / "tools.jsonl").write_bytes((directory / "tools.jsonl").read_bytes()[:-40]), "bytes, its manifest says"),
        (lambda directory: (directory / "manifest.json").write_text("[1, 2"), "cannot be used"),
        (lambda directory: (directory / "transitions.json").unlink(), "transitions.json is missing"),
        (lambda directory: (directory / "names.json").write_text("[]"), "names.json has 2 bytes"),
        (lambda directory: (directory / "manifest.json").unlink(), "it has no manifest"),
        (lambda directory: (directory / "manifest.json").write_text("[" * 100_000), "recursion"),  # json's RecursionError
        (lambda directory: _replace_by_named_pipe(directory / "manifest.json"), "manifest cannot be read .manifest.json is not a regular file"),
    ],
)
def test_a_damaged_snapshot_warns_and_the_catalogs_load_from_their_files(snapshot_home, catalog_files, damage, problem):
    expected = [tool.model_dump() for tool in load_checked(catalog_files).registry]
    (directory,) = _snapshots(snapshot_home)
    damage(directory)
    with pytest.warns(RuntimeWarning, match=rf"the stored catalog snapshot .*{directory.name}.*{problem}"):
        loaded = load_checked(catalog_files)
    assert type(loaded.registry).__name__ == "ToolRegistry" and [tool.model_dump() for tool in loaded.registry] == expected
    assert isinstance(load_checked(catalog_files).registry, StoredToolRegistry)  # stored anew


def _replace_by_named_pipe(path: Path) -> None:
    """``path`` replaced by a named pipe no process writes to: reading it would wait forever."""
    path.unlink()
    os.mkfifo(path)


def _change_transitions(directory: Path, change) -> None:
    """Change the parsed ``transitions.json`` (its size in the manifest follows)."""
    stored = json.loads((directory / "transitions.json").read_text())
    change(stored)
    (directory / "transitions.json").write_text(json.dumps(stored))


def _set_array_value(directory: Path, name: str, position: int, value: float) -> None:
    """Write ``value`` at ``position`` of the array ``name`` of the snapshot's transitions.bin, in place."""
    manifest = json.loads((directory / "manifest.json").read_text())
    type_code = catalog_snapshot._ARRAY_TYPES[name]
    itemsize = array.array(type_code).itemsize
    place = manifest["arrays"][name]
    with open(directory / "transitions.bin", "r+b") as stream:
        stream.seek(place["start"] + (position % place["count"]) * itemsize)
        stream.write(array.array(type_code, [value]).tobytes())


def _change_manifest(directory: Path, change) -> None:
    manifest = json.loads((directory / "manifest.json").read_text())
    change(manifest)
    (directory / "manifest.json").write_text(json.dumps(manifest))


@pytest.mark.parametrize(
    ("tamper", "problem"),
    [
        (lambda directory: _set_array_value(directory, "requires", 0, 10**6), "names states outside its"),
        (lambda directory: _set_array_value(directory, "produces", -1, -1), "names states outside its"),
        (lambda directory: _set_array_value(directory, "server_of", 0, 99), "names servers outside its"),
        (lambda directory: _set_array_value(directory, "cost", 1, float("nan")), "costs are not all finite"),
        (lambda directory: _set_array_value(directory, "cost", 1, -2.0), "costs are not all finite"),
        (lambda directory: _set_array_value(directory, "offsets", 2, 10**9), "offsets do not run from 0"),
        (lambda directory: _set_array_value(directory, "requires_ends", 3, 0), "requires are not 34 runs"),
        (lambda directory: _change_manifest(directory, lambda manifest: manifest["arrays"]["produces"].update(count=10**6)), "places produces past"),
        (lambda directory: _change_manifest(directory, lambda manifest: manifest["arrays"]["cost"].update(start="0")), "does not place cost"),
        (lambda directory: _change_manifest(directory, lambda manifest: manifest["arrays"].update(byte_order="middle")), "byte order"),
        (lambda directory: (directory / "transitions.json").write_text('{"tokens":{},"servers":[]}  '), "does not hold lists"),
        # Two states of one token would crash the planner's numbering (IndexError), not warn.
        (
            lambda directory: _change_transitions(directory, lambda stored: stored["tokens"].__setitem__(1, stored["tokens"][0])),
            "tokens are not distinct strings",
        ),
        (lambda directory: _change_transitions(directory, lambda stored: stored["tokens"].__setitem__(0, 7)), "tokens are not distinct strings"),
        (lambda directory: _change_transitions(directory, lambda stored: stored["servers"].__setitem__(0, 7)), "servers are not all strings"),
        (lambda directory: (directory / "transitions.json").write_text("[" * 100_000), "recursion"),
    ],
)
def test_transitions_of_the_wrong_states_or_types_are_refused(snapshot_home, catalog_files, tamper, problem):
    loaded = load_checked(catalog_files)
    assert len(loaded.registry) == 34  # the counts the problems name
    (directory,) = _snapshots(snapshot_home)
    size = (directory / "transitions.json").stat().st_size
    tamper(directory)
    if (directory / "transitions.json").stat().st_size != size:
        _change_manifest(directory, lambda manifest: manifest["files"]["transitions.json"].update(bytes=(directory / "transitions.json").stat().st_size))
    with pytest.warns(RuntimeWarning, match=problem):
        assert type(load_checked(catalog_files).registry).__name__ == "ToolRegistry"


def test_costs_whose_sum_is_past_the_largest_float_read_back_from_their_snapshot(snapshot_home, tmp_path):
    # Any finite cost is a valid one; two of 1e308 overflow math.fsum, which crashed every later load.
    catalog = tmp_path / "library.yaml"
    catalog.write_text(
        LIBRARY.replace("    cost: 2\n", "    cost: 1.0e+308\n").replace(
            "    mcp_server: archive\n    required_parameters: [{name: book",
            "    mcp_server: archive\n    cost: 1.0e+308\n    required_parameters: [{name: book",
            1,
        )
    )
    assert [tool.cost for tool in load_checked([catalog]).registry] == [1.0, 1e308, 1e308]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = load_checked([catalog])
    assert isinstance(again.registry, StoredToolRegistry) and [tool.cost for tool in again.registry] == [1.0, 1e308, 1e308]


def test_a_plan_through_a_tool_whose_stored_states_are_not_its_own_is_refused(snapshot_home, catalog_files):
    # In range and of the right types, the numbers pass every check of the arrays; find_book made to
    # produce library.loan_drafted would be a one-step plan the catalog does not allow.
    from toolpath.planner.planning.graph import StateGraph

    loaded = load_checked(catalog_files)
    find_book = loaded.registry.get_tool_by_server_and_name("library", "find_book").id
    table = loaded.registry.transitions()
    (directory,) = _snapshots(snapshot_home)
    _set_array_value(directory, "produces", sum(map(len, table.produces[:find_book])), table.tokens.index("library.loan_drafted"))
    tampered = load_checked(catalog_files)
    assert isinstance(tampered.registry, StoredToolRegistry)
    with pytest.raises(DamagedSnapshotError, match=r"transitions.bin gives tool 'find_book' .*other states or another cost than its definition; it is removed"):
        plan(StateGraph(tampered.registry, tampered.states), ["library.loan_drafted"], held=["library.title_given"])
    again = load_checked(catalog_files)
    found = plan(StateGraph(again.registry, again.states), ["library.loan_drafted"], held=["library.title_given"])
    assert [step.tool.name for step in found.steps] == ["find_book", "draft_loan"]


def test_a_definition_changed_in_place_is_refused_when_it_is_read(snapshot_home, catalog_files):
    load_checked(catalog_files)
    (directory,) = _snapshots(snapshot_home)
    tools = directory / "tools.jsonl"
    text = tools.read_bytes()
    tools.write_bytes(text.replace(b'"name":"draft_loan"', b'"name":"draft_lean"'))  # the same size
    registry = load_checked(catalog_files).registry
    assert registry.get_tool_by_name("find_book").name == "find_book"  # other tools read as ever
    with pytest.raises(DamagedSnapshotError, match=rf"catalog snapshot {directory} is damaged: .*'draft_lean'.*; it is removed: run again"):
        registry.get_tool_by_server_and_name("library", "draft_loan")
    assert not directory.exists()
    assert load_checked(catalog_files).registry.get_tool_by_server_and_name("library", "draft_loan").name == "draft_loan"  # from the file


def test_a_snapshot_removed_while_in_use_keeps_answering(snapshot_home, catalog_files):
    load_checked(catalog_files)
    registry = load_checked(catalog_files).registry
    (directory,) = _snapshots(snapshot_home)
    shutil.rmtree(directory)  # the cleanup of another process, which keeps the four most recent
    assert registry.get_tool_by_name("draft_loan").name == "draft_loan"
    assert len(list(registry)) == len(registry)


def test_a_snapshot_cut_short_by_another_program_reads_as_damaged(snapshot_home, catalog_files):
    load_checked(catalog_files)
    registry = load_checked(catalog_files).registry
    (directory,) = _snapshots(snapshot_home)
    os.truncate(directory / "tools.jsonl", 100)  # a memory map would end the process with SIGBUS here
    with pytest.raises(DamagedSnapshotError, match="does not validate"):
        registry.get_tool_by_id(len(registry) - 1)


def test_a_store_that_cannot_be_written_warns_and_loads_all_the_same(snapshot_home, catalog_files):
    snapshot_home.mkdir(parents=True)
    (snapshot_home / "catalogs").write_text("not a directory")
    with pytest.warns(RuntimeWarning, match="catalog snapshot cannot be stored in .*a file stands where its directory should be"):
        loaded = load_checked(catalog_files)
    # Not stored, but its content is known: a skill index is still keyed without reading a text.
    assert loaded.registry.content_key is not None and len(loaded.registry) > 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per process and directory
        assert load_checked(catalog_files).registry.get_tool_by_name("find_book").name == "find_book"


def test_a_catalog_whose_module_went_missing_is_skipped_as_without_a_snapshot(snapshot_home, catalog_files, tmp_path):
    load_checked(catalog_files)
    (tmp_path / "modules" / "snapshot_test_notes_module.py").unlink()
    with pytest.warns(CatalogSkippedWarning, match="snapshot_test_notes_module"):
        loaded = load_checked(catalog_files)
    assert [entry.domain for entry in loaded.skipped] == ["notes"] and "notes" not in {catalog.domain for catalog in loaded.catalogs}
    assert len(_snapshots(snapshot_home)) == 1  # a set with a skipped catalog is not stored


def test_small_catalogs_are_not_snapshotted(tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLPATH_HOME", str(tmp_path / "home"))
    loaded = load_checked(default_catalog_paths())
    assert type(loaded.registry).__name__ == "ToolRegistry" and loaded.registry.content_key is None
    assert not (tmp_path / "home" / "catalogs").exists()


def test_snapshot_files_are_private_to_their_owner(snapshot_home, catalog_files):
    load_checked(catalog_files)
    (directory,) = _snapshots(snapshot_home)
    assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
    assert {stat.S_IMODE(os.stat(directory / name).st_mode) for name in os.listdir(directory)} == {0o600}


def test_a_named_pipe_among_large_catalogs_is_refused_at_once(snapshot_home, catalog_files, tmp_path):
    pipe = tmp_path / "catalog.fifo"
    os.mkfifo(pipe)
    with pytest.raises(CatalogError, match="named pipe"):
        load_checked([*catalog_files, pipe])  # no writer: opening it must not wait for one


def test_a_file_rewritten_while_it_loads_is_not_stored_under_its_old_bytes(snapshot_home, catalog_files, monkeypatch):
    from toolpath.registry import lint

    real = lint._lint

    def rewritten_meanwhile(*arguments, **options):
        found = real(*arguments, **options)
        catalog_files[-2].write_text(LIBRARY.replace("Draft a loan slip", "Write a loan slip"))
        return found

    monkeypatch.setattr(lint, "_lint", rewritten_meanwhile)
    load_checked(catalog_files)
    assert _snapshots(snapshot_home) == []
    monkeypatch.setattr(lint, "_lint", real)
    assert load_checked(catalog_files).registry.get_tool_by_name("draft_loan").description == "Write a loan slip for a book that was found"


def test_a_digest_reused_from_the_record_still_sees_a_same_size_rewrite(snapshot_home, catalog_files, monkeypatch):
    from toolpath.registry import file_digests

    # Hashed "three seconds later": the files' digests are recorded as for files written long ago.
    real_time = file_digests.time.time_ns
    monkeypatch.setattr(file_digests.time, "time_ns", lambda: real_time() + 3 * 10**9)
    first = load_checked(catalog_files)
    hashed = []
    real_digest = file_digests.hashlib.file_digest
    monkeypatch.setattr(file_digests.hashlib, "file_digest", lambda stream, name: hashed.append(stream.name) or real_digest(stream, name))
    again = load_checked(catalog_files)
    assert hashed == [] and isinstance(again.registry, StoredToolRegistry) and again.registry.content_key == first.registry.content_key

    # The same number of bytes, the modification time put back: the status-change time still moves.
    library = catalog_files[-2]
    status = library.stat()
    text = library.read_text()
    changed = text.replace("Look a book up on the shelves by its title", "Seek a book up on the shelves by its title")
    assert len(changed) == len(text) and changed != text
    library.write_text(changed)
    os.utime(library, ns=(status.st_atime_ns, status.st_mtime_ns))
    reloaded = load_checked(catalog_files)
    assert hashed and reloaded.registry.get_tool_by_name("find_book").description.startswith("Seek a book")
