"""Learned search data: phrasings people used for tools and states, as vectors, and an optional
linear query adapter (issue 53). Built from an overlay (:mod:`toolpath.registry.overlays`) or from
labelled phrasings, and given to :class:`toolpath.planner.search.skills.SkillIndex` as ``learned``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import numpy as np

from toolpath.planner.search.embedding import Embedder, checked_vectors

if TYPE_CHECKING:
    from toolpath.planner.search.skills import SkillIndex

#: One learned row's owner: ``(kind, server, name)``; ``server`` is ``None`` for a state.
LearnedEntry = tuple[Literal["tool", "state"], str | None, str]

#: Weight of keeping the adapter near the identity (ridge towards ``I``); with few examples the map
#: stays close to leaving queries as they are.
ADAPTER_REGULARISATION = 1.0


@dataclass(frozen=True)
class LearnedSearch:
    """Learned phrasings as vectors.

    Attributes:
        entries: the owner of each row of ``vectors``.
        vectors: ``(len(entries), d)`` float32 unit rows.
        adapter: a ``(d, d)`` map applied to query vectors (``query @ adapter``), or ``None``.
    """

    entries: tuple[LearnedEntry, ...]
    vectors: np.ndarray = field(repr=False)
    adapter: np.ndarray | None = field(default=None, repr=False)

    @classmethod
    def from_phrasings(cls, embedder: Embedder, pairs: Sequence[tuple[str, LearnedEntry]], adapter: np.ndarray | None = None) -> LearnedSearch:
        """Embed ``[(text, entry)]`` into a :class:`LearnedSearch`.

        Raises:
            ValueError: the embedder's output is not a finite ``(len(pairs), d)`` array.
        """
        texts = [text for text, _ in pairs]
        vectors = checked_vectors(embedder(texts), len(texts), embedder) if texts else np.zeros((0, 1), dtype=np.float32)
        return cls(tuple(entry for _, entry in pairs), unit_rows(vectors), adapter)


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """``vectors`` as float32 rows of length 1 (zero rows stay zero)."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1, norms)


def fit_query_adapter(index: SkillIndex, query_vectors: np.ndarray, gold: list[LearnedEntry]) -> np.ndarray:
    """A ``(d, d)`` linear map ``W`` taking each query vector towards its gold entry's vector in the
    index (the mean of the entry's text vectors), by ridge regression regularised towards the
    identity: ``W = argmin ‖QW − T‖² + λ‖W − I‖²`` with λ = :data:`ADAPTER_REGULARISATION`, solved
    in closed form, ``(QᵀQ + λI)⁻¹ (QᵀT + λI)`` (numpy only).

    Raises:
        ValueError: ``query_vectors`` is not ``(len(gold), d)`` for the index's ``d``, or a gold entry
            is not in the index.
    """
    queries = unit_rows(query_vectors)
    targets = unit_rows(np.stack([index.entry_vector(entry) for entry in gold])) if gold else np.zeros_like(queries)
    if queries.shape != targets.shape:
        raise ValueError(f"query_vectors has shape {queries.shape}, but {len(gold)} gold entries of the index give {targets.shape}")
    dimension = queries.shape[1]
    identity = np.eye(dimension, dtype=np.float64)
    left = queries.T.astype(np.float64) @ queries + ADAPTER_REGULARISATION * identity
    right = queries.T.astype(np.float64) @ targets + ADAPTER_REGULARISATION * identity
    return np.linalg.solve(left, right).astype(np.float32)
