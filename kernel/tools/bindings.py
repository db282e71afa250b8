"""Handle bindings: which handle and attribute each tool gets, and the code that binds them.

Tools are grouped into one handle per server (toolkit); handle names come from
:func:`toolpath.registry.names.handle_name` and attribute names from :class:`toolpath.registry.names.NameMap`, so the
names a cell calls, the names the kernel binds and the names the instructions advertise are the
same. In-kernel handles are bound by :mod:`toolpath.kernel.inside.handles` (tool modules are imported lazily on first
use); host handles are fetched from :mod:`toolpath.kernel.inside.bridge_client`, where CodeMode installed them.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from toolpath.kernel.inside.protocol import BINDER_FUNCTION, BINDER_MODULE, HOST_FUNCTION, HOST_MODULE, SEARCH_ATTRIBUTE
from toolpath.kernel.tools.approvals import approval_spec
from toolpath.kernel.tools.toolkit import Toolkit, signature_text
from toolpath.registry import ToolDefinition
from toolpath.registry.names import attribute_name, handle_name, name_map
from toolpath.registry.retry_policy import effective_retry

#: Names the binding code itself uses in the kernel namespace.
BINDING_NAMES = frozenset({BINDER_FUNCTION, HOST_FUNCTION})
#: The toolkit of a tool that names no server.
DEFAULT_TOOLKIT = "tools"
#: Characters of a host tool's first docstring line shown in instructions: a server's descriptions
#: are not ours, and one of 200,000 characters must not become the model's prompt.
MAX_SUMMARY_CHARS = 300


def unlisted_tools(handle: str, total: int, listed: int, searchable: bool) -> str:
    """The instruction line for a handle whose tools are not all listed: how many there are, and how
    to find the others (``searchable``: with ``handle.search_tools``, which no tool of its hides)."""
    shown = f"the first {listed:,} listed above" if listed else "none listed here"
    search = f"`{handle}.{SEARCH_ATTRIBUTE}('words for what you need')` (the 10 best matches of names and descriptions, with signatures)"
    find = search if searchable else f"`[name for name in dir({handle}) if 'word' in name]`"
    return f"  {handle} has {total:,} tools, {shown}: find the others with {find}, read one with `help({handle}.name)`"


def toolkit_of(tool: ToolDefinition) -> str:
    return tool.server_name or DEFAULT_TOOLKIT


@dataclass(frozen=True)
class Bindings:
    """Handles for a set of tools.

    Attributes:
        handles: in-kernel handles, ``{handle: {attribute: (tool wire name, module)}}``; a tool that
            asks for approval has a third item, its policy (:func:`toolpath.kernel.tools.approvals.approval_spec`),
            and a tool retried on failure a fourth, its retry policy
            (:func:`toolpath.registry.retry_policy.effective_retry`; the third is then ``None`` when it asks for none).
        host_handles: host handles, ``{handle: (toolkit name, {attribute: tool wire name})}``.
        targets: ``{tool id: "handle.attribute"}`` for registry tools, what a cell calls.
        servers: ``{handle: server}`` for in-kernel handles named otherwise than their server
            (``records_3``, when ``records`` is taken): a failure injected into ``server.tool``
            strikes through them too.
    """

    handles: dict[str, dict[str, tuple]]
    targets: dict[int, str]
    host_handles: dict[str, tuple[str, dict[str, str]]] = field(default_factory=dict)
    servers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(
        cls, tools: Iterable[ToolDefinition], taken: Iterable[str] = (), universe: Iterable[ToolDefinition] = (), toolkits: Sequence[Toolkit] = ()
    ) -> Bindings:
        """Name the handles of ``tools`` and ``toolkits``.

        Args:
            tools: registry tools (each needs ``id`` and ``module`` set, as a registry gives); those
                with ``binding="host"`` get host handles, the others in-kernel ones.
            taken: names the handles must avoid (inputs, parameters of the cell).
            universe: all tools of the same servers (e.g. a whole registry): attribute names are
                de-duplicated over them, so a tool keeps its name whichever others are bound.
            toolkits: host toolkits; each becomes a host handle of its own.

        A toolkit named like a server of ``tools`` (that server's host-bound tools) shares its handle:
        a domain is one handle wherever its tools run.

        Raises:
            ValueError: two toolkits share a name, or a host tool and a kernel tool of one handle
                would share an attribute.
        """
        tools = list(tools)
        names = [toolkit.name for toolkit in toolkits]
        clash = next((name for name in names if names.count(name) > 1), None)
        if clash is not None:
            raise ValueError(f"two toolkits are named {clash!r}; give each a distinct name")
        servers = name_map({*(toolkit_of(tool) for tool in tools), *names}, base=handle_name, taken={*taken, *BINDING_NAMES})
        everyone = list(universe)
        handles: dict[str, dict[str, tuple]] = {}
        host_handles: dict[str, tuple[str, dict[str, str]]] = {}
        targets: dict[int, str] = {}
        renamed: dict[str, str] = {}
        for server in sorted({toolkit_of(tool) for tool in tools}):
            members = [tool for tool in tools if toolkit_of(tool) == server]
            attributes = name_map([*(tool.name for tool in everyone if toolkit_of(tool) == server), *(tool.name for tool in members)], base=attribute_name)
            handle = servers.python(server)
            for tool in members:
                attribute = attributes.python(tool.name)
                if tool.binding == "host":
                    host_handles.setdefault(handle, (server, {}))[1][attribute] = tool.name
                else:
                    spec, retry = approval_spec(tool), effective_retry(tool)
                    extra = [spec, retry.to_spec()] if retry is not None else [spec] if spec else []
                    handles.setdefault(handle, {})[attribute] = (tool.name, tool.module or "", *extra)
                    if handle != server:
                        renamed[handle] = server
                targets[tool.id] = f"{handle}.{attribute}"
        for toolkit in toolkits:
            attributes = name_map(toolkit.functions, base=attribute_name)
            handle = servers.python(toolkit.name)
            host_attributes = {attributes.python(name): name for name in toolkit.functions}
            # A server whose tools run in both places (kernel-bound and host-bound) is one handle.
            shared = sorted(set(host_attributes) & set(handles.get(handle, {})))
            if shared:
                raise ValueError(f"{toolkit.name!r} has a host tool and a kernel tool both bound as {shared[0]!r}; rename one of them")
            host_handles[handle] = (toolkit.name, host_attributes)
        return cls(handles, targets, host_handles, renamed)

    def code(self) -> str:
        """Python that binds every handle (empty when there are none)."""
        lines = []
        if self.host_handles:
            lines.append(f"from {HOST_MODULE} import {HOST_FUNCTION}")
        if self.handles:
            lines.append(f"from {BINDER_MODULE} import {BINDER_FUNCTION}")
        for name, attributes in self.handles.items():
            entries = "".join(f"\n    {attribute!r}: {target!r}," for attribute, target in attributes.items())
            host = f", host={HOST_FUNCTION}({self.host_handles[name][0]!r})" if name in self.host_handles else ""
            server = f", server={self.servers[name]!r}" if name in self.servers else ""
            lines.append(f"{name} = {BINDER_FUNCTION}({name!r}, {{{entries}\n}}{host}{server})")
        for name, (toolkit, _) in self.host_handles.items():
            if name not in self.handles:
                lines.append(f"{name} = {HOST_FUNCTION}({toolkit!r})")
        return "\n".join(lines) + "\n" if lines else ""

    def describe_toolkits(self, toolkits: Iterable[Toolkit]) -> list[str]:
        """Instruction lines for host toolkits: ``handle.attribute(signature)`` and the first docstring
        line of each tool, up to the kit's ``max_listed_tools``; past it, how many there are and how a
        cell finds the others."""
        by_toolkit = {toolkit: handle for handle, (toolkit, _) in self.host_handles.items()}
        lines = []
        for toolkit in toolkits:
            handle = by_toolkit[toolkit.name]
            attributes = self.host_handles[handle][1]
            listed = list(attributes.items())[: toolkit.max_listed_tools]
            for attribute, name in listed:
                tool = toolkit.functions[name]
                signature = signature_text(tool.signature) if tool.signature is not None else "(...)"
                renamed = f"  (tool {name!r})" if attribute != name else ""
                lines.append(f"  {handle}.{attribute}{signature}{renamed}")
                summary = inspect.cleandoc(tool.description).split("\n", 1)[0][:MAX_SUMMARY_CHARS] if tool.description else ""
                if summary:
                    lines.append(f"      {summary}")
                if tool.pause_reason:
                    lines.append(f"      not callable in cells ({tool.pause_reason}): ask for it as a regular tool call")
                elif tool.asks_approval:
                    lines.append(f"      {tool.asks_approval}: the call waits for a person's answer; a no raises ApprovalDenied")
                elif tool.load_error:
                    lines.append(f"      unavailable: {tool.load_error}")
            if len(attributes) > len(listed):
                lines.append(unlisted_tools(handle, len(attributes), len(listed), searchable=SEARCH_ATTRIBUTE not in attributes))
        return lines

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
            if tool.approval != "never":
                when = "every call" if tool.approval == "always" else "a call that would write over a file that exists"
                lines.append(f"      {when} asks a person for approval first; a no raises ApprovalDenied")
        return lines
