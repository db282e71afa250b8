"""User inputs of a task: their names, which parameters each is meant for, and their literal form.

An input is given by name, and goes only where it is meant:

- a plain name (``path``) fills the *required* parameters of that (Python) name on the plan;
- a step-qualified name (``write_report.path``, or ``tabular.write_report.path`` when two servers
  share the tool name) fills that parameter of that tool, required or optional. Optional
  parameters (a report's title, a plot's bins, an output file) take only such inputs, so a value
  the user gave for one tool never lands in another tool's option by a shared name.

Values are JSON-like (dict, list, str, finite numbers, bool, None, nested at most
:data:`MAX_NESTING` deep) and written into the cell as Python literals of exact built-in types
(:func:`plain_value`): a caller's subclass or ``__repr__`` never reaches the cell.
"""

from __future__ import annotations

import keyword
import math
import operator
from collections.abc import Iterable, Mapping
from typing import Any

from toolpath.errors import Refusal
from toolpath.registry import ToolDefinition, ToolParameter
from toolpath.registry.names import parameter_name


class InputError(Refusal, ValueError):
    """A user input that cannot become a variable of the cell (bad name, or a value with no literal
    form), or that would go where it is not meant (see :mod:`toolpath.planner.planning.inputs`)."""


def split_name(name: str) -> tuple[str | None, str]:
    """``(tool, parameter)`` of an input name: ``(None, "path")`` for ``path``,
    ``("write_report", "path")`` for ``write_report.path`` (the tool may be ``server.tool``)."""
    tool, _, parameter = name.rpartition(".")
    return (tool or None), parameter


def check_input_names(inputs: Mapping[str, Any]) -> None:
    """Raise :class:`InputError` for an input name that is neither a Python name nor ``TOOL.PARAMETER``
    (``TOOL`` is a tool's name as its catalog gives it, ``SERVER.NAME`` too, spaces included)."""
    for name in inputs:
        if not isinstance(name, str):
            raise InputError(f"input names must be strings, got {name!r}")
        tool, dot, parameter = name.rpartition(".")
        if keyword.iskeyword(parameter):  # a soft keyword (`match`) is a fine keyword argument
            raise InputError(
                f"input name {name!r} is a Python keyword, so it cannot be a variable; a tool parameter named {parameter!r} is passed as {parameter_name(parameter)!r}"
            )
        # A tool's name may have spaces ("Audio Noise Reduction", as TaskBench names tools): the
        # qualifier is matched to tool names, never made a variable, so only unprintable text is refused.
        if not parameter.isidentifier() or (dot and (not tool.strip(". ") or not tool.isprintable())):
            raise InputError(
                f"input name {name!r} is not a valid Python name: use the parameter's Python name (letters, digits, underscores; not starting with a digit), or TOOL.PARAMETER for one tool's parameter (e.g. write_report.path)"
            )


def names_a_step(inputs: Mapping[str, Any], tools: Iterable[ToolDefinition]) -> bool:
    """Whether a step-qualified input names one of ``tools``: the user addressed that tool."""
    return any(qualifier is not None and any(names_tool(qualifier, tool) for tool in tools) for qualifier, _ in map(split_name, inputs))


def is_qualified(name: str) -> bool:
    return "." in name


def names_tool(qualifier: str, tool: ToolDefinition) -> bool:
    """Whether the ``TOOL`` part of a step-qualified input names ``tool`` (``name`` or ``server.name``)."""
    return qualifier == tool.name or (tool.server_name is not None and qualifier == f"{tool.server_name}.{tool.name}")


def input_for(tool: ToolDefinition, parameter: ToolParameter, inputs: Mapping[str, Any]) -> str | None:
    """The name of the input meant for ``parameter`` of ``tool``, or ``None``: a step-qualified
    input naming both, else (for a required parameter) a plain input of its Python name."""
    for name in inputs:
        qualifier, bare = split_name(name)
        if qualifier is not None and bare in (parameter.python_name, parameter.name) and names_tool(qualifier, tool):
            return name
    if parameter in tool.required_parameters and parameter.python_name in inputs:
        return parameter.python_name
    return None


#: How deeply an input value may nest (lists and dicts in each other). CPython's parser refuses
#: more than 200 nested brackets in source ("too many nested parentheses"); half leaves room.
MAX_NESTING = 100


def plain_value(value: Any, name: str = "input") -> Any:
    """``value`` rebuilt from exact built-in JSON-like types: ``dict`` (keys ``str``, ``int``,
    ``float``, ``bool`` or ``None``), ``list`` (from a list or tuple), ``str``, ``int``, finite
    ``float``, ``bool``, ``None``. Subclasses are converted to their base type (a ``StrEnum`` to its
    string, ``numpy.float64`` to ``float``, an integer with ``__index__`` to ``int``), so no
    ``__repr__`` of the caller's ever reaches a cell.

    Raises:
        InputError: naming the input: another type, a NaN or infinite float, or nesting deeper
            than :data:`MAX_NESTING`.
    """

    def convert(item: Any, depth: int) -> Any:
        if depth > MAX_NESTING:
            raise InputError(
                f"input {name!r} is nested more than {MAX_NESTING} levels deep; a cell cannot hold it as a literal: pass it as a file path instead"
            )
        if item is None or isinstance(item, bool):
            return None if item is None else bool(item)
        if isinstance(item, str):
            return str.__str__(item)  # the characters, whatever the subclass's __str__ says
        if isinstance(item, float):
            if not math.isfinite(item):
                raise InputError(f"input {name!r} holds {float(item)!r}, which is not a finite number; Python source has no literal for it")
            return float(item)
        if isinstance(item, int) or (hasattr(type(item), "__index__") and not isinstance(item, (list, tuple, dict))):
            return operator.index(item)
        if isinstance(item, (list, tuple)):
            return [convert(element, depth + 1) for element in item]
        if isinstance(item, dict):
            return {convert_key(key): convert(element, depth + 1) for key, element in item.items()}
        raise InputError(
            f"input {name!r} holds a value of type {_type_name(item)}, which has no literal form; pass JSON values (strings, numbers, lists, objects)"
        )

    def convert_key(key: Any) -> Any:
        if key is not None and not isinstance(key, (str, int, float)):
            raise InputError(f"input {name!r} has a dict key of type {_type_name(key)}; keys must be strings or numbers")
        return convert(key, 0)

    return convert(value, 0)


def _type_name(value: Any) -> str:
    kind = type(value)
    return kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def python_literal(value: Any, name: str = "input") -> str:
    """Python source that evaluates to ``value`` (:func:`plain_value` of it): only the ``repr`` of
    exact built-in types is written into a cell.

    Raises:
        InputError: see :func:`plain_value`.
    """
    return repr(plain_value(value, name))
