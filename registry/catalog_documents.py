"""Catalog documents: a catalog file's text parsed as JSON (``.json``) or YAML (anything else) into
data, and :class:`SourceLocator`, which finds the line and column of a field of it for a problem.

YAML is parsed by libyaml when PyYAML has it (``yaml.__with_libyaml__``), else by PyYAML's
pure-Python parser; both give the same data, errors and positions. A plain document (no anchors,
aliases or explicit tags: every catalog in practice) is built straight from the parser's events;
any other, or one with a problem, is composed into nodes first, as PyYAML does, and that path
words every problem. Equal strings in a document become one object. PyYAML reads YAML 1.1, where an
unquoted ``yes``, ``no``, ``on`` or ``off`` is a boolean: as a mapping key it is refused (TP101,
"quote it"), and where text was expected the problem says so. A duplicate key, an integer longer
than Python reads, an impossible date and an alias bomb are problems at their position, not
exceptions from deep inside the parsers. The YAML side lives in
:mod:`toolpath.registry.catalog_yaml`, imported only for a YAML document or a position asked for,
so that a JSON catalog or a catalog snapshot loads without importing PyYAML.
"""

from __future__ import annotations

import gc
import hashlib
import json
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from toolpath.registry.catalog_problems import INVALID_FIELD, UNREADABLE, CatalogError, CatalogProblem, field_path
from toolpath.registry.document_nodes import MAX_INTEGER_DIGITS, MappingAt, NodeAt, ScalarAt, SequenceAt

_pause_lock = threading.Lock()
_pauses = 0
_collector_was_enabled = False


