"""Dense indexes (planner/search/dense_index.py): the approximate index finds what the exact one
finds, skill search through it returns the exact search's hits, saved indexes load back the same,
and damaged ones are refused with the file named."""

import hashlib
import json
import os
import shutil

import numpy as np
import pytest

from toolpath.planner import SkillIndex, StateGraph
from toolpath.planner.search.dense_index import (
    APPROXIMATE_FROM_TEXTS,
    ApproximateDenseIndex,
    DenseIndexError,
    ExactDenseIndex,
    build_dense_index,
    load_dense_index,
)
from toolpath.registry import State, ToolDefinition, ToolRegistry
from toolpath.registry.storage import StoreError

DIMENSIONS = 24


def unit_rows(count: int, seed: int, dimensions: int = DIMENSIONS) -> np.ndarray:
    rows = np.random.default_rng(seed).standard_normal((count, dimensions)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def entries_of(texts: int, seed: int) -> np.ndarray:
    """First rows of entries of 1 to 3 texts each."""
    lengths = np.random.default_rng(seed).integers(1, 4, size=texts)
    starts = np.concatenate(([0], np.cumsum(lengths)))
    return starts[starts < texts]


def best_by_hand(vectors: np.ndarray, first_text: np.ndarray, query: np.ndarray) -> np.ndarray:
    ends = [*first_text[1:], len(vectors)]
    return np.array([max(float(np.dot(vectors[row], query)) for row in range(start, end)) for start, end in zip(first_text, ends)])


@pytest.fixture(scope="module")
def vectors_and_entries():
    vectors = unit_rows(3000, seed=1)
    return vectors, entries_of(len(vectors), seed=2)


@pytest.fixture(scope="module")
def approximate(vectors_and_entries):
    vectors, first_text = vectors_and_entries
    # One thread: the graph, and so this test, comes out the same on every run.
    return ApproximateDenseIndex.build(vectors, first_text, threads=1)


def test_the_approximate_index_finds_the_exact_top_ten_with_exact_similarities(vectors_and_entries, approximate):
    vectors, first_text = vectors_and_entries
    queries = unit_rows(20, seed=3)
    for query in queries:
        expected = best_by_hand(vectors, first_text, query)
        top_ten = np.argsort(-expected)[:10]
        found = approximate.nearest(query, 256)
        assert not found.complete and set(top_ten) <= set(found.entries.tolist())
        # Every candidate's similarity is its best text's, exactly (not the graph's int8 estimate).
        np.testing.assert_allclose(found.similarity, expected[found.entries], rtol=0, atol=1e-6)
        assert (found.similarity >= found.floor).all()


def test_asking_for_every_text_scores_every_entry_exactly(vectors_and_entries, approximate):
    vectors, first_text = vectors_and_entries
    query = unit_rows(1, seed=4)[0]
    found = approximate.nearest(query, len(vectors))
    assert found.complete and len(found.entries) == len(first_text)
    np.testing.assert_allclose(found.similarity, best_by_hand(vectors, first_text, query), rtol=0, atol=1e-6)


def test_small_indexes_stay_exact_and_large_ones_approximate():
    first_text = np.arange(10)
    assert not build_dense_index(unit_rows(10, seed=5), first_text).approximate
    assert APPROXIMATE_FROM_TEXTS > 10
    assert build_dense_index(unit_rows(10, seed=5), first_text, approximate=True).approximate


def test_inconsistent_arrays_are_refused():
    with pytest.raises(ValueError, match="first_text must start at 0"):
        ExactDenseIndex(unit_rows(5, seed=6), [1, 3])
    with pytest.raises(ValueError, match="first_text must start at 0"):
        ExactDenseIndex(unit_rows(5, seed=6), [0, 3, 3])
    with pytest.raises(ValueError, match="float32"):
        ExactDenseIndex(unit_rows(5, seed=6).astype(np.float64), [0])


@pytest.mark.parametrize("kind", ["exact", "approximate"])
def test_a_saved_index_loads_memory_mapped_and_answers_the_same(tmp_path, vectors_and_entries, approximate, kind):
    vectors, first_text = vectors_and_entries
    index = approximate if kind == "approximate" else ExactDenseIndex(vectors, first_text)
    index.save(tmp_path / "dense")
    loaded = load_dense_index(tmp_path / "dense")
    assert type(loaded) is type(index) and isinstance(loaded.vectors, np.memmap)
    np.testing.assert_array_equal(loaded.first_text, first_text)
    for query in unit_rows(5, seed=7):
        before, after = index.nearest(query, 200), loaded.nearest(query, 200)
        np.testing.assert_array_equal(before.entries, after.entries)
        np.testing.assert_array_equal(before.similarity, after.similarity)
        np.testing.assert_array_equal(before.best_text, after.best_text)


@pytest.fixture()
def saved(tmp_path, approximate):
    approximate.save(tmp_path / "dense")
    return tmp_path / "dense"


def test_a_missing_index_is_refused_as_a_store_error_naming_its_manifest(tmp_path):
    with pytest.raises(StoreError, match="dense_index.json is unusable: there is no saved dense index"):
        load_dense_index(tmp_path)


def damage(path, keep_modification_time: bool) -> None:
    """Overwrite 4,000 bytes a third of the way into ``path`` (in the graph's links), its size unchanged."""
    status = path.stat()
    data = bytearray(path.read_bytes())
    middle = len(data) // 3
    data[middle : middle + 4000] = np.random.default_rng(9).integers(0, 256, 4000, dtype=np.uint8).tobytes()
    path.write_bytes(bytes(data))
    if keep_modification_time:
        os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns))


