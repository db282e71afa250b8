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
exceptions from deep inside the parsers.
"""

from __future__ import annotations

import gc
import hashlib
import json
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from toolpath.registry.catalog_problems import INVALID_FIELD, UNREADABLE, CatalogError, CatalogProblem, boolean_word_advice, field_path

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


class _NodeAt:
    """A node of a document as :class:`SourceLocator` keeps it: where it starts (0-based line and
    column, as PyYAML's marks give them) and its ``value``: a scalar's text (:class:`_ScalarAt`), a
    sequence's nodes (:class:`_SequenceAt`) or a mapping's (key node, value node) pairs in the
    file's order (:class:`_MappingAt`). A fifth of the memory of PyYAML's nodes with their marks."""

    __slots__ = ("line", "column", "value")

    def __init__(self, line: int, column: int, value: Any):
        self.line, self.column, self.value = line, column, value


class _ScalarAt(_NodeAt):
    __slots__ = ()


class _SequenceAt(_NodeAt):
    __slots__ = ()


class _MappingAt(_NodeAt):
    __slots__ = ()


def _nodes_at(text: str) -> _NodeAt | None:
    """The document's nodes, composed as :func:`yaml.compose` composes them (an alias is the node
    its anchor names), from the parser's events; ``None`` for an empty document or text that
    :func:`yaml.compose` refuses."""
    loader = _YAML_LOADER(text)
    try:
        get_event = loader.get_event
        scalar_event, alias_event, sequence_start, mapping_start = yaml.ScalarEvent, yaml.AliasEvent, yaml.SequenceStartEvent, yaml.MappingStartEvent
        strings: dict[str, str] = {}
        anchors: dict[str, _NodeAt] = {}
        # The open collections, and for each the key node waiting for its value (None: no key yet).
        open_collections: list[_NodeAt] = []
        keys: list[_NodeAt | None] = []
        root: _NodeAt | None = None
        get_event()  # StreamStartEvent
        if isinstance(loader.peek_event(), yaml.StreamEndEvent):
            return None
        get_event()  # DocumentStartEvent
        while True:
            event = get_event()
            kind = type(event)
            if kind is alias_event:
                if event.anchor not in anchors:
                    return None  # "found undefined alias"
                node = anchors[event.anchor]
            elif kind is yaml.SequenceEndEvent or kind is yaml.MappingEndEvent:
                open_collections.pop()
                keys.pop()
                if not open_collections:
                    break
                continue
            else:
                mark = event.start_mark
                if kind is scalar_event:
                    node = _ScalarAt(mark.line, mark.column, strings.setdefault(event.value, event.value))
                else:
                    node = (_SequenceAt if kind is sequence_start else _MappingAt)(mark.line, mark.column, [])
                if event.anchor is not None:
                    if event.anchor in anchors:
                        return None  # "found duplicate anchor"
                    anchors[event.anchor] = node
            if not open_collections:
                root = node
            elif type(open_collections[-1]) is _SequenceAt:
                open_collections[-1].value.append(node)
            elif keys[-1] is None:
                keys[-1] = node
            else:
                open_collections[-1].value.append((keys[-1], node))
                keys[-1] = None
            if kind is sequence_start or kind is mapping_start:
                open_collections.append(node)
                keys.append(None)
            elif not open_collections:
                break  # the document is one scalar
        get_event()  # DocumentEndEvent
        return root if isinstance(loader.peek_event(), yaml.StreamEndEvent) else None  # else "expected a single document"
    except yaml.YAMLError:
        return None
    finally:
        loader.dispose()


class SourceLocator:
    """Maps field paths of one file to line/column, using YAML's node marks (JSON is valid YAML).

    The file's text is composed into nodes (:class:`_NodeAt`) when a position is first asked for,
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
        self._root: _NodeAt | None = None
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
    def root(self) -> _NodeAt | None:
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
                with garbage_collection_paused():
                    self._root = _nodes_at(text)
                self._text = None
        return self._root

    def scalar_position(self, value: str) -> tuple[int | None, int | None]:
        """Position of the first scalar written as ``value`` (for JSON numbers, which have no marks)."""
        stack = [self.root] if self.root is not None else []
        while stack:
            node = stack.pop()
            if isinstance(node, _ScalarAt) and node.value == value:
                return node.line + 1, node.column + 1
            if isinstance(node, _MappingAt):
                stack.extend(child for pair in reversed(node.value) for child in reversed(pair))
            elif isinstance(node, _SequenceAt):
                stack.extend(reversed(node.value))
        return None, None

    def first_duplicate_key(self) -> tuple[int | None, int | None]:
        """Position of the first key that repeats within one mapping (for JSON, which has no marks)."""
        stack = [self.root] if self.root is not None else []
        while stack:
            node = stack.pop()
            if isinstance(node, _MappingAt):
                seen: set[str] = set()
                for key, value in node.value:
                    if isinstance(key, _ScalarAt):
                        if key.value in seen:
                            return key.line + 1, key.column + 1
                        seen.add(key.value)
                    stack.append(value)
            elif isinstance(node, _SequenceAt):
                stack.extend(node.value)
        return None, None

    def _aliased(self, location: Sequence[str | int]) -> list[str | int]:
        if location and isinstance(location[0], str):
            return [self.aliases.get(location[0], location[0]), *location[1:]]
        return list(location)

    def _walk(self, location: Sequence[str | int]) -> tuple[_NodeAt | None, bool]:
        """The deepest node along ``location`` and whether the whole location was found."""
        node = self.root
        for key in self._aliased(location):
            if isinstance(node, _MappingAt):
                child = next((value for name, value in node.value if isinstance(name, _ScalarAt) and name.value == key), None)
            elif isinstance(node, _SequenceAt) and isinstance(key, int) and 0 <= key < len(node.value):
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
        if found and isinstance(node, _SequenceAt):
            return next((index for index, child in enumerate(node.value) if isinstance(child, _ScalarAt) and child.value == value), None)
        return None

    def boolean_words_at(self, location: Sequence[str | int]) -> list[tuple[str, bool]]:
        """``(text, value)`` of each unquoted ``yes``/``no``/``on``/``off`` read as a boolean that is
        the value at ``location`` or an item or value directly in it."""
        if not self.boolean_words:  # spares composing the nodes of a file that has none
            return []
        node, found = self._walk(location)
        if not found or node is None:
            return []
        if isinstance(node, _SequenceAt):
            nodes = [node, *node.value]
        elif isinstance(node, _MappingAt):
            nodes = [node, *(value for _, value in node.value)]
        else:
            nodes = [node]
        positions = [(each.line + 1, each.column + 1) for each in nodes]
        return [self.boolean_words[position] for position in positions if position in self.boolean_words]

    def problem(self, location: Sequence[str | int], message: str, code: str = INVALID_FIELD) -> CatalogProblem:
        location = self._aliased(location)
        line, column = self.position(location)
        return CatalogProblem(self.path, field_path(location), message, line, column, code)


