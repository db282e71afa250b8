"""KernelSession: one ipykernel, started and driven through jupyter_client's public async API.

The session starts the kernel with a chosen interpreter (default: the running one, so the kernel
sees the same installed packages, toolpath's included), executes cells and collects what a person
would see: stdout, stderr, the ``Out[n]`` text, or the traceback. Leaving the ``async with`` block
always shuts the kernel down; the kernel also exits by itself if the host process dies, because
jupyter_client starts it with the parent-process watchdog ipykernel provides.

Each kernel has a private temporary directory (connection file with the kernel's key, sockets, log)
holding an ``owner.json`` that names the host process. A host killed with SIGKILL cannot remove it,
so the first kernel a process starts removes this user's directories whose owner is gone.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import queue
import shutil
import stat
import sys
import tempfile
import time
from collections.abc import Callable

import psutil
from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
from jupyter_client.manager import AsyncKernelManager

from kernel.handles import TOOL_CALLS_PAYLOAD
from kernel.output import CellOutput, CellResult, OutputLimits

_POLL_SECONDS = 0.5
#: Seconds a cell gets to stop after its timeout interrupt before it is reported as stuck.
INTERRUPT_GRACE = 10.0
_KERNEL_NAME = "toolpath-python"
_DIRECTORY_PREFIX = "toolpath-kernel-"
_OWNER_FILE = "owner.json"
#: A directory with no owner file is another process's that is still starting, unless it is older.
_UNOWNED_GRACE_SECONDS = 3600.0
_stale_directories_removed = False


def _owner() -> dict[str, float]:
    """This process, as ``owner.json`` names it: pid and start time (pids are reused)."""
    return {"pid": os.getpid(), "started": psutil.Process().create_time()}


def _is_running(owner: dict) -> bool:
    try:
        return abs(psutil.Process(int(owner["pid"])).create_time() - float(owner["started"])) < 1.0
    except (psutil.Error, KeyError, TypeError, ValueError):
        return False


def _read_owner(path: str) -> dict | None:
    """The owner named by ``path``, or ``None`` when there is no readable, well-formed owner file
    (a half-written one, a FIFO or a link to a device are read without blocking, and at most 4 kB)."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return None
        owner = json.loads(os.read(descriptor, 4096))
    except (OSError, ValueError):
        return None
    finally:
        os.close(descriptor)
    return owner if isinstance(owner, dict) else None