def test_a_file_changed_after_it_was_saved_is_refused(saved):
    damage(saved / "texts.faiss", keep_modification_time=False)
    with pytest.raises(DenseIndexError, match=r"texts.faiss is unusable: it was changed after it was saved .*Delete the directory"):
        load_dense_index(saved)


def test_a_graph_damaged_without_a_trace_is_refused_by_faiss_not_crashed_on(saved):
    damage(saved / "texts.faiss", keep_modification_time=True)
    with pytest.raises(DenseIndexError, match=r"texts.faiss is unusable: faiss cannot read it \(.*out of range"):
        load_dense_index(saved)


def test_a_copied_index_loads_after_its_checksums_agree(tmp_path, saved):
    copy = tmp_path / "copy"
    copy.mkdir()
    for path in saved.iterdir():
        shutil.copyfile(path, copy / path.name)  # new modification times: each file's CRC-32 is checked
    assert load_dense_index(copy).approximate


@pytest.mark.parametrize("name", ["texts.faiss", "vectors.npy", "first_text.npy"])
def test_a_file_cut_short_is_refused_naming_it(saved, name):
    path = saved / name
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(DenseIndexError, match=rf"{name} is unusable: it has [\d,]+ bytes where \d+ were saved"):
        load_dense_index(saved)


def test_a_manifest_of_another_format_or_not_json_is_refused(saved):
    manifest = saved / "dense_index.json"
    recorded = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**recorded, "format": 99}))
    with pytest.raises(DenseIndexError, match="of format 99, not 1"):
        load_dense_index(saved)
    manifest.write_text("{not json")
    with pytest.raises(DenseIndexError, match="the manifest cannot be read"):
        load_dense_index(saved)


def test_vectors_of_another_shape_than_recorded_are_refused(saved):
    manifest = saved / "dense_index.json"
    recorded = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**recorded, "texts": recorded["texts"] + 1}))
    with pytest.raises(DenseIndexError, match=r"vectors.npy is unusable: it holds float32 \(3000, 24\) where the manifest records float32 \(3001, 24\)"):
        load_dense_index(saved)


class HashEmbedder:
    """A fixed random unit vector per text (its SHA-256 seeds it): no model, the same every run."""

    def __call__(self, texts):
        return np.stack([unit_rows(1, seed=int(hashlib.sha256(text.encode()).hexdigest()[:8], 16))[0] for text in texts])


VERBS = ["summarise", "forecast", "validate", "translate", "classify", "rank", "merge", "export", "audit", "tag"]
THINGS = ["invoices", "sensor readings", "reviews", "manifests", "payroll", "scans", "tickets", "flights", "leads", "orders", "claims", "filings"]
PLACES = ["by region", "per customer", "in bulk", "for auditors", "each week"]


@pytest.fixture(scope="module")
def office_graph():
    """600 tools (about 1,800 texts) over 12 input states and 120 result states."""
    registry = ToolRegistry(package="office")
    states = [State(f"office.{thing.replace(' ', '_')}_given", f"the {thing} the user has", [f"my {thing}"], input=True) for thing in THINGS]
    for verb in VERBS:
        for thing in THINGS:
            slug = thing.replace(" ", "_")
            states.append(State(f"office.{slug}_{verb}d", f"the {thing}, {verb}d", [f"{verb}d {thing}"]))
            for place in PLACES:
                registry.register_tool(
                    ToolDefinition(
                        name=f"{verb}_{slug}_{place.replace(' ', '_')}",
                        description=f"{verb.capitalize()} the {thing} {place}.",
                        affordances=[f"{verb} {thing} {place}"],
                        state_transition={"requires": [f"office.{slug}_given"], "produces": [f"office.{slug}_{verb}d"]},
                    )
                )
    return StateGraph(registry, states)