@contextmanager
def garbage_collection_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while the body runs (re-entrant, thread-safe).

    Parsing and validating a large catalog creates millions of objects that all stay alive; each
    collection the allocations trigger walks them again, which made a 25,000-tool catalog load
    several times slower. Nothing built here forms cycles that need collecting before the end.
    """
    global _pauses, _collector_was_enabled
    with _pause_lock:
        if _pauses == 0:
            _collector_was_enabled = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _pause_lock:
            _pauses -= 1
            if _pauses == 0 and _collector_was_enabled:
                # What was built is long-lived (a catalog lives as long as its registry): move it
                # straight to the oldest generation, as freeze() then unfreeze() does, instead of
                # having the young generations walk all of it (0.5 s each at 25,000 tools) before
                # it gets there. Not when someone froze objects on purpose: that would undo theirs.
                if gc.get_freeze_count() == 0:
                    gc.freeze()
                    gc.unfreeze()
                gc.enable()


class SourceLocator:
    """Maps field paths of one file to line/column, using YAML's node marks (JSON is valid YAML).

    The file's text is composed into nodes (:class:`NodeAt`) when a position is first asked for,
    then kept: a catalog without problems never needs one, and the nodes of a large catalog take
    more memory than its data (loading 100,000 tools of compact JSON with one problem peaks at
    1.15 GB with these nodes, 2.46 GB with PyYAML's, which carry two marks and a dict each).

    ``aliases`` renames top-level keys of a translated format back to the file's own
    (agora-workbench's ``server_name`` is this format's ``domain``).
    """

    def __init__(self, path: Path, text: str, *, is_json: bool = False):
        self.path = str(path)
        self._text: str | None = text
        self.is_json = is_json
        self._root: NodeAt | None = None
        #: ``(length, hash)`` of the text once :meth:`forget_text` dropped it; ``(bytes, SHA-256)`` of a file not read yet.
        self._fingerprint: tuple[int, int | str] | None = None
        self._composing = threading.Lock()  # a second thread waits for the nodes, not sees none
        self.aliases: dict[str, str] = {}
        #: ``{(line, column): (text, value)}`` of each unquoted ``yes``/``no``/``on``/``off`` value
        #: YAML 1.1 read as a boolean (see :func:`toolpath.registry.catalog_problems.boolean_word_advice`).
        self.boolean_words: dict[tuple[int, int], tuple[str, bool]] = {}

    @classmethod
    def of_unread_file(cls, path: Path, size: int, sha256: str, *, is_json: bool) -> SourceLocator:
        """The locator of a file not read in this process (a catalog read from its snapshot:
        :mod:`toolpath.registry.catalog_snapshot`): the file is read when a position is first asked
        for, and used only while it still has ``size`` bytes of SHA-256 ``sha256`` (hex)."""
        locator = cls(path, "", is_json=is_json)
        locator._text = None
        locator._fingerprint = (size, sha256)
        return locator

    def forget_text(self) -> None:
        """Drop the file's text (a catalog's own size in memory: 68 MiB at 100,000 tools), to read
        the file again if a position is ever asked for; positions are then known only while the
        file is unchanged (else ``None``: never a line of another text)."""
        with self._composing:
            if self._text is not None:
                self._fingerprint = (len(self._text), hash(self._text))
                self._text = None

    def _text_again(self) -> str | None:
        """The text :meth:`forget_text` dropped (or a file not read yet: :meth:`of_unread_file`),
        read again if the file still holds it."""
        from toolpath.registry.catalog_files import decoded_text, read_bytes, read_text  # reading sits above parsing

        assert self._fingerprint is not None
        length, digest = self._fingerprint
        self._fingerprint = None
        try:
            if isinstance(digest, str):  # the file's size and SHA-256
                data = read_bytes(Path(self.path), length)
                return decoded_text(Path(self.path), data) if len(data) == length and hashlib.sha256(data).hexdigest() == digest else None
            text = read_text(Path(self.path), 4 * length + 3)  # UTF-8 takes at most 4 bytes a character, and a BOM 3
        except CatalogError:
            return None
        return text if (len(text), hash(text)) == (length, digest) else None

    @property
    def root(self) -> NodeAt | None:
        """The document's root node (``None`` for an empty document or text YAML cannot compose)."""
        with self._composing:
            if self._text is None and self._fingerprint is not None:
                self._text = self._text_again()
            if self._text is not None:
                text = self._text
                if self.is_json:
                    # Raw tabs can only be whitespace in valid JSON, and YAML refuses them as
                    # indentation, so they become spaces (columns do not move).
                    text = text.replace("\t", " ")
                from toolpath.registry.catalog_yaml import nodes_at  # PyYAML is imported for YAML only

                with garbage_collection_paused():
                    self._root = nodes_at(text)
                self._text = None
        return self._root

    def scalar_position(self, value: str) -> tuple[int | None, int | None]:
        """Position of the first scalar written as ``value`` (for JSON numbers, which have no marks)."""
        stack = [self.root] if self.root is not None else []
        while stack:
            node = stack.pop()
            if isinstance(node, ScalarAt) and node.value == value:
                return node.line + 1, node.column + 1
            if isinstance(node, MappingAt):
                stack.extend(child for pair in reversed(node.value) for child in reversed(pair))
            elif isinstance(node, SequenceAt):
                stack.extend(reversed(node.value))
        return None, None

    def first_duplicate_key(self) -> tuple[int | None, int | None]:
        """Position of the first key that repeats within one mapping (for JSON, which has no marks)."""
        stack = [self.root] if self.root is not None else []
        while stack:
            node = stack.pop()
            if isinstance(node, MappingAt):
                seen: set[str] = set()
                for key, value in node.value:
                    if isinstance(key, ScalarAt):
                        if key.value in seen:
                            return key.line + 1, key.column + 1
                        seen.add(key.value)
                    stack.append(value)
            elif isinstance(node, SequenceAt):
                stack.extend(node.value)
        return None, None

    def _aliased(self, location: Sequence[str | int]) -> list[str | int]:
        if location and isinstance(location[0], str):
            return [self.aliases.get(location[0], location[0]), *location[1:]]
        return list(location)

    def _walk(self, location: Sequence[str | int]) -> tuple[NodeAt | None, bool]:
        """The deepest node along ``location`` and whether the whole location was found."""
        node = self.root
        for key in self._aliased(location):
            if isinstance(node, MappingAt):
                child = next((value for name, value in node.value if isinstance(name, ScalarAt) and name.value == key), None)
            elif isinstance(node, SequenceAt) and isinstance(key, int) and 0 <= key < len(node.value):
                child = node.value[key]
            else:
                child = None
            if child is None:
                return node, False
            node = child
        return node, True

    def position(self, location: Sequence[str | int]) -> tuple[int | None, int | None]:
        """1-based (line, column) of the deepest node along ``location`` that exists."""
        node, _ = self._walk(location)
        if node is None:
            return None, None
        return node.line + 1, node.column + 1

    def item_index(self, location: Sequence[str | int], value: str) -> int | None:
        """Index of the scalar ``value`` in the list at ``location``, to point at one list item."""
        node, found = self._walk(location)
        if found and isinstance(node, SequenceAt):
            return next((index for index, child in enumerate(node.value) if isinstance(child, ScalarAt) and child.value == value), None)
        return None

    def boolean_words_at(self, location: Sequence[str | int]) -> list[tuple[str, bool]]:
        """``(text, value)`` of each unquoted ``yes``/``no``/``on``/``off`` read as a boolean that is
        the value at ``location`` or an item or value directly in it."""
        if not self.boolean_words:  # spares composing the nodes of a file that has none
            return []
        node, found = self._walk(location)
        if not found or node is None:
            return []
        if isinstance(node, SequenceAt):
            nodes = [node, *node.value]
        elif isinstance(node, MappingAt):
            nodes = [node, *(value for _, value in node.value)]
        else:
            nodes = [node]
        positions = [(each.line + 1, each.column + 1) for each in nodes]
        return [self.boolean_words[position] for position in positions if position in self.boolean_words]

    def problem(self, location: Sequence[str | int], message: str, code: str = INVALID_FIELD) -> CatalogProblem:
        location = self._aliased(location)
        line, column = self.position(location)
        return CatalogProblem(self.path, field_path(location), message, line, column, code)


