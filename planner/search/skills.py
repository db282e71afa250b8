"""Skill search: match what an agent wants to achieve against the states and tools of a graph.

Every state is one entry with its description, affordances and token in words; every tool one entry
with its description, affordances, name in words and parameter names. Two rankings of the entries
are fused:

* **dense**: the best cosine similarity between the query and any one text of the entry, from
  sentence-transformers embeddings (cached in SQLite, see :mod:`toolpath.planner.search.embedding_cache`), so a
  single well-phrased affordance is enough to match. A text that repeats an earlier one of its entry
  up to case, punctuation and articles (a name in words restating the description, as catalogs
  drafted from APIs often have it) is not embedded: it would score within a hair of the other, and
  it is about a third of a big catalog's first embedding (:func:`_embedded_texts`);
* **BM25** (``bm25s``, Snowball-stemmed English, stop words removed) over all the entry's texts.

Fusion is weighted reciprocal-rank fusion (Cormack, Clarke & Büttcher, SIGIR 2009):
``score = DENSE_WEIGHT / (RRF_K + dense rank) + (1 − DENSE_WEIGHT) / (RRF_K + BM25 rank)``, an entry
with no query word contributing no BM25 term. ``RRF_K`` and ``DENSE_WEIGHT`` were tuned on the
MetaTool dev split only (``benchmarks/bench_search.py``).

**Large catalogs** (from :data:`toolpath.planner.search.dense_index.APPROXIMATE_FROM_TEXTS` texts,
about 30,000 tools) find their dense candidates through an approximate nearest-neighbour index
(:mod:`toolpath.planner.search.dense_index`): the entries of the texts nearest the query, each
re-scored exactly. The candidates take dense ranks 1, 2, … by their exact similarity, and every
other entry shares the next rank, so outside the candidates the order comes from BM25 alone (what
:meth:`SkillIndex.tool_relevance` returns for them). That shared rank is the best any of them could
have, so their fused scores are upper bounds: :meth:`SkillIndex.search` returns only hits whose
score is exact, asking for four times as many candidates (at last, scoring every text) when it
reaches an entry whose score is a bound. Its hits are those of the exact search, up to the
candidates the approximate index misses (top-10 agreement in docs/benchmarks.md), and
:meth:`SkillIndex.entry_rank` always scores every text.

**Learned evidence** (optional, :class:`toolpath.planner.search.learned.LearnedSearch`: phrasings
seen in use, as vectors, and a query adapter). An entry's *learned similarity* combines its nearest
learned phrasing's cosine and the cosine of the mean of its phrasings (a prototype), both with the
query as embedded (the phrasings are queries too): from the larger of the two it moves toward their
average by the share ``0.5 × LEARNED_BLEND_PHRASINGS / (n + LEARNED_BLEND_PHRASINGS)`` for an entry
of ``n`` phrasings. With many phrasings the larger one decides (a phrasing seen almost word for word
is the best evidence there is); with a few, one close phrasing or a prototype of a handful is less
sure, and an entry that both its nearest phrasing and its prototype point at is the safer bet. Its
dense similarity becomes the larger of
its catalog texts' best cosine (with the adapted query when there is an adapter) and its learned
similarity; and an entry whose nearest phrasing or prototype (the larger, unblended: a phrasing that
is nearly the request keeps its full weight however few there are) reaches ``LEARNED_THRESHOLD``
gains ``LEARNED_WEIGHT × (that similarity − LEARNED_THRESHOLD)``
on top of its fused score, so a phrasing seen almost word for word wins over a catalog text that only
resembles the query. An entry without phrasings keeps its own similarity and is passed only by an
entry that has a phrasing closer to the query than any text of its own: with few examples the
learned entries rarely are, so the search stays at least as good as without (measured on MetaTool,
with 1 % and half an example per tool, in ``benchmarks/bench_search.py``). Once there is at least
``LEARNED_LEXICAL_MIN`` phrasing per entry on average, the phrasings' words also join their entries'
BM25 documents (with fewer, they cost more than they bring).

Each hit also says whether it is reachable from the held states and carries the plan that reaches it.
"""

from __future__ import annotations

import copy
import functools
import logging
import os
import re
import unicodedata
import warnings
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple

import numpy as np

from toolpath.errors import Refusal
from toolpath.kernel.inside.tool_search import bm25_terms, bm25s
from toolpath.planner.planning.delete_free import INFINITY
from toolpath.planner.planning.graph import StateGraph
from toolpath.planner.planning.plans import NoPlanError, Plan, plan, plan_to_run
from toolpath.planner.search.dense_index import DenseIndex, build_dense_index, group_maxima
from toolpath.planner.search.embedding import Embedder, EmbedderUnavailableError, checked_vectors, default_embedder
from toolpath.planner.search.embedding_cache import CachedEmbedder, EmbeddingCache, warn_unusable
from toolpath.planner.search.learned import LearnedEntry, LearnedSearch, LearnedSearchError
from toolpath.planner.search.stored_index import CatalogPart, IndexStore, StoredIndex, build_progress, catalog_key, content_index_key, model_identity
from toolpath.registry.storage import StoreError

# bm25s sets its logger to DEBUG itself, so an application that logs at the root (the MCP SDK's
# server does) prints a note for every index built; the application's level decides instead.
logging.getLogger("bm25s").setLevel(logging.NOTSET)

#: Reciprocal-rank-fusion constant (Cormack et al. use 60); tuned on MetaTool dev (grid 1, 5, 20, 60).
RRF_K = 20
#: Weight of the dense ranking in the fusion (BM25 gets the rest); tuned on MetaTool dev (grid 0.5-0.9).
DENSE_WEIGHT = 0.8

