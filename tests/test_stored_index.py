"""Stored skill indexes (issue 57): a second index of the same catalogs loads the stored BM25 index
and vectors instead of embedding or reading the cache; a changed catalog, a damaged directory,
concurrent builders, a store that cannot be written, and ``toolpath catalog index``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

from toolpath.catalogs import default_catalog_paths
from toolpath.planner import SkillIndex, StateGraph
from toolpath.planner.search.dense_index import ExactDenseIndex, load_dense_index
from toolpath.planner.search.learned import LearnedSearch
from toolpath.planner.search.stored_index import KEEP_INDEXES, IndexStore
from toolpath.registry import State, ToolDefinition, ToolRegistry

QUERIES = ("molecular weight", "parse a SMILES string", "sign the report", "how heavy is it", "cluster fingerprints")


class CountingEmbedder:
    """Bag-of-words vectors over a tiny vocabulary; records every text it is asked to embed."""

    model_id = "test/stored-bag-of-words-v1"
    vocabulary = ("cluster", "smiles", "weight", "report", "molecule", "sign", "heavy")

    def __init__(self):
        self.embedded: list[str] = []

    def __call__(self, texts):
        self.embedded.extend(texts)
        return np.array([[text.lower().count(word) for word in self.vocabulary] + [1.0] for text in texts], dtype=float)


def lab_graph(weigh_affordance: str = "know how heavy a molecule is") -> StateGraph:
    registry = ToolRegistry(package="lab")
    registry.register_tool(ToolDefinition(name="parse", description="parse a SMILES string", state_transition={"produces": ["lab.parsed"]}))
    registry.register_tool(
        ToolDefinition(
            name="weigh",
            description="molecular weight of a molecule",
            affordances=[weigh_affordance],
            state_transition={"requires": ["lab.parsed"], "produces": ["lab.weighed"]},
        )
    )
    registry.register_tool(
        ToolDefinition(name="sign_report", description="sign the weight report", state_transition={"requires": ["lab.weighed"], "produces": ["lab.signed"]})
    )
    states = [
        State("lab.parsed", "a parsed molecule"),
        State("lab.weighed", "the molecular weight", ["report a weight"]),
        State("lab.signed", "a signed report"),
    ]
    return StateGraph(registry, states)


def ranking(index: SkillIndex) -> list[list[tuple]]:
    """Every hit of every query with all it says, for comparing two indexes."""
    return [
        [(hit.kind, hit.name, round(hit.score, 6), hit.similarity, round(hit.lexical, 5), hit.matched) for hit in index.search(query, k=6)] for query in QUERIES
    ]


def built(graph: StateGraph, cache: Path, **options) -> tuple[SkillIndex, CountingEmbedder, list[str]]:
    """A SkillIndex of ``graph`` with a fresh CountingEmbedder, and the RuntimeWarnings raised building it."""
    embedder = CountingEmbedder()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        index = SkillIndex(graph, embedder, cache=cache, **options)
    return index, embedder, [str(warning.message) for warning in caught if issubclass(warning.category, RuntimeWarning)]


def test_a_second_index_of_the_same_catalogs_loads_from_the_store_without_embedding_or_reading_the_cache(tmp_path):
    cache = tmp_path / "toolpath.db"
    first, first_embedder, warned = built(lab_graph(), cache)
    assert warned == [] and first_embedder.embedded and first.stored is not None and first.stored.stored and not first.stored.loaded
    assert first.stored.directory.parent == tmp_path / "indexes"
    cache.unlink()  # opening the cache would create the file again

    second, second_embedder, warned = built(lab_graph(), cache)
    assert warned == [] and second_embedder.embedded == [] and not cache.exists()
    assert second.stored is not None and second.stored.loaded and second.stored.directory == first.stored.directory
    assert second.cache_counts == (0, 0) and second.embedder is second_embedder
    fresh = SkillIndex(lab_graph(), CountingEmbedder(), cache=False)
    assert ranking(second) == ranking(fresh) == ranking(first)


def test_learned_evidence_applies_on_top_of_a_loaded_index(tmp_path):
    cache = tmp_path / "toolpath.db"
    built(lab_graph(), cache)
    sign = ("tool", None, "sign_report")
    # Two phrasings: vectors only. Six, one per entry: their words join the BM25 documents too.
    for phrasings in ([("put my name on the paper", sign)] * 2, [("put my name on the paper", sign)] * 6):
        learned = LearnedSearch.from_phrasings(CountingEmbedder(), phrasings)
        loaded = SkillIndex(lab_graph(), CountingEmbedder(), cache=cache, learned=learned)
        fresh = SkillIndex(lab_graph(), CountingEmbedder(), cache=False, learned=learned)
        assert loaded.stored is not None and loaded.stored.loaded
        assert ranking(loaded) == ranking(fresh)
    assert loaded.search("paper", k=1)[0].name == "sign_report"


def test_a_changed_affordance_changes_the_key_and_the_index_is_built_again(tmp_path):
    cache = tmp_path / "toolpath.db"
    before, _, _ = built(lab_graph(), cache)
    after, embedder, warned = built(lab_graph("find the mass of a compound"), cache)
    assert warned == [] and after.stored is not None and before.stored is not None
    assert after.stored.key != before.stored.key and not after.stored.loaded and after.stored.stored
    assert embedder.embedded == ["find the mass of a compound"]  # the rest came from the embedding cache
    assert ranking(after) == ranking(SkillIndex(lab_graph("find the mass of a compound"), CountingEmbedder(), cache=False))
    assert before.stored.directory.exists()  # the earlier catalog version is kept (see clean_up)


def test_another_model_or_mode_is_another_stored_index(tmp_path):
    cache = tmp_path / "toolpath.db"
    hybrid, _, _ = built(lab_graph(), cache)
    other = CountingEmbedder()
    other.model_id = "test/stored-bag-of-words-v2"
    second = SkillIndex(lab_graph(), other, cache=cache)
    lexical = SkillIndex(lab_graph(), mode="bm25", cache=cache)
    assert other.embedded and not second.stored.loaded
    assert len({hybrid.stored.key, second.stored.key, lexical.stored.key}) == 3
    assert SkillIndex(lab_graph(), mode="bm25", cache=cache).stored.loaded


def truncate_vectors(directory: Path) -> None:
    path = directory / "dense" / "vectors.npy"
    path.write_bytes(path.read_bytes()[:-12])


def truncate_bm25_scores(directory: Path) -> None:
    path = directory / "bm25" / "data.csc.index.npy"
    path.write_bytes(path.read_bytes()[:100])


def remove_manifest(directory: Path) -> None:
    (directory / "manifest.json").unlink()


def garble_manifest(directory: Path) -> None:
    (directory / "manifest.json").write_text("{not json", encoding="utf-8")


def foreign_manifest(directory: Path) -> None:
    manifest = json.loads((directory / "manifest.json").read_text())
    manifest["key"] = "0" * 64
    (directory / "manifest.json").write_text(json.dumps(manifest))


def vectors_of_another_shape(directory: Path) -> None:
    """A dense index of vectors of one dimension fewer, sound in itself but not of the catalog."""
    dense = load_dense_index(directory / "dense")
    other = ExactDenseIndex(np.ascontiguousarray(np.asarray(dense.vectors)[:, :-1]), dense.first_text)
    shutil.rmtree(directory / "dense")
    other.save(directory / "dense")


def documents_out_of_range(directory: Path) -> None:
    """BM25 document numbers past the last document, in a file of the size the manifest records."""
    path = directory / "bm25" / "indices.csc.index.npy"
    indices = np.load(path)
    np.save(path, np.full_like(indices, 1000), allow_pickle=False)


DAMAGE = {
    "truncated vectors": (truncate_vectors, "dense/vectors.npy: it has"),
    "truncated BM25 scores": (truncate_bm25_scores, "bm25/data.csc.index.npy has"),
    "no manifest (a partial directory)": (remove_manifest, "it has no manifest"),
    "a manifest that is not JSON": (garble_manifest, "Expecting property name"),
    "another catalog's manifest": (foreign_manifest, "its manifest's key is"),
    "vectors of another shape": (vectors_of_another_shape, "the catalog needs ["),
    "BM25 documents out of range": (documents_out_of_range, "names documents outside"),
}


@pytest.mark.parametrize(("damage", "problem"), DAMAGE.values(), ids=DAMAGE.keys())
def test_a_damaged_stored_index_warns_and_is_built_again(tmp_path, damage, problem):
    cache = tmp_path / "toolpath.db"
    first, _, _ = built(lab_graph(), cache)
    damage(first.stored.directory)

    index, embedder, warned = built(lab_graph(), cache)
    assert len(warned) == 1 and f"the stored skill index {first.stored.directory} cannot be used" in warned[0] and problem in warned[0]
    assert not index.stored.loaded and index.stored.stored and embedder.embedded == []  # rebuilt from the embedding cache
    assert ranking(index) == ranking(SkillIndex(lab_graph(), CountingEmbedder(), cache=False))

    again, _, warned_again = built(lab_graph(), cache)
    assert warned_again == [] and again.stored.loaded  # stored anew
    assert [path.name for path in (tmp_path / "indexes").iterdir()] == [first.stored.directory.name]  # nothing damaged left behind


def test_storing_an_index_another_process_stored_first_keeps_theirs(tmp_path):
    cache = tmp_path / "toolpath.db"
    first, _, _ = built(lab_graph(), cache)
    store = IndexStore(tmp_path / "indexes")
    part, _ = store.load(first.stored.key, first.stored.entries, first.stored.texts, _model())
    again = store.save(first.stored.key, part, _model(), first.stored.entries, first.stored.texts)
    assert again.stored and not again.loaded and again.directory == first.stored.directory
    assert [path.name for path in (tmp_path / "indexes").iterdir()] == [first.stored.directory.name]  # no temporary left


def _model():
    from toolpath.planner.search.stored_index import model_identity

    return model_identity(CountingEmbedder())


BUILDER = textwrap.dedent(
    """
    import sys, time, warnings
    import numpy as np
    sys.path.insert(0, sys.argv[2])
    from test_stored_index import CountingEmbedder, lab_graph, ranking
    from toolpath.planner import SkillIndex

    class SlowEmbedder(CountingEmbedder):
        def __call__(self, texts):
            time.sleep(3.0)  # every builder is still embedding when the others start
            return super().__call__(texts)

    warnings.simplefilter("error")  # any warning fails the builder
    index = SkillIndex(lab_graph(), SlowEmbedder(), cache=sys.argv[1])
    print(int(index.stored.stored), int(index.stored.loaded), repr(ranking(index)))
    """
)


@pytest.fixture
def shared_store(tmp_path):
    return IndexStore(tmp_path / "indexes")


def test_concurrent_builders_share_one_store_directory(tmp_path, shared_store):
    processes = []
    for number in range(3):
        script = BUILDER.replace("cache=sys.argv[1]", f"cache=sys.argv[1], store={str(shared_store.directory)!r}")
        processes.append(
            subprocess.Popen(
                [sys.executable, "-c", script, str(tmp_path / f"cache-{number}.db"), str(Path(__file__).parent)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    results = [process.communicate(timeout=300) for process in processes]
    assert [process.returncode for process in processes] == [0] * 3, [error for _, error in results]
    assert all(output.startswith("1 ") for output, _ in results)  # each says its index is stored
    (directory,) = shared_store.directory.iterdir()  # one copy, no temporary directory left
    loaded, embedder, warned = built(lab_graph(), tmp_path / "other.db", store=shared_store)
    assert warned == [] and loaded.stored.loaded and loaded.stored.directory == directory and embedder.embedded == []
    assert ranking(loaded) == ranking(SkillIndex(lab_graph(), CountingEmbedder(), cache=False))


def make_a_file_where_the_store_goes(home: Path) -> None:
    (home / "indexes").write_text("not a directory")


def make_read_only(home: Path) -> None:
    home.chmod(0o500)


UNWRITABLE = {
    "a file where its directory should be": make_a_file_where_the_store_goes,
    "a read-only home": pytest.param(make_read_only, marks=pytest.mark.needs_file_modes),
}


@pytest.mark.parametrize("make_unwritable", UNWRITABLE.values(), ids=UNWRITABLE.keys())
def test_a_store_that_cannot_be_written_warns_once_and_search_still_works(tmp_path, make_unwritable):
    home = tmp_path / "home"
    home.mkdir()
    cache = home / "toolpath.db"
    SkillIndex(lab_graph(), CountingEmbedder(), cache=cache, store=False)  # the cache is filled while it can be
    make_unwritable(home)
    try:
        first, _, warned = built(lab_graph(), cache)
        second, _, warned_again = built(lab_graph(), cache)
    finally:
        home.chmod(0o700)
    assert len(warned) == 1 and f"the skill index cannot be stored in {home / 'indexes'}" in warned[0] and "TOOLPATH_HOME" in warned[0]
    assert warned_again == []  # once per process
    assert not first.stored.stored and not second.stored.loaded and first.stored.problem
    assert ranking(second) == ranking(SkillIndex(lab_graph(), CountingEmbedder(), cache=False))


def test_the_store_keeps_the_most_recently_used_indexes(tmp_path):
    cache = tmp_path / "toolpath.db"
    oldest, _, _ = built(lab_graph("version 0"), cache)
    for version in range(1, KEEP_INDEXES):
        built(lab_graph(f"version {version}"), cache)
    os.utime(oldest.stored.directory / "manifest.json", (1, 1))  # long unused
    newest, _, _ = built(lab_graph("the newest version"), cache)
    kept = {path.name for path in (tmp_path / "indexes").iterdir()}
    assert len(kept) == KEEP_INDEXES and newest.stored.directory.name in kept and oldest.stored.directory.name not in kept


def test_stored_files_are_private_to_their_owner(tmp_path):
    index, _, _ = built(lab_graph(), tmp_path / "toolpath.db")
    for root, _, files in os.walk(index.stored.directory):
        assert os.stat(root).st_mode & 0o777 == 0o700
        assert all(os.stat(os.path.join(root, name)).st_mode & 0o777 == 0o600 for name in files)


def toolpath(*arguments: str, home: Path) -> subprocess.CompletedProcess:
    environment = {**os.environ, "TOOLPATH_HOME": str(home), "TOOLPATH_RECORD": "off"}
    return subprocess.run([sys.executable, "-m", "toolpath.planner.interfaces.cli", *arguments], capture_output=True, text=True, timeout=600, env=environment)


def test_catalog_index_builds_the_index_once_and_search_loads_it(tmp_path, chemistry_catalog):
    home = tmp_path / "home"
    first = toolpath("catalog", "index", "--catalog", str(chemistry_catalog), "--json", home=home)
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    assert report["catalogs"] == [str(chemistry_catalog)] and report["built"] is True
    assert report["entries"] == report["tools"] + report["states"] > 0 and report["texts"] > report["entries"]
    assert 0 < report["texts_embedded"] <= report["texts"] and report["texts_from_cache"] == 0
    assert report["dimensions"] == 384 and report["model"]["id"] == "sentence-transformers/all-MiniLM-L6-v2"
    directory = Path(report["directory"])
    assert directory.parent == home / "indexes" and (directory / "manifest.json").exists()
    assert report["approximate"] is False and report["bytes"]["dense"] > (directory / "dense" / "vectors.npy").stat().st_size >= 4 * 384 * report["texts"]
    besides = sum((directory / name).stat().st_size for name in ("manifest.json", "first_text.npy"))
    assert report["bytes"]["total"] == report["bytes"]["dense"] + report["bytes"]["bm25"] + besides

    again = toolpath("catalog", "index", "--catalog", str(chemistry_catalog), "--json", home=home)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["built"] is False and json.loads(again.stdout)["texts_embedded"] == 0

    (home / "toolpath.db").unlink()  # a search that read the embedding cache would create it again
    search = toolpath("search", "is this molecule drug-like?", "--catalog", str(chemistry_catalog), "--json", home=home)
    assert search.returncode == 0, search.stderr
    assert json.loads(search.stdout)["hits"][0]["similarity"] is not None and not (home / "toolpath.db").exists()

    rebuilt = toolpath("catalog", "index", "--catalog", str(chemistry_catalog), "--rebuild", home=home)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert rebuilt.stdout.startswith(f"indexed {report['entries']} entries") and f"MiB in {directory}" in rebuilt.stdout


def test_catalog_index_takes_catalogs_as_add_catalog_does(tmp_path, chemistry_catalog):
    tabular = next(path for path in default_catalog_paths() if path.parent.name == "tabular")
    result = toolpath("catalog", "index", "--catalog", str(chemistry_catalog), str(tabular), "--json", home=tmp_path / "home")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["catalogs"] == [str(chemistry_catalog), str(tabular)]


def test_catalog_index_fails_when_the_index_cannot_be_stored(tmp_path, chemistry_catalog):
    home = tmp_path / "home"
    home.mkdir()
    (home / "indexes").write_text("in the way")
    result = toolpath("catalog", "index", "--catalog", str(chemistry_catalog), home=home)
    assert result.returncode == 2 and f"skill index store {home / 'indexes'} is unusable" in result.stderr
    assert "cannot be stored" not in result.stderr  # said once, as the command's failure


def test_the_key_tells_apart_every_input_of_the_stored_part():
    from toolpath.planner.search.stored_index import ModelIdentity, catalog_key

    model = ModelIdentity("m", "1")
    base = ([("tool", "a", "s")], [0], ["ab", "c"], ["ab c"], model)
    variants = [
        ([("state", "a", "s")], [0], ["ab", "c"], ["ab c"], model),
        ([("tool", "a", "t")], [0], ["ab", "c"], ["ab c"], model),
        ([("tool", "a", "s")], [0], ["a", "bc"], ["ab c"], model),  # the same characters, other texts
        ([("tool", "a", "s")], [0], ["ab", "c"], ["ab  c"], model),
        ([("tool", "a", "s")], [0], ["ab", "c"], ["ab c"], ModelIdentity("m", "2")),
        ([("tool", "a", "s")], [0], ["ab", "c"], ["ab c"], None),
    ]
    keys = {catalog_key(*base), *(catalog_key(*variant) for variant in variants)}
    assert len(keys) == 1 + len(variants) and catalog_key(*base) == catalog_key(*base)


def test_building_a_large_index_on_a_terminal_shows_its_progress_on_standard_error(tmp_path, monkeypatch, capsys):
    import io

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    registry = ToolRegistry(package="many")
    for number in range(1000):
        registry.register_tool(ToolDefinition(name=f"tool_{number}", description=f"tool number {number}", state_transition={"produces": ["many.done"]}))
    graph = StateGraph(registry, [State("many.done", "done")])
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    index = SkillIndex(graph, CountingEmbedder(), cache=tmp_path / "toolpath.db")
    assert index.stored.stored and "skill index: storing" in terminal.getvalue() and "2/3" in terminal.getvalue()
    assert capsys.readouterr().out == ""
    terminal.seek(0)
    terminal.truncate()
    SkillIndex(graph, CountingEmbedder(), cache=tmp_path / "toolpath.db")
    assert "skill index" not in terminal.getvalue()  # loaded: nothing to show