#: Aliases let a few bytes of YAML expand into billions of nodes; no real catalog needs more than
#: this many nodes added by them (a catalog without anchors adds none).
MAX_ALIAS_EXPANSION = 1_000_000

#: The longest integer a catalog may write, in digits: Python's default limit for converting an
#: integer to or from text (``sys.int_info.default_max_str_digits``). Past it, reading the number
#: and printing it (in a message, a signature) raise ``ValueError``.
MAX_INTEGER_DIGITS = sys.int_info.default_max_str_digits

_STR_TAG = "tag:yaml.org,2002:str"
_BOOL_TAG = "tag:yaml.org,2002:bool"
#: What YAML 1.1 (PyYAML) reads as a boolean besides ``true``/``false``, when written unquoted
#: (``y``/``n`` stay strings in PyYAML).
_BOOLEAN_WORDS = frozenset({"yes", "no", "on", "off"})


_SEQUENCE_TAG = "tag:yaml.org,2002:seq"
_MAPPING_TAG = "tag:yaml.org,2002:map"


class _CatalogConstructor(yaml.constructor.SafeConstructor):
    """PyYAML's safe constructor with a catalog's rules.

    A mapping that repeats a key is an error instead of last-one-wins; an integer longer than
    :data:`MAX_INTEGER_DIGITS` and a date or time that does not exist are errors at their position
    instead of a ``ValueError`` from deep inside PyYAML.

    Every unquoted ``yes``/``no``/``on``/``off`` read as a boolean is kept in ``boolean_words``,
    by node id, with whether it is a mapping key: a key can only be a mistake, and a value may be.
    """

    def __init__(self) -> None:
        super().__init__()
        self.boolean_words: dict[int, tuple[yaml.ScalarNode, bool]] = {}

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if _is_boolean_word(key_node):
                self.boolean_words[id(key_node)] = (key_node, True)
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                if key_node.value in seen:
                    raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key_node.value!r}", key_node.start_mark)
                seen.add(key_node.value)
        return super().construct_mapping(node, deep)

    def construct_bounded_int(self, node: yaml.ScalarNode) -> int:
        problem = f"this integer has more than {MAX_INTEGER_DIGITS:,} digits, more than Python reads or prints; quote it if it is text, or use a float"
        # Checked on the text first: sexagesimal (1:30:00) and binary integers are built digit by
        # digit, and a megabyte of them would take minutes before the value could be checked.
        if len(node.value) > MAX_INTEGER_DIGITS:
            raise yaml.constructor.ConstructorError(None, None, problem, node.start_mark)
        try:
            value = super().construct_yaml_int(node)
            str(value)  # a short hexadecimal literal can still be too long in decimal
        except ValueError:
            raise yaml.constructor.ConstructorError(None, None, problem, node.start_mark) from None
        return value

    def construct_recorded_bool(self, node: yaml.ScalarNode) -> bool:
        if _is_boolean_word(node):
            self.boolean_words.setdefault(id(node), (node, False))  # a key was recorded as one already
        return super().construct_yaml_bool(node)

    def construct_checked_timestamp(self, node: yaml.ScalarNode) -> Any:
        try:
            return super().construct_yaml_timestamp(node)
        except (ValueError, OverflowError) as error:
            raise yaml.constructor.ConstructorError(
                None, None, f"{node.value!r} is not a valid date or time ({error}); quote it if it is text", node.start_mark
            ) from None

    def construct_tree(self, root: yaml.Node) -> tuple[Any, bool]:
        """The data of a document, built without PyYAML's per-node generators.

        Plain strings, lists and mappings with string keys, which make up nearly all of a catalog,
        are built here, iteratively (a document nested a thousand deep needs no recursion); every
        other node (numbers, ``!!set``, merge keys ``<<``, non-string keys) goes through
        :meth:`construct_object`, so the result equals PyYAML's. A collection reached again
        through an alias is built once and shared, as PyYAML does, so even one that contains
        itself ends.

        Returns:
            ``(data, shared)``: ``shared`` is true when a collection was reached twice, or was built
            by PyYAML (which may have reached one twice, unseen here); the caller then bounds what
            aliases expand to before anything walks the data.
        """
        scalar, sequence, mapping_node = yaml.ScalarNode, yaml.SequenceNode, yaml.MappingNode
        holder: list[Any] = [None]
        built: dict[int, Any] = {}
        shared = False
        # (node, container, slot): build node into container[slot]. Plain strings are filled in as
        # their container is built, so mostly collections pass through here.
        pending: list[tuple[yaml.Node, Any, Any]] = [(root, holder, 0)]
        while pending:
            node, parent, slot = pending.pop()
            if type(node) is scalar:
                parent[slot] = node.value if node.tag == _STR_TAG else self.construct_object(node, deep=True)
                continue
            if id(node) in built:
                parent[slot] = built[id(node)]
                shared = True
                continue
            value: Any = None
            deferred: list[tuple[yaml.Node, Any, Any]] = []
            if node.tag == _SEQUENCE_TAG and type(node) is sequence:
                value = []
                for child in node.value:
                    if child.tag == _STR_TAG and type(child) is scalar:
                        value.append(child.value)
                    else:
                        deferred.append((child, value, len(value)))
                        value.append(None)
            elif node.tag == _MAPPING_TAG and type(node) is mapping_node:
                value = {}
                for key_node, value_node in node.value:
                    if key_node.tag != _STR_TAG or type(key_node) is not scalar:
                        value = None  # a merge key `<<` or a key that is not a string
                        break
                    key = key_node.value
                    if key in value:
                        raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
                    if value_node.tag == _STR_TAG and type(value_node) is scalar:
                        value[key] = value_node.value
                    else:
                        value[key] = None  # keeps the file's key order
                        deferred.append((value_node, value, key))
            if value is None:
                value = self.construct_object(node, deep=True)
                shared = True
            else:
                pending.extend(deferred)
            built[id(node)] = parent[slot] = value
        return holder[0], shared