#: Cosine similarity of a query and a learned phrasing from which the phrasing adds to its entry's
#: fused score, and how much per unit of similarity above it. Chosen on a held-back part of the
#: MetaTool learning queries at five amounts of learned data (thresholds 0.4-0.6, weights 0.02-0.3;
#: ``benchmarks/bench_search.py --tune`` repeats the grid), never on the measured part: higher weights
#: win a little with all the data and lose with 5 examples per tool; a threshold of 0.4 loses with
#: under one example per tool.
LEARNED_THRESHOLD = 0.5
LEARNED_WEIGHT = 0.05
#: Phrasings at which an entry's learned similarity is moved a quarter of the way from the larger of
#: its nearest phrasing's and its prototype's cosine toward their average (further with fewer, little
#: with many; see the module docstring). Chosen on the held-back part of the MetaTool
#: learning queries (``benchmarks/bench_search.py --tune``: 5, 10, 20, 40 and no blend, with the
#: adapter at ridge 1), never on the measured part: with 5 examples per tool R@1 .653 → .668 and
#: R@5 .866 → .868, every other amount of labels within ± .005 of the larger alone; 20 and 40 win a
#: little more with all the labels and lose R@5 with the labels of the top 5 only. Refitting
#: ``learned.ADAPTER_RIDGE`` with it then gave 2. The bonus above ``LEARNED_THRESHOLD`` keeps the
#: unblended similarity: blended, it cost a three-phrasing tool its first place for a request next
#: to one of its phrasings (tests/test_learning.py); unblended, the held-back figures with ridge 2
#: against the shipped search before the blend: all labels R@1 .806 → .812, R@5 .951 → .953;
#: 5 per tool .653 → .659, .866 → .872; top-5 labels .779 → .778, .901 → .902; 1 % .562 → .568,
#: .819 → .820; half per tool .580 → .587, .822 → .820.
LEARNED_BLEND_PHRASINGS = 5.0
#: Learned phrasings join their entries' BM25 documents once there is at least this many per entry
#: on average. Measured on the held-back part of the MetaTool learning queries: with 5 and more per
#: tool their words add ≈ .02 R@1 and .015 R@5; with 1 % or half an example per tool they cost
#: ≈ .02 R@1 (a few learned tools' documents grow while the rest stay as written).
LEARNED_LEXICAL_MIN = 1.0

#: Cosine similarity a hit needs to match a task (:func:`toolpath.planner.tasks.goals.choose_goal`, which says how
#: it was set); ``toolpath search`` marks hits below it.
MIN_SCORE = 0.35

#: Query vectors kept per index (see ``SkillIndex._query_vector``).
_RECENT_QUERIES = 64
#: Texts an approximate search first asks its dense index for, at least, and per hit wanted. With
#: 10 hits, any 26 candidate entries leave every entry outside them a fused score below the 10th
#: best (``DENSE_WEIGHT / (RRF_K + 27) + (1 - DENSE_WEIGHT) / (RRF_K + 1)`` < ``DENSE_WEIGHT /
#: (RRF_K + 10)``), and 256 texts are that many entries unless entries have ten texts each: a search
#: without filters needs no second round.
_CANDIDATE_TEXTS = 256
_CANDIDATE_TEXTS_PER_HIT = 16
#: Each further round asks for this many times the texts; once that reaches this share of all
#: texts, every text is scored instead.
_CANDIDATE_GROWTH = 4
_EXACT_FROM_SHARE = 0.1

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
        similarity: cosine similarity of the query and the best-matching text, in [-1, 1] (a
            learned phrasing of the entry counts as one of its texts); ``None`` when the index has
            no embeddings (BM25 only).
        lexical: the BM25 score of the entry (0 when no query word occurs in it; learned phrasings'
            words count when they joined, see the module docstring).
        matched: the text that matched best (densely, else the one sharing most query words).
        states: the goal this hit stands for: the state itself, or what the tool produces.
        reachable: for a state, whether a plan from the held states reaches it; for a tool, whether
            a plan can run it.
        plan: that plan, ending with the tool for a tool hit (``None`` when unreachable).
        learned: when learned evidence moved this hit (its nearest learned phrasing is closer than
            its catalog texts, or reaches :data:`LEARNED_THRESHOLD`), that phrasing; else ``None``.
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
    learned: LearnedMatch | None = None

    @property
    def qualified_name(self) -> str:
        """The name a plan or ``--avoid`` takes: ``server.name`` for a tool of a domain, else the
        hit's name."""
        return f"{self.server}.{self.name}" if self.kind == "tool" and self.server else self.name

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
            "learned": None if self.learned is None else self.learned.to_dict(),
        }


@dataclass(frozen=True)
class LearnedMatch:
    """The learned evidence for a hit it moved.

    Attributes:
        phrasing: the entry's learned phrasing nearest the query (``None`` when the learned data
            kept no texts).
        row: its row in the :class:`LearnedSearch`.
        similarity: the entry's learned similarity: the larger of ``phrasing_similarity`` and
            ``mean_similarity``, moved toward their average when the entry has few phrasings (see
            the module docstring and :data:`LEARNED_BLEND_PHRASINGS`).
        phrasing_similarity: the nearest phrasing's cosine similarity with the query.
        mean_similarity: the cosine similarity of the mean of the entry's phrasings with the query.
        catalog_similarity: the best cosine of the entry's own catalog texts.
    """

    phrasing: str | None
    row: int
    similarity: float
    phrasing_similarity: float
    mean_similarity: float
    catalog_similarity: float

    def to_dict(self) -> dict:
        return {
            "phrasing": self.phrasing,
            "row": self.row,
            "similarity": round(self.similarity, 4),
            "phrasing_similarity": round(self.phrasing_similarity, 4),
            "mean_similarity": round(self.mean_similarity, 4),
            "catalog_similarity": round(self.catalog_similarity, 4),
        }