@pytest.fixture(scope="module")
def exact_and_approximate(office_graph):
    exact = SkillIndex(office_graph, HashEmbedder(), cache=False)
    assert not exact.dense_index.approximate  # 1,800 texts: the exact path, as every shipped catalog
    dense = ApproximateDenseIndex.build(exact.dense_index.vectors, exact.dense_index.first_text, threads=1)
    return exact, exact.with_dense_index(dense)


def hits_of(index, query, **options):
    return [(hit.kind, hit.name, hit.score, hit.similarity, hit.lexical, hit.matched, hit.reachable) for hit in index.search(query, **options)]


@pytest.mark.parametrize(
    "options",
    [{}, {"k": 3}, {"kind": "state"}, {"held": ["office.invoices_given"], "reachable_only": True}, {"kind": "state", "k": 40}],
    ids=["plain", "three", "states-only", "reachable-only", "forty-states"],
)
def test_search_through_the_approximate_index_returns_the_exact_hits_and_scores(exact_and_approximate, options):
    exact, approximate = exact_and_approximate
    # Filters that pass over most entries make the approximate search ask for more candidates
    # (states are 132 of 732 entries), until it scores every text.
    for query in ["forecast the invoices by region", "I want my payroll audited", "tag reviews", "what claims are there"]:
        assert hits_of(approximate, query, **options) == hits_of(exact, query, **options)


def test_outside_the_candidates_tools_are_ordered_by_their_words_alone(exact_and_approximate):
    exact, approximate = exact_and_approximate
    query = "translate the flights in bulk"
    relevance = approximate.tool_relevance(query)
    exact_relevance = exact.tool_relevance(query)
    assert len(relevance) == len(exact_relevance) == 600
    top = sorted(exact_relevance, key=exact_relevance.get, reverse=True)[:10]
    assert sorted(relevance, key=relevance.get, reverse=True)[:10] == top
    # Exact, every tool has its own dense rank; approximate, the tools outside the candidates share
    # one, so those that share no word with the query all tie for last.
    lowest = min(relevance.values())
    assert list(exact_relevance.values()).count(min(exact_relevance.values())) == 1
    assert list(relevance.values()).count(lowest) > 200


def test_a_dense_index_of_other_texts_is_refused(exact_and_approximate):
    exact, _ = exact_and_approximate
    other = ExactDenseIndex(unit_rows(10, seed=8), np.arange(10))
    with pytest.raises(ValueError, match="has 10 texts of 24 dimensions in 10 entries; this index has"):
        exact.with_dense_index(other)


def test_the_exact_path_scores_as_reciprocal_rank_fusion_of_best_cosines(office_graph, exact_and_approximate):
    """Below the threshold nothing changed: each hit's similarity is its best text's cosine, and its
    score is the weighted reciprocal-rank fusion of the dense and BM25 ranks (module docstring)."""
    exact, _ = exact_and_approximate
    query = "merge the leads per customer"
    query_vector = HashEmbedder()([query])[0]
    # Entries in the index's order (states as declared, then tools), which breaks ties of either ranking.
    keys = [("state", None, token) for token in office_graph.states] + [("tool", tool.server_name, tool.name) for tool in office_graph.registry]
    best = [float((exact.entry_text_vectors(key) @ query_vector).max()) for key in keys]
    hits = {(hit.kind, hit.name): hit for hit in exact.search(query, k=len(keys))}
    assert len(hits) == len(keys)
    lexical = [hits[key[0], key[2]].lexical for key in keys]
    dense_rank = {keys[position]: rank for rank, position in enumerate(sorted(range(len(keys)), key=lambda position: (-best[position], position)), 1)}
    sharing = sorted((position for position in range(len(keys)) if lexical[position] > 0), key=lambda position: (-lexical[position], position))
    lexical_rank = {keys[position]: rank for rank, position in enumerate(sharing, 1)}
    assert 0 < len(lexical_rank) < len(keys)
    for position, key in enumerate(keys):
        hit = hits[key[0], key[2]]
        assert hit.similarity == pytest.approx(best[position], abs=1e-6)
        expected = 0.8 / (20 + dense_rank[key]) + (0.2 / (20 + lexical_rank[key]) if key in lexical_rank else 0.0)
        assert hit.score == pytest.approx(expected, rel=1e-12)
