"""Type strings: the written form of parameter and return types (``"list[str]"``, ``"rdkit.Chem.Mol"``).

Catalogs write types as strings so that loading imports nothing. A type string is valid when it is a
Python type expression built only from dotted names, subscripts (``dict[str, int]``), ``|`` unions,
``None``, ``...`` and bracketed lists of types (``Callable[[int], str]``); it is parsed with
:mod:`ast`, never evaluated.
"""

from __future__ import annotations

import ast


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
