"""Labelled examples: a request (or the steps an agent gave) and the tools that served it.

They come from a file of JSON Lines (:func:`read_examples`) or from the record of use. One object
per line, either form:

* ``{"request": "text", "tools": ["name" or "server/name", ...]}``: a request in words and the
  tools that served it, in the order they ran;
* ``{"steps": ["text", ...], "tools": [...]}``: steps aligned one to one with the tools;
* both ``"request"`` and ``"steps"``: the request and the steps an agent gave for it (development
  sets such as ``benchmarks/tmdb_dev_requests.jsonl`` keep both, so one line serves learning from
  steps and measuring on the request, and a chain is not counted twice).

Optional fields: ``"id"`` (any string or number, kept for reports) and ``"links"`` (``[["a", "b"],
...]``, the chain's edges when it is not a straight line; default: each tool to the next). Blank
lines are skipped. Tools are written as their catalog names; ``server/name`` picks one when two
servers have a tool of that name (:func:`resolve_tool`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolpath.errors import ToolpathError
from toolpath.registry import ToolDefinition, ToolRegistry

_FIELDS = {"request", "steps", "tools", "id", "links"}
#: Characters a request or step may have: a request is a few sentences (the longest of the taskplan
#: data's 3,627 has under 1,000); a longer text is a document pasted by mistake, and every overlay
#: learned from it would carry it.
LONGEST_TEXT = 4000


class ExamplesError(ToolpathError, ValueError):
    """A labelled example that cannot be read: the message names the file, line and field."""


@dataclass(frozen=True)
class LabelledExample:
    """One request or list of steps, and the tools that served it.

    Attributes:
        tools: the tools in the order they ran, as written (``name`` or ``server/name``).
        request: the request in words, or ``None`` when only steps were given.
        steps: the steps, aligned one to one with ``tools`` (empty when only a request was given).
        links: the chain's edges, as pairs of entries of ``tools``.
        identifier: the example's ``id``, if it had one.
        source: where it came from (``FILE:LINE``, or a record entry), for error messages and reports.
    """

    tools: tuple[str, ...]
    request: str | None = None
    steps: tuple[str, ...] = ()
    links: tuple[tuple[str, str], ...] = ()
    identifier: str | None = None
    source: str = ""

    def phrasings(self) -> list[tuple[str, str]]:
        """``(text, tool)`` pairs this example teaches: each step with its tool when steps were
        given, else the request with its tool when it was served by one tool. A request served by several tools teaches
        none of them alone (which words asked for which tool is not known)."""
        if self.steps:
            return list(zip(self.steps, self.tools))
        if self.request is not None and len(set(self.tools)) == 1:
            return [(self.request, self.tools[0])]
        return []


def read_examples(path: str | Path) -> list[LabelledExample]:
    """Read a JSON Lines file of labelled examples (see the module docstring).

    Returns:
        The examples in file order.

    Raises:
        ExamplesError: the file cannot be read, or a line is not JSON or not an example; the
            message names the file, the line (1-based) and the field, and says what is expected.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ExamplesError(f"cannot read labelled examples from {path}: {error}") from None
    examples = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            data = json.loads(line)
        except json.JSONDecodeError as error:
            raise ExamplesError(f"{where}: not JSON ({error.msg} at column {error.colno}); each line is one JSON object") from None
        examples.append(example_from_mapping(data, where))
    return examples


def example_from_mapping(data: Any, where: str) -> LabelledExample:
    """One example from its JSON object; ``where`` names it in errors.

    Raises:
        ExamplesError: naming ``where`` and the field that is missing or malformed.
    """
    if not isinstance(data, dict):
        raise ExamplesError(f"{where}: an example is a JSON object with `tools` and `request` or `steps`, found {type(data).__name__}")
    unknown = sorted(set(data) - _FIELDS)
    if unknown:
        raise ExamplesError(f"{where}: unknown field {', '.join(map(repr, unknown))}; an example has {', '.join(sorted(_FIELDS))}")
    tools = _texts(data.get("tools"), where, "tools")
    if not tools:
        raise ExamplesError(f"{where}: `tools` is missing or empty; list the tools that served the request, in order")
    request, steps = data.get("request"), data.get("steps")
    if request is None and steps is None:
        raise ExamplesError(f"{where}: give `request` (text), `steps` (a list of texts), or both")
    if request is not None and (not isinstance(request, str) or not request.strip()):
        raise ExamplesError(f"{where}: `request` must be non-empty text")
    step_texts = _texts(steps, where, "steps") if steps is not None else ()
    for name, text in [("request", request or ""), *(("steps", step) for step in step_texts)]:
        if len(text) > LONGEST_TEXT:
            raise ExamplesError(f"{where}: `{name}` has {len(text):,} characters, more than the {LONGEST_TEXT:,} a request or step may have; shorten it")
    if steps is not None and len(step_texts) != len(tools):
        raise ExamplesError(f"{where}: {len(step_texts)} steps but {len(tools)} tools; steps are aligned one to one with tools")
    links = _links(data.get("links"), tools, where)
    identifier = data.get("id")
    if identifier is not None and not isinstance(identifier, (str, int)):
        raise ExamplesError(f"{where}: `id` must be a string or a number")
    return LabelledExample(
        tools=tools,
        request=request.strip() if request is not None else None,
        steps=step_texts,
        links=links,
        identifier=None if identifier is None else str(identifier),
        source=where,
    )


def _texts(value: Any, where: str, name: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(item, str) and item.strip() for item in value):
        raise ExamplesError(f"{where}: `{name}` must be a list of non-empty texts")
    return tuple(item.strip() for item in value)


def _links(value: Any, tools: tuple[str, ...], where: str) -> tuple[tuple[str, str], ...]:
    if value is None:
        return tuple(zip(tools, tools[1:]))
    if not isinstance(value, list) or not all(isinstance(pair, list) and len(pair) == 2 for pair in value):
        raise ExamplesError(f"{where}: `links` must be a list of [from, to] pairs of tools")
    for pair in value:
        missing = [name for name in pair if name not in tools]
        if missing:
            raise ExamplesError(f"{where}: `links` names {missing[0]!r}, which is not among `tools`")
    return tuple((source, target) for source, target in value)


def resolve_tool(registry: ToolRegistry, written: str, source: str = "") -> ToolDefinition:
    """The tool an example names: ``name``, or ``server/name`` when two servers share the name.

    Raises:
        ExamplesError: naming ``source``, when no loaded tool has that name, or several do and no
            server was given (the message lists the ``server/name`` forms to write instead).
    """
    server, _, name = written.rpartition("/")
    matches = [tool for tool in registry if tool.name == name and (not server or tool.server_name == server)]
    prefix = f"{source}: " if source else ""
    if not matches:
        raise ExamplesError(f"{prefix}no loaded catalog has a tool {written!r}; load its catalog or fix the name")
    if len(matches) > 1:
        choices = ", ".join(sorted(f"{tool.server_name}/{tool.name}" for tool in matches))
        raise ExamplesError(f"{prefix}tool {written!r} is ambiguous: write one of {choices}")
    return matches[0]
