"""Handle bindings: which handle and attribute each in-kernel tool gets, and the code that binds them.

Tools are grouped into one handle per server (toolkit); handle names come from
:func:`registry.names.handle_name` and attribute names from :class:`registry.names.NameMap`, so the
names a cell calls, the names the kernel binds and the names the instructions advertise are the
same. The binding code imports :mod:`kernel.handles` inside the kernel; tool modules are imported
lazily on first use.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from registry import ToolDefinition
from registry.names import NameMap, handle_name

BINDER_MODULE = "kernel.handles"
BINDER_FUNCTION = "bind_module_tools"
#: The toolkit of a tool that names no server.
DEFAULT_TOOLKIT = "tools"


def toolkit_of(tool: ToolDefinition) -> str:
    return tool.server_name or DEFAULT_TOOLKIT


@dataclass(frozen=True)
class Bindings:
    """Handles for a set of tools.

    Attributes:
        handles: ``{handle: {attribute: (tool wire name, module)}}``, in server order.
        targets: ``{tool id: "handle.attribute"}``, what a cell calls.
    """

    handles: dict[str, dict[str, tuple[str, str]]]
    targets: dict[int, str]

    @classmethod
    def of(cls, tools: Iterable[ToolDefinition], taken: Iterable[str] = (), universe: Iterable[ToolDefinition] = ()) -> Bindings:
        """Name the handles of ``tools`` (each needs ``id`` and ``module`` set, as a registry gives).

        Args:
            tools: the tools to bind.
            taken: names the handles must avoid (inputs, parameters of the cell).
            universe: all tools of the same servers (e.g. a whole registry): attribute names are
                de-duplicated over them, so a tool keeps its name whichever others are bound.
        """
        tools = list(tools)
        servers = NameMap({toolkit_of(tool) for tool in tools}, base=handle_name, taken={*taken, BINDER_FUNCTION})
        everyone = list(universe)
        handles: dict[str, dict[str, tuple[str, str]]] = {}
        targets: dict[int, str] = {}
        for server in sorted(servers.items()):
            members = [tool for tool in tools if toolkit_of(tool) == server]
            attributes = NameMap([*(tool.name for tool in everyone if toolkit_of(tool) == server), *(tool.name for tool in members)])
            handle = servers.python(server)
            for tool in members:
                attribute = attributes.python(tool.name)
                handles.setdefault(handle, {})[attribute] = (tool.name, tool.module or "")
                targets[tool.id] = f"{handle}.{attribute}"
        return cls(handles, targets)

    def code(self) -> str:
        """Python that binds every handle (empty when there are none)."""
        if not self.handles:
            return ""
        lines = [f"from {BINDER_MODULE} import {BINDER_FUNCTION}"]
        for name, attributes in self.handles.items():
            entries = "".join(f"\n    {attribute!r}: {target!r}," for attribute, target in attributes.items())
            lines.append(f"{name} = {BINDER_FUNCTION}({name!r}, {{{entries}\n}})")
        return "\n".join(lines) + "\n"

    def describe(self, tools: Iterable[ToolDefinition]) -> list[str]:
        """Instruction lines for ``tools``: ``handle.attribute(signature)``, description, states."""
        lines = []
        for tool in tools:
            target = self.targets[tool.id]
            renamed = f"  (tool {tool.name!r})" if target.rsplit(".", 1)[1] != tool.name else ""
            lines.append(f"  {target}{tool.signature().removeprefix(tool.name)}{renamed}")
            if tool.description:
                lines.append(f"      {tool.description}")
            requires = ", ".join(sorted(tool.state_transition.requires)) or "nothing"
            produces = ", ".join(sorted(tool.state_transition.produces)) or "nothing"
            lines.append(f"      requires: {requires}; produces: {produces}")
        return lines
