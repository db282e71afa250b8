"""YAML catalog documents: PyYAML's events built into data and into the nodes
:class:`toolpath.registry.catalog_documents.SourceLocator` keeps, with the checks that make
parsing safe (see :mod:`toolpath.registry.catalog_documents`, which imports this module only for a
YAML document or a position asked for: a JSON catalog, or a catalog snapshot, is loaded without
importing PyYAML).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from toolpath.registry.catalog_problems import UNREADABLE, CatalogError, CatalogProblem, boolean_word_advice, field_path
from toolpath.registry.document_nodes import MAX_INTEGER_DIGITS, MappingAt, NodeAt, ScalarAt, SequenceAt


def nodes_at(text: str) -> NodeAt | None:
    """The document's nodes, composed as :func:`yaml.compose` composes them (an alias is the node
    its anchor names), from the parser's events; ``None`` for an empty document or text that
    :func:`yaml.compose` refuses."""
    loader = _YAML_LOADER(text)
    try:
        get_event = loader.get_event
        scalar_event, alias_event, sequence_start, mapping_start = yaml.ScalarEvent, yaml.AliasEvent, yaml.SequenceStartEvent, yaml.MappingStartEvent
        strings: dict[str, str] = {}
        anchors: dict[str, NodeAt] = {}
        # The open collections, and for each the key node waiting for its value (None: no key yet).
        open_collections: list[NodeAt] = []
        keys: list[NodeAt | None] = []
        root: NodeAt | None = None
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
                    node = ScalarAt(mark.line, mark.column, strings.setdefault(event.value, event.value))
                else:
                    node = (SequenceAt if kind is sequence_start else MappingAt)(mark.line, mark.column, [])
                if event.anchor is not None:
                    if event.anchor in anchors:
                        return None  # "found duplicate anchor"
                    anchors[event.anchor] = node
            if not open_collections:
                root = node
            elif type(open_collections[-1]) is SequenceAt:
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


#: Aliases let a few bytes of YAML expand into billions of nodes; no real catalog needs more than
#: this many nodes added by them (a catalog without anchors adds none).
MAX_ALIAS_EXPANSION = 1_000_000

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
    """The document needs the node path of :func:`load_yaml`: it has an anchor, an alias, an
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
    """What :func:`load_yaml` returns, built straight from the parser's events, for a document
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


def load_yaml(path: Path, text: str) -> tuple[Any, dict[tuple[int, int], tuple[str, bool]]]:
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
