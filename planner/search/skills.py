"""Skill search: match what an agent wants to achieve against the states and tools of a graph.

Every state is one entry with its description, affordances and token in words; every tool one entry
with its description, affordances, name in words and parameter names. Two rankings of the entries
are fused:

* **dense**: the best cosine similarity between the query and any one text of the entry, from
  sentence-transformers embeddings (cached in SQLite, see :mod:`toolpath.planner.search.embedding_cache`), so a
  single well-phrased affordance is enough to match;
* **BM25** (``bm25s``, Snowball-stemmed English, stop words removed) over all the entry's texts.

Fusion is weighted reciprocal-rank fusion (Cormack, Clarke & Büttcher, SIGIR 2009):
``score = DENSE_WEIGHT / (RRF_K + dense rank) + (1 − DENSE_WEIGHT) / (RRF_K + BM25 rank)``, an entry
with no query word contributing no BM25 term. ``RRF_K`` and ``DENSE_WEIGHT`` were tuned on the
MetaTool dev split only (``benchmarks/bench_search.py``).

Each hit also says whether it is reachable from the held states and carries the plan that reaches it.
"""

from __future__ import annotations

import logging
import os
import re
import unicodedata
import warnings
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import bm25s
import numpy as np

from toolpath.errors import Refusal
from toolpath.kernel.inside.tool_search import bm25_terms
from toolpath.planner.planning.graph import StateGraph
from toolpath.planner.planning.plans import NoPlanError, Plan, plan, plan_to_run
from toolpath.planner.search.embedding import Embedder, EmbedderUnavailableError, checked_vectors, default_embedder
from toolpath.planner.search.embedding_cache import CachedEmbedder, EmbeddingCache, warn_unusable
from toolpath.registry.storage import StoreError

if TYPE_CHECKING:
    from toolpath.planner.search.learned import LearnedEntry, LearnedSearch

# bm25s sets its logger to DEBUG itself, so an application that logs at the root (the MCP SDK's
# server does) prints a note for every index built; the application's level decides instead.
logging.getLogger("bm25s").setLevel(logging.NOTSET)

#: Reciprocal-rank-fusion constant (Cormack et al. use 60); tuned on MetaTool dev (grid 1, 5, 20, 60).
RRF_K = 20
#: Weight of the dense ranking in the fusion (BM25 gets the rest); tuned on MetaTool dev (grid 0.5-0.9).
DENSE_WEIGHT = 0.8

#: Cosine similarity a hit needs to match a task (:func:`toolpath.planner.tasks.goals.choose_goal`, which says how
#: it was set); ``toolpath search`` marks hits below it.
MIN_SCORE = 0.35

#: Query vectors kept per index (see ``SkillIndex._query_vector``).
_RECENT_QUERIES = 64

Mode = Literal["hybrid", "dense", "bm25"]
Kind = Literal["state", "tool"]


@dataclass(frozen=True)
class SkillHit:
    """One search result.

    Attributes:
        kind: ``"state"`` or ``"tool"``.
        name: the state token, or the tool name.
        server: the tool's server; for a state, the prefix of its token (its domain).
        score: the fused score (hybrid), the cosine similarity (dense) or the BM25 score (bm25).
        similarity: cosine similarity of the query and the best-matching text, in [-1, 1];
            ``None`` when the index has no embeddings (BM25 only).
        lexical: the BM25 score of the entry (0 when no query word occurs in it).
        matched: the text that matched best (densely, else the one sharing most query words).
        states: the goal this hit stands for: the state itself, or what the tool produces.
        reachable: for a state, whether a plan from the held states reaches it; for a tool, whether
            a plan can run it.
        plan: that plan, ending with the tool for a tool hit (``None`` when unreachable).
    """

    kind: Kind
    name: str
    server: str | None
    score: float
    similarity: float | None
    lexical: float
    matched: str
    states: frozenset[str]
    reachable: bool
    plan: Plan | None

    def matches(self, min_score: float = MIN_SCORE) -> bool:
        """Whether a task would match this hit: its similarity reaches ``min_score``, or, in an
        index without embeddings, it shares a word with the query."""
        return self.similarity >= min_score if self.similarity is not None else self.lexical > 0

    def to_dict(self) -> dict:
        return {
            "kind": self.kind,
            "name": self.name,
            "server": self.server,
            "score": round(self.score, 6),
            "similarity": None if self.similarity is None else round(self.similarity, 4),
            "lexical": round(self.lexical, 4),
            "matched": self.matched,
            "states": sorted(self.states),
            "reachable": self.reachable,
            "plan": None if self.plan is None else [step.tool.name for step in self.plan.steps],
        }


