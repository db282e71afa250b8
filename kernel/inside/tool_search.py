"""Word search over a handle's tools (this module is imported *in the kernel process*, on the first
search): BM25 as skill search's lexical half (``bm25s``, Snowball-stemmed English, stop words
removed) over each tool's name, its words, and its docstring."""

from __future__ import annotations

import importlib
import re
import sys
from types import ModuleType

import Stemmer


def _bm25s_without_scipy() -> ModuleType:
    """``bm25s``, imported without ``scipy.sparse`` unless the process has it already.

    bm25s imports scipy.sparse when it can, only for a CSC backend toolpath does not use (its
    default ``csc_backend="numpy"`` builds the same index), and importing scipy costs 0.2-0.3 s of
    every command that searches (issue 57). A ``None`` in ``sys.modules`` is the import system's
    documented way to make an import fail; it is removed once bm25s is loaded, so a later
    ``import scipy.sparse`` works as ever.
    """
    if "bm25s" in sys.modules or "scipy.sparse" in sys.modules:
        return importlib.import_module("bm25s")
    sys.modules["scipy.sparse"] = None  # type: ignore[assignment]
    try:
        return importlib.import_module("bm25s")
    finally:
        if sys.modules.get("scipy.sparse", 0) is None:
            del sys.modules["scipy.sparse"]


bm25s = _bm25s_without_scipy()
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
        self._bm25 = bm25s.BM25(csc_backend="numpy")
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