_CatalogConstructor.add_constructor("tag:yaml.org,2002:int", _CatalogConstructor.construct_bounded_int)
_CatalogConstructor.add_constructor("tag:yaml.org,2002:timestamp", _CatalogConstructor.construct_checked_timestamp)
_CatalogConstructor.add_constructor(_BOOL_TAG, _CatalogConstructor.construct_recorded_bool)


def _is_boolean_word(node: yaml.Node) -> bool:
    """Whether ``node`` is an unquoted ``yes``/``no``/``on``/``off`` that YAML 1.1 reads as a boolean."""
    return isinstance(node, yaml.ScalarNode) and node.tag == _BOOL_TAG and not node.style and node.value.lower() in _BOOLEAN_WORDS


class _PurePythonLoader(yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser, yaml.composer.Composer, _CatalogConstructor, yaml.resolver.Resolver):
    """PyYAML's pure-Python parser with the catalog constructor (what ``yaml.SafeLoader`` is, with ours)."""

    def __init__(self, stream: str):
        yaml.reader.Reader.__init__(self, stream)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        yaml.composer.Composer.__init__(self)
        _CatalogConstructor.__init__(self)
        yaml.resolver.Resolver.__init__(self)


def _libyaml_refuses_deep_nesting() -> bool:
    """Whether PyYAML has libyaml, and one that refuses documents nested over 1,000 levels deep
    (``exceeded maximum nesting depth``, as the libyaml 0.2.6 in PyYAML 6.0.4's wheels does).

    PyYAML composes the nodes libyaml parses by recursing in C: without that limit, a hostile file
    could overflow the stack and kill the process, so an older libyaml is not used.
    """
    if not getattr(yaml, "__with_libyaml__", False):
        return False
    try:
        yaml.compose("[" * 2000, Loader=yaml.CSafeLoader)
    except yaml.YAMLError as error:
        return "nesting depth" in str(error)
    return False


