"""toolpath's SQLite file when it is unusable: every case raises one StoreError naming the file and
what to do; skill search warns once and answers without the cache; malformed cache rows are
re-embedded; the CLI prints one warning line and still answers."""

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import warnings

import numpy as np
import pytest

from toolpath.kernel.inside import wire
from toolpath.kernel.inside.result_store import ResultStore
from toolpath.planner import SkillIndex, StateGraph
from toolpath.planner.search.embedding_cache import EmbeddingCache, text_hash
from toolpath.registry import State, ToolDefinition, ToolRegistry
from toolpath.registry import storage as store_module
from toolpath.registry.storage import StoreError


def write_sql(path, *statements):
    """Run SQL statements on the file at ``path``, as another program would."""
    with contextlib.closing(sqlite3.connect(path)) as database, database:
        for statement in statements:
            database.execute(statement)


#: Tests of files whose mode forbids reading or writing them; as root they run in a child process
#: without the capabilities that override file modes (see ``pytest_pyfunc_call`` in conftest.py).
needs_file_modes = pytest.mark.needs_file_modes


class WordCountEmbedder:
    """Counts of a few words per text (plus a constant, so no vector is zero); records what it embeds."""

    model_id = "test/word-count-v1"
    vocabulary = ("parse", "weight", "molecule", "report")

    def __init__(self):
        self.embedded: list[str] = []

    def __call__(self, texts):
        self.embedded.extend(texts)
        return np.array([[text.lower().count(word) for word in self.vocabulary] + [1.0] for text in texts], dtype=float)


def small_graph():
    registry = ToolRegistry(package="lab")
    registry.register_tool(ToolDefinition(name="parse", description="parse a SMILES string", state_transition={"produces": ["lab.parsed"]}))
    registry.register_tool(
        ToolDefinition(name="weigh", description="molecular weight of a molecule", state_transition={"requires": ["lab.parsed"], "produces": ["lab.weighed"]})
    )
    return StateGraph(registry, [State("lab.parsed", "a parsed molecule"), State("lab.weighed", "the molecular weight", ["know how heavy a molecule is"])])


def build_index(**options):
    """A SkillIndex of :func:`small_graph`, its embedder, and the RuntimeWarnings raised while building it
    (from the embedding cache itself: no stored index unless ``store`` is given)."""
    options.setdefault("store", False)
    embedder = WordCountEmbedder()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        index = SkillIndex(small_graph(), embedder, **options)
    return index, embedder, [str(warning.message) for warning in caught if issubclass(warning.category, RuntimeWarning)]


def cache_with_one_index(path):
    """A cache file at ``path`` holding the embeddings of :func:`small_graph`; the number of rows."""
    _, embedder, _ = build_index(cache=path)
    return len(embedder.embedded)


def make_directory(path):
    path.mkdir()


def make_parent_a_file(path):
    path.parent.rmdir()
    path.parent.write_text("a file where toolpath's directory should be")


def make_not_a_database(path):
    path.write_bytes(b"this is not a database" * 100)


def make_truncated(path):
    cache_with_one_index(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2 + 7])


def make_wrong_columns(path):
    write_sql(path, "create table embeddings (model_id text, text text, vector blob)")


def make_no_primary_key(path):
    write_sql(
        path,
        "create table embeddings (model_id text, text_hash text, dimension integer, vector blob)",
        "insert into embeddings values ('test/word-count-v1', '', 1, x'')",
    )


def make_read_only(path):
    path.touch()
    path.chmod(0o400)


def make_unreadable(path):
    cache_with_one_index(path)
    path.chmod(0)


UNUSABLE = {
    "a directory": make_directory,
    "its directory is a file": make_parent_a_file,
    "not a database": make_not_a_database,
    "a truncated database": make_truncated,
    "a table with other columns": make_wrong_columns,
    "a table without its primary key": make_no_primary_key,
    "read-only": pytest.param(make_read_only, marks=needs_file_modes),
    "unreadable": pytest.param(make_unreadable, marks=needs_file_modes),
}


@pytest.fixture
def home(tmp_path, monkeypatch):
    """An empty TOOLPATH_HOME; its ``toolpath.db`` is the default store."""
    directory = tmp_path / "home"
    directory.mkdir()
    monkeypatch.setenv("TOOLPATH_HOME", str(directory))
    return directory


