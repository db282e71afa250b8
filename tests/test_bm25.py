"""toolpath.kernel.bm25 gives bm25s's terms and scores (bm25s, a test dependency, is the reference)."""

from __future__ import annotations

import bm25s
import numpy as np
import pytest
import Stemmer

from toolpath.catalogs import default_catalog_paths
from toolpath.kernel.bm25 import BM25, terms
from toolpath.registry import load_catalogs


def reference_terms(texts: list[str]) -> list[list[str]]:
    return bm25s.tokenize(texts, stopwords="en", stemmer=Stemmer.Stemmer("english"), return_ids=False, show_progress=False)


def reference_scores(documents: list[list[str]], query: list[str]) -> np.ndarray:
    index = bm25s.BM25()
    index.index(documents, show_progress=False)
    return index.get_scores(query) if query else np.zeros(len(documents), dtype=np.float32)


@pytest.fixture(scope="module")
def catalog_texts() -> list[str]:
    """One document per state and tool of the shipped catalogs, about as skill search builds them."""
    loaded = load_catalogs(default_catalog_paths())
    states = [" ".join([state.description, *state.affordances, token]) for token, state in loaded.states.items()]
    tools = [" ".join([tool.description, *tool.affordances, tool.name.replace("_", " ")]) for tool in loaded.registry]
    return states + tools


QUERIES = [
    "group similar molecules",
    "is aspirin drug-like? check Lipinski's rule of five",
    "Plot a histogram of the prices; then filter the rows!",
    "the and of",  # stop words only: no term
    "molecules molecules molecules",  # a repeated term counts each time
    "zzz quux",  # words no document holds
    "Molécules similaires",  # Unicode words
]


def test_terms_are_bm25s_terms(catalog_texts):
    texts = [*catalog_texts, *QUERIES, "", "a", "x y z", "ÉCOLE École école", "don't stop-words_here 3.14"]
    assert terms(texts) == reference_terms(texts)


def test_scores_are_bm25s_scores_and_rank_alike(catalog_texts):
    documents = terms(catalog_texts)
    index = BM25(documents)
    for query in [*QUERIES, *catalog_texts[:20]]:
        query_terms = terms([query])[0]
        scores, expected = index.scores(query_terms), reference_scores(documents, query_terms)
        assert scores.dtype == np.float32 and scores.shape == (len(documents),)
        np.testing.assert_allclose(scores, expected, rtol=1e-6, atol=0)
        assert np.argsort(-scores, kind="stable").tolist() == np.argsort(-expected, kind="stable").tolist(), query


def test_equal_documents_tie_and_empty_documents_score_zero():
    documents = terms(["cluster molecules", "", "cluster molecules", "plot a table", "the of"])
    scores = BM25(documents).scores(terms(["cluster"])[0])
    assert scores[0] == scores[2] > 0 and scores[1] == scores[3] == scores[4] == 0
    np.testing.assert_allclose(scores, reference_scores(documents, ["cluster"]), rtol=1e-6, atol=0)


def test_an_index_of_nothing_or_of_empty_documents_scores_nothing():
    assert BM25([]).scores(["cluster"]).shape == (0,)
    assert BM25([[], []]).scores(["cluster"]).tolist() == [0.0, 0.0]