if _libyaml_refuses_deep_nesting():

    class _LibyamlLoader(yaml.cyaml.CParser, _CatalogConstructor, yaml.resolver.Resolver):
        """libyaml's parser with the catalog constructor (what ``yaml.CSafeLoader`` is, with ours)."""

        def __init__(self, stream: str):
            yaml.cyaml.CParser.__init__(self, stream)
            _CatalogConstructor.__init__(self)
            yaml.resolver.Resolver.__init__(self)

    _YAML_LOADER: type = _LibyamlLoader
else:
    _YAML_LOADER = _PurePythonLoader


def yaml_parser() -> str:
    """``"libyaml"`` when catalogs are parsed by libyaml (several times faster), else ``"pure-python"``."""
    return "pure-python" if _YAML_LOADER is _PurePythonLoader else "libyaml"


def _alias_expansion(root: yaml.Node) -> tuple[int, int]:
    """``(nodes once aliases are expanded, nodes written)``; raises ``ValueError`` on a recursive alias."""
    sizes: dict[int, int] = {}
    expanding: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [child for pair in node.value for child in pair]
        else:
            children = []
        if children_done:
            sizes[id(node)] = 1 + sum(sizes[id(child)] for child in children)
            expanding.discard(id(node))
            continue
        if id(node) in sizes:
            continue
        if id(node) in expanding:
            raise ValueError("an alias refers to a node that contains it")
        expanding.add(id(node))
        stack.append((node, True))
        stack.extend((child, False) for child in children if id(child) not in sizes)
    return sizes[id(root)], len(sizes)


def _node_locations(root: yaml.Node, wanted: set[int]) -> dict[int, list[str | int]]:
    """The field path (``["mcp_servers", "on"]``) of each node whose id is in ``wanted``; a key's
    path ends with its own text."""
    found: dict[int, list[str | int]] = {}
    stack: list[tuple[yaml.Node, list[str | int]]] = [(root, [])]
    visited: set[int] = set()
    while stack and len(found) < len(wanted):
        node, location = stack.pop()
        if id(node) in visited:  # an alias reaches a node twice
            continue
        visited.add(id(node))
        if id(node) in wanted:
            found[id(node)] = location
        if isinstance(node, yaml.SequenceNode):
            stack.extend((child, [*location, index]) for index, child in enumerate(node.value))
        elif isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                step = key.value if isinstance(key, yaml.ScalarNode) else "?"
                if id(key) in wanted:
                    found[id(key)] = [*location, step]
                stack.append((value, [*location, step]))
    return found


