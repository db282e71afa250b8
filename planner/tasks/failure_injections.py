"""Which tools a :class:`toolpath.kernel.FailureInjection` names, checked before a kernel starts.

The kernel matches an injection by name only (``handle.tool``, ``server.tool`` or ``tool``,
:mod:`toolpath.kernel.inside.retries`), so an injection naming no tool would silently fail nothing.
A CodeMode refuses a name none of its tools has (:mod:`toolpath.kernel.codemode.injection_targets`,
whose :func:`named_tools` this module uses); a workspace knows its catalogs' tools and the toolkits it
is given, so :meth:`toolpath.planner.Workspace.code_mode` (every ``run_task``, session and
``toolpath run``) and ``toolpath run --inject-failure`` refuse such a name here first, in the
catalogs' words.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from toolpath.kernel.codemode.injection_targets import UnknownInjectionTargetError, named_tools
from toolpath.registry import ToolDefinition

__all__ = ["UnknownInjectionTargetError", "check_injections", "named_tools"]


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
