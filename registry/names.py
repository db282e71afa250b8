"""Wire names ↔ Python identifiers.

Tool and toolkit names come from catalogs and servers (``get-forecast``, ``PDF&URLTool``, ``lambda``);
handles, attributes and variables in a kernel must be valid Python names that the model can call.
Everything that turns a wire name into a Python name goes through this module, so the mapping is the
same in the planned cell, in the kernel and in the instructions a model reads.

Rules of :func:`python_identifier` (one name on its own):

- characters Python cannot use in an identifier become ``_`` (letters of any script are kept, unless
  Python's NFKC normalisation of identifiers would change them, which would make two wire names
  collide silently);
- a name that cannot start an identifier (a leading digit) gets a ``_`` prefix; an empty name
  becomes ``_unnamed``;
- keywords, soft keywords (``match``, ``case``, ``_``), builtins and the names IPython reserves in a
  kernel's namespace (``In``, ``Out``, ``get_ipython``, ...) get ``_`` suffixes until they are free.

:class:`NameMap` turns a whole set of wire names into distinct identifiers and back (a bijection):
collisions such as ``get-forecast`` and ``get_forecast`` get deterministic suffixes ``_2``, ``_3``…,
and a name that is already a valid identifier keeps it.

:func:`require_printable` keeps control characters out of names and tokens in the first place: they
end up in comments and string literals of generated cells and in module paths, where a NUL or a
carriage return breaks the code.
"""

from __future__ import annotations

import builtins
import functools
import keyword
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping

#: Names IPython puts in a kernel's user namespace (its input/output history and helpers), and the
#: function the planned cell imports to bind handles. A handle with one of these names would shadow
#: them, so they are suffixed like keywords.
KERNEL_RESERVED_NAMES = frozenset(
    {"In", "Out", "get_ipython", "exit", "quit", "display", "_i", "_ii", "_iii", "_ih", "_oh", "_dh", "__", "___", "bind_module_tools"}
)


#: Control characters (Unicode category Cc: U+0000–U+001F, U+007F–U+009F; tab and newline included)
#: and lone surrogates (Cs), which no UTF-8 source file can hold.
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def require_printable(text: str, what: str) -> str:
    """Return ``text`` unchanged if it holds no control character and no lone surrogate.

    Args:
        text: a name or state token.
        what: how to call it in the message, e.g. ``"tool name"``.

    Raises:
        ValueError: naming the first offending character by its code point.

    Examples:
        >>> require_printable("parse_molecule", "tool name")
        'parse_molecule'
        >>> require_printable("parse\\x00molecule", "tool name")
        Traceback (most recent call last):
        ...
        ValueError: tool name 'parse\\x00molecule' contains the control character U+0000; names and tokens must be printable
    """
    match = _UNPRINTABLE.search(text)
    if match is None:
        return text
    character = match.group()
    kind = "lone surrogate" if "\ud800" <= character <= "\udfff" else "control character"
    raise ValueError(f"{what} {text!r} contains the {kind} U+{ord(character):04X}; names and tokens must be printable")


def _usable_character(character: str) -> bool:
    if character.isascii():
        return character.isalnum() or character == "_"
    return ("a" + character).isidentifier() and unicodedata.normalize("NFKC", character) == character


def is_reserved(name: str) -> bool:
    """True for keywords, soft keywords, builtins and :data:`KERNEL_RESERVED_NAMES`."""
    return keyword.iskeyword(name) or keyword.issoftkeyword(name) or hasattr(builtins, name) or name in KERNEL_RESERVED_NAMES


def python_identifier(wire_name: str) -> str:
    """Map one wire name to a valid, non-reserved Python identifier (not necessarily unique).

    Examples:
        >>> python_identifier("get-forecast")
        'get_forecast'
        >>> python_identifier("lambda")
        'lambda_'
        >>> python_identifier("3d-viewer")
        '_3d_viewer'
        >>> python_identifier("PDF&URLTool")
        'PDF_URLTool'
    """
    if wire_name.isascii() and wire_name.isidentifier():
        # Already an identifier, and NFKC leaves ASCII alone: only reserved names change below.
        identifier = wire_name
    else:
        identifier = "".join(character if _usable_character(character) else "_" for character in wire_name)
    if unicodedata.normalize("NFKC", identifier) != identifier:
        # Combining sequences can normalise into other letters; ASCII is the safe floor.
        identifier = "".join(character if character.isascii() and (character.isalnum() or character == "_") else "_" for character in wire_name)
    if not identifier:
        return "_unnamed"
    if not identifier.isidentifier():
        identifier = "_" + identifier
    while is_reserved(identifier):  # "_" → "__" is still reserved (IPython's output history)
        identifier += "_"
    return identifier


def function_names(tool_name: str) -> tuple[str, ...]:
    """Names under which a tool's module may define its function, in lookup order.

    The function is named like the tool; a tool whose name Python cannot use (``get-forecast``,
    ``class``) is implemented by the function named :func:`python_identifier` of it.

    Examples:
        >>> function_names("parse_molecule")
        ('parse_molecule',)
        >>> function_names("get-forecast")
        ('get-forecast', 'get_forecast')
    """
    identifier = python_identifier(tool_name)
    return (tool_name,) if identifier == tool_name else (tool_name, identifier)