@dataclass(frozen=True)
class _Scores:
    """One query's scores of every entry (see :meth:`SkillIndex._scores`). With an approximate dense
    search, ``exact`` marks the entries whose fused score is exact (the rest have an upper bound,
    their similarity the candidates' floor and ``best_text`` -1); ``None``: every entry's is."""

    fused: np.ndarray
    similarity: np.ndarray | None
    best_text: np.ndarray | None
    lexical: np.ndarray
    query_tokens: list[str]
    catalog_similarity: np.ndarray | None = None
    learned_similarity: np.ndarray | None = None
    phrasing_similarity: np.ndarray | None = None
    mean_similarity: np.ndarray | None = None
    learned_row: np.ndarray | None = None
    exact: np.ndarray | None = None


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


class _Entry(NamedTuple):
    """One state or tool of the index (a named tuple: a frozen dataclass took 0.5 s of 100,000 tools' index)."""

    kind: Kind
    name: str
    server: str | None
    states: frozenset[str]
    tool_id: int | None = None


_WORD_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SEPARATORS = re.compile(r"[._\-&/]+")


#: Words a text is compared without when looking for repeats (:func:`_embedded_texts`).
_ARTICLES = frozenset({"a", "an", "the"})
_WORD = re.compile(r"[^\W_]+")


def _embedded_texts(texts: list[str]) -> list[str]:
    """``texts`` without those that repeat an earlier one up to case, punctuation and articles:
    ``["Forecast the sales per region.", "forecast sales per region"]`` → the first only. Measured on
    benchmarks/bench_scale_tools.py's 100,000 tools, whose names restate their descriptions: 307,380
    texts to embed before, 207,380 after."""
    seen: set[tuple[str, ...]] = set()
    kept = []
    for text in texts:
        words = tuple(word for word in _WORD.findall(text.casefold()) if word not in _ARTICLES)
        if words not in seen:
            seen.add(words)
            kept.append(text)
    return kept


def _words(identifier: str) -> str:
    """``chemistry.molecule_parsed`` → ``chemistry molecule parsed``; ``getWeatherAPI`` → ``get Weather API``."""
    # All lower case, no boundary can match: skipping that pattern saves 0.3 s of 100,000 tools' index.
    spaced = identifier if identifier.islower() else _WORD_BOUNDARY.sub(" ", identifier)
    return _SEPARATORS.sub(" ", spaced).strip()


class _IndexEntries(Sequence[_Entry]):
    """The entries of a graph's index: its declared states, then its tools in id order, each tool's
    entry made from the graph's transition table when asked for (no definition is read for it)."""

    def __init__(self, graph: StateGraph):
        self._states = [_Entry("state", token, token.split(".", 1)[0] if "." in token else None, frozenset([token])) for token in graph.states]
        self._table = graph.transitions

    def __len__(self) -> int:
        return len(self._states) + len(self._table.ids)

    def __getitem__(self, position):  # type: ignore[no-untyped-def]  # Sequence's int and slice overloads
        if isinstance(position, slice):
            return [self[index] for index in range(*position.indices(len(self)))]
        if position < 0:
            position += len(self)
        if position < len(self._states):
            return self._states[position]
        tool = position - len(self._states)
        table = self._table
        if not 0 <= tool < len(table.ids):
            raise IndexError(f"entry {position} of an index of {len(self)}")
        return _Entry("tool", table.names[tool], table.servers[tool], frozenset(table.tokens[number] for number in table.produces[tool]), table.ids[tool])

    def __iter__(self) -> Iterator[_Entry]:
        return (self[position] for position in range(len(self)))

    @property
    def tool_positions(self) -> range:
        """The positions of the tool entries."""
        return range(len(self._states), len(self))


