"""Word search over a handle's tools (this module is imported *in the kernel process*, on the first
search): BM25 as skill search's lexical half (``bm25s``, Snowball-stemmed English, stop words
removed) over each tool's name, its words, and its docstring."""

from __future__ import annotations

import re

import bm25s
import Stemmer

_STEMMER = Stemmer.Stemmer("english")


def bm25_terms(texts: list[str]) -> list[list[str]]:
    """Each text's BM25 terms: lower-cased words, English stop words removed, Snowball-stemmed (the
    same for skill search and handles' tool search, so both read a query alike)."""
    return bm25s.tokenize(texts, stopwords="en", stemmer=_STEMMER, return_ids=False, show_progress=False)


def name_words(name: str) -> str:
    """``send_invoice`` → ``send invoice``; ``getWeatherAPI`` → ``get Weather API``."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", " ", name)
    return re.sub(r"[._\-&/]+", " ", spaced).strip()


class ToolSearch:
    """An index of tools by their texts.

    Args:
        texts: ``{tool: text}``, the text of each tool (its name, docstring...).
    """

    def __init__(self, texts: dict[str, str]):
        self._names = list(texts)
        self._bm25 = bm25s.BM25()
        if self._names:
            self._bm25.index(bm25_terms([f"{text} {name_words(name)} {name}" for name, text in texts.items()]), show_progress=False)

    def search(self, query: str, k: int) -> list[str]:
        """The names of the ``k`` tools that best match ``query``, best first; only tools sharing a
        word (stemmed) with it."""
        query_tokens = bm25_terms([query])[0]
        if not query_tokens or not self._names:
            return []
        scores = self._bm25.get_scores(query_tokens)
        ranked = sorted(range(len(self._names)), key=lambda index: -scores[index])
        return [self._names[index] for index in ranked[:k] if scores[index] > 0]