@pytest.fixture
def full_disk(monkeypatch):
    """Every connection refuses to grow its file, as SQLite does when the disk is full."""
    connect = store_module.connect

    def connect_without_space(path):
        database = connect(path)
        pages = database.execute("pragma page_count").fetchone()[0]
        database.execute(f"pragma max_page_count = {max(pages, 1)}")
        return database

    monkeypatch.setattr(store_module, "connect", connect_without_space)


def use_embedding_cache(path):
    cache = EmbeddingCache(path)
    cache.put("test/model", {text_hash("parse"): np.ones(3)})
    return cache.get("test/model", [text_hash("parse")])


@pytest.mark.parametrize("make", UNUSABLE.values(), ids=UNUSABLE.keys())
def test_every_unusable_cache_file_raises_a_store_error_naming_it_and_what_to_do(home, make):
    path = home / "toolpath.db"
    make(path)
    with pytest.raises(StoreError) as raised:
        use_embedding_cache(path)
    message = str(raised.value)
    assert str(path) in message and "TOOLPATH_HOME" in message
    assert raised.value.path == path


def test_a_full_disk_raises_a_store_error_saying_so(home, full_disk):
    with pytest.raises(StoreError, match="the disk is full. Free some disk space") as raised:
        use_embedding_cache(home / "toolpath.db")
    assert raised.value.path == home / "toolpath.db"


def test_a_path_the_caller_chose_is_not_fixed_by_toolpath_home(tmp_path):
    (tmp_path / "cache.db").mkdir()
    with pytest.raises(StoreError, match="it is a directory. Delete or move it, or use another file"):
        EmbeddingCache(tmp_path / "cache.db")


@pytest.mark.parametrize("make", UNUSABLE.values(), ids=UNUSABLE.keys())
def test_search_warns_once_about_an_unusable_cache_and_still_answers(home, make):
    path = home / "toolpath.db"
    make(path)
    index, embedder, warned = build_index()
    assert len(warned) == 1, warned
    assert f"the embedding cache at {path} is unusable" in warned[0] and "TOOLPATH_HOME" in warned[0]
    assert index.mode == "hybrid" and index.search("molecular weight", k=1, kind="state")[0].name == "lab.weighed"


def test_search_on_a_full_disk_warns_once_and_still_answers(home, full_disk):
    index, _, warned = build_index()
    assert len(warned) == 1 and "the disk is full" in warned[0]
    assert index.search("molecular weight", k=1, kind="state")[0].name == "lab.weighed"


def corrupt_one_row(path, text, **columns):
    """Overwrite columns of the cached row of ``text``."""
    assignments = ", ".join(f"{name} = ?" for name in columns)
    with contextlib.closing(sqlite3.connect(path)) as database, database:
        updated = database.execute(f"update embeddings set {assignments} where text_hash = ?", [*columns.values(), text_hash(text)]).rowcount
    assert updated == 1


MALFORMED_ROWS = {
    "vector shorter than its dimension": {"vector": np.ones(3, dtype="<f4").tobytes()},
    "dimension unlike the other rows": {"dimension": 3, "vector": np.ones(3, dtype="<f4").tobytes()},
    "NaN values": {"vector": np.full(5, np.nan, dtype="<f4").tobytes()},
    "infinite values": {"vector": np.full(5, np.inf, dtype="<f4").tobytes()},
    "NULL vector": {"vector": None},
    "NULL dimension": {"dimension": None},
    "vector stored as text": {"vector": "0.1 0.2 0.3 0.4 0.5"},
    "dimension stored as text": {"dimension": "five"},
    "zero dimension": {"dimension": 0, "vector": b""},
}


@pytest.mark.parametrize("columns", MALFORMED_ROWS.values(), ids=MALFORMED_ROWS.keys())
def test_a_malformed_row_is_re_embedded_and_rewritten_with_one_warning(tmp_path, columns):
    path = tmp_path / "toolpath.db"
    cache_with_one_index(path)
    corrupt_one_row(path, "molecular weight of a molecule", **columns)

    index, embedder, warned = build_index(cache=path)
    assert embedder.embedded == ["molecular weight of a molecule"]
    assert len(warned) == 1 and f"ignored 1 malformed row(s) of the embedding cache {path}" in warned[0]
    assert index.search("molecular weight", k=1, kind="tool")[0].name == "weigh"

    _, again, warned_again = build_index(cache=path)
    assert again.embedded == [] and warned_again == []