class _StoredTexts(Sequence[str]):
    """The texts of an index loaded for a catalog snapshot: ``count`` texts, entry ``e``'s from
    ``first_text[e]`` on, each entry's worked out (``texts_of(e)``) when one of its texts is asked for."""

    def __init__(self, texts_of: Callable[[int], list[str]], first_text: np.ndarray, count: int):
        self._texts_of, self._first_text, self._count = texts_of, first_text, count

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, index):  # type: ignore[no-untyped-def]  # one text: no caller slices these
        if isinstance(index, slice) or not 0 <= index < self._count:
            raise IndexError(f"text {index!r} of an index of {self._count} (one text at a time)")
        position = int(np.searchsorted(self._first_text, index, side="right")) - 1
        return self._texts_of(position)[index - int(self._first_text[position])]


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
        learned: learned phrasings and query adapter to fuse in (see the module docstring); ``None``
            searches exactly as without. Without embeddings (``mode="bm25"``, or the model is not
            installed) only the phrasings' words count, with a ``RuntimeWarning`` that the vectors do not.
        store: where the catalog part (BM25 index and text vectors) is stored once per catalog
            version and loaded from by later indexes (:mod:`toolpath.planner.search.stored_index`):
            an :class:`IndexStore` or its directory; ``None`` for the ``indexes`` directory beside
            the embedding cache's file (none when ``cache`` is ``False``); ``False`` for none. An
            index loaded from it calls neither the embedder nor the cache (``cache_counts`` stays
            ``(0, 0)``; :attr:`stored` says which happened). Learned evidence is applied on top.

    When sentence-transformers is not installed, the default embedder cannot load: the index warns
    (``RuntimeWarning``) and searches with BM25 only (``mode`` becomes ``"bm25"``).

    A stored index that cannot be trusted, or a store that cannot be written, warns
    (``RuntimeWarning``) and the index is built as without one.

    An unusable cache file (a directory, not a database, corrupt, unreadable, read-only, a full
    disk: any :class:`toolpath.registry.storage.StoreError`) warns once (``RuntimeWarning``, naming the file
    and what to do) and the index is embedded without it; a malformed row warns and is re-embedded.

    Raises:
        ValueError: an unknown ``mode`` or fusion constant, or an embedder whose output is not a
            finite ``(n, d)`` array.
        LearnedSearchError: a learned entry the graph does not have (naming it: learned data from
            other catalogs is refused rather than silently half used), or learned vectors of another
            dimension than the index's.
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
        store: IndexStore | str | os.PathLike[str] | Literal[False] | None = None,
    ):
        if mode not in ("hybrid", "dense", "bm25"):
            raise ValueError(f"mode must be 'hybrid', 'dense' or 'bm25', got {mode!r}")
        if rrf_k < 0 or not 0 <= dense_weight <= 1:
            raise ValueError(f"rrf_k must be at least 0 and dense_weight within [0, 1], got {rrf_k} and {dense_weight}")
        self.graph = graph
        self.mode: Mode = mode
        self.rrf_k = rrf_k
        self.dense_weight = dense_weight
        self._entries = _IndexEntries(graph)
        # Each entry's texts (in ``_texts``, from ``_first_text[entry]``) and BM25 document: built
        # from the graph when the index is built; read as used when it is loaded for a catalog
        # snapshot (:meth:`_texts_of`, for the hits shown), which reads no other tool's definition.
        self._texts: Sequence[str] = []
        self._first_text: Sequence[int] = []
        self._documents: list[str] | None = None
        owners = self._learned_owners(learned) if learned is not None else None
        self.embedder: Embedder | None = None
        self._recent_queries: dict[str, np.ndarray] = {}
        self._queries_ready = False
        self._cached: CachedEmbedder | None = None
        self._vectors = np.zeros((0, 1), dtype=np.float32)
        self._dense: DenseIndex | None = None
        #: How the catalog part was got and where it is stored (``None``: no store was used).
        self.stored: StoredIndex | None = None
        self._catalog_bm25 = self._catalog_part(embedder if embedder is not None or mode == "bm25" else default_embedder(), cache, store)
        self._bm25 = self._lexical_index(learned, owners)
        self.learned: LearnedSearch | None = None
        if learned is not None and owners is not None:
            self._use_learned(learned, owners)

    def _catalog_part(
        self,
        embedder: Embedder | None,
        cache: EmbeddingCache | str | os.PathLike[str] | Literal[False] | None,
        store: IndexStore | str | os.PathLike[str] | Literal[False] | None,
    ) -> bm25s.BM25:
        """The BM25 index of the catalog documents, and the texts' vectors (``self._vectors``):
        loaded from the store when it holds this catalog version, else built and stored (see
        :mod:`toolpath.planner.search.stored_index`)."""
        if store is False or (store is None and cache is False) or not self._entries:
            index_store = None
        else:
            index_store = store if isinstance(store, IndexStore) else IndexStore(store) if store is not None else IndexStore.beside(cache)
        model = None if self.mode == "bm25" else model_identity(embedder)
        key = None
        content = self.graph.registry.content_key
        if index_store is not None and (self.mode == "bm25" or model is not None):
            if content is not None:
                # The catalogs' content is known from their bytes: no text need be read to know the key.
                key = content_index_key(content, self.graph.states, model)
                found = index_store.load(key, len(self._entries), None, model)
            else:
                self._build_texts()
                entries = [(entry.kind, entry.name, entry.server) for entry in self._entries]
                key = catalog_key(entries, self._first_text, self._texts, self._documents, model)
                found = index_store.load(key, len(self._entries), len(self._texts), model)
            if found is not None:
                part, self.stored = found
                if self._documents is None:
                    self._first_text = part.first_text
                    self._texts = _StoredTexts(self._texts_of, part.first_text, self.stored.texts)
                if part.dense is not None:
                    self._dense, self._vectors = part.dense, part.dense.vectors
                    self.embedder = embedder
                return part.lexical
        if self._documents is None:
            self._build_texts()
        assert self._documents is not None
        with build_progress(len(self._entries), len(self._texts), None if key is None or index_store is None else index_store.path_of(key)) as progress:
            lexical = _bm25_of(self._documents)
            progress.set_description("skill index: vectors")
            progress.update()
            mode = self.mode
            if mode != "bm25" and self._texts:
                assert embedder is not None
                self._embed_texts(embedder, cache)
                if self.mode != "bm25":
                    self._dense = build_dense_index(self._vectors, self._first_text)
            progress.set_description("skill index: storing")
            progress.update()
            # An index that fell back to BM25 (no model) is not what the key promises: not stored.
            if key is not None and index_store is not None and self.mode == mode:
                part = CatalogPart(lexical, self._dense, np.asarray(self._first_text, dtype=np.int64))
                self.stored = index_store.save(key, part, model, len(self._entries), len(self._texts))
            progress.update()
        return lexical

    def _lexical_index(self, learned: LearnedSearch | None, owners: np.ndarray | None) -> bm25s.BM25:
        """BM25 over the entries' catalog documents, with the learned phrasings' words joined to
        their entries' once there are :data:`LEARNED_LEXICAL_MIN` per entry (without them: the
        catalog's own, built or loaded once)."""
        if learned is not None and owners is not None and learned.texts and len(learned) >= LEARNED_LEXICAL_MIN * len(self._entries):
            if self._documents is None:
                self._build_texts()
            documents = list(self._documents or ())
            additions: dict[int, list[str]] = {}
            for row, owner in enumerate(owners.tolist()):
                additions.setdefault(owner, []).append(learned.texts[row])
            for owner, texts in additions.items():
                documents[owner] = " ".join([documents[owner], *texts])
            return _bm25_of(documents)
        return self._catalog_bm25

    def with_learned(self, learned: LearnedSearch | None) -> SkillIndex:
        """The same catalogs searched with other learned data (``None``: none), without embedding
        the catalog texts again: how :func:`toolpath.planner.search.learned.choose_query_adapter`
        checks an adapter on phrasings it was not fitted on.

        Raises:
            LearnedSearchError: as the constructor's ``learned``.
        """
        other = copy.copy(self)
        other._recent_queries = {}
        other.learned = None
        owners = self._learned_owners(learned) if learned is not None else None
        other._bm25 = self._lexical_index(learned, owners)
        if learned is not None and owners is not None:
            other._use_learned(learned, owners)
        return other

    def with_dense_index(self, dense: DenseIndex) -> SkillIndex:
        """The same index searching through ``dense``, a dense index of the same texts: one loaded
        from disk (:func:`toolpath.planner.search.dense_index.load_dense_index`), or the exact one
        an approximate one is measured against (``benchmarks/bench_dense_index.py``).

        Raises:
            ValueError: an index without embeddings, or ``dense`` of other texts (another count of
                texts or entries, or other dimensions).
        """
        if self._dense is None:
            raise ValueError("the index has no embeddings (BM25 only), so it has no dense index to replace")
        if dense.vectors.shape != self._dense.vectors.shape or not np.array_equal(dense.first_text, self._dense.first_text):
            raise ValueError(
                f"the dense index has {dense.vectors.shape[0]} texts of {dense.vectors.shape[1]} dimensions in {len(dense.first_text)} entries; "
                f"this index has {self._dense.vectors.shape[0]} of {self._dense.vectors.shape[1]} in {len(self._dense.first_text)}: build it from this index's catalogs"
            )
        other = copy.copy(self)
        other._recent_queries = dict(self._recent_queries)
        other._dense = dense
        return other

    def entry_rank(self, query: str, entry: LearnedEntry, query_vector: np.ndarray | None = None) -> int:
        """The place (1 = first) of ``entry`` among the entries of its kind in the ranking
        :meth:`search` orders by, for ``query`` with no filter; ``query_vector``: the query's embedding when it is known already
        (a unit ``(d,)`` vector by this index's embedder), so evaluating many labelled queries does
        not embed them again.

        Raises:
            QueryError: the query is empty or blank.
            LearnedSearchError: an entry the index does not have.
        """
        if not query or not query.strip():
            raise QueryError("the query is empty; describe what you want to achieve")
        keys = [self._key(candidate) for candidate in self._entries]
        try:
            position = keys.index(tuple(entry))
        except ValueError:
            raise LearnedSearchError(f"the index has no entry {tuple(entry)!r}; give (kind, server, name) of a tool or state of its catalogs") from None
        if query_vector is not None and self.mode != "bm25":
            self._remember_query(query.strip(), _normalised(np.asarray(query_vector)[None, :])[0])
        fused = self._scores(query, candidate_texts=None).fused
        same_kind = np.array([candidate.kind == self._entries[position].kind for candidate in self._entries])
        # search() orders by score, earlier entries first among equals (a stable sort).
        ahead = same_kind & ((fused > fused[position]) | ((fused == fused[position]) & (np.arange(len(fused)) < position)))
        return int(ahead.sum()) + 1

    def _build_texts(self) -> None:
        """Every entry's texts and BM25 document, from the graph (every tool's definition)."""
        texts: list[str] = []
        first_text: list[int] = []
        documents: list[str] = []
        parameter_words: dict[str, str] = {}
        for position in range(len(self._entries)):
            entry_texts = self._catalog_texts(position)
            first_text.append(len(texts))
            texts.extend(_embedded_texts(entry_texts))
            if self._entries[position].kind == "state":
                documents.append(" ".join(entry_texts))
                continue
            tool = self.graph.registry.get_tool_by_id(self._entries[position].tool_id)
            # Many tools share parameter names: each is worded once.
            parameters = [
                parameter_words.get(parameter.name) or parameter_words.setdefault(parameter.name, _words(parameter.name))
                for parameter in (*tool.required_parameters, *tool.optional_parameters)
            ]
            # The name as written too, so a request that names the tool ("call SearchPeople") matches it.
            documents.append(" ".join([*entry_texts, *parameters, tool.name]))
        self._texts, self._first_text, self._documents = texts, first_text, documents

    def _catalog_texts(self, position: int) -> list[str]:
        """The texts the catalog gives the entry at ``position``: never empty, stripped, without
        exact repeats. All of them make its BM25 document; :meth:`_texts_of` those embedded."""
        entry = self._entries[position]
        if entry.kind == "state":
            state = self.graph.states[entry.name]
            texts = [state.description, *state.affordances, _words(entry.name)]
        else:
            tool = self.graph.registry.get_tool_by_id(entry.tool_id)
            texts = [tool.description, *tool.affordances, _words(tool.name)]
        return [text for text in dict.fromkeys(map(str.strip, texts)) if text] or [entry.name]

    def _texts_of(self, position: int) -> list[str]:
        """The texts of the entry at ``position`` as the index embeds them (the dense scores are
        maxima over each entry's run of texts): its catalog texts without near repeats (:func:`_embedded_texts`)."""
        return _embedded_texts(self._catalog_texts(position))

    def _embed_texts(self, embedder: Embedder, cache: EmbeddingCache | str | os.PathLike[str] | Literal[False] | None) -> None:
        try:
            self._vectors = _normalised(self._embed_through_cache(embedder, cache))
        except EmbedderUnavailableError as error:
            warnings.warn(f"skill search falls back to BM25 only: {error}", RuntimeWarning, stacklevel=5)
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

    def _learned_owners(self, learned: LearnedSearch) -> np.ndarray:
        """The position of each learned row's entry in this index."""
        keys = {self._key(entry): position for position, entry in enumerate(self._entries)}
        owners = np.empty(len(learned), dtype=np.int64)
        for row, key in enumerate(learned.entries):
            position = keys.get(key)
            if position is None:
                kind, server, name = key
                what = f"state {name}" if kind == "state" else f"tool {server}/{name}" if server else f"tool {name}"
                quoted = f" (phrasing {learned.texts[row]!r})" if learned.texts else ""
                raise LearnedSearchError(
                    f"learned row {row}{quoted} is for the {what}, which the catalogs do not have; learn again from these catalogs, or load the catalog that has it"
                )
            owners[row] = position
        return owners

    def _use_learned(self, learned: LearnedSearch, owners: np.ndarray) -> None:
        if self.mode == "bm25":
            warnings.warn("learned vectors are ignored: the index has no embeddings (BM25 only)", RuntimeWarning, stacklevel=3)
            return
        if learned.dimensions != self._vectors.shape[1]:
            raise LearnedSearchError(
                f"learned vectors have {learned.dimensions} dimensions and the index's embedder {self._vectors.shape[1]}; learn again with this index's embedding model"
            )
        order = np.argsort(owners, kind="stable")
        self.learned = learned
        # Rows grouped by entry, so the nearest phrasing of each entry is one reduceat.
        self._learned_vectors = learned.vectors[order]
        self._learned_rows = order
        self._learned_entries, self._learned_starts = np.unique(owners[order], return_index=True)
        sums = np.add.reduceat(self._learned_vectors, self._learned_starts, axis=0) if len(order) else np.zeros((0, learned.dimensions), dtype=np.float32)
        self._learned_means = _normalised(sums)
        self._learned_counts = np.diff(np.append(self._learned_starts, len(order))).astype(np.float32)

    @staticmethod
    def _key(entry: _Entry) -> LearnedEntry:
        return ("tool", entry.server, entry.name) if entry.kind == "tool" else ("state", None, entry.name)

    @property
    def text_dimensions(self) -> int | None:
        """``d`` of the catalog texts' embeddings, or ``None`` for an index without embeddings."""
        return None if self.mode == "bm25" else int(self._vectors.shape[1])

    def entry_text_vectors(self, entry: LearnedEntry) -> np.ndarray:
        """The unit vectors ``(texts, d)`` of one entry's catalog texts (``(kind, server, name)``).

        Raises:
            LearnedSearchError: an entry the index does not have, or an index without embeddings.
        """
        if self.mode == "bm25":
            raise LearnedSearchError("the index has no embeddings (BM25 only)")
        for position, candidate in enumerate(self._entries):
            if self._key(candidate) == tuple(entry):
                end = self._first_text[position + 1] if position + 1 < len(self._first_text) else len(self._texts)
                return self._vectors[self._first_text[position] : end]
        raise LearnedSearchError(f"the index has no entry {tuple(entry)!r}; give (kind, server, name) of a tool or state of its catalogs")

    @property
    def dense_index(self) -> DenseIndex | None:
        """The dense index searched (exact or approximate, see the module docstring), to save beside
        the embedding cache; ``None`` for an index without embeddings."""
        return self._dense

    @property
    def cache_counts(self) -> tuple[int, int]:
        """``(hits, misses)`` of the embedding cache while building this index (``(0, 0)`` uncached,
        or loaded from the store)."""
        return (self._cached.hits, self._cached.misses) if self._cached is not None else (0, 0)

    @functools.cached_property
    def domains(self) -> set[str]:
        """Servers of the tools and domains (token prefixes) of the states, for the ``domain`` filter
        (worked out once: a pass over every entry costs milliseconds at 100,000 tools)."""
        states = {token.split(".", 1)[0] for token in self.graph.states if "." in token}
        return states | {server for server in self.graph.transitions.servers if server is not None}

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
        unknown = sorted(domains - self.domains) if domains else []
        if unknown:
            raise QueryError(f"unknown domain {', '.join(map(repr, unknown))}; the catalogs have: {', '.join(sorted(self.domains)) or 'none'}")
        if not self._entries:
            return []
        candidate_texts: int | None = max(_CANDIDATE_TEXTS, _CANDIDATE_TEXTS_PER_HIT * k)
        scores = self._scores(query, candidate_texts)
        hits: list[SkillHit] = []
        # Entries already taken or passed over: after a round with more candidates they keep their
        # place (their scores were exact), so the next round goes on after them.
        considered: set[int] = set()
        while True:
            for index in _best_first(scores.fused):
                if index in considered:
                    continue
                if scores.exact is not None and not scores.exact[index]:
                    break  # an upper bound, not a score: ask for more candidates first
                considered.add(index)
                entry = self._entries[index]
                if (kind is not None and entry.kind != kind) or (domains is not None and entry.server not in domains):
                    continue
                if self.mode == "bm25" and scores.lexical[index] <= 0:
                    return hits  # ranked by BM25 alone: the rest share no word with the query
                reachable, goal_plan = self._reach(entry, held)
                if reachable_only and not reachable:
                    continue
                hits.append(self._hit(scores, index, reachable, goal_plan))
                if len(hits) == k:
                    return hits
            else:
                return hits
            assert candidate_texts is not None  # exact scores leave no bound to break on
            candidate_texts *= _CANDIDATE_GROWTH
            if candidate_texts >= _EXACT_FROM_SHARE * len(self._texts):
                candidate_texts = None
            scores = self._scores(query, candidate_texts)

    def _hit(self, scores: _Scores, index: int, reachable: bool, goal_plan: Plan | None) -> SkillHit:
        entry = self._entries[index]
        similarity, best_text = scores.similarity, scores.best_text
        matched = self._texts[best_text[index]] if best_text is not None else self._lexical_match(index, set(scores.query_tokens))
        learned = self._learned_match(scores, index)
        if learned is not None and learned.similarity > learned.catalog_similarity:
            matched = learned.phrasing if learned.phrasing is not None else matched
        return SkillHit(
            entry.kind,
            entry.name,
            entry.server,
            float(scores.fused[index]),
            None if similarity is None else float(similarity[index]),
            float(scores.lexical[index]),
            matched,
            entry.states,
            reachable,
            goal_plan,
            learned,
        )

    def tool_relevance(self, query: str) -> dict[int, float]:
        """``{tool id: score}`` of every tool for ``query``, the fused score :meth:`search` ranks by
        (higher is more relevant; only the order means something). For breaking ties between plans
        of equal cost (:func:`toolpath.planner.planning.plans.plan`'s ``prefer``). With an
        approximate dense index, tools outside its candidates share one dense rank (see the module
        docstring): among them, BM25 alone orders.

        Raises:
            QueryError: the query is empty or blank.
        """
        if not query or not query.strip():
            raise QueryError("the query is empty; describe what you want to achieve")
        if not self._entries:
            return {}
        score = self._scores(query, _CANDIDATE_TEXTS).fused
        positions, tool_ids = self._tool_entries
        return dict(zip(tool_ids, score[positions].tolist()))

    @functools.cached_property
    def _tool_entries(self) -> tuple[np.ndarray, list[int]]:
        """The positions of the tool entries and their tools' ids (made once)."""
        return np.arange(self._entries.tool_positions.start, self._entries.tool_positions.stop, dtype=np.int64), list(self.graph.transitions.ids)

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
            self._remember_query(query, vector)
        return vector

    def _remember_query(self, query: str, vector: np.ndarray) -> None:
        if query not in self._recent_queries and len(self._recent_queries) >= _RECENT_QUERIES:
            del self._recent_queries[next(iter(self._recent_queries))]
        self._recent_queries[query] = vector

    def _scores(self, query: str, candidate_texts: int | None) -> _Scores:
        """Every entry's fused score for ``query``, with the parts it was fused from. With an
        approximate dense index, ``candidate_texts`` is how many texts to ask it for (``None``:
        score every text); see the module docstring for the entries outside its candidates."""
        query_tokens = bm25_terms([query])[0]
        lexical = self._bm25.get_scores(query_tokens) if query_tokens else np.zeros(len(self._entries), dtype=np.float32)
        if self.mode == "bm25":
            return _Scores(self._fused(None, lexical), None, None, lexical, query_tokens)
        query_vector = self._query_vector(query.strip())
        if self.learned is None:
            similarity, best_text, known, floor = self._dense_scores(query_vector, candidate_texts)
            ranked = None if known is None else known & (similarity >= floor)
            exact = ranked if self.mode == "hybrid" else known
            return _Scores(self._fused(similarity, lexical, ranked), similarity, best_text, lexical, query_tokens, exact=exact)
        adapter = self.learned.adapter
        # einsum, not `@`, for the reason in ExactDenseIndex.scores.
        catalog_query = query_vector if adapter is None else _normalised(np.einsum("i,ij->j", query_vector, adapter)[None, :])[0]
        catalog_similarity, best_text, known, floor = self._dense_scores(catalog_query, candidate_texts)
        if known is not None and len(self._learned_entries):
            # Entries with phrasings are scored exactly wherever they rank: their learned similarity
            # may lift them past the candidates, and a hit shows its catalog similarity.
            missing = self._learned_entries[~known[self._learned_entries]]
            assert self._dense is not None
            catalog_similarity[missing], best_text[missing] = self._dense.scores(catalog_query, missing)
            known[missing] = True
        phrasing_similarity = np.full(len(self._entries), -np.inf, dtype=np.float32)
        mean_similarity = np.full(len(self._entries), -np.inf, dtype=np.float32)
        learned_row = np.full(len(self._entries), -1, dtype=np.int64)
        if len(self._learned_vectors):
            # The phrasings are queries themselves: compared with the query as embedded, not adapted.
            similarities = np.einsum("ij,j->i", self._learned_vectors, query_vector)
            nearest, position = group_maxima(similarities, self._learned_starts)
            phrasing_similarity[self._learned_entries] = nearest
            mean_similarity[self._learned_entries] = np.einsum("ij,j->i", self._learned_means, query_vector)
            learned_row[self._learned_entries] = self._learned_rows[position]
        # The bonus rewards the larger of nearest phrasing and prototype, so a phrasing that is nearly
        # the request keeps its full weight; the ranking uses the blend (see the module docstring).
        closest_learned = np.maximum(phrasing_similarity, mean_similarity)
        learned_similarity = closest_learned.copy()
        if len(self._learned_vectors):
            larger = closest_learned[self._learned_entries]
            smaller = np.minimum(phrasing_similarity, mean_similarity)[self._learned_entries]
            share = 0.5 * LEARNED_BLEND_PHRASINGS / (self._learned_counts + LEARNED_BLEND_PHRASINGS)
            learned_similarity[self._learned_entries] = larger - share * (larger - smaller)
        similarity = np.maximum(catalog_similarity, learned_similarity)
        # Only an entry at or above the candidates' floor has a known dense rank: below it, entries
        # scored exactly and entries never scored are mixed.
        ranked = None if known is None else known & (similarity >= floor)
        fused = self._fused(similarity, lexical, ranked)
        if self.mode == "hybrid":
            fused = fused + LEARNED_WEIGHT * np.maximum(0.0, closest_learned - LEARNED_THRESHOLD)
        return _Scores(
            fused,
            similarity,
            best_text,
            lexical,
            query_tokens,
            catalog_similarity,
            learned_similarity,
            phrasing_similarity,
            mean_similarity,
            learned_row,
            ranked if self.mode == "hybrid" else known,
        )

    def _learned_match(self, scores: _Scores, index: int) -> LearnedMatch | None:
        if scores.learned_row is None or scores.learned_row[index] < 0:
            return None
        assert scores.learned_similarity is not None and scores.catalog_similarity is not None and self.learned is not None
        assert scores.phrasing_similarity is not None and scores.mean_similarity is not None
        learned, catalog = float(scores.learned_similarity[index]), float(scores.catalog_similarity[index])
        closest = max(float(scores.phrasing_similarity[index]), float(scores.mean_similarity[index]))
        if closest < LEARNED_THRESHOLD and learned <= catalog:
            return None  # neither raised its similarity nor added to its score
        row = int(scores.learned_row[index])
        phrasing = self.learned.texts[row] if self.learned.texts else None
        return LearnedMatch(phrasing, row, learned, float(scores.phrasing_similarity[index]), float(scores.mean_similarity[index]), catalog)

    def _dense_scores(self, query_vector: np.ndarray, candidate_texts: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, float]:
        """Per entry: the best cosine over its texts and the row of that text, for every entry
        (``known`` is ``None``, ``floor`` -inf) or, from an approximate index asked for
        ``candidate_texts`` texts, for its candidates (``known``), every other entry getting the
        candidates' ``floor`` (an upper bound) and row -1."""
        assert self._dense is not None
        if query_vector.shape != self._dense.vectors.shape[1:]:
            raise ValueError(
                f"the embedder returned a {query_vector.shape[0]}-dimensional query vector for an index of {self._dense.vectors.shape[1]} dimensions"
            )
        if candidate_texts is None or not self._dense.approximate:
            similarity, best_text = self._dense.scores(query_vector)
            return similarity, best_text, None, float("-inf")
        found = self._dense.nearest(query_vector, candidate_texts)
        if found.complete:
            return found.similarity, found.best_text, None, float("-inf")
        similarity = np.full(len(self._entries), found.floor, dtype=np.float32)
        best_text = np.full(len(self._entries), -1, dtype=np.int64)
        known = np.zeros(len(self._entries), dtype=bool)
        similarity[found.entries], best_text[found.entries], known[found.entries] = found.similarity, found.best_text, True
        return similarity, best_text, known, found.floor

    def _fused(self, similarity: np.ndarray | None, lexical: np.ndarray, ranked: np.ndarray | None = None) -> np.ndarray:
        """The fused score of every entry; ``ranked``: the entries whose dense rank is known, the
        rest sharing the rank after them (``None``: every entry's is)."""
        if self.mode == "dense":
            assert similarity is not None
            return similarity
        if self.mode == "bm25" or similarity is None:
            return lexical
        dense = self.dense_weight / (self.rrf_k + _ranks(similarity, ranked))
        # Only entries sharing a query word have a BM25 term, so only they are ranked (at 100,000
        # entries, sorting them all costs more than the rest of the fusion).
        sharing = np.flatnonzero(lexical > 0)
        lexical_part = np.zeros(len(lexical), dtype=np.float64)
        lexical_part[sharing] = (1 - self.dense_weight) / (self.rrf_k + _ranks(lexical[sharing]))
        return dense + lexical_part

    def _lexical_match(self, index: int, query_tokens: set[str]) -> str:
        texts = self._texts_of(index)
        overlaps = [len(query_tokens & set(tokens)) for tokens in bm25_terms(texts)]
        return texts[int(np.argmax(overlaps))]

    def _reach(self, entry: _Entry, held: frozenset[str]) -> tuple[bool, Plan | None]:
        """A state is reachable when a plan reaches it; a tool when a plan can run it (and ends with it)."""
        tool = self.graph.registry.get_tool_by_id(entry.tool_id) if entry.kind == "tool" else None
        needed = tool.state_transition.requires if tool is not None else entry.states
        # What the planner tests first (a finite h_max, cached per held states): a plan would only
        # say why not, at a cost of milliseconds per hit at 100,000 tools, and a hit keeps no reason.
        task = self.graph.delete_free_task
        reached = task.relaxed_costs(task.states(held), frozenset()).value
        if any(token not in held and (token not in task.state_index or reached[task.state_index[token]] == INFINITY) for token in needed):
            return False, None
        try:
            if tool is not None:
                return True, plan_to_run(self.graph, tool, held)
            return True, plan(self.graph, entry.states, held)
        except NoPlanError:
            return False, None


