"""The engine behind CodeMode: the coroutines that do its work, on its private loop.

:class:`toolpath.kernel.codemode.facade.CodeMode` is the façade (sync and async methods, the model's tools);
each of its methods runs one of these coroutines on the :class:`~toolpath.kernel.codemode.loop_thread.LoopThread`.
The engine composes the parts: the session pool, snapshots and handle binding.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from toolpath.kernel.codemode.handle_binding import HandleBinder, check_registered
from toolpath.kernel.codemode.loop_thread import LoopThread
from toolpath.kernel.codemode.notices import describe_error, join
from toolpath.kernel.codemode.options import CellPolicy, KernelCapacity, KernelLaunch, SnapshotPolicy
from toolpath.kernel.codemode.session_pool import SessionPool, check_ids
from toolpath.kernel.codemode.session_snapshots import SessionSnapshots
from toolpath.kernel.codemode.snapshot_store import SnapshotStore
from toolpath.kernel.errors import KernelError
from toolpath.kernel.inside.protocol import SETUP_MODULE
from toolpath.kernel.kernels.ipython_kernel import IPythonKernel, check_code
from toolpath.kernel.kernels.output import CellResult, OutputLimits
from toolpath.kernel.observer import CodeModeObserver
from toolpath.kernel.sandbox.provisioner import limit_notice
from toolpath.kernel.tools.approvals import ApprovalContext, ApprovalDecision, ApprovalGate, OnApproval
from toolpath.kernel.tools.bindings import Bindings
from toolpath.observability.cell_spans import note_kernel, traced_cell
from toolpath.registry import ToolDefinition

_INTROSPECTION_LIMITS = OutputLimits(max_output_chars=64_000_000)


class CodeModeEngine:
    """Sessions' cells, kernels and housekeeping for one CodeMode; every coroutine runs on ``loop_thread``.

    Args:
        launch / cells / capacity: CodeMode's option groups.
        snapshot_store: where snapshots are kept; ``None``: snapshots are off.
        snapshot_policy: when and how much to snapshot.
        binder: CodeMode's tools, handles and bridges.
        allow_restart: whether :meth:`restart` may discard a session's kernel.
        loop_thread: the private loop everything here runs on.
        approvals: where calls from cells that need approval ask.
        observer: told of each cell that ran, and (through ``binder`` and the snapshots) of host
            tool calls and snapshots.
    """

    def __init__(
        self,
        launch: KernelLaunch,
        cells: CellPolicy,
        capacity: KernelCapacity,
        snapshot_store: SnapshotStore | None,
        snapshot_policy: SnapshotPolicy,
        binder: HandleBinder,
        allow_restart: bool,
        loop_thread: LoopThread,
        approvals: ApprovalGate,
        observer: CodeModeObserver | None = None,
    ):
        self.launch = launch
        self.observer = observer or CodeModeObserver()
        self.cells = cells
        self.binder = binder
        self.allow_restart = allow_restart
        self._loop_thread = loop_thread
        self.approvals = approvals
        self.snapshots = SessionSnapshots(
            snapshot_store, snapshot_policy, cells.timeout, cells.busy_wait, loop_thread.loop, cells.interrupt_grace, self.observer
        )
        self.pool = SessionPool(
            capacity, cells.busy_wait, self.snapshots, self.new_kernel, self.stop_kernel, binder.forget, self.attach_kernel, self.leave_kernel
        )
        # Kernel starts that no caller waits for (CodeMode.start_soon); shutdown stops those still under way.
        self._background_starts: set[asyncio.Task] = set()
        loop_thread.loop.call_soon_threadsafe(self.pool.start)

    async def new_kernel(self) -> IPythonKernel:
        """A started kernel, set up, with CodeMode's own handles bound and the startup code run."""
        kernel = self.launch.kernel()
        await kernel.start()
        try:
            await self._set_up(kernel)
            if self.launch.startup_code:
                startup = await kernel.execute(self.launch.startup_code, timeout=self.cells.timeout, silent=True)
                if startup.status != "ok":
                    raise KernelError(f"startup_code failed: {describe_error(startup)}")
        except BaseException:
            await self.stop_kernel(kernel)
            raise
        return kernel

    async def attach_kernel(self, recorded: Mapping[str, Any]) -> IPythonKernel | None:
        """The kernel another process left running on this CodeMode's gateway (``recorded`` as
        :meth:`SessionSnapshots.record_kernel` wrote it), set up and with its handles bound to this
        process's bridge; ``None`` when it is on another gateway or gone. Its startup code ran
        when it started and is not run again.

        Raises:
            KernelError: the gateway cannot be reached, or the kernel cannot be set up (it is then
                shut down: its variables come back from the snapshot in a new one).
        """
        gateway = self.launch.gateway
        if gateway is None or recorded.get("gateway") != gateway.url or not isinstance(recorded.get("kernel_id"), str):
            return None
        kernel = self.launch.kernel()
        if not await kernel.attach(recorded["kernel_id"]):
            return None
        try:
            await self._set_up(kernel)
        except BaseException:
            await self.stop_kernel(kernel)
            raise
        return kernel

    async def leave_kernel(self, kernel: IPythonKernel) -> None:
        """Stop driving ``kernel`` (another process took its session over): close its bridge, and
        leave it running on its gateway for the taker to attach to, or shut it down when local."""
        await self.binder.release(kernel)
        await kernel.detach()

    async def _set_up(self, kernel: IPythonKernel) -> None:
        """Configure toolpath's kernel side and bind CodeMode's own handles (to this process's bridge)."""
        setup = await kernel.execute(
            f"import {SETUP_MODULE} as _toolpath_setup\n_toolpath_setup.configure(allow_shell={self.launch.allow_shell!r})\ndel _toolpath_setup",
            timeout=60,
            silent=True,
        )
        if setup.status != "ok":
            raise KernelError(f"setting up the kernel failed: {describe_error(setup)}")
        await self.binder.bind(kernel, None)

    async def stop_kernel(self, kernel: IPythonKernel) -> None:
        """Close the kernel's bridge (cancelling its in-flight calls) and shut it down."""
        await self.binder.release(kernel)
        await kernel.shutdown()

    @traced_cell
    async def run(
        self,
        code: str,
        session_id: str,
        call_loop: asyncio.AbstractEventLoop | None = None,
        user_id: str | None = None,
        on_approval: OnApproval = "ask",
        answers: Mapping[str, ApprovalDecision] | None = None,
        report_variables: bool = False,
    ) -> CellResult:
        """Run a cell in the session's kernel (CodeMode.arun); host tools' async functions run on ``call_loop``."""
        check_code(code)  # before a kernel is started for it
        session = await self.pool.owned(session_id, user_id)
        cells = self.cells
        async with session.lock:
            notice, session.notice = session.notice, ""
            if session.kernel is not None and session.kernel.busy and not await session.kernel.wait_until_idle(cells.busy_wait):
                if cells.on_busy_kernel == "wait":
                    session.last_used = time.monotonic()
                    evalue = "the environment is still busy with an earlier cell that ignored its interrupt; retry in a moment, or restart to discard the kernel and its state"
                    return CellResult("busy", error={"ename": "Busy", "evalue": evalue, "traceback": ""}, notice=notice)
                await self.pool.discard(session)
                session.lost_kernel = True
                notice = join(notice, "The kernel was restarted because an earlier cell would not stop; this is a fresh kernel.")
            if session.kernel is None:
                notice = join(notice, await self.pool.start_kernel(session))
            kernel = session.kernel
            note_kernel(kernel.kernel_id)
            if not self.binder.is_current(kernel, session):
                await self.binder.bind(kernel, session)
            bridge = self.binder.bridge_of(kernel)
            cell_ids: list[str] = []
            approval = ApprovalContext(self.approvals, session.session_id, session.owner, on_approval == "pause", dict(answers or {}))
            if bridge is not None:
                bridge.call_loop = call_loop
                bridge.approval = approval
            started = time.perf_counter()
            try:
                result = await kernel.execute(
                    code,
                    timeout=cells.timeout,
                    limits=cells.limits,
                    interrupt_grace=cells.interrupt_grace,
                    on_start=cell_ids.append,
                    report_variables=report_variables,
                )
            except (asyncio.CancelledError, Exception):
                if session.kernel is kernel or asyncio.current_task().cancelling():  # type: ignore[union-attr]
                    raise
                result = CellResult("dead")
            # A cell that stopped before a call waiting for approval raised to stop, but has not failed.
            self.observer.cell_finished("paused" if approval.pending else result.status, time.perf_counter() - started)
            if result.status == "dead" and session.kernel is not kernel:
                # restart() (or an eviction) shut this kernel down under the running cell: the cell
                # raised on the closed channels, or the kernel's end was seen first.
                evalue = "the kernel was restarted while this cell ran; the cell was stopped and earlier variables are gone"
                result = CellResult("dead", error={"ename": "KernelRestarted", "evalue": evalue, "traceback": ""})
            session.last_used = time.monotonic()
            if self.launch.sandbox is not None:
                notice = join(notice, limit_notice(self.launch.sandbox, result.status, result.error))
            if bridge is not None and cell_ids and result.status in ("timeout", "aborted"):
                bridge.cancel_cell(cell_ids[0])
            if result.status == "aborted" and cells.on_busy_kernel == "restart" and session.kernel is kernel:
                # Stopped now, not when the next cell comes: a cell that ignores its interrupt would
                # spin a core (until cpu_seconds, in a sandbox) with nobody waiting for it.
                await self.pool.discard(session)
                session.lost_kernel = True
                stopped = (
                    f"The cell ignored its interrupt for {cells.interrupt_grace:g} s, so its kernel was stopped; "
                    "the next cell starts a fresh kernel with the variables of this session's last snapshot, if any."
                )
                error = {**(result.error or {}), "evalue": f"the cell ignored its interrupt for {cells.interrupt_grace:g} s, so its kernel was stopped"}
                result = replace(result, error=error, notice=join(result.notice, stopped))
            if result.status == "dead" and session.kernel is kernel:
                await self.pool.discard(session)
                session.lost_kernel = True
                session.notice = join(session.notice, "The kernel died during the previous cell; this is a fresh kernel.")
            elif result.status in ("ok", "error"):  # a failing cell may have changed variables too
                if self.snapshots.policy.after_each_cell:
                    # Before the result is returned: a client told the cell ran finds its variables
                    # wherever the session goes next, even if this process dies the next moment.
                    notice = join(notice, await self.snapshots.write_now(session))
                else:
                    self.snapshots.schedule(session)
            if approval.pending:
                result = replace(result, pending_approval=approval.pending[0].to_dict())
            return replace(result, notice=join(notice, result.notice)) if notice else result

    async def start(self, session_id: str, user_id: str | None) -> None:
        """Give the session its kernel now (CodeMode.astart)."""
        session = await self.pool.owned(session_id, user_id)
        async with session.lock:
            if session.kernel is None:
                session.notice = join(session.notice, await self.pool.start_kernel(session))

    def start_soon(self, session_id: str, user_id: str | None) -> None:
        """Start :meth:`start` as a task of its own (CodeMode.start_soon); call on the loop's thread.
        Its error is left to the session's first cell, which starts the kernel again and reports it."""
        task = asyncio.ensure_future(self.start(session_id, user_id))
        self._background_starts.add(task)
        task.add_done_callback(self._background_starts.discard)
        task.add_done_callback(lambda done: done.cancelled() or done.exception())  # retrieved: not logged as never retrieved

    async def save_with_snapshot(self, session_id: str, provider: Callable[[], Any], user_id: str | None) -> Any:
        """CodeMode.asave_with_snapshot."""
        session = await self.pool.owned(session_id, user_id)
        session.data_provider = provider
        return await self.snapshots.saved_data(session)

    async def restart(self, session_id: str, user_id: str | None) -> bool:
        """Discard the session's kernel and snapshot (CodeMode.arestart); whether there was any."""
        if not self.allow_restart:
            raise PermissionError("restart is disabled for this CodeMode (allow_restart=False)")
        check_ids(session_id, user_id)
        if not self.pool.is_known(session_id) and not await self.snapshots.is_stored(session_id):
            return False  # nothing to restart, and nobody's session to claim
        session = await self.pool.owned(session_id, user_id)
        await self.snapshots.check_not_held(session)  # another process's kernel still uses that snapshot
        # No lock: a restart must work while a stuck cell holds the session.
        await self.snapshots.discard(session)
        if session.kernel is not None:
            await self.pool.discard(session)
            session.notice = "The kernel was restarted; earlier variables are gone."
        return True

    async def introspect(self, code: str, session_id: str, user_id: str | None) -> Any:
        """Run a silent housekeeping cell that prints one JSON line; that line, parsed."""
        check_ids(session_id, user_id)
        session = self.pool.sessions.get(session_id)
        if session is not None:
            await self.pool.owned(session_id, user_id)
        if session is None or session.kernel is None:
            raise KeyError(f"session {session_id!r} has no kernel; run a cell first")
        async with session.lock:
            # Uncapped: the answer is one JSON line, as long as the names of 10,000 variables.
            result = await session.kernel.execute(code, timeout=30, silent=True, limits=_INTROSPECTION_LIMITS)
        if result.status != "ok":
            raise KernelError(f"inspecting the session failed: {describe_error(result)}")
        return json.loads(result.stdout.strip().splitlines()[-1])

    async def bind_for_session(self, session_id: str, tools: list[ToolDefinition], universe: list[ToolDefinition], user_id: str | None) -> Bindings:
        """CodeMode.abind."""
        check_registered(tools)  # before the session is created
        return self.binder.bind_for_session(await self.pool.owned(session_id, user_id), tools, universe)

    async def shutdown(self) -> None:
        """Stop kernel starts under way, write pending snapshots, then refuse new work and shut every
        kernel and connection down."""
        for task in self._background_starts:
            task.cancel()  # a kernel being started stops itself on cancellation
        await asyncio.gather(*self._background_starts, return_exceptions=True)
        await self.flush_all()
        self._loop_thread.closed = True
        await self.pool.close()
        await self.snapshots.stop_renewing()
        await self.binder.close()
        if self.launch.gateway is not None:
            await self.launch.gateway.aclose()

    async def flush_all(self) -> None:
        """Write every session's pending snapshot."""
        await self.snapshots.flush_all(list(self.pool.sessions.values()))
