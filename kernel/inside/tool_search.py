"""Word search over a handle's tools (this module is imported *in the kernel process*, on the first
search): BM25 as skill search's lexical half (``bm25s``, Snowball-stemmed English, stop words
removed) over each tool's name, its words, and its docstring."""

from __future__ import annotations

import importlib
import re
import sys
from types import ModuleType

import Stemmer

#: Modules bm25s imports when it can, for what toolpath does not use: ``scipy.sparse`` for a CSC
#: backend (its default ``csc_backend="numpy"`` builds the same index), ``tqdm.auto`` for progress
#: bars toolpath never asks it for (``show_progress=False``; without it bm25s uses a stand-in that
#: returns the iterable). They cost 0.2-0.3 s and 0.03 s (tqdm.auto imports asyncio and ssl) of
#: every command that searches (issue 57).
_NOT_FOR_BM25S = ("scipy.sparse", "tqdm.auto")


def _bm25s_without_optional_imports() -> ModuleType:
    """``bm25s``, imported without the modules of :data:`_NOT_FOR_BM25S` the process does not have yet.

    A ``None`` in ``sys.modules`` is the import system's documented way to make an import fail
    (bm25s catches the ``ImportError``); each is removed once bm25s is loaded, so a later import of
    that module works as ever.
    """
    if "bm25s" in sys.modules:
        return sys.modules["bm25s"]
    blocked = [name for name in _NOT_FOR_BM25S if name not in sys.modules]
    for name in blocked:
        sys.modules[name] = None  # type: ignore[assignment]
    try:
        return importlib.import_module("bm25s")
    finally:
        for name in blocked:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]


bm25s = _bm25s_without_optional_imports()
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
