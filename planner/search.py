"""Skill search: match task text against the affordances of states and tools.

Every state contributes its description, its affordances and its token in words; every tool its
description, affordances and name in words. A hit's score is the best cosine similarity between the
query and any one of its texts, so a single well-phrased affordance is enough to match.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from planner.embedding import Embedder, default_embedder
from planner.graph import StateGraph


@dataclass(frozen=True)
class SkillHit:
    """One search result.

    Attributes:
        kind: ``"state"`` or ``"tool"``.
        name: the state token, or the tool name.
        server: the tool's server; for a state, the prefix of its token (its domain).
        score: cosine similarity of the query and the best-matching text, in [-1, 1].
        matched: the text that matched best.
        states: the states reaching this hit gives: the state itself, or what the tool produces.
    """

    kind: Literal["state", "tool"]
    name: str
    server: str | None
    score: float
    matched: str
    states: frozenset[str]

    def to_dict(self) -> dict:
        return {
            "kind": self.kind,
            "name": self.name,
            "server": self.server,
            "score": round(self.score, 4),
            "matched": self.matched,
            "states": sorted(self.states),
        }


class QueryError(ValueError):
    """A search query that cannot be answered as given (empty, or a bad ``k``)."""


def _words(identifier: str) -> str:
    return identifier.replace(".", " ").replace("_", " ").replace("-", " ")


class SkillIndex:
    """A dense index over the states and tools of a :class:`StateGraph`.

    Args:
        graph: the graph whose declared states and tools are indexed.
        embedder: maps texts to vectors; default: the embedded all-MiniLM-L6-v2 model.

    Every text is embedded once, when the index is built.
    """

    def __init__(self, graph: StateGraph, embedder: Embedder | None = None):
        self.graph = graph
        self.embedder = embedder if embedder is not None else default_embedder()
        self._entries: list[tuple[Literal["state", "tool"], str, str | None, frozenset[str]]] = []
        self._texts: list[str] = []
        self._owner: list[int] = []
        for token, state in graph.states.items():
            domain = token.split(".", 1)[0] if "." in token else None
            self._add(("state", token, domain, frozenset([token])), [state.description, *state.affordances, _words(token)])
        for tool in graph.registry:
            self._add(("tool", tool.name, tool.server_name, tool.state_transition.produces), [tool.description, *tool.affordances, _words(tool.name)])
        self._vectors = self._normalised(self.embedder(self._texts)) if self._texts else np.zeros((0, 1), dtype=np.float32)
        self._owners = np.asarray(self._owner, dtype=np.int64)

    def _add(self, entry: tuple[Literal["state", "tool"], str, str | None, frozenset[str]], texts: list[str]) -> None:
        index = len(self._entries)
        self._entries.append(entry)
        for text in dict.fromkeys(text.strip() for text in texts):
            if text:
                self._texts.append(text)
                self._owner.append(index)

    @staticmethod
    def _normalised(vectors: np.ndarray) -> np.ndarray:
        vectors = np.asarray(vectors, dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms == 0, 1, norms)

    def search(self, query: str, k: int = 10) -> list[SkillHit]:
        """The ``k`` best states and tools for ``query``, best first.

        Raises:
            QueryError: when the query is empty or ``k`` < 1.
        """
        if not query or not query.strip():
            raise QueryError("the query is empty; describe what you want to achieve")
        if k < 1:
            raise QueryError(f"k must be at least 1, got {k}")
        if not self._texts:
            return []
        query_vector = self._normalised(self.embedder([query.strip()]))[0]
        similarities = self._vectors @ query_vector
        best_score = np.full(len(self._entries), -np.inf, dtype=np.float32)
        np.maximum.at(best_score, self._owners, similarities)
        hits = []
        for index in np.argsort(-best_score, kind="stable")[:k]:
            kind, name, server, states = self._entries[index]
            texts = np.flatnonzero(self._owners == index)
            matched = self._texts[texts[np.argmax(similarities[texts])]]
            hits.append(SkillHit(kind, name, server, float(best_score[index]), matched, states))
        return hits
