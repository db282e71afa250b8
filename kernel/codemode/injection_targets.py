"""Which tools a :class:`toolpath.kernel.FailureInjection` names, checked before a kernel starts.

The kernel matches an injection by name only (``handle.tool``, ``server.tool`` or ``tool``,
:mod:`toolpath.kernel.inside.retries`), so an injection naming no tool would silently fail nothing.
CodeMode refuses such a name when it is made (:class:`toolpath.kernel.codemode.handle_binding.HandleBinder`),
checking it against every tool it is given: ``tools`` (toolkits, tools, functions, registry tools),
``approval_tools`` and ``cell_tools`` (the registry tools cells bind themselves, as planned cells do);
a name under a toolkit whose tools are listed when it connects (an MCP server's) is checked once it
has connected. :mod:`toolpath.planner.tasks.failure_injections` checks the same way against a
workspace's catalogs.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from toolpath.errors import Refusal
from toolpath.kernel.tools.bindings import toolkit_of
from toolpath.registry import ToolDefinition
from toolpath.registry.names import handle_name

if TYPE_CHECKING:
    from toolpath.kernel.tools.toolkit import Toolkit

#: Known names offered when an injection names none: the closest (difflib's ratio ≥ 0.6, as
#: :func:`toolpath.registry.catalog_problems.did_you_mean`), then up to two more at least this close
#: (names of one server share their prefix, which alone makes a ratio near 0.6).
NEAREST_SHOWN = 3
ALSO_CLOSE_RATIO = 0.75


class UnknownInjectionTargetError(Refusal, ValueError):
    """A failure injection names a tool that none of the tools given has; the message names it and
    the nearest known names."""


def nearest_names(name: str, known: Iterable[str]) -> str:
    """`` did you mean 'x'?`` for the known name closest to ``name``, with up to two more close ones
    (`` (or 'y', 'z')``); ``""`` when none is close (see :data:`NEAREST_SHOWN`)."""
    names = list(dict.fromkeys(known))
    close = difflib.get_close_matches(name, names, n=1)
    if not close:
        return ""
    also = [other for other in difflib.get_close_matches(name, names, n=NEAREST_SHOWN, cutoff=ALSO_CLOSE_RATIO) if other != close[0]][: NEAREST_SHOWN - 1]
    others = f" (or {', '.join(map(repr, also))})" if also else ""
    return f" did you mean {close[0]!r}?{others}"


def named_tools(
    name: str, tools: Sequence[ToolDefinition], toolkits: Iterable[Toolkit] = (), holder: str = "no loaded catalog or toolkit has a tool"
) -> list[ToolDefinition]:
    """The registry tools that ``name`` names as the kernel matches it: ``server.tool``,
    ``handle.tool`` (the handle its server binds to) or ``tool`` alone (every tool of that name).

    Args:
        name: a :attr:`toolpath.kernel.FailureInjection.tool`.
        tools: the registry tools known.
        toolkits: the host toolkits also bound: a name of one of their tools (``toolkit.tool``,
            ``handle.tool`` or ``tool``) is known too, and any ``toolkit.tool`` of a toolkit that
            registers its tools when it connects, until it has.
        holder: the start of the message for a name nothing has, which the name follows.

    Returns:
        The registry tools named (empty when ``name`` names a toolkit's tool only).

    Raises:
        UnknownInjectionTargetError: ``name`` names none of them; the message gives the nearest names.
    """
    matched = [tool for tool in tools if name in (tool.name, f"{toolkit_of(tool)}.{tool.name}", f"{handle_name(toolkit_of(tool))}.{tool.name}")]
    if matched:
        return matched
    toolkits = list(toolkits)
    if waits_for_connect(name, toolkits):
        return []  # its tools are known only once it connects
    known = {f"{toolkit_of(tool)}.{tool.name}": None for tool in tools}
    for toolkit in toolkits:
        prefixes = {toolkit.name, handle_name(toolkit.name)}
        for tool in toolkit.functions:
            known[f"{toolkit.name}.{tool}"] = None
            if name == tool or name in {f"{prefix}.{tool}" for prefix in prefixes}:
                return []
    raise UnknownInjectionTargetError(f"{holder} {name!r};{nearest_names(name, known) or ' name one as server.tool or tool, as the catalogs name it'}")


def waits_for_connect(name: str, toolkits: Iterable[Toolkit]) -> bool:
    """Whether ``name`` is under a toolkit whose tools are listed when it connects, and it has not."""
    prefix = name.partition(".")[0]
    return any(toolkit.requires_connect and not toolkit.is_connected and prefix in {toolkit.name, handle_name(toolkit.name)} for toolkit in toolkits)
