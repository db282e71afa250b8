"""BM25 over short texts: skill search's lexical half (:mod:`toolpath.planner.search.skills`) and a
handle's tool search in the kernel (:mod:`toolpath.kernel.tool_search`).

It computes what ``bm25s`` computes by default, in numpy alone: Lucene's BM25 (``k1`` = 1.5,
``b`` = 0.75, idf = ln(1 + (N − df + 0.5) / (df + 0.5)); Kamphuis et al., ECIR 2020) over bm25s's
terms (words of two or more word characters, lowercased, Lucene's English stop words removed,
Snowball-stemmed by PyStemmer), with the same float32 arithmetic, so scores and rankings are
bm25s's (``tests/test_bm25.py`` checks them against it). Importing bm25s imports ``scipy.sparse``
and ``tqdm.auto`` too: about 0.3 s of a 1 s ``toolpath search`` (issue 37), for indexes of a few
hundred texts that need neither.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

import numpy as np
import Stemmer

#: Term-frequency saturation and length normalisation (bm25s's and Lucene's defaults).
K1 = 1.5
B = 0.75
#: Lucene's English stop words (bm25s's ``stopwords="en"``).
STOP_WORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there these they this to was will with".split()
)
_WORD = re.compile(r"(?u)\b\w\w+\b")
_STEMMER = Stemmer.Stemmer("english")


def terms(texts: Sequence[str]) -> list[list[str]]:
    """Each text's terms, in order: its words of two or more word characters, lowercased, stop words
    removed, stemmed (``"Grouping similar molecules"`` → ``["group", "similar", "molecul"]``)."""
    words = [[word for word in _WORD.findall(text.lower()) if word not in STOP_WORDS] for text in texts]
    distinct = list(dict.fromkeys(word for text_words in words for word in text_words))
    stems = dict(zip(distinct, _STEMMER.stemWords(distinct)))
    return [[stems[word] for word in text_words] for text_words in words]


class BM25:
    """A BM25 index of documents given as term lists (:func:`terms`).

    Args:
        documents: ``n`` documents, each a list of terms (repeats count).
    """

    def __init__(self, documents: Sequence[Sequence[str]]):
        self.size = len(documents)
        counts = [Counter(document) for document in documents]
        holders: dict[str, list[int]] = {}
        for index, document_counts in enumerate(counts):
            for term in document_counts:
                holders.setdefault(term, []).append(index)
        # Rounded as bm25s rounds: idf to float32, each weight (idf × saturated frequency) to float32.
        idf = {term: float(np.float32(math.log(1 + (self.size - len(held) + 0.5) / (len(held) + 0.5)))) for term, held in holders.items()}
        weights: dict[str, list[float]] = {term: [] for term in holders}
        average_length = sum(map(len, documents)) / self.size if documents else 0.0
        for document, document_counts in zip(documents, counts):  # in document order, as holders lists them
            if not document_counts:
                continue  # no term, no weight (and when no document has one, no average length)
            norm = K1 * ((1 - B) + B * len(document) / average_length)
            for term, count in document_counts.items():
                weights[term].append(idf[term] * (count / (norm + count)))
        #: Per term: the documents holding it and its weight in each.
        self._postings = {term: (np.asarray(held, dtype=np.intp), np.asarray(weights[term], dtype=np.float32)) for term, held in holders.items()}

    def scores(self, query: Sequence[str]) -> np.ndarray:
        """``(n,)`` float32: each document's BM25 score for the query's terms (a repeated term counts
        each time; terms no document holds add nothing)."""
        scores = np.zeros(self.size, dtype=np.float32)
        for term in query:
            posting = self._postings.get(term)
            if posting is not None:
                held, weights = posting
                scores[held] += weights
        return scores