class _JsonObjects:
    """``json.loads``'s ``object_pairs_hook``: refuses a duplicate key, and makes equal strings in
    an object (or in a list in one) one object, as ``json`` does for keys. A catalog repeats its
    state tokens, types and stock phrases in every tool: at 10,000 generated tools the strings take
    4.6 MiB instead of 12.7."""

    def __init__(self) -> None:
        self.strings: dict[str, str] = {}

    def __call__(self, pairs: list[tuple[str, Any]]) -> dict:
        strings = self.strings
        result: dict[str, Any] = {}
        for key, value in pairs:
            if key in result:
                raise ValueError(f"duplicate key {key!r}")
            if type(value) is str:
                value = strings.setdefault(value, value)
            elif type(value) is list:
                for index, item in enumerate(value):
                    if type(item) is str:
                        value[index] = strings.setdefault(item, item)
            result[key] = value
        return result


class _IntegerTooLong(Exception):
    """Raised from inside ``json.loads`` for an integer literal over :data:`MAX_INTEGER_DIGITS` digits."""

    def __init__(self, literal: str):
        super().__init__(literal)
        self.literal = literal


def _json_integer(literal: str) -> int:
    if len(literal.lstrip("-")) > MAX_INTEGER_DIGITS:
        raise _IntegerTooLong(literal)
    return int(literal)


def parse_document(path: Path, text: str) -> tuple[Any, SourceLocator]:
    """Parse JSON (``.json``) or YAML (anything else) into data and a locator for its positions.

    Raises:
        CatalogError: with the position of a syntax error, a duplicate key, an integer longer than
            :data:`MAX_INTEGER_DIGITS`, an impossible date, or an alias bomb.
    """
    try:
        if path.suffix.lower() == ".json":
            locator = SourceLocator(path, text, is_json=True)
            try:
                document = json.loads(text, object_pairs_hook=_JsonObjects(), parse_int=_json_integer)
            except json.JSONDecodeError as error:
                raise CatalogError([CatalogProblem(str(path), "", f"invalid JSON: {error.msg}", error.lineno, error.colno, UNREADABLE)]) from None
            except _IntegerTooLong as error:
                line, column = locator.scalar_position(error.literal)
                message = f"invalid JSON: this integer has more than {MAX_INTEGER_DIGITS:,} digits, more than Python reads or prints; write it as a string if it is text, or as a float"
                raise CatalogError([CatalogProblem(str(path), "", message, line, column, UNREADABLE)]) from None
            except ValueError as error:
                line, column = locator.first_duplicate_key()
                raise CatalogError([CatalogProblem(str(path), "", f"invalid JSON: {error}", line, column, UNREADABLE)]) from None
            return document, locator
        import yaml  # imported by YAML documents only: a JSON catalog or a snapshot's load skips it (12 ms)

        from toolpath.registry.catalog_yaml import load_yaml

        try:
            document, boolean_values = load_yaml(path, text)
        except yaml.YAMLError as error:
            mark = getattr(error, "problem_mark", None)
            reason = getattr(error, "problem", None) or str(error)
            line, column = (mark.line + 1, mark.column + 1) if mark else (None, None)
            raise CatalogError([CatalogProblem(str(path), "", f"invalid YAML: {reason}", line, column, UNREADABLE)]) from None
        locator = SourceLocator(path, text)
        locator.boolean_words = boolean_values
        return document, locator
    except RecursionError:
        raise CatalogError([CatalogProblem(str(path), "", "the document is nested too deeply to read", code=UNREADABLE)]) from None


def as_list(value: Any) -> list:
    """``value`` when a document holds a list there, else ``[]`` (validation reports what it holds)."""
    return value if isinstance(value, list) else []


def as_mapping(value: Any) -> dict:
    """``value`` when a document holds a mapping there, else ``{}`` (validation reports what it holds)."""
    return value if isinstance(value, dict) else {}