class _NotPlain(Exception):
    """The document needs the node path of :func:`_load_yaml`: it has an anchor, an alias, an
    explicit tag, a key that is not a string, or a problem whose report that path words."""


#: ``{first character: [(tag, pattern), ...]}``: PyYAML's implicit resolvers (the YAML 1.1 rules for
#: a plain scalar's type), keyed as :meth:`yaml.resolver.Resolver.resolve` reads them.
_IMPLICIT_RESOLVERS: dict[str, list[tuple[str, Any]]] = {
    first: resolvers + yaml.resolver.Resolver.yaml_implicit_resolvers.get(None, [])
    for first, resolvers in yaml.resolver.Resolver.yaml_implicit_resolvers.items()
    if first is not None
}
_NULL_TAG = "tag:yaml.org,2002:null"
#: Scalar tags whose constructors return the value directly (the other implicit tags, ``merge``,
#: ``value`` and ``yaml``, are only ever errors or merge keys: the node path handles them).
_PLAIN_CONSTRUCTED_TAGS = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float", "tag:yaml.org,2002:timestamp", _NULL_TAG)


def _scalar_tag(event: yaml.ScalarEvent) -> str:
    """The tag :meth:`yaml.resolver.Resolver.resolve` gives a scalar without an explicit tag
    (:class:`_NotPlain` for one with it)."""
    if event.tag is not None and event.tag != "!":
        raise _NotPlain
    if not event.implicit[0]:  # quoted, or a block scalar: text
        return _STR_TAG
    value = event.value
    for tag, pattern in _IMPLICIT_RESOLVERS.get(value[:1], ()):
        if pattern.match(value):
            return tag
    return _STR_TAG


def _load_plain_yaml(text: str) -> tuple[Any, dict[tuple[int, int], tuple[str, bool]]]:
    """What :func:`_load_yaml` returns, built straight from the parser's events, for a document
    without anchors, aliases, explicit tags, non-string keys or problems (every catalog written by
    hand or by a tool, in practice).

    The node path composes every node of the file before building anything: for 100,000 tools
    that is about 2 GiB of nodes and marks held at once. Here each event is dropped once its value
    is in place, and the result is the same data (PyYAML's implicit types, a value's boolean words
    by position).

    Raises:
        _NotPlain: for anything else, at the first sign of it; the caller then takes the node path,
            whose data and problems are the reference.
        yaml.YAMLError: the text is not YAML (the first error the parser meets, as on the node path).
    """
    loader = _YAML_LOADER(text)
    try:
        get_event = loader.get_event
        scalar_event, mapping_start, sequence_start = yaml.ScalarEvent, yaml.MappingStartEvent, yaml.SequenceStartEvent
        constructors = loader.yaml_constructors
        strings: dict[str, str] = {}  # equal strings as one object, as for JSON (_JsonObjects)
        boolean_values: dict[tuple[int, int], tuple[str, bool]] = {}
        # One frame per open collection: [the collection, the key read and awaiting its value].
        # A key is always a string here, so None marks "no key yet".
        frames: list[list[Any]] = []
        document: Any = None
        get_event()  # StreamStartEvent
        if isinstance(get_event(), yaml.StreamEndEvent):
            return None, {}
        while True:
            event = get_event()
            kind = type(event)
            if kind is scalar_event:
                if event.anchor is not None:
                    raise _NotPlain
                tag = _scalar_tag(event)
                frame = frames[-1] if frames else None
                if frame is not None and frame[1] is None and type(frame[0]) is dict:  # a mapping key
                    if tag != _STR_TAG or event.value in frame[0]:  # a boolean word, a number, a duplicate: the node path words it
                        raise _NotPlain
                    frame[1] = strings.setdefault(event.value, event.value)
                    continue
                if tag == _STR_TAG:
                    value: Any = strings.setdefault(event.value, event.value)
                elif tag == _BOOL_TAG:
                    value = loader.bool_values[event.value.lower()]
                    if not event.style and event.value.lower() in _BOOLEAN_WORDS:
                        boolean_values[(event.start_mark.line + 1, event.start_mark.column + 1)] = (event.value, value)
                elif tag in _PLAIN_CONSTRUCTED_TAGS:
                    node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, event.style)
                    try:
                        value = constructors[tag](loader, node)
                    except yaml.YAMLError:  # an integer too long, an impossible date
                        raise _NotPlain from None
                else:
                    raise _NotPlain
            elif kind is mapping_start or kind is sequence_start:
                if event.anchor is not None or (event.tag is not None and event.tag != "!"):
                    raise _NotPlain
                value = {} if kind is mapping_start else []
            elif kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
                value = frames.pop()[0]
                if frames:
                    continue  # placed when it was opened
                document = value
                break
            else:  # an alias
                raise _NotPlain
            if not frames:
                document = value
                if kind is scalar_event:
                    break
            else:
                frame = frames[-1]
                if type(frame[0]) is list:
                    frame[0].append(value)
                elif frame[1] is None:  # a collection as a mapping key
                    raise _NotPlain
                else:
                    frame[0][frame[1]] = value
                    frame[1] = None
            if kind is not scalar_event:
                frames.append([value, None])
        get_event()  # DocumentEndEvent
        if not isinstance(loader.peek_event(), yaml.StreamEndEvent):  # a second document: the node path says so
            raise _NotPlain
        return document, boolean_values
    finally:
        loader.dispose()