def module_basename(tool_name: str) -> str:
    """The module name a tool gets under its catalog's ``package``: the tool name when Python can
    import it with a plain ``import``, else :func:`python_identifier` of it (``get-forecast`` →
    ``get_forecast``).

    Examples:
        >>> module_basename("parse_molecule"), module_basename("get-forecast"), module_basename("class")
        ('parse_molecule', 'get_forecast', 'class_')
    """
    return tool_name if tool_name.isidentifier() and not keyword.iskeyword(tool_name) else python_identifier(tool_name)


def attribute_name(tool_name: str) -> str:
    """The attribute a tool gets on its handle: :func:`python_identifier` without leading underscores,
    which a handle keeps for itself (so no tool can hide or break the handle's own attributes).

    Examples:
        >>> attribute_name("get-forecast"), attribute_name("_toolkit"), attribute_name("__init__")
        ('get_forecast', 'toolkit', 'init___')
    """
    return python_identifier(python_identifier(tool_name).lstrip("_") or "tool")


def parameter_name(wire_name: str) -> str:
    """The keyword a parameter is passed by in Python: the wire name itself when Python accepts it as
    a keyword argument (builtins such as ``id`` or ``type`` are fine there), else
    :func:`python_identifier` of it (``from`` → ``from_``, ``repo-path`` → ``repo_path``).

    Examples:
        >>> parameter_name("type"), parameter_name("from"), parameter_name("repo-path")
        ('type', 'from_', 'repo_path')
    """
    return wire_name if wire_name.isidentifier() and not keyword.iskeyword(wire_name) else python_identifier(wire_name)


def strip_toolkit_suffix(toolkit_name: str) -> str:
    """``inventory_tools`` → ``inventory``: a toolkit's handle drops a trailing ``_tools``."""
    if toolkit_name.endswith("_tools") and len(toolkit_name) > len("_tools"):
        return toolkit_name[: -len("_tools")]
    return toolkit_name


def handle_name(toolkit_name: str) -> str:
    """The name a toolkit's handle binds to in a kernel (one toolkit on its own; see :class:`NameMap`).

    Examples:
        >>> handle_name("inventory_tools")
        'inventory'
        >>> handle_name("lambda_tools")
        'lambda_'
    """
    return python_identifier(strip_toolkit_suffix(toolkit_name))


class NameMap:
    """A bijection between a set of wire names and distinct Python identifiers.

    Args:
        wire_names: the names to map (duplicates are ignored).
        base: wire name → preferred identifier before de-duplication (default :func:`python_identifier`;
            use :func:`handle_name` for toolkits).
        taken: identifiers already in use in the target namespace; mapped names avoid them.

    Names whose preferred identifier equals the wire name are assigned first, so a tool that is
    already a valid name is never renamed because of another; the rest are assigned in sorted order
    and collisions get ``_2``, ``_3``… The result depends only on the set of names.

    Examples:
        >>> names = NameMap(["get-forecast", "get_forecast"])
        >>> names.python("get_forecast"), names.python("get-forecast")
        ('get_forecast', 'get_forecast_2')
        >>> names.wire("get_forecast_2")
        'get-forecast'
    """

    def __init__(self, wire_names: Iterable[str], base: Callable[[str], str] = python_identifier, taken: Iterable[str] = ()):
        unique = set(wire_names)
        preferred = {name: base(name) for name in unique}
        used = set(taken)
        self._to_python: dict[str, str] = {}
        for name in sorted(unique, key=lambda name: (preferred[name] != name, name)):
            candidate, counter = preferred[name], 2
            while candidate in used:
                candidate = f"{preferred[name]}_{counter}"
                counter += 1
            used.add(candidate)
            self._to_python[name] = candidate
        self._to_wire = {identifier: name for name, identifier in self._to_python.items()}

    def python(self, wire_name: str) -> str:
        """The identifier of ``wire_name``; ``KeyError`` if it is not in the map."""
        return self._to_python[wire_name]

    def wire(self, identifier: str) -> str:
        """The wire name behind ``identifier``; ``KeyError`` if no name maps to it."""
        return self._to_wire[identifier]

    def items(self) -> Mapping[str, str]:
        """``{wire name: identifier}``."""
        return dict(self._to_python)

    def __len__(self) -> int:
        return len(self._to_python)


@functools.lru_cache(maxsize=1024)
def _cached_name_map(wire_names: frozenset[str], base: Callable[[str], str], taken: frozenset[str]) -> NameMap:
    return NameMap(wire_names, base=base, taken=taken)


def name_map(wire_names: Iterable[str], base: Callable[[str], str] = python_identifier, taken: Iterable[str] = ()) -> NameMap:
    """:class:`NameMap` of ``wire_names``, shared between callers that ask for the same set: a map
    depends only on its names, ``base`` and ``taken``, and planned cells ask for the names of a whole
    server's tools again and again."""
    return _cached_name_map(frozenset(wire_names), base, frozenset(taken))
