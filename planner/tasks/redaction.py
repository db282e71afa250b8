"""Values in a task's words replaced by their kinds, for the record of use
(:mod:`toolpath.planner.tasks.record_of_use`): "plot sales.csv by month for 2024" is kept as "plot
<file .csv> by month for <number>".

What is replaced, wherever it stands in the text:

* the values given: the task's inputs and the values the planner bound from its words (each
  known with its parameter, so a column is ``<column>``), except the catalog's own words (a
  parameter's ``choices``, the operators of a condition);
* quoted spans (``'Ada'`` → ``<text>``; a quoted file name or number by its kind), URLs
  (``<url>``), e-mail addresses (``<email>``), file names (``<file .csv>``: the extension is kept,
  it says what kind of file), paths written out (``<path>``), words mixing letters with digits or
  notation (``<text>``: keys, versions, identifiers, SMILES) and numbers (``<number>``, with dates
  and times written in digits).

The kinds keep what a task asks for (a learner needs "plot <file .csv> by month"), and drop what
only this user's data says.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from toolpath.planner.tasks.clauses import is_file_name

_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+[^\s.,;:!?)'\"]")
# A name, "@", and a domain of dotted labels: its domain alone would read as a file name ("bob@<file .com>").
_EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
# As toolpath.planner.tasks.arguments reads file names inside a text: a suffix of two to seven characters.
_FILE = re.compile(r"(?<![\w./~-])[\w./~-]*\w\.([A-Za-z][A-Za-z0-9]{1,6})(?![\w/-])")
# Digits with their separators: 12, 3.5, 1,000, 2024-03-01, 10:30, 50%.
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:[.,:/-]\d+)*%?(?!\w)")
_QUOTED = re.compile(r"(?<!\w)(['\"\u2018\u201c])(.+?)(['\"\u2019\u201d])(?!\w)")
# A path written out: absolute, from home or a drive ("/home/ada/x", "~/data", "C:\\Users\\ada").
_PATH = re.compile(r"(?<![\w.])(?:~?/|[A-Za-z]:\\)[^\s'\"]+")
# A word that mixes letters with digits or notation ("hunter2", "sk-ABC123", "v1.2.3", "CC(=O)O",
# "c1ccccc1O"): identifiers, keys, versions and molecules are this user's data, never the words of
# a request, so they go even when no parameter took them ("log2" goes too: privacy first).
_CODE_LIKE = re.compile(r"(?<!\S)(?=\S*[A-Za-z])(?=\S*(?:\d|[=#()\[\]@]))[^\s,;!?'\"]{4,}")


@dataclass(frozen=True)
class KnownValue:
    """A value the task was given or bound from its words, and the kind it is shown as
    (``meaning``: the parameter's, ``column``, ``file``, ...; ``None``: read from the value)."""

    value: Any
    meaning: str | None = None


def kind_marker(value: Any, meaning: str | None = None) -> str:
    """The marker standing for ``value``: ``<email>``, ``<column>``, ``<file .csv>``, ``<url>``,
    ``<number>`` or ``<text>``."""
    if isinstance(value, str) and _EMAIL.fullmatch(value.strip()):
        return "<email>"
    if meaning in ("column", "columns"):
        return "<column>"
    if isinstance(value, bool):
        return "<text>"
    if isinstance(value, (int, float)):
        return "<number>"
    text = str(value)
    if _URL.fullmatch(text):
        return "<url>"
    if meaning == "file" or is_file_name(text):
        suffix = os.path.splitext(text)[1].lower()
        return f"<file {suffix}>" if suffix else "<file>"
    if _NUMBER.fullmatch(text.strip()):
        return "<number>"
    return "<text>"


def redacted_message(message: str, texts: Iterable[str], known: Iterable[KnownValue] = ()) -> str:
    """A message of toolpath's (a refusal's reason) about a task whose words are ``texts``: each of
    them it quotes replaced by :func:`redacted` of it, then the known values and numbers elsewhere.
    The message's own quotes (a state's name, the advice's code) stay: they are the catalog's words."""
    known = list(known)
    for original in sorted({text for text in texts if text}, key=len, reverse=True):
        message = message.replace(original, redacted(original, known))
    return redacted(message, known, shapes=False)


def redacted(text: str, known: Iterable[KnownValue] = (), shapes: bool = True) -> str:
    """``text`` with every value in it replaced by its kind (see the module docstring); without
    ``shapes``, only the known values and numbers (not quoted spans, URLs or file names)."""
    spans: list[tuple[int, int, str]] = []
    for value in known:
        for scalar in _scalars(value.value):
            written = str(scalar)
            if len(written) < 2 and not written.isdigit():
                continue  # one letter or sign ("x", ">") would replace parts of words
            for match in re.finditer(rf"(?<!\w){re.escape(written)}(?!\w)", text):
                spans.append((match.start(), match.end(), kind_marker(scalar, value.meaning)))
    if shapes:
        spans += [(match.start(), match.end(), kind_marker(match.group(2))) for match in _QUOTED.finditer(text)]
        spans += [(match.start(), match.end(), "<url>") for match in _URL.finditer(text)]
        spans += [(match.start(), match.end(), "<email>") for match in _EMAIL.finditer(text)]
        spans += [(match.start(), match.end(), kind_marker(match.group())) for match in _FILE.finditer(text)]
        spans += [(match.start(), match.end(), "<path>") for match in _PATH.finditer(text)]
        spans += [(match.start(), match.end(), "<text>") for match in _CODE_LIKE.finditer(text)]
    spans += [(match.start(), match.end(), "<number>") for match in _NUMBER.finditer(text)]
    # Of overlapping spans the first and widest names the kind (a quoted file name, not the number
    # inside it), and the union is replaced: no piece of a value is left beside its marker.
    kept: list[tuple[int, int, str]] = []
    for start, end, marker in sorted(spans, key=lambda span: (span[0], span[0] - span[1])):
        if kept and start < kept[-1][1]:
            kept[-1] = (kept[-1][0], max(end, kept[-1][1]), kept[-1][2])
        else:
            kept.append((start, end, marker))
    pieces, position = [], 0
    for start, end, marker in kept:
        pieces += [text[position:start], marker]
        position = end
    pieces.append(text[position:])
    return "".join(pieces)


def _scalars(value: Any) -> Iterator[Any]:
    """The strings and numbers inside ``value`` (a scalar, or lists and mappings of them)."""
    if isinstance(value, dict):
        for item in value.values():
            yield from _scalars(item)
    elif isinstance(value, (list, tuple, set, frozenset)):
        for item in value:
            yield from _scalars(item)
    elif isinstance(value, (str, int, float)) and not isinstance(value, bool):
        yield value
