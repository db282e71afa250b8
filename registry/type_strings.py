"""Type strings: the written form of parameter and return types (``"list[str]"``, ``"rdkit.Chem.Mol"``).

Catalogs write types as strings so that loading imports nothing. A type string is valid when it is a
Python type expression built only from dotted names, subscripts (``dict[str, int]``), ``|`` unions,
``None``, ``...`` and bracketed lists of types (``Callable[[int], str]``); it is parsed with
:mod:`ast`, never evaluated.
"""

from __future__ import annotations

import ast
from typing import Any

#: JSON Schema's primitive types as Python type names.
_JSON_TYPES = {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "null": "None", "object": "dict", "array": "list"}


class TypeStringError(ValueError):
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
    a ``$ref`` included) is ``"Any"``.

    Examples:
        >>> type_from_json_schema({"type": "array", "items": {"type": "integer"}})
        'list[int]'
        >>> type_from_json_schema({"anyOf": [{"type": "string"}, {"type": "null"}]})
        'str | None'
        >>> type_from_json_schema({"type": "object", "additionalProperties": {"type": "number"}})
        'dict[str, float]'
        >>> type_from_json_schema({"type": "string", "enum": ["celsius", "fahrenheit"]})
        "Literal['celsius', 'fahrenheit']"
    """
    if not isinstance(schema, dict):
        return "Any"
    choices = schema.get("enum")
    if isinstance(choices, list) and choices and all(isinstance(choice, str) for choice in choices):
        return f"Literal[{', '.join(map(repr, dict.fromkeys(choices)))}]"
    alternatives = schema.get("anyOf") or schema.get("oneOf")
    kind = schema.get("type")
    if isinstance(alternatives, list) and alternatives:
        parts = [type_from_json_schema(alternative) for alternative in alternatives]
    elif isinstance(kind, list) and kind:
        parts = [type_from_json_schema({**schema, "type": single}) for single in kind]
    elif kind == "array" and isinstance(schema.get("items"), dict):
        return f"list[{type_from_json_schema(schema['items'])}]"
    elif kind == "object" and isinstance(schema.get("additionalProperties"), dict) and not schema.get("properties"):
        return f"dict[str, {type_from_json_schema(schema['additionalProperties'])}]"
    else:
        return _JSON_TYPES.get(kind, "Any") if isinstance(kind, str) else "Any"
    unique = list(dict.fromkeys(parts))
    return "Any" if "Any" in unique else " | ".join(unique)