class QueryError(Refusal, ValueError):
    """A search query that cannot be answered as given (empty, or a bad ``k``)."""


def check_text(text: str, what: str = "query") -> None:
    """Refuse a query or task text that no model should read and no terminal should echo.

    Raises:
        QueryError: naming ``what`` and the position (0-based) of a control character other than
            tab and line ends (a NUL, a terminal escape), or of a lone surrogate (bytes that were not
            UTF-8: Python decodes such command-line bytes to U+DC80-U+DCFF).
    """
    for position, character in enumerate(text):
        code = ord(character)
        if 0xDC80 <= code <= 0xDCFF:
            raise QueryError(f"the {what} is not valid UTF-8: byte 0x{code - 0xDC00:02x} at character {position}; give the text in UTF-8")
        if 0xD800 <= code <= 0xDFFF:
            raise QueryError(f"the {what} holds a lone surrogate U+{code:04X} at character {position}; give it as text")
        if unicodedata.category(character) == "Cc" and character not in "\t\n\r":
            raise QueryError(f"the {what} holds the control character U+{code:04X} at character {position}; remove it")


@dataclass(frozen=True)
class _Entry:
    kind: Kind
    name: str
    server: str | None
    states: frozenset[str]
    tool_id: int | None = None


def _words(identifier: str) -> str:
    """``chemistry.molecule_parsed`` → ``chemistry molecule parsed``; ``getWeatherAPI`` → ``get Weather API``."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", " ", identifier)
    return re.sub(r"[._\-&/]+", " ", spaced).strip()


class SkillIndex:
    """A hybrid (dense + BM25) index over the states and tools of a :class:`StateGraph`.

    Args:
        graph: the graph whose declared states and tools are indexed.
        embedder: maps texts to an ``(n, d)`` float array; default: the embedded all-MiniLM-L6-v2.
        mode: ``"hybrid"`` (default), ``"dense"`` or ``"bm25"``.
        cache: where embeddings are kept: an :class:`EmbeddingCache`, a database path, ``None``
            for ``$TOOLPATH_HOME/toolpath.db``, or ``False`` for no cache. Embedders without a
            ``model_id`` are never cached.
        rrf_k, dense_weight: the fusion's constants (defaults: :data:`RRF_K`, :data:`DENSE_WEIGHT`).
        learned: phrasings learned from use (:class:`toolpath.planner.search.learned.LearnedSearch`):
            an entry's dense similarity is its best over its own texts and its learned phrasings,
            and the learned adapter, if any, maps each query vector first.

    When sentence-transformers is not installed, the default embedder cannot load: the index warns
    (``RuntimeWarning``) and searches with BM25 only (``mode`` becomes ``"bm25"``).

    An unusable cache file (a directory, not a database, corrupt, unreadable, read-only, a full
    disk: any :class:`toolpath.registry.storage.StoreError`) warns once (``RuntimeWarning``, naming the file
    and what to do) and the index is embedded without it; a malformed row warns and is re-embedded.

    Raises:
        ValueError: an unknown ``mode`` or fusion constant, or an embedder whose output is not a
            finite ``(n, d)`` array.
    """

    def __init__(
        self,
        graph: StateGraph,
        embedder: Embedder | None = None,
        mode: Mode = "hybrid",
        cache: EmbeddingCache | str | os.PathLike[str] | Literal[False] | None = None,
        rrf_k: float = RRF_K,
        dense_weight: float = DENSE_WEIGHT,
        learned: LearnedSearch | None = None,
    ):
        if mode not in ("hybrid", "dense", "bm25"):
            raise ValueError(f"mode must be 'hybrid', 'dense' or 'bm25', got {mode!r}")
        if rrf_k < 0 or not 0 <= dense_weight <= 1:
            raise ValueError(f"rrf_k must be at least 0 and dense_weight within [0, 1], got {rrf_k} and {dense_weight}")
        self.graph = graph
        self.mode: Mode = mode
        self.rrf_k = rrf_k
        self.dense_weight = dense_weight
        self._entries: list[_Entry] = []
        self._texts: list[str] = []
        self._first_text: list[int] = []
        documents: list[str] = []
        for token, state in graph.states.items():
            domain = token.split(".", 1)[0] if "." in token else None
            texts = self._add(_Entry("state", token, domain, frozenset([token])), [state.description, *state.affordances, _words(token)])
            documents.append(" ".join(texts))
        for tool in graph.registry:
            transition = tool.state_transition
            texts = self._add(
                _Entry("tool", tool.name, tool.server_name, transition.produces, tool.id), [tool.description, *tool.affordances, _words(tool.name)]
            )
            parameters = [_words(parameter.name) for parameter in (*tool.required_parameters, *tool.optional_parameters)]
            # The name as written too, so a request that names the tool ("call SearchPeople") matches it.
            documents.append(" ".join([*texts, *parameters, tool.name]))
        self._bm25 = bm25s.BM25()
        if documents:
            self._bm25.index(bm25_terms(documents), show_progress=False)
        self.embedder: Embedder | None = None
        self.learned = learned
        self._learned_owner = self._learned_owners(learned)
        self._recent_queries: dict[str, np.ndarray] = {}
        self._queries_ready = False
        self._cached: CachedEmbedder | None = None
        self._vectors = np.zeros((0, 1), dtype=np.float32)
        if mode != "bm25" and self._texts:
            self._embed_texts(embedder if embedder is not None else default_embedder(), cache)

    def _add(self, entry: _Entry, texts: list[str]) -> list[str]:
        # Never empty: the dense scores are maxima over each entry's run of texts.
        kept = [text for text in dict.fromkeys(text.strip() for text in texts) if text] or [entry.name]
        self._entries.append(entry)
        self._first_text.append(len(self._texts))
        self._texts.extend(kept)
        return kept

    def _learned_owners(self, learned: LearnedSearch | None) -> np.ndarray:
        """The index of the entry each learned row belongs to (-1: no entry of this index)."""
        if learned is None:
            return np.zeros(0, dtype=np.int64)
        position = {(entry.kind, entry.server if entry.kind == "tool" else None, entry.name): index for index, entry in enumerate(self._entries)}
        return np.asarray([position.get(entry, -1) for entry in learned.entries], dtype=np.int64)

    def entry_vector(self, entry: LearnedEntry) -> np.ndarray:
        """The mean of the unit vectors of an entry's texts (``(kind, server, name)``; server ``None`` for a state).

        Raises:
            ValueError: the index has no such entry, or no embeddings.
        """
        kind, server, name = entry
        for index, known in enumerate(self._entries):
            if known.kind == kind and known.name == name and (kind == "state" or known.server == server):
                if len(self._vectors) != len(self._texts):
                    raise ValueError("the index has no embeddings (BM25 only)")
                end = self._first_text[index + 1] if index + 1 < len(self._first_text) else len(self._texts)
                return self._vectors[self._first_text[index] : end].mean(axis=0)
        raise ValueError(f"the index has no {kind} {name!r}" + (f" of server {server!r}" if server else ""))

    def _embed_texts(self, embedder: Embedder, cache: EmbeddingCache | str | os.PathLike[str] | Literal[False] | None) -> None:
        try:
            self._vectors = _normalised(self._embed_through_cache(embedder, cache))
        except EmbedderUnavailableError as error:
            warnings.warn(f"skill search falls back to BM25 only: {error}", RuntimeWarning, stacklevel=4)
            self.mode = "bm25"
            return
        self.embedder = embedder  # queries skip the cache: they are one-off texts

    def _embed_through_cache(self, embedder: Embedder, cache: EmbeddingCache | str | os.PathLike[str] | Literal[False] | None) -> np.ndarray:
        if cache is False or not getattr(embedder, "model_id", None):
            return checked_vectors(embedder(self._texts), len(self._texts), embedder)
        try:
            self._cached = CachedEmbedder(embedder, cache if isinstance(cache, EmbeddingCache) else EmbeddingCache(cache))
            return self._cached(self._texts)
        except StoreError as error:
            # A broken cache costs time, not answers: embed everything and say where the file is.
            warn_unusable(error)
            self._cached = None
            return checked_vectors(embedder(self._texts), len(self._texts), embedder)

    @property
    def cache_counts(self) -> tuple[int, int]:
        """``(hits, misses)`` of the embedding cache while building this index (``(0, 0)`` uncached)."""
        return (self._cached.hits, self._cached.misses) if self._cached is not None else (0, 0)

    @property
    def domains(self) -> set[str]:
        """Servers of the tools and domains (token prefixes) of the states, for the ``domain`` filter."""
        return {entry.server for entry in self._entries if entry.server is not None}

    def __len__(self) -> int:
        """Number of entries (states and tools)."""
        return len(self._entries)

    def search(
        self,
        query: str,
        k: int = 10,
        held: Iterable[str] = (),
        domain: str | Collection[str] | None = None,
        kind: Kind | None = None,
        reachable_only: bool = False,
    ) -> list[SkillHit]:
        """The ``k`` best states and tools for ``query``, best first.

        Parameters:
            query: what the agent wants to achieve, in words (any language the model knows).
            k: at most this many hits.
            held: states held now; each hit says whether it is reachable from them, and how.
            domain: keep only hits of this server/domain (or of any of these).
            kind: keep only states or only tools.
            reachable_only: keep only hits reachable from ``held``.

        Raises:
            QueryError: the query is empty or blank, or ``k`` < 1.
            UnknownStateError: a held token the graph does not know.
        """
        if not query or not query.strip():
            raise QueryError("the query is empty; describe what you want to achieve")
        check_text(query)
        if not isinstance(k, int) or k < 1:
            raise QueryError(f"k must be a whole number of at least 1, got {k!r}")
        if kind not in (None, "state", "tool"):
            raise QueryError(f"kind must be 'state' or 'tool', got {kind!r}")
        held = frozenset([held] if isinstance(held, str) else held)
        self.graph.check_states(sorted(held))
        domains = {domain} if isinstance(domain, str) else set(domain) if domain is not None else None
        unknown = sorted((domains or set()) - self.domains)
        if unknown:
            raise QueryError(f"unknown domain {', '.join(map(repr, unknown))}; the catalogs have: {', '.join(sorted(self.domains)) or 'none'}")
        if not self._entries:
            return []
        similarity, best_text = self._dense_scores(query) if self.mode != "bm25" else (None, None)
        query_tokens = bm25_terms([query])[0]
        lexical = self._bm25.get_scores(query_tokens) if query_tokens else np.zeros(len(self._entries), dtype=np.float32)
        score = self._fused(similarity, lexical)
        hits: list[SkillHit] = []
        for index in np.argsort(-score, kind="stable"):
            entry = self._entries[index]
            if (kind is not None and entry.kind != kind) or (domains is not None and entry.server not in domains):
                continue
            if self.mode == "bm25" and lexical[index] <= 0:
                break  # ranked by BM25 alone: the rest share no word with the query
            reachable, goal_plan = self._reach(entry, held)
            if reachable_only and not reachable:
                continue
            matched = self._texts[best_text[index]] if best_text is not None else self._lexical_match(index, set(query_tokens))
            dense = None if similarity is None else float(similarity[index])
            hits.append(
                SkillHit(entry.kind, entry.name, entry.server, float(score[index]), dense, float(lexical[index]), matched, entry.states, reachable, goal_plan)
            )
            if len(hits) == k:
                break
        return hits

    def tool_relevance(self, query: str) -> dict[int, float]:
        """``{tool id: score}`` of every tool for ``query``, the fused score :meth:`search` ranks by
        (higher is more relevant; only the order means something). For breaking ties between plans
        of equal cost (:func:`toolpath.planner.planning.plans.plan`'s ``prefer``).

        Raises:
            QueryError: the query is empty or blank.
        """
        if not query or not query.strip():
            raise QueryError("the query is empty; describe what you want to achieve")
        if not self._entries:
            return {}
        similarity = self._dense_scores(query)[0] if self.mode != "bm25" else None
        query_tokens = bm25_terms([query])[0]
        lexical = self._bm25.get_scores(query_tokens) if query_tokens else np.zeros(len(self._entries), dtype=np.float32)
        score = self._fused(similarity, lexical)
        return {entry.tool_id: float(score[index]) for index, entry in enumerate(self._entries) if entry.kind == "tool" and entry.tool_id is not None}

    def load_query_model(self) -> None:
        """Embed one probe query now (once per index), so whatever the embedder loads on first use
        loads here: the shipped ONNX query model takes seconds, and about 20 s when it is first
        exported. Planning calls this before its time budget starts, so the budget counts planning.

        Raises:
            ValueError: the embedder's output is not a finite ``(1, d)`` array.
        """
        if self.embedder is not None and not self._queries_ready:
            checked_vectors(self.embedder(["probe"]), 1, self.embedder)
            self._queries_ready = True

    def _query_vector(self, query: str) -> np.ndarray:
        """The query's unit vector; the last few are kept, since planning a task searches each part
        and then scores every tool against it."""
        vector = self._recent_queries.get(query)
        if vector is None:
            assert self.embedder is not None
            vector = _normalised(checked_vectors(self.embedder([query]), 1, self.embedder))[0]
            if self.learned is not None and self.learned.adapter is not None:
                vector = _normalised((vector @ self.learned.adapter)[None, :])[0]
            if len(self._recent_queries) >= _RECENT_QUERIES:
                del self._recent_queries[next(iter(self._recent_queries))]
            self._recent_queries[query] = vector
        return vector

    def _dense_scores(self, query: str) -> tuple[np.ndarray, np.ndarray]:
        """Per entry: the best cosine over its texts, and the index of that text."""
        query_vector = self._query_vector(query.strip())
        if query_vector.shape != self._vectors.shape[1:]:
            raise ValueError(f"the embedder returned a {query_vector.shape[0]}-dimensional query vector for an index of {self._vectors.shape[1]} dimensions")
        # Not `@`: a BLAS matrix-vector product wakes OpenBLAS's threads, which then spin and starve
        # the embedding model's threads on the next query (2.5x slower with torch on 2 cores); einsum stays in one thread.
        similarities = np.einsum("ij,j->i", self._vectors, query_vector)
        starts = np.asarray(self._first_text)
        best = np.maximum.reduceat(similarities, starts)
        # The first text reaching an entry's best score (reduceat has no argmax counterpart).
        owner = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(similarities))))
        is_best = np.flatnonzero(similarities == best[owner])
        best_text = np.empty(len(starts), dtype=np.int64)
        best_text[owner[is_best][::-1]] = is_best[::-1]
        if self.learned is not None and len(self._learned_owner):
            known = self._learned_owner >= 0
            learned_similarities = np.einsum("ij,j->i", self.learned.vectors[known], query_vector)
            np.maximum.at(best, self._learned_owner[known], learned_similarities)
        return best, best_text

    def _fused(self, similarity: np.ndarray | None, lexical: np.ndarray) -> np.ndarray:
        if self.mode == "dense":
            assert similarity is not None
            return similarity
        if self.mode == "bm25" or similarity is None:
            return lexical
        dense = self.dense_weight / (self.rrf_k + _ranks(similarity))
        return dense + np.where(lexical > 0, (1 - self.dense_weight) / (self.rrf_k + _ranks(lexical)), 0.0)

    def _lexical_match(self, index: int, query_tokens: set[str]) -> str:
        end = self._first_text[index + 1] if index + 1 < len(self._first_text) else len(self._texts)
        texts = self._texts[self._first_text[index] : end]
        overlaps = [len(query_tokens & set(tokens)) for tokens in bm25_terms(texts)]
        return texts[int(np.argmax(overlaps))]

    def _reach(self, entry: _Entry, held: frozenset[str]) -> tuple[bool, Plan | None]:
        """A state is reachable when a plan reaches it; a tool when a plan can run it (and ends with it)."""
        try:
            if entry.kind == "tool":
                return True, plan_to_run(self.graph, self.graph.registry.get_tool_by_id(entry.tool_id), held)
            return True, plan(self.graph, entry.states, held)
        except NoPlanError:
            return False, None


def _normalised(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1, norms)


def _ranks(scores: np.ndarray) -> np.ndarray:
    """1-based rank of each score, best first (ties broken by position)."""
    ranks = np.empty(len(scores), dtype=np.float64)
    ranks[np.argsort(-scores, kind="stable")] = np.arange(1, len(scores) + 1)
    return ranks
