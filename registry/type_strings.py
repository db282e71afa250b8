"""Type strings: the written form of parameter and return types (``"list[str]"``, ``"rdkit.Chem.Mol"``).

Catalogs write types as strings so that loading imports nothing. A type string is valid when it is a
Python type expression built only from dotted names, subscripts (``dict[str, int]``), ``|`` unions,
``None``, ``...`` and bracketed lists of types (``Callable[[int], str]``); it is parsed with
:mod:`ast`, never evaluated.
"""

from __future__ import annotations

import ast
import difflib
import typing
from collections.abc import Iterable
from typing import Any

from toolpath.errors import Refusal

#: JSON Schema's primitive types as Python type names.
_JSON_TYPES = {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "null": "None", "object": "dict", "array": "list"}
#: Levels of nested schemas a type follows (``list[list[...]]``, each ``anyOf`` a level too); deeper
#: ones are ``Any``. Pydantic's schema of ``list[dict[str, list[int]]] | None`` nests 5; 12 leaves
#: room for real tools and keeps a schema built to nest cheap.
MAX_SCHEMA_DEPTH = 12
#: Schema objects one conversion looks at; the rest count as ``Any``. Bounds the work on a schema
#: that fans out (long ``anyOf`` lists, sub-schemas shared in a Python object); a real tool
#: parameter has tens.
MAX_SCHEMA_NODES = 1000
#: Characters of a type string: it is shown in a signature line a model reads, where a longer one
#: is noise (the same order as a tool summary's 300, :data:`toolpath.kernel.tools.bindings.MAX_SUMMARY_CHARS`).
MAX_TYPE_CHARS = 300


#: The builtin names a type string can mean as a type (``filter`` or ``zip`` are classes too, but
#: never what a catalog means by a type).
_BUILTIN_TYPE_NAMES = ("None", "bool", "bytearray", "bytes", "complex", "dict", "float", "frozenset", "int", "list", "object", "set", "str", "tuple", "type")
#: What a type string names without importing anything: builtin data types and typing's types
#: (its capitalised names; the lower-case ones are functions such as ``cast``).
TYPE_NAMES = (*_BUILTIN_TYPE_NAMES, *sorted(name for name in typing.__all__ if name[:1].isupper()))


def type_name_suggestion(name: str) -> str | None:
    """The type name a writer of ``name`` most likely meant, or ``None``.

    A JSON Schema type name (any case) is its Python type (``integer`` → ``int``, ``String`` →
    ``str``); anything else is the closest of :data:`TYPE_NAMES` by :mod:`difflib` (ratio ≥ 0.6),
    compared without case.

    Examples:
        >>> type_name_suggestion("integer")
        'int'
        >>> type_name_suggestion("Dict")
        'dict'
        >>> type_name_suggestion("Optinal")
        'Optional'
    """
    if name.lower() in _JSON_TYPES:
        return _JSON_TYPES[name.lower()]
    by_lower = {known.lower(): known for known in reversed(TYPE_NAMES)}  # `dict` wins over typing's `Dict`
    close = difflib.get_close_matches(name.lower(), list(by_lower), n=1)
    return by_lower[close[0]] if close else None


class TypeStringError(Refusal, ValueError):
    """A type string that is not a type expression; the message says what is wrong."""


def _check(node: ast.AST, text: str) -> None:
    if isinstance(node, ast.Name):
        return
    if isinstance(node, ast.Attribute):
        _check(node.value, text)
        if not isinstance(node.value, (ast.Name, ast.Attribute)):
            raise TypeStringError(f"type {text!r}: only dotted names may have attributes")
        return
    if isinstance(node, ast.Subscript):
        if not isinstance(node.value, (ast.Name, ast.Attribute)):
            raise TypeStringError(f"type {text!r}: only a named type can be subscripted")
        _check(node.value, text)
        _check(node.slice, text)
        return
    if isinstance(node, (ast.Tuple, ast.List)):
        for element in node.elts:
            _check(element, text)
        return
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        _check(node.left, text)
        _check(node.right, text)
        return
    if isinstance(node, ast.Constant) and (node.value is None or node.value is Ellipsis or isinstance(node.value, str)):
        # A string constant is a forward reference or a Literal's value.
        return
    raise TypeStringError(f"type {text!r}: {ast.unparse(node)!r} is not part of a type expression")


def check_type_string(text: str) -> None:
    """Raise :class:`TypeStringError` unless ``text`` is a valid type expression.

    Examples:
        >>> check_type_string("dict[str, list[int]] | None")
        >>> check_type_string("list[str")
        Traceback (most recent call last):
        ...
        registry.type_strings.TypeStringError: type 'list[str': not valid Python syntax ('[' was never closed)
    """
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as error:
        raise TypeStringError(f"type {text!r}: not valid Python syntax ({error.msg})") from None
    except (ValueError, RecursionError, MemoryError) as error:
        raise TypeStringError(f"type {text!r}: cannot be parsed ({type(error).__name__})") from None
    _check(tree.body, text)