def _bm25_of(documents: list[str]) -> bm25s.BM25:
    lexical = bm25s.BM25(csc_backend="numpy")
    if documents:
        lexical.index(bm25_terms(documents), show_progress=False)
    return lexical


def _normalised(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1, norms)


def _ranks(scores: np.ndarray, ranked: np.ndarray | None = None) -> np.ndarray:
    """1-based rank of each score, best first (ties broken by position); ``ranked``: a mask of the
    scores to rank, every other one sharing the rank after theirs."""
    if ranked is None:
        ranks = np.empty(len(scores), dtype=np.float64)
        ranks[np.argsort(-scores, kind="stable")] = np.arange(1, len(scores) + 1)
        return ranks
    positions = np.flatnonzero(ranked)
    ranks = np.full(len(scores), len(positions) + 1, dtype=np.float64)
    ranks[positions[np.argsort(-scores[positions], kind="stable")]] = np.arange(1, len(positions) + 1)
    return ranks


def _best_first(scores: np.ndarray) -> Iterator[int]:
    """The positions of ``scores``, highest first and ties by position (the order of a stable
    argsort of ``-scores``), sorted a growing slice at a time: a search usually wants the first
    few of 100,000."""
    keys = -scores
    remaining = np.arange(len(keys))
    size = 64
    while len(remaining):
        if len(remaining) > size:
            threshold = np.partition(keys[remaining], size - 1)[size - 1]
            # Ties with the last kept key come along, so none is cut off from its equals.
            taken = keys[remaining] <= threshold
            chosen, remaining = remaining[taken], remaining[~taken]
        else:
            chosen, remaining = remaining, remaining[:0]
        yield from chosen[np.argsort(keys[chosen], kind="stable")].tolist()
        size *= 4
