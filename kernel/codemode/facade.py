"""CodeMode: persistent IPython kernels, one per session, for agents that write Python.

A model gets two tools: ``execute(code)`` runs a cell in its session's kernel, ``restart()`` discards
the kernel and its state. Programs get ``run``/``variables``/``value``/``shutdown`` and their async
twins. The session id always comes from the caller (the agent run), never from cell code.

Contract: cells of one session run one at a time, in call order; sessions run in parallel. A cell
over ``timeout`` is interrupted; one that ignores the interrupt returns ``"aborted"``, and the next
cell waits up to ``busy_wait`` seconds for it, then returns ``"busy"`` (or, with
``on_busy_kernel="restart"``, its kernel is stopped as it is aborted, and the next cell starts a
fresh one from the session's last snapshot). A kernel that dies is reported with its last
output; the next cell starts a fresh kernel and says whether the variables came back.

This module is the façade; each part has its own module: sessions, owners, the pool and eviction
(:mod:`~toolpath.kernel.codemode.session_pool`), snapshots (:mod:`~toolpath.kernel.codemode.session_snapshots`),
handles and bridges (:mod:`~toolpath.kernel.codemode.handle_binding`), a run's toolkit connections
(:mod:`~toolpath.kernel.codemode.toolkit_connections`), the private event loop every kernel is driven from
(:mod:`~toolpath.kernel.codemode.loop_thread`), the option groups (:mod:`~toolpath.kernel.codemode.options`)
and what a model is told (:mod:`~toolpath.kernel.codemode.model_tools`). Where kernels run (here, from a
kernelspec's provisioner, on a Jupyter gateway) is :mod:`~toolpath.kernel.kernels.ipython_kernel`'s business.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

from toolpath.kernel.codemode.engine import CodeModeEngine
from toolpath.kernel.codemode.handle_binding import HandleBinder
from toolpath.kernel.codemode.loop_thread import LoopThread, running_loop
from toolpath.kernel.codemode.model_tools import instructions, tool_schemas
from toolpath.kernel.codemode.options import FLAT_DEFAULT, SHORTHAND, BridgePolicy, CellPolicy, KernelCapacity, KernelLaunch, SnapshotPolicy, option_groups
from toolpath.kernel.codemode.session_pool import check_ids
from toolpath.kernel.codemode.snapshot_store import DEFAULT_LEASE_SECONDS, SnapshotStore
from toolpath.kernel.codemode.toolkit_connections import ToolkitConnections
from toolpath.kernel.inside.protocol import SETUP_MODULE
from toolpath.kernel.inside.result_store import ResultStore
from toolpath.kernel.inside.retries import FailureInjection
from toolpath.kernel.kernels.output import CellResult, format_for_model
from toolpath.kernel.observer import CodeModeObserver
from toolpath.kernel.option_checks import check_seconds
from toolpath.kernel.tools.approval_log import ApprovalLog, RecordedDecision
from toolpath.kernel.tools.approvals import DEFAULT_APPROVAL_TIMEOUT, ApprovalDecision, ApprovalGate, Approver, OnApproval
from toolpath.kernel.tools.bindings import Bindings
from toolpath.kernel.tools.toolkit import Tool, Toolkit
from toolpath.registry import ToolDefinition

if TYPE_CHECKING:
    from toolpath.kernel.sandbox.provisioner import SandboxPolicy


class CodeMode:
    """Persistent IPython kernels keyed by session id.

    Args:
        tools: what to bind as awaitable handles in every kernel, one handle per toolkit or server:
            :class:`toolpath.kernel.Toolkit` objects, plain functions and :class:`toolpath.kernel.Tool` objects (one
            toolkit named ``tools``), and registry tools (each needs ``id`` and ``module`` or
            ``mcp_server``, as a :class:`toolpath.registry.ToolRegistry` gives them). Registry tools with
            ``binding="kernel"`` are imported inside the kernel on first use; everything else runs
            in this process and is called over the bridge: ``await inventory.stock_level("A-1")``.
            Registry tools served by an MCP server connect to it on their first call (one
            connection per server configuration) and are disconnected when the run ends.
        cells: how each cell runs: time limit, interrupt grace, output caps (:class:`~toolpath.kernel.codemode.options.CellPolicy`).
        capacity: how many kernels live at once, and for how long (:class:`~toolpath.kernel.codemode.options.KernelCapacity`).
        launch: where and how kernels start: interpreter, directory, environment, startup code, shell
            escapes, a kernelspec, a Jupyter gateway or a sandbox (:class:`~toolpath.kernel.codemode.options.KernelLaunch`).
        snapshots: when a session's snapshot is written, and how much of it (:class:`~toolpath.kernel.codemode.options.SnapshotPolicy`).
        bridge: what may cross the bridge, and where remote kernels reach it (:class:`~toolpath.kernel.codemode.options.BridgePolicy`).
        allow_restart: offer ``restart`` to the model (see :meth:`model_tools`); ``False`` also makes
            :meth:`restart` raise.
        offload_results: keep results over ``max_result_bytes`` in the SQLite file and give the cell
            an id to read them back with ``await results.get(id)``.
        result_store: that SQLite file; default ``$TOOLPATH_HOME/toolpath.db`` (see
            :func:`toolpath.registry.storage.default_database_path`).
        snapshot: keep each session's variables in ``snapshot_store`` and restore them into its next
            kernel (after this process restarts, an eviction or a death; not after
            :meth:`restart`). ``False`` keeps nothing (owners then live in this process only).
        snapshot_store: the store of snapshots, owners, session holders and approval decisions: a
            SQLite file, or a ``postgresql://`` URL that several processes (``toolpath serve``
            replicas) share; default ``$TOOLPATH_STORE``, else ``$TOOLPATH_HOME/toolpath.db``.
            Restoring a snapshot runs its pickles' code: a SQLite file is created readable by its
            owner only, and a PostgreSQL database must be kept as private.
        session_lease: seconds this process's hold on a session lasts in the store unless renewed
            (it renews every third of that while the session's kernel lives); another process,
            on any host, may take the session over once it has run out.
        bridge_certificate: ``(certificate file, key file)``, PEM, for the bridge's TLS; default a
            self-signed certificate for the bridge address's host, made at start. Kernels trust
            exactly this certificate (CodeMode sends it with the bridge's address).
        approver: who decides on calls to host tools that ask for approval
            (``Tool(requires_approval=...)``, :mod:`toolpath.kernel.tools.approvals`): ``approver(request)``
            returns ``True``/``False`` or an :class:`toolpath.kernel.tools.approvals.ApprovalDecision`, sync
            (run in a worker thread) or async. The cell waits for the answer with its kernel and
            variables intact; a no raises ``ApprovalDenied`` in the cell and the tool does not run.
            ``None``: such calls are denied, saying that nobody can approve them.
        approval_timeout: seconds an approver has to answer before the call raises
            ``ApprovalTimeout`` (keep it under ``timeout``, which interrupts the cell). Every
            decision is recorded with the session and user in the SQLite file of ``snapshot_store``
            (:meth:`approval_decisions`).
        approval_tools: catalog tools that cells may bind in the kernel themselves (a planned cell
            binds its own handles): a kernel's request to approve a call (``approve`` on the bridge)
            is put to the approver only for such a tool with an approval policy, or one of ``tools``;
            any other is denied unseen (a cell can send one of its own). :meth:`Workspace.code_mode`
            gives its catalogs' tools.
        inject_failures: make chosen tools fail on purpose, to try how a plan or an agent copes
            (:class:`toolpath.kernel.FailureInjection`: a tool, a probability with its seed, or
            the tries that fail): each such try raises ``InjectedFailure`` in the cell before the
            tool runs, and retry policies that retry ``connection`` retry it. A cell's
            :attr:`CellResult.injected_failures` counts them. Each must name a tool of ``tools``,
            ``approval_tools`` or ``cell_tools``, else CodeMode refuses it
            (:class:`toolpath.kernel.codemode.injection_targets.UnknownInjectionTargetError`, a
            ``ValueError`` naming the nearest known names); one under a toolkit whose tools are
            listed when it connects (an MCP server's) is checked then, and the run's first cell raises it.
        cell_tools: registry tools that cells bind in the kernel themselves (a planned cell binds
            its own handles, and :meth:`bind` a session's), so that ``inject_failures`` may name
            them. :meth:`Workspace.code_mode` gives its catalogs' tools.
        observer: told of each cell that ran, each host tool call through a bridge and each snapshot
            written, with kinds, sizes and durations only (:class:`toolpath.kernel.observer.CodeModeObserver`;
            ``toolpath serve --metrics`` counts them); ``None``: nobody is told.

    Every other keyword is shorthand for one field of a group, for when that group is not given
    (giving both is a ``TypeError``): :data:`~toolpath.kernel.codemode.options.SHORTHAND` says which
    (``timeout`` is ``cells.timeout``, ``max_output_chars`` is ``cells.limits.max_output_chars``,
    ``gateway_url`` and ``gateway_token`` make ``launch.gateway``, ``bridge_address`` is
    ``bridge.address`` as ``"host:port"``).

    Raises:
        TypeError: a group given with one of its shorthand keywords (the message names both), a
            group that is not of its class, or a ``tools`` item that is not a toolkit, tool,
            callable or registry tool.
        ValueError: for an unknown ``on_busy_kernel``, a negative number, two toolkits with one name,
            a registry tool without ``id`` or without ``module``/``mcp_server``, a bad gateway URL
            or bridge address, ``python`` with ``kernel_name`` or ``gateway_url``, ``cwd`` or
            ``offload_results`` with ``gateway_url``, or a bridge certificate that cannot be loaded.
        registry.storage.StoreError: ``result_store`` is a directory or cannot be created.
    """

    def __init__(
        self,
        tools: Iterable[ToolDefinition | Toolkit | Tool | Callable[..., Any]] = (),
        *,
        cells: CellPolicy | None = None,
        capacity: KernelCapacity | None = None,
        launch: KernelLaunch | None = None,
        snapshots: SnapshotPolicy | None = None,
        bridge: BridgePolicy | None = None,
        allow_restart: bool = True,
        offload_results: bool = False,
        result_store: str | os.PathLike[str] | None = None,
        snapshot: bool = True,
        snapshot_store: str | os.PathLike[str] | None = None,
        session_lease: float = DEFAULT_LEASE_SECONDS,
        bridge_certificate: tuple[str, str] | None = None,
        approver: Approver | None = None,
        approval_timeout: float = DEFAULT_APPROVAL_TIMEOUT,
        approval_tools: Iterable[ToolDefinition] = (),
        inject_failures: Iterable[FailureInjection] = (),
        cell_tools: Iterable[ToolDefinition] = (),
        observer: CodeModeObserver | None = None,
        # Shorthand for one field of a group each (the class docstring says which).
        allow_shell: bool = FLAT_DEFAULT["allow_shell"],
        on_busy_kernel: Literal["wait", "restart"] = FLAT_DEFAULT["on_busy_kernel"],
        busy_wait: float = FLAT_DEFAULT["busy_wait"],
        idle_ttl: float = FLAT_DEFAULT["idle_ttl"],
        timeout: float | None = FLAT_DEFAULT["timeout"],
        python: str | None = FLAT_DEFAULT["python"],
        cwd: str | None = FLAT_DEFAULT["cwd"],
        env: dict[str, str] | None = FLAT_DEFAULT["env"],
        startup_code: str | None = FLAT_DEFAULT["startup_code"],
        max_output_chars: int = FLAT_DEFAULT["max_output_chars"],
        max_images_per_cell: int = FLAT_DEFAULT["max_images_per_cell"],
        max_image_bytes: int = FLAT_DEFAULT["max_image_bytes"],
        max_kernels: int | None = FLAT_DEFAULT["max_kernels"],
        max_kernels_per_user: int | None = FLAT_DEFAULT["max_kernels_per_user"],
        pool_size: int = FLAT_DEFAULT["pool_size"],
        interrupt_grace: float = FLAT_DEFAULT["interrupt_grace"],
        max_result_bytes: int = FLAT_DEFAULT["max_result_bytes"],
        accept_pickles: bool | None = FLAT_DEFAULT["accept_pickles"],
        snapshot_debounce: float = FLAT_DEFAULT["snapshot_debounce"],
        snapshot_after_each_cell: bool | None = FLAT_DEFAULT["snapshot_after_each_cell"],
        max_variable_bytes: int = FLAT_DEFAULT["max_variable_bytes"],
        max_snapshot_bytes: int = FLAT_DEFAULT["max_snapshot_bytes"],
        kernel_name: str | None = FLAT_DEFAULT["kernel_name"],
        gateway_url: str | None = FLAT_DEFAULT["gateway_url"],
        gateway_token: str | None = FLAT_DEFAULT["gateway_token"],
        bridge_address: str | None = FLAT_DEFAULT["bridge_address"],
        bridge_listen: str | None = FLAT_DEFAULT["bridge_listen"],
        sandbox: SandboxPolicy | None = FLAT_DEFAULT["sandbox"],
    ):
        shorthand = {name: value for name, value in locals().items() if name in SHORTHAND}  # first: locals() holds just the arguments
        groups = option_groups({"cells": cells, "capacity": capacity, "launch": launch, "snapshots": snapshots, "bridge": bridge}, shorthand)
        self.cells, self.capacity, self.launch, bridge = (groups[name] for name in ("cells", "capacity", "launch", "bridge"))
        _check_stores(offload_results, result_store, snapshot, snapshot_store, self.launch, bridge)
        self.allow_restart = allow_restart
        self._binder = HandleBinder(
            tools,
            bridge,
            ResultStore(result_store) if offload_results else None,
            bridge_certificate,
            sandboxed=self.launch.sandbox is not None,
            approvals=approver is not None,
            approval_tools=approval_tools,
            inject_failures=inject_failures,
            cell_tools=cell_tools,
            observer=observer,
        )
        self._connections = ToolkitConnections(self._binder)
        check_seconds("session_lease", session_lease, positive=True)
        store = SnapshotStore(snapshot_store, lease_seconds=session_lease) if snapshot else None
        snapshot_policy = _decided_by_store(groups["snapshots"], store)
        self._approval_log = ApprovalLog(store.database if store is not None else None)
        approvals = ApprovalGate(approver, approval_timeout, self._approval_log)
        self._loop_thread = LoopThread()  # last: nothing after it can fail and leave its thread running
        self._engine = CodeModeEngine(
            self.launch, self.cells, self.capacity, store, snapshot_policy, self._binder, allow_restart, self._loop_thread, approvals, observer
        )

    # -- runs: connecting and closing toolkits -------------------------------------------------------

    async def aopen(self) -> None:
        """Start a run now: connect every toolkit that needs it, on the running loop.

        Raises:
            UnknownInjectionTargetError: a failure injection names a tool that the toolkit it names,
                now connected, does not list; every run raises it (the injections are the CodeMode's).
        """
        self._loop_thread.check_open()
        if self._connections.pending(asynchronous_too=True):
            await self._connections.connect(asynchronous_too=True)
        self._binder.check_connected_injections()

    def open(self) -> None:
        """Start a run now: connect the toolkits whose ``connect()`` is sync (async ones connect on the first cell)."""
        self._loop_thread.call(self._connections.connect(asynchronous_too=False))

    async def aclose(self) -> None:
        """End the run: close the toolkits this CodeMode connected (newest first) and write pending
        snapshots; kernels stay.

        Raises:
            RuntimeError: some ``close()`` failed (the others were still closed); the message lists them.
        """
        if self._loop_thread.closed:
            return  # shutdown closed everything
        errors = await self._connections.close(waiting_loop=None)
        await self._loop_thread.relay(self._engine.flush_all())
        _raise_close_errors(errors)

    def close(self) -> None:
        """Sync :meth:`aclose`. An async ``close()`` runs on the loop its toolkit connected on when that
        loop is still running in another thread, else on CodeMode's own loop.

        Raises:
            RuntimeError: some ``close()`` failed, or an async toolkit must be closed on the calling
                thread's own running loop (use :meth:`aclose` there).
        """
        if self._loop_thread.closed:
            return  # shutdown closed everything
        errors = self._loop_thread.call(self._connections.close(waiting_loop=running_loop()))
        self._loop_thread.call(self._engine.flush_all())
        _raise_close_errors(errors)

    # -- model-facing tools -----------------------------------------------------------------------

    async def aexecute(self, code: str, session_id: str, user_id: str | None = None) -> str:
        """Run a Python cell in the session's kernel and return what it showed, as text for a model
        (see :meth:`arun` for ``user_id``)."""
        return format_for_model(await self.arun(code, session_id, user_id))

    def execute(self, code: str, session_id: str, user_id: str | None = None) -> str:
        """Sync :meth:`aexecute`."""
        return format_for_model(self.run(code, session_id, user_id))

    async def arestart(self, session_id: str, user_id: str | None = None) -> str:
        """Discard the session's kernel, all its variables and its snapshot; the next cell starts fresh.
        Returns what happened, for the model (a session with nothing to discard says so).

        Raises:
            SessionOwnerError: the session belongs to another user.
            PermissionError: ``allow_restart=False``.
            ValueError: a blank or non-string session id or user id.
        """
        return _restarted(await self._loop_thread.relay(self._engine.restart(session_id, user_id)))

    def restart(self, session_id: str, user_id: str | None = None) -> str:
        """Sync :meth:`arestart`."""
        return _restarted(self._loop_thread.call(self._engine.restart(session_id, user_id)))

    def approval_decisions(self, session_id: str, user_id: str | None = None) -> list[RecordedDecision]:
        """The approval decisions on ``session_id``'s calls, oldest first: who decided, when, the
        tool, a digest of its arguments, the answer and its note. Only its owner sees them: another
        ``user_id`` gets an empty list.

        Raises:
            ValueError: a blank or non-string session id or user id.
            registry.storage.StoreError: the SQLite file is unusable.
        """
        check_ids(session_id, user_id)
        return self._approval_log.decisions(session_id, user_id)

    def model_tools(self) -> dict[str, Any]:
        """The tools to offer a model: ``execute``, and ``restart`` unless ``allow_restart=False``."""
        return {"execute": self.aexecute, **({"restart": self.arestart} if self.allow_restart else {})}

    def model_tool_schemas(self, api: Literal["openai", "anthropic"] = "openai") -> list[dict[str, Any]]:
        """The JSON declarations of :meth:`model_tools` for a model API, from one source
        (:func:`toolpath.kernel.codemode.model_tools.tool_schemas`). The session id is not a parameter: your
        program binds it.

        Raises:
            ValueError: an ``api`` other than ``"openai"`` or ``"anthropic"``.
        """
        return tool_schemas(self.allow_restart, api)

    def instructions(self, session_id: str | None = None) -> str:
        """Text for a model: how the kernel behaves, the tool handles and the limits in force.

        Args:
            session_id: also describe the tools bound for this session alone (see :meth:`bind`).
        """
        session = self._engine.pool.sessions.get(session_id) if session_id is not None else None
        offload = self._binder.policy.max_result_bytes if self._binder.result_store is not None else None
        return instructions(self._binder.describe(session), self.cells, self.launch.allow_shell, offload, self.allow_restart)

    # -- developer surface ------------------------------------------------------------------------

    async def arun(
        self,
        code: str,
        session_id: str,
        user_id: str | None = None,
        *,
        on_approval: OnApproval = "ask",
        answers: Mapping[str, ApprovalDecision] | None = None,
        report_variables: bool = False,
    ) -> CellResult:
        """Run a cell and return the structured :class:`CellResult`.

        The first cell of a run connects the toolkits that need it; host tools' async functions are
        awaited on the loop this is awaited on. The first cell of a session's kernel restores the
        session's snapshot (if any) and says what it restored in ``notice``.

        Args:
            user_id: the user this run acts for, given by the program (never by cell code). A new
                session belongs to it; a session may only be used with its owner's ``user_id``
                (a session created without one, only without one).
            on_approval: ``"ask"`` (the approver decides while the cell waits) or ``"pause"``: a
                call that needs approval raises ``ApprovalPending`` in the cell instead, and the
                result's ``pending_approval`` names it (a planned task that pauses, see
                :meth:`toolpath.planner.tasks.agent_session.AgentSession.run_task`).
            answers: decisions already given, by request digest: a call whose request has one is
                settled by it (recorded in the audit log) without asking or pausing.
            report_variables: also answer the kernel's variable names after a cell that succeeds,
                in the same round trip (:attr:`CellResult.variables`; what :meth:`avariables`
                answers with a cell of its own).

        Raises:
            UnknownInjectionTargetError: a failure injection names a tool that a toolkit connected
                for the run does not list (see :meth:`aopen`); nothing runs.
            SessionOwnerError: the session belongs to another user; no kernel is started.
            SessionHeldError: with snapshots on, another running process holds the session (it runs
                the session's kernel on the same store); no kernel is started.
            registry.storage.StoreError: with snapshots on, the owner cannot be looked up.
        """
        await self.aopen()
        return await self._loop_thread.relay(
            self._engine.run(code, session_id, asyncio.get_running_loop(), user_id, on_approval, answers or {}, report_variables)
        )

    def run(
        self,
        code: str,
        session_id: str,
        user_id: str | None = None,
        *,
        on_approval: OnApproval = "ask",
        answers: Mapping[str, ApprovalDecision] | None = None,
        report_variables: bool = False,
    ) -> CellResult:
        """Sync :meth:`arun`; host tools' async functions run on CodeMode's own loop (so calling this
        from inside a running loop cannot deadlock).

        Examples:
            A session's kernel starts with its first cell and keeps its variables for the next;
            leaving the ``with`` block shuts every kernel down.

            >>> from toolpath.kernel import CodeMode
            >>> with CodeMode(pool_size=0) as code_mode:
            ...     first = code_mode.run("total = sum(range(10)); total", "demo")
            ...     second = code_mode.run("print(total * 2)", "demo")
            ...     failed = code_mode.run("1 / 0", "demo")
            >>> first.status, first.result, first.value
            ('ok', '45', 45)
            >>> print(second.stdout, end="")
            90
            >>> failed.status, failed.error["ename"]
            ('error', 'ZeroDivisionError')
        """
        if self._connections.pending(asynchronous_too=True):
            self._loop_thread.call(self._connections.connect(asynchronous_too=True))
        self._binder.check_connected_injections()
        return self._loop_thread.call(self._engine.run(code, session_id, None, user_id, on_approval, answers or {}, report_variables))

    async def astart(self, session_id: str, user_id: str | None = None) -> None:
        """Give the session its kernel now (restoring its snapshot) instead of at its first cell; what
        was restored is told in the next cell's ``notice``. Raises as :meth:`arun`."""
        await self._loop_thread.relay(self._engine.start(session_id, user_id))

    def start(self, session_id: str, user_id: str | None = None) -> None:
        """Sync :meth:`astart`."""
        self._loop_thread.call(self._engine.start(session_id, user_id))

    def start_soon(self, session_id: str, user_id: str | None = None) -> None:
        """Start giving the session its kernel in the background, as :meth:`start` does, and return
        at once: a program's other work (planning the task the kernel will run) overlaps the
        kernel's start, on another core. The session's first cell waits for it; when it fails, that
        cell starts the kernel again and reports the error. :meth:`shutdown` stops a start still
        under way (its kernel is shut down)."""
        self._loop_thread.check_open()
        self._loop_thread.loop.call_soon_threadsafe(self._engine.start_soon, session_id, user_id)

    def restored(self, session_id: str) -> bool:
        """Whether the session's live kernel was restored from a snapshot (its variables came back)."""
        session = self._engine.pool.sessions.get(session_id)
        return session is not None and session.kernel is not None and session.restored

    async def asave_with_snapshot(self, session_id: str, provider: Callable[[], Any], user_id: str | None = None) -> Any:
        """Save ``provider()`` (JSON-ready data, e.g. a planner session's held states) with every
        snapshot of the session, and return the data saved with its last snapshot (``None`` when
        there is none, or snapshots are off). Raises as :meth:`arun`."""
        return await self._loop_thread.relay(self._engine.save_with_snapshot(session_id, provider, user_id))

    def save_with_snapshot(self, session_id: str, provider: Callable[[], Any], user_id: str | None = None) -> Any:
        """Sync :meth:`asave_with_snapshot`."""
        return self._loop_thread.call(self._engine.save_with_snapshot(session_id, provider, user_id))

    async def avariables(self, session_id: str, user_id: str | None = None) -> list[str]:
        """Names of the user's variables in the session (IPython's ``%who_ls``)."""
        return await self._loop_thread.relay(self._engine.introspect(f"import {SETUP_MODULE} as _s; _s.print_variables(); del _s", session_id, user_id))

    def variables(self, session_id: str, user_id: str | None = None) -> list[str]:
        return self._loop_thread.call(self._engine.introspect(f"import {SETUP_MODULE} as _s; _s.print_variables(); del _s", session_id, user_id))

    async def avalue(self, name: str, session_id: str, user_id: str | None = None) -> Any:
        """The value of a JSON-serialisable variable; raises ``KeyError``/``ValueError`` otherwise."""
        return _value_or_raise(await self._loop_thread.relay(self._engine.introspect(_value_code(name), session_id, user_id)))

    def value(self, name: str, session_id: str, user_id: str | None = None) -> Any:
        return _value_or_raise(self._loop_thread.call(self._engine.introspect(_value_code(name), session_id, user_id)))

    async def abind(self, session_id: str, tools: Iterable[ToolDefinition], universe: Iterable[ToolDefinition] = (), user_id: str | None = None) -> Bindings:
        """Bind registry tools as handles in one session only, on top of CodeMode's own tools.

        They are bound before the session's next cell, and again in every kernel the session gets
        later (after a restart, a death or an eviction); handles already bound keep their names.
        A server's kernel-bound and host-bound tools share one handle. Host-bound tools are loaded
        into this process now (their modules imported) and shared by every session that binds them.

        Args:
            session_id: the session (created if new, owned by ``user_id``; see :meth:`arun`).
            tools: registry tools (each with ``id`` and ``module``); tools already bound are skipped.
            universe: every tool the session may ever bind (e.g. a whole registry): handle and
                attribute names are de-duplicated over it, so binding more tools later never renames
                one already bound. Default: the tools bound so far.

        Returns:
            The session's :class:`toolpath.kernel.tools.bindings.Bindings` (CodeMode's own handles included).

        Raises:
            ValueError: a tool without ``id``/``module``, a host tool of one of CodeMode's own
                toolkits, or two tools of one handle bound under one name; nothing is bound then.
        """
        return await self._loop_thread.relay(self._engine.bind_for_session(session_id, list(tools), list(universe), user_id))

    def bind(self, session_id: str, tools: Iterable[ToolDefinition], universe: Iterable[ToolDefinition] = (), user_id: str | None = None) -> Bindings:
        """Sync :meth:`abind`."""
        return self._loop_thread.call(self._engine.bind_for_session(session_id, list(tools), list(universe), user_id))

    async def aend_session(self, session_id: str, user_id: str | None = None) -> None:
        """Write the session's pending snapshot, shut its kernel down and forget it here (its bound
        tools too); its snapshot stays for a later CodeMode. Other sessions and the pool are
        untouched; unknown sessions are ignored."""
        await self._loop_thread.relay(self._engine.pool.end(session_id, user_id))

    def end_session(self, session_id: str, user_id: str | None = None) -> None:
        """Sync :meth:`aend_session`."""
        self._loop_thread.call(self._engine.pool.end(session_id, user_id))

    def kernel_id(self, session_id: str) -> str | None:
        """The id of the session's live kernel, or ``None`` when it has none (never started, restarted,
        died or evicted). A new kernel has a new id: a caller that remembers what a kernel holds
        compares ids to learn that its variables are gone."""
        session = self._engine.pool.sessions.get(session_id)
        kernel = session.kernel if session is not None else None
        return kernel.kernel_id if kernel is not None else None

    def pool_ready(self) -> int:
        """How many pre-started kernels are waiting for new sessions."""
        return len(self._engine.pool.pool)

    def sessions(self) -> list[str]:
        """Ids of the sessions with a live kernel."""
        return sorted(session.session_id for session in self._engine.pool.sessions.values() if session.kernel is not None)

    async def alive_kernels(self) -> dict[str, str | None]:
        """The sessions with a live kernel, each with its owner (``None``: made without a user id), read
        on CodeMode's own loop, where sessions come and go: a consistent view from any thread."""
        return await self._loop_thread.relay(self._alive_kernels())

    async def _alive_kernels(self) -> dict[str, str | None]:
        return {session.session_id: session.owner for session in self._engine.pool.sessions.values() if session.kernel is not None}

    async def ashutdown(self) -> None:
        """End the run (:meth:`aclose`), shut down every kernel (sessions and pool) and stop the loop."""
        if not self._loop_thread.closed:
            try:
                await self.aclose()
            finally:
                await self._loop_thread.relay(self._engine.shutdown())
                self._loop_thread.stop()

    def shutdown(self) -> None:
        """Sync :meth:`ashutdown`."""
        if not self._loop_thread.closed:
            try:
                self.close()
            finally:
                self._loop_thread.call(self._engine.shutdown())
                self._loop_thread.stop()

    def __enter__(self) -> CodeMode:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()

    async def __aenter__(self) -> CodeMode:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.ashutdown()


def _restarted(discarded: bool) -> str:
    if discarded:
        return "The kernel was restarted; all variables are gone."
    return "This session had no kernel and no saved variables; its next cell starts a fresh kernel."


def _check_stores(offload_results: bool, result_store: object, snapshot: bool, snapshot_store: object, launch: KernelLaunch, bridge: BridgePolicy) -> None:
    """Refuse a store given without the option that uses it, and offloaded results for gateway kernels.

    Raises:
        ValueError: naming the option and what to do.
    """
    if result_store is not None and not offload_results:
        raise ValueError("result_store is only used with offload_results=True")
    if snapshot_store is not None and not snapshot:
        raise ValueError("snapshot_store is only used with snapshot=True")
    if launch.gateway is not None and offload_results:
        raise ValueError(
            f"offload_results needs kernels on this machine: offloaded results are read from the SQLite file, which a kernel on a gateway cannot open; without it, results over max_result_bytes={bridge.max_result_bytes:,} raise ResultTooLarge in the cell"
        )


def _decided_by_store(policy: SnapshotPolicy, store: SnapshotStore | None) -> SnapshotPolicy:
    """``policy`` with ``after_each_cell`` decided when left to the store: on for a shared store
    (PostgreSQL), where another replica may take the session over at any time; off for SQLite."""
    if policy.after_each_cell is not None:
        return policy
    return replace(policy, after_each_cell=store is not None and store.database.engine != "sqlite")


def _raise_close_errors(errors: list[str]) -> None:
    if errors:
        raise RuntimeError(f"closing toolkits failed: {'; '.join(errors)}")


def _value_code(name: str) -> str:
    return f"import {SETUP_MODULE} as _s; _s.print_value({name!r}); del _s"


def _value_or_raise(answer: dict) -> Any:
    if "error" in answer:
        raise (KeyError if answer["error"].startswith("no variable") else ValueError)(answer["error"])
    return answer["value"]
