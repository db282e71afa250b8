"""Wire names ↔ Python identifiers.

Tool and toolkit names come from catalogs and servers (``get-forecast``, ``PDF&URLTool``); handles
and variables in a planned cell must be valid Python names. Everything that turns a wire name into a
Python name goes through this module so the mapping is the same everywhere.
"""

from __future__ import annotations

import builtins
import keyword
import re

_INVALID_CHARACTERS = re.compile(r"[^0-9A-Za-z_]")


def python_identifier(wire_name: str) -> str:
    """Map ``wire_name`` to a valid, non-reserved Python identifier.

    Characters outside ``[0-9A-Za-z_]`` become ``_``; a leading digit gets a ``_`` prefix; a
    keyword, soft keyword or builtin name gets a ``_`` suffix so it never shadows Python itself.

    Examples:
        >>> python_identifier("get-forecast")
        'get_forecast'
        >>> python_identifier("lambda")
        'lambda_'
        >>> python_identifier("3d-viewer")
        '_3d_viewer'
    """
    identifier = _INVALID_CHARACTERS.sub("_", wire_name) or "_"
    if identifier[0].isdigit():
        identifier = "_" + identifier
    if keyword.iskeyword(identifier) or keyword.issoftkeyword(identifier) or hasattr(builtins, identifier):
        identifier += "_"
    return identifier


def handle_name(toolkit_name: str) -> str:
    """The name a toolkit's handle binds to in a kernel: a trailing ``_tools`` is dropped first.

    Examples:
        >>> handle_name("inventory_tools")
        'inventory'
        >>> handle_name("chemistry")
        'chemistry'
    """
    base = toolkit_name[: -len("_tools")] if toolkit_name.endswith("_tools") and toolkit_name != "_tools" else toolkit_name
    return python_identifier(base)
