"""Binding tool handles in kernels, and the bridges through which handles reach host tools.

CodeMode's own tools are bound in every kernel; a session's own tools (CodeMode.bind) in that
session's kernels only. Registry tools with ``binding="kernel"`` are imported inside the kernel;
everything else runs in this process behind the kernel's bridge (:mod:`toolpath.kernel.bridge.host`):
its own Unix socket for a local kernel, a shared TLS endpoint for kernels on other hosts.

A kernel records which *binding version* it has: CodeMode's (bumped when a run's connects change
what the toolkits offer) and its session's (bumped by CodeMode.bind). A cell in a kernel whose
version is behind binds again first.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import itertools
import json
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from toolpath.kernel.bridge.host import Bridge, BridgeListener, toolkit_spec
from toolpath.kernel.codemode.injection_targets import UnknownInjectionTargetError, named_tools, waits_for_connect
from toolpath.kernel.codemode.notices import describe_error
from toolpath.kernel.codemode.options import BridgePolicy
from toolpath.kernel.codemode.session_record import SessionRecord
from toolpath.kernel.errors import KernelError
from toolpath.kernel.inside.protocol import APPROVAL_ERRORS, APPROVAL_POLICY_MODULE, HOST_MODULE, RETRIES_MODULE, SETUP_MODULE
from toolpath.kernel.inside.result_store import ResultStore
from toolpath.kernel.inside.retries import FailureInjection
from toolpath.kernel.kernels.ipython_kernel import IPythonKernel
from toolpath.kernel.observer import CodeModeObserver
from toolpath.kernel.tools.approvals import approval_spec
from toolpath.kernel.tools.bindings import Bindings, toolkit_of
from toolpath.kernel.tools.toolkit import Tool, Toolkit, as_toolkits
from toolpath.registry import ToolDefinition
from toolpath.registry.names import handle_name

if TYPE_CHECKING:
    from collections.abc import Callable

    from toolpath.kernel.tools.mcp_toolkit import MCPConnections

#: The handle name of offloaded results (``await results.get(id)``), taken when offloading is on.
RESULTS_HANDLE = "results"


class HandleBinder:
    """CodeMode's tools and toolkits, and the handles and bridges of each of its kernels.

    Args:
        tools: as ``CodeMode(tools=...)``.
        policy: the bridges' limits and address.
        result_store: where oversized results are offloaded; ``None``: they raise in the cell.
        certificate: the bridge's TLS certificate files, ``(certificate, key)``; ``None``: a
            self-signed one is made when a remote kernel first needs it.
        sandboxed: kernels run sandboxed (their bridges then take JSON only by default).
        approvals: an approver decides on calls: every kernel gets a bridge, so that tools bound in
            it (a planned cell's) can ask too, not only host tools.
        approval_tools: catalog tools cells may bind in the kernel themselves; those with an
            approval policy may ask the approver over the bridge (``Bridge(asks_in_kernel=...)``).
        inject_failures: failures to inject into tool calls in every kernel
            (:class:`toolpath.kernel.inside.retries.FailureInjection`), installed with the handles.
            Each must name a tool of ``tools``, ``approval_tools`` or ``cell_tools``
            (:mod:`toolpath.kernel.codemode.injection_targets`); one under a toolkit whose tools are
            listed when it connects is checked once it has (:meth:`check_connected_injections`, which each run calls).
        cell_tools: registry tools that cells bind in the kernel themselves (a planned cell binds
            its own handles; ``CodeMode.bind`` binds a session's): failures may be injected into them.
        observer: told of every call that crosses a bridge (:class:`toolpath.kernel.observer.CodeModeObserver`).

    Raises:
        ValueError: a registry tool without ``id`` or without ``module``/``mcp_server``, or two
            toolkits with one name; a certificate that cannot be loaded; a failure injection naming
            no tool given (:class:`toolpath.kernel.codemode.injection_targets.UnknownInjectionTargetError`,
            naming the nearest known names).
        TypeError: a ``tools`` item that is not a toolkit, tool, callable or registry tool.
    """

    def __init__(
        self,
        tools: Iterable[ToolDefinition | Toolkit | Tool | Callable[..., Any]],
        policy: BridgePolicy,
        result_store: ResultStore | None,
        certificate: tuple[str, str] | None,
        sandboxed: bool,
        approvals: bool = False,
        approval_tools: Iterable[ToolDefinition] = (),
        inject_failures: Iterable[FailureInjection] = (),
        cell_tools: Iterable[ToolDefinition] = (),
        observer: CodeModeObserver | None = None,
    ):
        self.policy = policy
        self.observer = observer or CodeModeObserver()
        self.inject_failures = _checked_injections(inject_failures)
        self.approvals = approvals
        # Kept as given when they are sequences (a catalog's tools read as asked for): each is read
        # only when an injection is checked or a cell asks for an approval, never at start.
        self._approval_tools = approval_tools if isinstance(approval_tools, Sequence) else list(approval_tools)
        self._cell_tools = cell_tools if isinstance(cell_tools, Sequence) else list(cell_tools)
        self.result_store = result_store
        self._sandboxed = sandboxed
        if certificate is not None and (isinstance(certificate, (str, bytes)) or len(certificate) != 2):
            raise ValueError(f"bridge_certificate must be (certificate file, key file), got {certificate!r}")
        self._certificate = _bridge_tls().load(*certificate) if certificate is not None else None
        self._listener: BridgeListener | None = None
        if isinstance(tools, (str, bytes)) or not isinstance(tools, Iterable):
            raise TypeError(f"tools must be a list of toolkits, tools, functions or registry tools, got {type(tools).__name__} {tools!r}")
        items = list(tools)
        definitions = [tool for tool in items if isinstance(tool, ToolDefinition)]
        check_registered(definitions)
        #: Registry tools bound inside the kernel.
        self.tools = [tool for tool in definitions if tool.binding == "kernel"]
        #: Connections to the MCP servers of registry tools they serve (made with the first such tool).
        self.mcp_connections: MCPConnections | None = None
        #: Toolkits whose calls run in this process.
        self.toolkits = as_toolkits((tool for tool in items if not (isinstance(tool, ToolDefinition) and tool.binding == "kernel")), load=self.host_tool)
        #: Why a toolkit could not be bound (its connect() failed), by toolkit name.
        self.failures: dict[str, str] = {}
        # The registry tools failures may be injected into, and the injections under a toolkit not
        # yet connected, checked once it has.
        self._definitions = definitions
        self._injections_to_check = self._check_injections(self.inject_failures)
        # Host toolkits of registry tools bound for single sessions (see bind_for_session), by server name.
        self._session_toolkits: dict[str, Toolkit] = {}
        self._toolkit_spec = ""
        self._version = 0
        self._generations = itertools.count(1)
        self._bridges: dict[IPythonKernel, Bridge] = {}
        self._bound_version: dict[IPythonKernel, tuple[int, int]] = {}
        # What each kernel's bridge may call: "handle.attribute" -> (toolkit, tool name).
        self._kernel_targets: dict[IPythonKernel, dict[str, tuple[Toolkit, str]]] = {}
        # The in-kernel tools with an approval policy each kernel has bound ("handle.tool"): the only
        # ones its approve messages may name.
        self._kernel_approvals: dict[IPythonKernel, set[str]] = {}
        self.rebind()

    @functools.cached_property
    def _cell_approvals(self) -> set[str]:
        """``handle.tool`` of the in-kernel tools with an approval policy that a cell may bind itself."""
        return {f"{handle_name(toolkit_of(tool))}.{tool.name}" for tool in self._approval_tools if tool.binding == "kernel" and approval_spec(tool)}

    def _check_injections(self, injections: Iterable[FailureInjection]) -> list[FailureInjection]:
        """Those of ``injections`` under a toolkit not yet connected (checked later).

        Raises:
            UnknownInjectionTargetError: one names no tool this CodeMode was given.
        """
        waiting = []
        for injection in injections:
            if waits_for_connect(injection.tool, self.toolkits):
                waiting.append(injection)
                continue
            try:
                named_tools(injection.tool, [*self._definitions, *self._approval_tools, *self._cell_tools], self.toolkits, holder="this CodeMode has no tool")
            except UnknownInjectionTargetError as error:
                raise UnknownInjectionTargetError(
                    f"inject_failures: FailureInjection({injection.tool!r}): {error} (an injection naming no tool would fail nothing: name a tool of "
                    "tools=, or give the registry tools cells bind themselves, as planned cells do, as cell_tools=)"
                ) from None
        return waiting

    def check_connected_injections(self) -> None:
        """Check the failure injections under toolkits that have connected since (their tools are listed now).

        Raises:
            UnknownInjectionTargetError: one names no tool of its toolkit; the message gives the nearest.
        """
        if self._injections_to_check:
            self._injections_to_check = self._check_injections(self._injections_to_check)

    @property
    def _taken(self) -> set[str]:
        return {RESULTS_HANDLE} if self.result_store is not None else set()

    def host_tool(self, definition: ToolDefinition) -> Tool:
        """The host :class:`Tool` of a registry tool: its module's function, a call to its MCP server,
        or a call of its HTTP operation."""
        if definition.http is not None:
            return importlib.import_module("toolpath.kernel.tools.http_tools").http_tool(definition)
        if definition.mcp_server is None:
            return Tool.from_definition(definition)
        mcp_toolkit = importlib.import_module("toolpath.kernel.tools.mcp_toolkit")  # the MCP SDK takes about a second to import
        if self.mcp_connections is None:
            self.mcp_connections = mcp_toolkit.MCPConnections()
        return mcp_toolkit.catalog_tool(definition, self.mcp_connections)

    def rebind(self) -> None:
        """Name the handles of the tools and toolkits as they are now; bump the version on change."""
        self.bindings = Bindings.of(self.tools, universe=self.tools, toolkits=self.toolkits, taken=self._taken)
        spec = json.dumps(self._host_binding(self.bindings)[1], sort_keys=True)
        if spec != self._toolkit_spec:
            self._toolkit_spec = spec
            self._version += 1

    def session_bindings(self, session: SessionRecord | None) -> Bindings:
        """The handles of CodeMode's own tools plus the tools bound for ``session`` alone."""
        if session is None or not session.tools:
            return self.bindings
        tools = [*self.tools, *session.tools.values()]
        return Bindings.of(tools, universe=[*self.tools, *session.universe], toolkits=self.toolkits, taken=self._taken)

    def toolkit_named(self, name: str) -> Toolkit:
        return next((toolkit for toolkit in self.toolkits if toolkit.name == name), None) or self._session_toolkits[name]

    def is_current(self, kernel: IPythonKernel, session: SessionRecord | None) -> bool:
        """Whether ``kernel`` has every handle ``session`` needs, as they are named now."""
        return self._bound_version.get(kernel) == self._wanted_version(session)

    def forget(self, kernel: IPythonKernel) -> None:
        """Bind ``kernel``'s handles again before its next cell (something may have overwritten them)."""
        self._bound_version.pop(kernel, None)

    def bridge_of(self, kernel: IPythonKernel) -> Bridge | None:
        return self._bridges.get(kernel)

    def _wanted_version(self, session: SessionRecord | None) -> tuple[int, int]:
        return (self._version, session.tools_version if session is not None else 0)

    async def bind(self, kernel: IPythonKernel, session: SessionRecord | None) -> None:
        """Bind (or rebind) every handle ``session`` needs in ``kernel``.

        Raises:
            KernelError: the binding cell failed (its traceback), or the bridge could not listen.
        """
        version = self._wanted_version(session)
        bindings = self.session_bindings(session)
        targets, specs = self._host_binding(bindings)
        self._kernel_targets[kernel] = targets
        self._kernel_approvals[kernel] = {
            f"{handle}.{entry[0]}" for handle, attributes in bindings.handles.items() for entry in attributes.values() if len(entry) > 2 and entry[2]
        }
        bridge = self._bridges.get(kernel)
        if bridge is None and (specs or self.result_store is not None or self.approvals):
            bridge = self._bridges[kernel] = await self._new_bridge(kernel)
        code = bindings.code()
        if self.inject_failures:
            injections = json.dumps([injection.to_dict() for injection in self.inject_failures])
            code += f"import {RETRIES_MODULE} as _toolpath_retries\n_toolpath_retries.inject_failures({injections!r})\ndel _toolpath_retries\n"
        if bridge is not None:
            spec = {**bridge.spec(), "toolkits": specs, "results": str(bridge.result_store.path) if bridge.result_store else None}
            if self.result_store is not None and bridge.result_store is None:
                spec["results_off"] = (
                    "offloaded results are kept in the host's SQLite file, which this kernel on another host cannot open; results over max_result_bytes raise ResultTooLarge instead"
                )
            code = f"import {HOST_MODULE} as _toolpath_bridge\n_toolpath_bridge.install({json.dumps(spec)!r})\ndel _toolpath_bridge\n" + code
            code += f"from {APPROVAL_POLICY_MODULE} import {', '.join(APPROVAL_ERRORS)}\n"
            if self.result_store is not None:
                code += f"from {HOST_MODULE} import results_handle as _toolpath_results\n{RESULTS_HANDLE} = _toolpath_results()\ndel _toolpath_results\n"
        if code:
            names = [*bindings.handles, *bindings.host_handles, *([RESULTS_HANDLE] if bridge is not None and self.result_store is not None else [])]
            names += list(APPROVAL_ERRORS) if bridge is not None else []
            code += f"import {SETUP_MODULE} as _toolpath_setup\n_toolpath_setup.keep_handles({names!r})\ndel _toolpath_setup\n"
            bound = await kernel.execute(code, timeout=60, silent=True)
            if bound.status != "ok":
                raise KernelError(f"binding the tool handles failed: {describe_error(bound)}")
        self._bound_version[kernel] = version

    async def release(self, kernel: IPythonKernel) -> None:
        """Close ``kernel``'s bridge (cancelling its in-flight calls) and forget its handles."""
        bridge = self._bridges.pop(kernel, None)
        self._bound_version.pop(kernel, None)
        self._kernel_targets.pop(kernel, None)
        self._kernel_approvals.pop(kernel, None)
        if bridge is not None:
            await bridge.close()

    async def _new_bridge(self, kernel: IPythonKernel) -> Bridge:
        """The bridge of ``kernel``: its own Unix socket when it is local, else the TLS endpoint kernels
        on other hosts share, which accepts JSON only unless ``accept_pickles`` says otherwise."""
        # A kernel that is not trusted with this process's power (remote, sandboxed) sends JSON only.
        accept_pickles = self.policy.accept_pickles if self.policy.accept_pickles is not None else not (kernel.remote or self._sandboxed)

        def lookup(target: str) -> tuple[Toolkit, str] | None:  # consulted at call time: later bindings count
            return self._kernel_targets.get(kernel, {}).get(target)

        def asks_in_kernel(tool: str) -> bool:
            return tool in self._cell_approvals or tool in self._kernel_approvals.get(kernel, ())

        generation = next(self._generations)
        if kernel.remote:
            bridge = Bridge(
                None,
                generation,
                lookup,
                self.policy.max_result_bytes,
                None,
                accept_pickles,
                listener=await self._bridge_listener(),
                asks_in_kernel=asks_in_kernel,
                observer=self.observer,
            )
        else:
            bridge = Bridge(
                kernel.directory,
                generation,
                lookup,
                self.policy.max_result_bytes,
                self.result_store,
                accept_pickles,
                asks_in_kernel=asks_in_kernel,
                observer=self.observer,
            )
        await bridge.start()
        return bridge

    async def _bridge_listener(self) -> BridgeListener:
        """The TLS endpoint of this CodeMode's remote kernels, started on first use."""
        if self._listener is None:
            if self._certificate is None:
                self._certificate = await asyncio.to_thread(_bridge_tls().generate, self.policy.address[0])
            listener = BridgeListener(self.policy.listen, self.policy.address, self._certificate)
            try:
                await listener.start()
            except OSError as error:
                raise KernelError(str(error)) from None
            self._listener = listener
        return self._listener

    async def close(self) -> None:
        """Stop the TLS endpoint, if one was started."""
        if self._listener is not None:
            await self._listener.close()

    def _host_binding(self, bindings: Bindings) -> tuple[dict[str, tuple[Toolkit, str]], dict[str, Any]]:
        """For the host handles of ``bindings``: the bridge's call targets (``"handle.attribute"`` →
        toolkit and tool name) and the specs the kernel binds them from."""
        targets = {}
        specs = {}
        for handle, (name, attributes) in bindings.host_handles.items():
            toolkit = self.toolkit_named(name)
            targets.update({f"{handle}.{attribute}": (toolkit, tool) for attribute, tool in attributes.items()})
            specs[handle] = toolkit_spec(toolkit, attributes, self.failures.get(name, ""))
        return targets, specs

    def bind_for_session(self, session: SessionRecord, tools: list[ToolDefinition], universe: list[ToolDefinition]) -> Bindings:
        """Add registry tools to ``session``'s own (see CodeMode.bind); its bindings after that.

        Raises:
            ValueError: a tool without ``id``/``module``, a host tool of one of CodeMode's own
                toolkits, or two tools of one handle bound under one name; nothing is bound then.
        """
        check_registered(tools)
        mine = {tool.id for tool in self.tools}
        toolkit_names = {toolkit.name for toolkit in self.toolkits}
        clash = next((tool for tool in tools if tool.binding == "host" and toolkit_of(tool) in toolkit_names), None)
        if clash is not None:
            raise ValueError(
                f"host tool {clash.name!r} belongs to {toolkit_of(clash)!r}, which is one of this CodeMode's own toolkits; pass its tools to CodeMode(tools=...) instead of binding them per session"
            )
        new = [tool for tool in tools if tool.id not in mine and tool.id not in session.tools]
        if not new and not universe:
            return self.session_bindings(session)
        trial = replace(session, tools={**session.tools, **{tool.id: tool for tool in new}}, universe=list(universe) or session.universe)
        bindings = self.session_bindings(trial)  # raises on a name clash before anything changes
        for server in sorted({toolkit_of(tool) for tool in new if tool.binding == "host"}):
            # Host tools are loaded (their modules imported) here, once, and shared by every session.
            members = [tool for tool in new if tool.binding == "host" and toolkit_of(tool) == server]
            toolkit = self._session_toolkits.get(server)
            if toolkit is None:
                self._session_toolkits[server] = Toolkit(server, [self.host_tool(tool) for tool in members])
            else:
                for tool in members:
                    if tool.name not in toolkit.functions:
                        toolkit.register(self.host_tool(tool))
        session.tools, session.universe = trial.tools, trial.universe
        if new:
            session.tools_version += 1
        return bindings

    def describe(self, session: SessionRecord | None) -> list[str]:
        """Lines for a model naming every handle bound for ``session`` (none when nothing is bound)."""
        session_tools = list(session.tools.values()) if session is not None else []
        if not (self.tools or self.toolkits or session_tools):
            return []
        lines = ["Tool handles already bound in the kernel (every call is awaitable: `await handle.tool(...)`; gather many with asyncio.gather):"]
        lines.extend(self.session_bindings(session).describe([*self.tools, *session_tools]))
        for handle, (toolkit, attributes) in self.bindings.host_handles.items():
            if toolkit in self.failures:
                lines.append(f"  {handle}: unavailable, {self.failures[toolkit]}")
            elif not attributes and self.toolkit_named(toolkit).requires_connect:
                # An MCP server's tools are known once it is connected (the first cell, or aopen()).
                lines.append(f"  {handle}: its tools are listed when it connects, as the first cell starts; evaluate `{handle}` in a cell to see them")
        lines.extend(self.bindings.describe_toolkits(toolkit for toolkit in self.toolkits if toolkit.name not in self.failures))
        lines.append("Do not assign to a handle's name; if you did, `del` it and the handle is bound again from the next cell.")
        return lines


def check_registered(tools: Iterable[ToolDefinition]) -> None:
    """Registry tools must come from a :class:`toolpath.registry.ToolRegistry`: with an id, and a module, an MCP server or an HTTP operation.

    Raises:
        ValueError: naming the tools that do not.
    """
    missing = [tool.name for tool in tools if tool.id is None or (not tool.module and tool.mcp_server is None and tool.http is None)]
    if missing:
        raise ValueError(f"tools {', '.join(missing)} have no id, or no module, MCP server or HTTP operation; register them in a ToolRegistry first")


def _bridge_tls() -> Any:
    """:mod:`toolpath.kernel.bridge.tls`, imported when a remote kernel first needs the bridge's TLS: the
    cryptography package is not needed by local kernels."""
    return importlib.import_module("toolpath.kernel.bridge.tls")


def _checked_injections(injections: Iterable[FailureInjection]) -> tuple[FailureInjection, ...]:
    """``injections`` as a tuple, each a :class:`FailureInjection` naming a different tool.

    Raises:
        TypeError: an item that is not a :class:`FailureInjection`, or a string for the whole.
        ValueError: two injections for one tool.
    """
    if isinstance(injections, (str, bytes)) or not isinstance(injections, Iterable):
        raise TypeError(f"inject_failures is a list of FailureInjection, got {type(injections).__name__}")
    checked = tuple(injections)
    wrong = next((item for item in checked if not isinstance(item, FailureInjection)), None)
    if wrong is not None:
        raise TypeError(f"inject_failures takes FailureInjection items (toolpath.kernel.FailureInjection('server.tool', probability=0.2)), got {wrong!r}")
    tools = [injection.tool for injection in checked]
    twice = next((tool for tool in tools if tools.count(tool) > 1), None)
    if twice is not None:
        raise ValueError(f"inject_failures names {twice!r} twice; give one FailureInjection per tool")
    return checked