def type_from_json_schema(schema: Any) -> str:
    """The type string of a JSON Schema (a tool's input property, say): ``{"type": "array", "items":
    {"type": "string"}}`` → ``"list[str]"``. Unions (``anyOf``, ``oneOf``, a list of types) become
    ``|``, an ``enum`` of strings a ``Literal``; what has no type (or one this mapping does not know,
    a ``$ref`` included: references are not followed, so a cycle of them costs nothing) is ``"Any"``.

    The schema comes from a server, so the conversion is bounded whatever its shape: it looks at
    most :data:`MAX_SCHEMA_NODES` schema objects, none nested deeper than :data:`MAX_SCHEMA_DEPTH`
    (deeper ones are ``Any``), and a type whose text would exceed :data:`MAX_TYPE_CHARS` becomes
    its general type (``list``, ``dict``, ``str``…, else ``Any``). Nothing is raised; a schema that
    is not an object (``true``, say) is ``"Any"``.

    Examples:
        >>> type_from_json_schema({"type": "array", "items": {"type": "integer"}})
        'list[int]'
        >>> type_from_json_schema({"anyOf": [{"type": "string"}, {"type": "null"}]})
        'str | None'
        >>> type_from_json_schema({"type": "object", "additionalProperties": {"type": "number"}})
        'dict[str, float]'
        >>> type_from_json_schema({"type": "string", "enum": ["celsius", "fahrenheit"]})
        "Literal['celsius', 'fahrenheit']"
        >>> type_from_json_schema({"type": "string", "enum": [f"unit {number}" for number in range(1000)]})
        'str'
    """
    return _schema_type(schema, 0, [MAX_SCHEMA_NODES])


def _schema_type(schema: Any, depth: int, nodes_left: list[int]) -> str:
    """:func:`type_from_json_schema` of ``schema`` found ``depth`` levels down; ``nodes_left`` (one
    count, shared by the whole conversion) is decremented for each schema object looked at."""
    if not isinstance(schema, dict) or depth >= MAX_SCHEMA_DEPTH or nodes_left[0] <= 0:
        return "Any"
    nodes_left[0] -= 1
    kind = schema.get("type")
    choices = schema.get("enum")
    alternatives = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(choices, list) and choices and all(isinstance(choice, str) for choice in choices):
        text = f"Literal[{', '.join(map(repr, dict.fromkeys(choices)))}]"
    elif isinstance(alternatives, list) and alternatives:
        text = _union(_schema_type(alternative, depth + 1, nodes_left) for alternative in alternatives)
    elif isinstance(kind, list) and kind:
        # Each type of the list once: `["array", "array"]` must not convert `items` twice per level.
        kinds = dict.fromkeys(single if isinstance(single, str) else None for single in kind)
        text = _union(_kind_type(schema, single, depth, nodes_left) for single in kinds)
    else:
        text = _kind_type(schema, kind, depth, nodes_left)
    if len(text) <= MAX_TYPE_CHARS:
        return text
    return _JSON_TYPES.get(kind, "Any") if isinstance(kind, str) else "Any"


def _kind_type(schema: dict[str, Any], kind: Any, depth: int, nodes_left: list[int]) -> str:
    """The type of ``schema`` read as JSON type ``kind`` (one of its ``type`` list, say)."""
    if kind == "array" and isinstance(schema.get("items"), dict):
        return f"list[{_schema_type(schema['items'], depth + 1, nodes_left)}]"
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict) and not schema.get("properties"):
        return f"dict[str, {_schema_type(schema['additionalProperties'], depth + 1, nodes_left)}]"
    return _JSON_TYPES.get(kind, "Any") if isinstance(kind, str) else "Any"


def _union(parts: Iterable[str]) -> str:
    unique = list(dict.fromkeys(parts))
    return "Any" if "Any" in unique else " | ".join(unique)


def literal_values(text: str) -> tuple[object, ...] | None:
    """The values a ``Literal[...]`` type string allows, or ``None`` for any other type string (or
    one that does not parse).

    Examples:
        >>> literal_values("Literal['sum', 'mean']")
        ('sum', 'mean')
        >>> literal_values("str") is None
        True
    """
    if "Literal" not in text:  # most types: spares parsing every parameter's type of a large catalog
        return None
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(node, ast.Subscript) or ast.unparse(node.value).split(".")[-1] != "Literal":
        return None
    elements = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    if not all(isinstance(element, ast.Constant) for element in elements):
        return None
    return tuple(element.value for element in elements)