def _load_yaml(path: Path, text: str) -> tuple[Any, dict[tuple[int, int], tuple[str, bool]]]:
    """The document, and each unquoted ``yes``/``no``/``on``/``off`` value read as a boolean:
    ``{(line, column): (its text, its value)}``, 1-based.

    A plain document is built from the parser's events (:func:`_load_plain_yaml`); any other is
    composed into nodes first, as PyYAML does.

    Raises:
        CatalogError: a mapping key written ``yes``/``no``/``on``/``off`` unquoted (YAML 1.1 makes
            it a boolean, which no catalog field or name can be), each with its line; an alias bomb.
        yaml.YAMLError: the text is not YAML.
    """
    try:
        return _load_plain_yaml(text)
    except _NotPlain:
        pass
    loader = _YAML_LOADER(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return None, {}
        document, shared = loader.construct_tree(root)
        boolean_keys = [node for node, is_key in loader.boolean_words.values() if is_key]
        if boolean_keys:
            locations = _node_locations(root, {id(node) for node in boolean_keys})
            boolean_keys = [node for node in boolean_keys if not _retry_condition_key(document, node, locations.get(id(node), []))]
        if boolean_keys:
            raise CatalogError(
                [
                    CatalogProblem(
                        str(path),
                        field_path(locations.get(id(node), [])),
                        boolean_word_advice(node.value, loader.construct_yaml_bool(node)),
                        node.start_mark.line + 1,
                        node.start_mark.column + 1,
                    )
                    for node in sorted(boolean_keys, key=lambda node: node.start_mark.index)
                ]
            )
        boolean_values = {
            (node.start_mark.line + 1, node.start_mark.column + 1): (node.value, loader.construct_yaml_bool(node))
            for node, is_key in loader.boolean_words.values()
            if not is_key
        }
        # An alias is written `*name`: without one, nothing is shared, and nothing to bound.
        if shared and "*" in text:
            try:
                expanded, written = _alias_expansion(root)
            except ValueError as error:
                raise CatalogError(
                    [CatalogProblem(str(path), "", f"invalid YAML: {error}", root.start_mark.line + 1, root.start_mark.column + 1, UNREADABLE)]
                ) from None
            if expanded - written > MAX_ALIAS_EXPANSION:
                message = f"the document expands to {expanded:,} nodes through aliases, {expanded - written:,} more than it holds (limit {MAX_ALIAS_EXPANSION:,}); write it out without anchors"
                raise CatalogError([CatalogProblem(str(path), "", message, code=UNREADABLE)])
        return document, boolean_values
    finally:
        loader.dispose()


def _retry_condition_key(document: Any, node: yaml.ScalarNode, location: list[str | int]) -> bool:
    """Whether ``node`` is the key ``on`` of a ``retry`` mapping (``retry: {attempts: 3, on: [timeout]}``),
    which YAML 1.1 reads as the boolean ``True``: it is given back its text in ``document``, since
    the field is named ``on`` and asking authors to quote it would trip every one of them."""
    if node.value.lower() != "on" or len(location) < 2 or location[-2] != "retry":
        return False
    mapping = document
    for step in location[:-1]:
        try:
            mapping = mapping[step]
        except (KeyError, IndexError, TypeError):
            return False
    if not isinstance(mapping, dict) or True not in mapping or "on" in mapping:
        return False
    mapping["on"] = mapping.pop(True)
    return True


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
        try:
            document, boolean_values = _load_yaml(path, text)
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
