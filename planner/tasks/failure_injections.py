"""Which tools a :class:`toolpath.kernel.FailureInjection` names, checked before a kernel starts.

The kernel matches an injection by name only (``handle.tool``, ``server.tool`` or ``tool``,
:mod:`toolpath.kernel.inside.retries`), so an injection naming no tool would silently fail nothing.
A bare CodeMode cannot tell (a cell may bind tools itself); a workspace knows its catalogs' tools and
the toolkits it is given, so :meth:`toolpath.planner.Workspace.code_mode` (every ``run_task``,
session and ``toolpath run``) and ``toolpath run --inject-failure`` refuse such a name here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from toolpath.errors import Refusal
from toolpath.planner.planning.plans import qualified_name
from toolpath.registry import ToolDefinition
from toolpath.registry.catalog_problems import did_you_mean
from toolpath.registry.names import handle_name


class UnknownInjectionTargetError(Refusal, ValueError):
    """A failure injection names a tool that no loaded catalog or given toolkit has; the message
    names it and the closest known name."""


def named_tools(name: str, tools: Sequence[ToolDefinition], toolkits: Iterable[Any] = ()) -> list[ToolDefinition]:
    """The catalog tools that ``name`` names as the kernel matches it: ``server.tool``, ``handle.tool``
    (the handle its server binds to) or ``tool`` alone (every tool of that name).

    Args:
        name: a :attr:`toolpath.kernel.FailureInjection.tool`.
        tools: the loaded catalogs' tools.
        toolkits: the host toolkits (:class:`toolpath.kernel.Toolkit`) also bound: a name of one of
            their tools (``toolkit.tool``, ``handle.tool`` or ``tool``) is known too, and any
            ``toolkit.tool`` of a toolkit that registers its tools when it connects.

    Returns:
        The catalog tools named (empty when ``name`` names a toolkit's tool only).

    Raises:
        UnknownInjectionTargetError: ``name`` names none of them.
    """
    matched = [
        tool for tool in tools if name in (qualified_name(tool), tool.name) or (tool.server_name and name == f"{handle_name(tool.server_name)}.{tool.name}")
    ]
    if matched:
        return matched
    known = {qualified_name(tool): None for tool in tools}
    for toolkit in toolkits:
        prefixes = {toolkit.name, handle_name(toolkit.name)}
        if toolkit.requires_connect and name.partition(".")[0] in prefixes:
            return []  # its tools are known only once it connects
        for tool in toolkit.functions:
            known[f"{toolkit.name}.{tool}"] = None
            if name == tool or name in {f"{prefix}.{tool}" for prefix in prefixes}:
                return []
    raise UnknownInjectionTargetError(
        f"no loaded catalog or toolkit has a tool {name!r};{did_you_mean(name, known) or ' name one as server.tool or tool, as the catalogs name it'}"
    )


def check_injections(injections: Iterable[Any], tools: Sequence[ToolDefinition], given_tools: Iterable[Any] = ()) -> None:
    """Refuse a failure injection naming a tool that neither the catalogs nor ``given_tools`` have.

    Args:
        injections: :class:`toolpath.kernel.FailureInjection` items (anything else is left to
            CodeMode, which says what it takes).
        tools: the loaded catalogs' tools.
        given_tools: ``CodeMode(tools=...)``'s items (toolkits, tools, functions, registry tools).

    Raises:
        UnknownInjectionTargetError: the first injection naming no tool (its message names it and the closest name).
    """
    from toolpath.kernel import FailureInjection
    from toolpath.kernel.tools.toolkit import as_toolkits

    checked = [injection for injection in injections if isinstance(injection, FailureInjection)] if not isinstance(injections, (str, bytes)) else []
    if not checked:
        return
    given = list(given_tools) if isinstance(given_tools, Iterable) and not isinstance(given_tools, (str, bytes)) else []
    definitions = [item for item in given if isinstance(item, ToolDefinition)]
    toolkits = as_toolkits(item for item in given if not isinstance(item, ToolDefinition))
    for injection in checked:
        try:
            named_tools(injection.tool, [*tools, *definitions], toolkits)
        except UnknownInjectionTargetError as error:
            raise UnknownInjectionTargetError(f"inject_failures: FailureInjection({injection.tool!r}): {error}") from None