def test_the_result_store_raises_a_store_error_naming_a_corrupt_file(tmp_path):
    path = tmp_path / "toolpath.db"
    make_not_a_database(path)
    with pytest.raises(StoreError, match="not a SQLite database") as raised:
        ResultStore(path).put(b"{}", "report", "dict")
    assert str(path) in str(raised.value)


def test_the_result_store_raises_a_store_error_when_the_disk_is_full(tmp_path, full_disk):
    path = tmp_path / "toolpath.db"
    with pytest.raises(StoreError, match="the disk is full") as raised:
        ResultStore(path).put(b"x" * 100_000, "report", "bytes")
    assert str(path) in str(raised.value)


def test_the_result_store_refuses_a_table_with_other_columns_and_a_directory(tmp_path):
    path = tmp_path / "toolpath.db"
    write_sql(path, "create table offloaded_results (id text primary key, payload blob)")
    with pytest.raises(StoreError, match="its offloaded_results table has columns"):
        ResultStore(path).get("abc")
    (tmp_path / "results").mkdir()
    with pytest.raises(StoreError, match="is a directory"):
        ResultStore(tmp_path / "results")


def test_the_result_store_still_says_key_error_for_an_unknown_id(tmp_path):
    store = ResultStore(tmp_path / "toolpath.db")
    with pytest.raises(KeyError):
        store.get("missing")
    result_id = store.put(wire.encode({"op": "value", "value": [1, 2]})[4:], "report", "list")
    assert store.get(result_id) == [1, 2]
    with pytest.raises(KeyError):
        store.get("missing")


def toolpath(*arguments, home):
    return subprocess.run(
        [sys.executable, "-m", "toolpath.planner.interfaces.cli", *arguments],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TOOLPATH_HOME": str(home)},
    )


@pytest.fixture
def malformed_row_home(tmp_path, chemistry_graph, embedder):
    """A home whose cache holds the real model's vectors of the shipped catalog, one row cut short."""
    path = tmp_path / "toolpath.db"
    SkillIndex(chemistry_graph, embedder, cache=path)
    write_sql(path, "update embeddings set vector = substr(vector, 1, 10) where rowid = (select min(rowid) from embeddings)")
    return tmp_path


def home_with(make, tmp_path):
    make(tmp_path / "toolpath.db")
    return tmp_path


CLI_HOMES = {
    "a directory": lambda tmp_path, request: home_with(make_directory, tmp_path),
    "not a database": lambda tmp_path, request: home_with(make_not_a_database, tmp_path),
    "a malformed row": lambda tmp_path, request: request.getfixturevalue("malformed_row_home"),
    "read-only": pytest.param(lambda tmp_path, request: home_with(make_read_only, tmp_path), marks=needs_file_modes),
}


def assert_one_warning_line_naming(stderr, path):
    lines = [line for line in stderr.splitlines() if line.startswith("toolpath: warning:")]
    assert len(lines) == 1 and str(path) in lines[0], stderr
    assert "Traceback" not in stderr


@pytest.mark.integration
@pytest.mark.parametrize("make_home", CLI_HOMES.values(), ids=CLI_HOMES.keys())
def test_cli_search_with_an_unusable_cache_warns_in_one_line_and_answers(tmp_path, request, make_home):
    home = make_home(tmp_path, request)
    completed = toolpath("search", "cluster molecules", "--k", "3", "--json", home=home)
    assert completed.returncode == 0, completed.stderr
    assert "chemistry.molecules_clustered" in {hit["name"] for hit in json.loads(completed.stdout)["hits"]}
    assert_one_warning_line_naming(completed.stderr, home / "toolpath.db")


@pytest.mark.integration
@pytest.mark.parametrize("make_home", [CLI_HOMES["a directory"], CLI_HOMES["a malformed row"]], ids=["a directory", "a malformed row"])
def test_cli_run_with_an_unusable_cache_warns_in_one_line_and_runs(tmp_path, request, make_home):
    home = make_home(tmp_path, request)
    completed = toolpath("run", "cluster these molecules by structural similarity", "--input", 'smiles_list=["CCO","CCCO"]', home=home)
    assert completed.returncode == 0, completed.stderr
    assert "Goal: chemistry.molecules_clustered" in completed.stdout
    assert_one_warning_line_naming(completed.stderr, home / "toolpath.db")
