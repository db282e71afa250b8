"""Learned search evidence: phrasings of states and tools seen in use, kept as vectors, and an
optional linear query adapter, fitted only when it helps on phrasings held back from its fitting
(:func:`choose_query_adapter`).

A :class:`LearnedSearch` is search data, not instructions for a model: one unit vector per learned
phrasing (a request or step that a tool or state served), each owned by one entry of the index, and
optionally a ``(d, d)`` matrix applied to query embeddings before they are compared with the
catalog's own texts. :class:`toolpath.planner.search.skills.SkillIndex` fuses it with its hybrid
score (see the module docstring there); :func:`fit_query_adapter` fits the matrix with numpy alone.

Every learned phrasing is kept: the issue's measurement (MetaTool, issue 53) found that keeping 8
phrasings per tool lost most of the gain (R@1 ≈ .64 with 8 against ≈ .81 with all, ≈ 50 per tool).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import numpy as np

from toolpath.errors import ToolpathError
from toolpath.planner.search.embedding import Embedder, checked_vectors

if TYPE_CHECKING:
    from toolpath.planner.search.skills import SkillIndex

#: ``(kind, server, name)``: a tool is ``("tool", server, name)``; a state ``("state", None, token)``.
LearnedEntry = tuple[Literal["tool", "state"], "str | None", str]

#: Ridge weight pulling the query adapter toward the identity (:func:`fit_query_adapter`). The
#: fitted queries are unit vectors, so their Gram matrix has trace n and eigenvalues of n/d on
#: average: a fixed weight of 1 lets a handful of examples (n ≪ d) move the map only along the
#: directions they span, while thousands of examples outweigh it. Chosen on a held-back part of the
#: MetaTool learning queries (``benchmarks/bench_search.py --tune``), never on the measured part: grid
#: 0.25-4 first gave 1; with the learned similarity blended for few phrasings
#: (``skills.LEARNED_BLEND_PHRASINGS``) a grid of 1, 2, 3, 4, 6 gave 2: with 5 examples per tool R@5
#: .868 → .874 and R@1 unchanged (.668), every other amount of labels within ± .005 of 1.
#: ``toolpath learn`` does not use it blindly: :func:`choose_query_adapter` checks
#: :data:`ADAPTER_RIDGES` (and no adapter) on the user's own held-back phrasings.
ADAPTER_RIDGE = 2.0

#: Ridges :func:`choose_query_adapter` checks, a factor 4 apart around the 2 that the held-back
#: MetaTool grid gave (``benchmarks/bench_search.py --tune``); on that grid 0.5-16 were all within
#: ± .01 of each other, so each user's own phrasings decide among a few well-spaced values.
ADAPTER_RIDGES = (0.5, 2.0, 8.0)
#: Folds of the phrasings :func:`choose_query_adapter` holds back in turn (by the hash of the text,
#: so a phrasing given twice is never checked against itself).
ADAPTER_FOLDS = 5
#: Fewer phrasings than this are too few to tell an adapter that helps from one that hurts (a
#: held-back figure over a handful of queries moves by a fifth with one query): no adapter then.
ADAPTER_MIN_PHRASINGS = 20
#: Held-back phrasings checked at most (spread evenly over all of them), which keeps the check to
#: seconds with thousands of phrasings; 1,000 give a recall figure to about ± .015.
ADAPTER_CHECKED_MAX = 1000

#: Texts embedded per call when building from phrasings (ONNX Runtime pads a batch to its longest text).
_BATCH = 64


class LearnedSearchError(ToolpathError, ValueError):
    """Learned search data that cannot be used as given: the message names the entry or the array
    and what to do."""


@dataclass(frozen=True, eq=False)
class LearnedSearch:
    """Learned phrasing vectors, one entry per row, and an optional query adapter.

    Attributes:
        entries: ``(kind, server, name)`` per row of ``vectors``: ``("tool", server, name)`` or
            ``("state", None, token)``.
        vectors: ``(n, d)`` float32 embeddings of the phrasings, made by the index's own embedder
            (they are normalised here; rows must be finite and non-zero).
        adapter: ``None``, or a ``(d, d)`` matrix: a query vector ``q`` (row) is compared with the
            catalog's texts as ``q @ adapter``, renormalised (:func:`fit_query_adapter`).
        texts: the phrasings themselves, aligned with ``vectors`` (empty when not kept); a hit
            moved by learned evidence quotes its nearest phrasing from here.

    Raises:
        LearnedSearchError: a row count that differs from the entries, a kind other than
            ``"tool"``/``"state"``, a state with a server, vectors that are not a finite ``(n, d)``
            array with non-zero rows, an adapter that is not a finite ``(d, d)`` array, or texts
            not aligned with the rows.
    """

    entries: tuple[LearnedEntry, ...]
    vectors: np.ndarray
    adapter: np.ndarray | None = None
    texts: tuple[str, ...] = field(default=())

    def __post_init__(self):
        entries = tuple(tuple(entry) for entry in self.entries)
        for position, entry in enumerate(entries):
            if len(entry) != 3 or entry[0] not in ("tool", "state") or not isinstance(entry[2], str):
                raise LearnedSearchError(f"learned entry {position} is {entry!r}; give (kind, server, name) with kind 'tool' or 'state'")
            if entry[0] == "state" and entry[1] is not None:
                raise LearnedSearchError(f"learned entry {position} is the state {entry[2]!r} with server {entry[1]!r}; a state's server is None")
        vectors = np.asarray(self.vectors, dtype=np.float32)
        if vectors.ndim != 2 or len(vectors) != len(entries) or vectors.shape[1] == 0:
            raise LearnedSearchError(f"learned vectors have shape {vectors.shape} for {len(entries)} entries; give an (n, d) array, one row per entry")
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        if not np.isfinite(vectors).all() or (len(vectors) and not (norms > 0).all()):
            raise LearnedSearchError("learned vectors hold NaN, infinite or all-zero rows; every phrasing needs a finite, non-zero embedding")
        adapter = self.adapter
        if adapter is not None:
            adapter = np.asarray(adapter, dtype=np.float32)
            if adapter.shape != (vectors.shape[1], vectors.shape[1]) or not np.isfinite(adapter).all():
                raise LearnedSearchError(
                    f"the query adapter has shape {adapter.shape}; it must be a finite ({vectors.shape[1]}, {vectors.shape[1]}) array for {vectors.shape[1]}-dimensional vectors"
                )
        if self.texts and len(self.texts) != len(entries):
            raise LearnedSearchError(f"{len(self.texts)} learned texts for {len(entries)} entries; give one text per row, or none")
        object.__setattr__(self, "entries", entries)
        object.__setattr__(self, "vectors", vectors / np.where(norms == 0, 1, norms))
        object.__setattr__(self, "adapter", adapter)
        object.__setattr__(self, "texts", tuple(self.texts))

    @property
    def dimensions(self) -> int:
        """``d``, the length of every vector."""
        return int(self.vectors.shape[1])

    def __len__(self) -> int:
        """Number of learned phrasings."""
        return len(self.entries)

    def phrasings_per_tool(self) -> dict[str, int]:
        """``{server.name: number of learned phrasings of the tool}`` (a tool of no server by its
        name), the learned examples goal choice weighs between near-duplicate tools."""
        return dict(Counter(f"{server}.{name}" if server else name for kind, server, name in self.entries if kind == "tool"))

    def with_adapter(self, adapter: np.ndarray | None) -> LearnedSearch:
        """The same phrasings with ``adapter`` instead (``None``: without one)."""
        return LearnedSearch(self.entries, self.vectors, adapter, self.texts)

    @classmethod
    def from_phrasings(cls, embedder: Embedder | None, phrasings: Sequence[tuple[str, LearnedEntry]], adapter: np.ndarray | None = None) -> LearnedSearch:
        """Embed ``(text, entry)`` pairs into learned search data, every one kept.

        Args:
            embedder: the embedder of the index the data is for (``SkillIndex.embedder``: learned
                and catalog vectors must share one model); ``None`` for an index without embeddings.
            phrasings: ``(text, (kind, server, name))`` pairs; texts are stripped.
            adapter: an optional ``(d, d)`` query adapter.

        Raises:
            LearnedSearchError: a blank text (naming its position), no embedder (BM25 only: nothing
                to compare vectors with), or bad entries/adapter (see the class).
            ValueError: the embedder's output is not a finite ``(n, d)`` array.
        """
        texts = [text.strip() for text, _ in phrasings]
        for position, text in enumerate(texts):
            if not text:
                raise LearnedSearchError(f"learned phrasing {position} (for {phrasings[position][1]!r}) is blank; give the words of the request")
        if embedder is None:
            raise LearnedSearchError("the index has no embeddings (BM25 only), so learned phrasings cannot be compared; install the embedding model")
        vectors = _embed(embedder, texts)
        return cls(tuple(entry for _, entry in phrasings), vectors, adapter, tuple(texts))


def _embed(embedder: Embedder, texts: list[str]) -> np.ndarray:
    if not texts:
        probe = checked_vectors(embedder(["probe"]), 1, embedder)
        return np.zeros((0, probe.shape[1]), dtype=np.float32)
    order = sorted(range(len(texts)), key=lambda position: len(texts[position]))
    vectors = np.empty((len(texts), 0), dtype=np.float32)
    for start in range(0, len(order), _BATCH):
        batch = order[start : start + _BATCH]
        embedded = checked_vectors(embedder([texts[position] for position in batch]), len(batch), embedder)
        if vectors.shape[1] == 0:
            vectors = np.empty((len(texts), embedded.shape[1]), dtype=np.float32)
        vectors[batch] = embedded
    return vectors


def fit_query_adapter(index: SkillIndex, query_vectors: np.ndarray, gold: Sequence[LearnedEntry], ridge: float | None = None) -> np.ndarray:
    """A ``(d, d)`` linear map moving each query toward its gold entry's text (ridge toward identity).

    Each query (row of ``query_vectors``, normalised here) is paired with the unit vector of the
    gold entry's catalog text it is closest to; the map ``A`` minimises
    ``Σ ‖q A − t‖² + ridge · ‖A − I‖²``, solved in closed form: ``A = (QᵀQ + ridge·I)⁻¹ (QᵀT + ridge·I)``.
    Numpy only; a few thousand queries of 384 dimensions take well under a second.

    Args:
        index: the index whose catalog texts are the targets (it must have embeddings).
        query_vectors: ``(n, d)`` embeddings of labelled queries, by the index's embedder.
        gold: the entry each query was served by, ``(kind, server, name)``.
        ridge: the pull toward the identity (``None``: :data:`ADAPTER_RIDGE`, which says why).

    Raises:
        LearnedSearchError: a shape mismatch, no queries, a non-positive ridge, an index without
            embeddings, or a gold entry the index does not know (naming it).
    """
    queries = np.asarray(query_vectors, dtype=np.float64)
    if queries.ndim != 2 or len(queries) != len(gold) or not len(queries):
        raise LearnedSearchError(f"query vectors have shape {queries.shape} for {len(gold)} gold entries; give an (n, d) array, one row per gold entry, n ≥ 1")
    ridge = ADAPTER_RIDGE if ridge is None else ridge
    if ridge <= 0:
        raise LearnedSearchError(f"the ridge must be positive, got {ridge}")
    dimensions = index.text_dimensions
    if dimensions is None:
        raise LearnedSearchError("the index has no embeddings (BM25 only); a query adapter needs them")
    if queries.shape[1] != dimensions:
        raise LearnedSearchError(f"query vectors have {queries.shape[1]} dimensions for an index of {dimensions}; embed them with the index's embedder")
    queries /= np.maximum(np.linalg.norm(queries, axis=1, keepdims=True), 1e-12)
    targets = np.empty_like(queries)
    entry_texts: dict[LearnedEntry, np.ndarray] = {}
    for row, entry in enumerate(gold):
        texts = entry_texts.get(tuple(entry))
        if texts is None:
            texts = entry_texts[tuple(entry)] = index.entry_text_vectors(entry)
        targets[row] = texts[int(np.argmax(texts @ queries[row]))]
    identity = np.eye(dimensions)
    return np.linalg.solve(queries.T @ queries + ridge * identity, queries.T @ targets + ridge * identity).astype(np.float32)


@dataclass(frozen=True)
class AdapterChoice:
    """Whether a query adapter helps on the user's own phrasings, and at which ridge
    (:func:`choose_query_adapter`).

    Attributes:
        adapter: the ``(d, d)`` adapter fitted on all the phrasings at the chosen ridge, or ``None``
            (no candidate beat searching without one on the held-back phrasings, or too few phrasings).
        ridge: the chosen ridge, or ``None``.
        checked: how many held-back phrasings the figures are over (0: not checked).
        figures: ``{"none" or "ridge R": {"recall_at_1", "recall_at_5", "mrr_at_10"}}`` on the
            held-back phrasings, searched with the learned data of the other folds.
        note: one sentence saying what was chosen and why, for the overlay's comments and ``--json``.
    """

    adapter: np.ndarray | None
    ridge: float | None
    checked: int
    figures: dict[str, dict[str, float]]
    note: str

    def to_dict(self) -> dict:
        return {"fitted": self.adapter is not None, "ridge": self.ridge, "checked": self.checked, "figures": self.figures, "note": self.note}


def choose_query_adapter(index: SkillIndex, learned: LearnedSearch, ridges: Sequence[float] | None = None, folds: int = ADAPTER_FOLDS) -> AdapterChoice:
    """Fit a query adapter only if it helps, at the ridge that helps most, judged on phrasings it
    was not fitted on.

    The phrasings are split into ``folds`` by the sha256 of their text; each fold in turn is held
    back, the rest become the index's learned data (``index.with_learned``) and fit one adapter per
    ridge (:func:`fit_query_adapter`), and the held-back phrasings are searched as queries (up to
    :data:`ADAPTER_CHECKED_MAX` in all, spread evenly) with no adapter and with each. The candidate of
    the highest MRR@10 over all folds wins; no adapter wins ties, so an adapter that does not help
    on the user's own phrasings is not fitted. The winner is fitted on all the phrasings.

    Args:
        index: the index of the catalogs learned over, with embeddings (its own learned data is ignored).
        learned: the phrasings, with their texts (:meth:`LearnedSearch.from_phrasings`); its adapter is ignored.
        ridges: the ridges tried (``None``: :data:`ADAPTER_RIDGES`, which says why).
        folds: at least 2 (default :data:`ADAPTER_FOLDS`).

    Raises:
        LearnedSearchError: learned data without texts, fewer than 2 folds, no ridge or a
            non-positive one, an index without embeddings, or an entry the index does not know.
    """
    ridges = tuple(ADAPTER_RIDGES if ridges is None else ridges)
    if folds < 2 or not ridges or any(ridge <= 0 for ridge in ridges):
        raise LearnedSearchError(f"give at least 2 folds and positive ridges, got {folds} folds and ridges {list(ridges)}")
    if index.text_dimensions is None:
        raise LearnedSearchError("the index has no embeddings (BM25 only); a query adapter needs them")
    if len(learned) and not learned.texts:
        raise LearnedSearchError("the learned data keeps no texts; checking an adapter searches the phrasings: build it with LearnedSearch.from_phrasings")
    if len(learned) < ADAPTER_MIN_PHRASINGS:
        return AdapterChoice(None, None, 0, {}, f"none: {len(learned)} phrasings are too few to check one on (at least {ADAPTER_MIN_PHRASINGS})")
    fold_of = np.array([int(hashlib.sha256(text.encode("utf-8")).hexdigest()[-8:], 16) % folds for text in learned.texts])
    checked_rows = set(np.linspace(0, len(learned) - 1, min(len(learned), ADAPTER_CHECKED_MAX)).round().astype(int).tolist())
    names = ["none", *(f"ridge {ridge:g}" for ridge in ridges)]
    ranks: dict[str, list[int]] = {name: [] for name in names}
    for fold in range(folds):
        held = [row for row in np.flatnonzero(fold_of == fold).tolist() if row in checked_rows]
        kept = np.flatnonzero(fold_of != fold)
        if not held or not len(kept):
            continue
        training = LearnedSearch(tuple(learned.entries[row] for row in kept), learned.vectors[kept], None, tuple(learned.texts[row] for row in kept))
        for name, ridge in zip(names, (None, *ridges)):
            adapter = None if ridge is None else fit_query_adapter(index, training.vectors, list(training.entries), ridge)
            searched = index.with_learned(training.with_adapter(adapter))
            ranks[name] += [searched.entry_rank(learned.texts[row], learned.entries[row], learned.vectors[row]) for row in held]
    checked = len(ranks["none"])
    if not checked:
        return AdapterChoice(None, None, 0, {}, f"none: the {len(learned)} phrasings are all one text, so none can be held back to check one on")
    figures = {name: _figures(values) for name, values in ranks.items()}
    best = max(names, key=lambda name: (figures[name]["mrr_at_10"], name == "none"))
    shown = ", ".join(f"{name} {figures[name]['recall_at_1']:.3f}/{figures[name]['recall_at_5']:.3f}" for name in names)
    measured = f"R@1/R@5 on {checked} held-back phrasings ({folds} folds): {shown}"
    if best == "none":
        return AdapterChoice(None, None, checked, figures, f"none: no ridge beat searching without one ({measured})")
    ridge = ridges[names.index(best) - 1]
    adapter = fit_query_adapter(index, learned.vectors, list(learned.entries), ridge)
    return AdapterChoice(adapter, ridge, checked, figures, f"fitted on {len(learned)} phrasings at ridge {ridge:g}, the best MRR@10 ({measured})")


def _figures(ranks: list[int]) -> dict[str, float]:
    values = np.asarray(ranks)
    return {
        "recall_at_1": round(float((values == 1).mean()), 4),
        "recall_at_5": round(float((values <= 5).mean()), 4),
        "mrr_at_10": round(float(np.where(values <= 10, 1 / values, 0).mean()), 4),
    }