def remove_stale_directories(root: str | None = None) -> list[str]:
    """Remove this user's kernel directories (under ``root``, default the temporary directory) whose
    owner process is gone, or whose owner file is missing or unreadable and that are over an hour old.

    Returns:
        The paths removed. Directories that cannot be read or removed are left as they are.
    """
    removed = []
    try:
        entries = list(os.scandir(root or tempfile.gettempdir()))
    except OSError:
        return removed
    for entry in entries:
        try:
            if not entry.name.startswith(_DIRECTORY_PREFIX) or not entry.is_dir(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_uid != os.getuid():
                continue
            owner = _read_owner(os.path.join(entry.path, _OWNER_FILE))
            if owner is not None:
                if _is_running(owner):
                    continue
            elif time.time() - entry.stat(follow_symlinks=False).st_mtime < _UNOWNED_GRACE_SECONDS:
                continue
        except OSError:
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(entry.path)
    return removed


class KernelError(RuntimeError):
    """The kernel could not be started, or died; the message says what to check."""


class KernelBusyError(KernelError):
    """An earlier cell ignored its interrupt and still holds the kernel; see :meth:`KernelSession.wait_until_idle`."""


class _InterpreterSpecs(KernelSpecManager):
    """A kernel-spec source with one spec: ipykernel on a given interpreter, whatever specs are installed."""

    def __init__(self, python: str, **kwargs):
        super().__init__(**kwargs)
        self._python = python

    def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
        return KernelSpec(
            argv=[self._python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            display_name="toolpath (Python)",
            language="python",
        )


class KernelSession:
    """A running IPython kernel for one session.

    Args:
        python: the kernel's interpreter; default ``sys.executable``.
        cwd: the kernel's working directory (and first entry of its import path); default the
            current directory.
        env: variables laid over the host's environment for the kernel.
        startup_timeout: seconds to wait for the kernel to answer after starting.

    The kernel's sockets, connection file (it holds the kernel's key) and output log live in a
    private temporary directory that :meth:`shutdown` removes.

    Use as ``async with KernelSession() as session: result = await session.execute(code)``.
    """

    def __init__(self, python: str | None = None, cwd: str | None = None, env: dict[str, str] | None = None, startup_timeout: float = 60.0):
        self.python = python or sys.executable
        self.cwd = cwd or os.getcwd()
        self.env = env or {}
        self.startup_timeout = startup_timeout
        self._manager: AsyncKernelManager | None = None
        self._client = None
        self._directory: tempfile.TemporaryDirectory | None = None
        self._log = None
        self._stuck_message_id: str | None = None
        #: The kernel's id (jupyter_client's), set once it has started; a restarted kernel is a new session with a new id.
        self.kernel_id: str | None = None

    async def __aenter__(self) -> KernelSession:
        await self.start()
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self.shutdown()

    @property
    def started(self) -> bool:
        return self._client is not None

    async def start(self) -> None:
        """Start the kernel and wait until it answers.

        Raises:
            KernelError: the kernel did not start or answer within ``startup_timeout`` seconds.
        """
        global _stale_directories_removed
        if not _stale_directories_removed:
            _stale_directories_removed = True
            remove_stale_directories()
        # IPC sockets in a private directory rather than TCP: no ports on the machine, and only this
        # user can reach the kernel (jupyter_client's TCP transport is unencrypted).
        self._directory = tempfile.TemporaryDirectory(prefix=_DIRECTORY_PREFIX)
        with open(os.path.join(self._directory.name, _OWNER_FILE), "w", encoding="utf-8") as file:
            json.dump(_owner(), file)
        manager = AsyncKernelManager(
            kernel_name=_KERNEL_NAME,
            kernel_spec_manager=_InterpreterSpecs(self.python),
            transport="ipc",
            ip=os.path.join(self._directory.name, "kernel"),
            connection_file=os.path.join(self._directory.name, "connection.json"),
        )
        # The kernel's own stdout/stderr (startup warnings, crashes) go to a log, not the user's terminal.
        self._log = open(os.path.join(self._directory.name, "kernel.log"), "w+b")
        self._manager = manager
        try:
            await manager.start_kernel(cwd=self.cwd, env={**os.environ, **self.env}, stdout=self._log, stderr=self._log)
            client = manager.client()
            client.start_channels()
            self._client = client
            await client.wait_for_ready(timeout=self.startup_timeout)
            self.kernel_id = manager.kernel_id
        except BaseException as error:
            log = self._log_tail()
            await self.shutdown()
            if not isinstance(error, Exception):
                raise
            detail = f"; the kernel said:\n{log}" if log else ""
            raise KernelError(f"could not start an IPython kernel with {self.python}: {error}. Check that ipykernel is installed for that interpreter{detail}") from error

    def _log_tail(self, limit: int = 2000) -> str:
        """The last ``limit`` characters the kernel process wrote to its stdout/stderr."""
        if self._log is None or self._log.closed:
            return ""
        self._log.flush()
        self._log.seek(0, os.SEEK_END)
        size = self._log.tell()
        self._log.seek(max(0, size - limit))
        return self._log.read().decode("utf-8", "replace").strip()

    @property
    def busy(self) -> bool:
        """True while a cell that ignored its interrupt may still be running."""
        return self._stuck_message_id is not None

    async def wait_until_idle(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for a stuck cell to finish; True when the kernel is free."""
        if self._stuck_message_id is None:
            return True
        assert self._client is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                message = await self._client.get_iopub_msg(timeout=min(_POLL_SECONDS, max(0.01, deadline - time.monotonic())))
            except queue.Empty:
                continue
            if message.get("parent_header", {}).get("msg_id") == self._stuck_message_id and message["msg_type"] == "status" and message["content"].get("execution_state") == "idle":
                self._stuck_message_id = None
                return True
        return False

    async def is_alive(self) -> bool:
        return self._manager is not None and await self._manager.is_alive()

    @property
    def directory(self) -> str:
        """The kernel's private directory (mode 0700), removed by :meth:`shutdown`."""
        if self._directory is None:
            raise KernelError("the kernel session is not started")
        return self._directory.name

    async def execute(self, code: str, timeout: float | None = 300.0, limits: OutputLimits | None = None, silent: bool = False, interrupt_grace: float = INTERRUPT_GRACE, on_start: Callable[[str], None] | None = None) -> CellResult:
        """Run ``code`` as one cell (top-level ``await`` allowed) and collect its output.

        Args:
            code: the cell.
            timeout: seconds before the kernel is interrupted (must be positive); ``None`` waits
                forever. A cell still running ``interrupt_grace`` seconds after the interrupt is
                ``"aborted"`` and the session stays :attr:`busy` until it finishes.
            limits: output caps (default :class:`OutputLimits`).
            silent: run without a history entry or ``Out[n]`` (for housekeeping cells).
            on_start: called with the cell's Jupyter message id once the cell is sent.

        Raises:
            KernelError: the session was not started.
            KernelBusyError: an earlier aborted cell still holds the kernel.
            ValueError: a timeout that is not a positive number.
        """
        if self._client is None or self._manager is None:
            raise KernelError("the kernel session is not started; use `async with KernelSession() as session`")
        if self._stuck_message_id is not None:
            raise KernelBusyError("an earlier cell ignored its interrupt and is still running; wait for it or restart the kernel")
        if timeout is not None and not (timeout > 0 and math.isfinite(timeout)):
            raise ValueError(f"timeout must be a positive number of seconds or None, got {timeout!r}")
        client, manager = self._client, self._manager
        output = CellOutput(limits or OutputLimits())
        # allow_stdin=False makes input() raise StdinNotImplementedError instead of hanging the cell.
        message_id = client.execute(code, silent=silent, store_history=not silent, allow_stdin=False)
        if on_start is not None:
            on_start(message_id)
        deadline = None if timeout is None else time.monotonic() + timeout
        interrupted = False
        while True:
            # The deadline is checked on every message, so a cell that prints continuously still times out.
            if deadline is not None and time.monotonic() > deadline:
                if interrupted:
                    self._stuck_message_id = message_id
                    evalue = f"the cell ran over {timeout:g} s and ignored the interrupt for {interrupt_grace:g} s; it may still be running"
                    return output.build("aborted", error={"ename": "Aborted", "evalue": evalue, "traceback": ""})
                await manager.interrupt_kernel()
                interrupted = True
                deadline = time.monotonic() + interrupt_grace
            try:
                message = await client.get_iopub_msg(timeout=_POLL_SECONDS)
            except queue.Empty:
                if not await manager.is_alive():
                    log = self._log_tail()
                    evalue = "the kernel process exited during the cell; its variables are gone" + (f". Its last output:\n{log}" if log else "")
                    return output.build("dead", error={"ename": "KernelDied", "evalue": evalue, "traceback": ""})
                continue
            if message.get("parent_header", {}).get("msg_id") != message_id:
                continue
            kind, content = message["msg_type"], message["content"]
            if kind == "status":
                if content.get("execution_state") == "idle":
                    break
                continue
            output.add(kind, content)
        reply = await self._shell_reply(message_id)
        execution_count = reply.get("execution_count")
        tool_calls = _tool_calls(reply)
        if output.error is None and reply.get("status") == "error":
            # The cell raised but no error reached iopub (it broke the streams that carry it): the
            # shell reply still says so.
            traceback = "\n".join(str(line) for line in reply.get("traceback") or [])
            return output.build("error", execution_count, error={"ename": str(reply.get("ename", "")), "evalue": str(reply.get("evalue", "")), "traceback": traceback}, tool_calls=tool_calls)
        if output.error is None:
            # The cell finished as the interrupt was sent; the interrupt may also have cut it short
            # without an exception (a very short timeout can land before user code runs). Say so.
            notice = "The time limit was reached as the cell finished; if its output looks incomplete, run it again with more time." if interrupted else ""
            return output.build("ok", execution_count, notice=notice, tool_calls=tool_calls)
        # A call interrupted inside a task the cell gathered surfaces as that task's cancellation.
        if interrupted and output.error["ename"] in ("KeyboardInterrupt", "CancelledError"):
            error = {**output.error, "ename": "Timeout", "evalue": f"the cell ran over {timeout:g} s and was interrupted"}
            return output.build("timeout", execution_count, error=error, tool_calls=tool_calls)
        return output.build("error", execution_count, tool_calls=tool_calls)

    async def _shell_reply(self, message_id: str) -> dict:
        """The content of the shell reply to ``message_id`` (status, execution count), ``{}`` if none comes."""
        assert self._client is not None
        try:
            while True:
                reply = await self._client.get_shell_msg(timeout=5.0)
                if reply.get("parent_header", {}).get("msg_id") == message_id:
                    return reply.get("content", {})
        except queue.Empty:
            return {}

    async def shutdown(self) -> None:
        """Stop the kernel and its channels and remove its private directory; safe to call twice."""
        client, manager, directory, log = self._client, self._manager, self._directory, self._log
        self._client = self._manager = self._directory = self._log = None
        self._stuck_message_id = None
        try:
            if client is not None:
                client.stop_channels()
            if manager is not None and manager.has_kernel:
                try:
                    await asyncio.wait_for(manager.shutdown_kernel(now=False), timeout=10.0)
                except (TimeoutError, RuntimeError):
                    await manager.shutdown_kernel(now=True)
        finally:
            if log is not None:
                log.close()
            if directory is not None:
                directory.cleanup()


#: Distinct tool-call targets kept from one reply, and their longest name: a cell could write any
#: payload, and a result must stay small.
_MAX_CALL_TARGETS = 1_000
_MAX_TARGET_CHARS = 300


def _tool_calls(reply: dict) -> dict[str, int]:
    """The completed tool calls a cell's execute reply reports (see :mod:`kernel.handles`); entries
    of any other shape are ignored, since the reply comes from code the cell could have replaced."""
    calls: dict[str, int] = {}
    for payload in reply.get("payload") or []:
        if isinstance(payload, dict) and payload.get("source") == TOOL_CALLS_PAYLOAD and isinstance(payload.get("tool_calls"), dict):
            for target, count in payload["tool_calls"].items():
                if isinstance(target, str) and len(target) <= _MAX_TARGET_CHARS and type(count) is int and count > 0 and (target in calls or len(calls) < _MAX_CALL_TARGETS):
                    calls[target] = calls.get(target, 0) + count
    return calls
