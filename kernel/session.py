"""KernelSession: one ipykernel, started and driven through jupyter_client's public async API.

The session starts the kernel with a chosen interpreter (default: the running one, so the kernel
sees the same installed packages, toolpath's included), executes cells and collects what a person
would see: stdout, stderr, the ``Out[n]`` text, or the traceback. Leaving the ``async with`` block
always shuts the kernel down; the kernel also exits by itself if the host process dies, because
jupyter_client starts it with the parent-process watchdog ipykernel provides.
"""

from __future__ import annotations

import asyncio
import os
import queue
import re
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from typing import Literal

from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
from jupyter_client.manager import AsyncKernelManager

_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_POLL_SECONDS = 0.5
_KERNEL_NAME = "toolpath-python"


class KernelError(RuntimeError):
    """The kernel could not be started, or died; the message says what to check."""


@dataclass(frozen=True)
class CellResult:
    """What running one cell showed.

    Attributes:
        status: ``"ok"``, ``"error"`` (an exception), ``"timeout"`` (interrupted after the time
            limit) or ``"dead"`` (the kernel died during the cell).
        stdout / stderr: the streams, in order of arrival.
        result: the ``text/plain`` form of the cell's last expression (``Out[n]``), if any.
        error: ``{"ename", "evalue", "traceback"}`` for an exception (traceback without ANSI colours).
        execution_count: the kernel's ``In[n]`` number.
    """

    status: Literal["ok", "error", "timeout", "dead"]
    stdout: str = ""
    stderr: str = ""
    result: str | None = None
    error: dict | None = None
    execution_count: int | None = None

    def to_dict(self) -> dict:
        return asdict(self)


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

    Use as ``async with KernelSession() as session: result = await session.execute(code)``.
    """

    def __init__(self, python: str | None = None, cwd: str | None = None, env: dict[str, str] | None = None, startup_timeout: float = 60.0):
        self.python = python or sys.executable
        self.cwd = cwd or os.getcwd()
        self.env = env or {}
        self.startup_timeout = startup_timeout
        self._manager: AsyncKernelManager | None = None
        self._client = None
        self._socket_directory: tempfile.TemporaryDirectory | None = None

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
        # IPC sockets in a private directory rather than TCP: no ports on the machine, and only this
        # user can reach the kernel (jupyter_client's TCP transport is unencrypted).
        self._socket_directory = tempfile.TemporaryDirectory(prefix="toolpath-kernel-")
        manager = AsyncKernelManager(
            kernel_name=_KERNEL_NAME,
            kernel_spec_manager=_InterpreterSpecs(self.python),
            transport="ipc",
            ip=os.path.join(self._socket_directory.name, "kernel"),
        )
        environment = {**os.environ, **self.env}
        try:
            await manager.start_kernel(cwd=self.cwd, env=environment)
            client = manager.client()
            client.start_channels()
            try:
                await client.wait_for_ready(timeout=self.startup_timeout)
            except RuntimeError:
                client.stop_channels()
                raise
        except Exception as error:
            if manager.has_kernel:
                await manager.shutdown_kernel(now=True)
            self._socket_directory.cleanup()
            raise KernelError(f"could not start an IPython kernel with {self.python}: {error}. Check that ipykernel is installed for that interpreter.") from error
        self._manager, self._client = manager, client

    async def execute(self, code: str, timeout: float | None = 300.0) -> CellResult:
        """Run ``code`` as one cell (top-level ``await`` allowed) and collect its output.

        Args:
            code: the cell.
            timeout: seconds before the kernel is interrupted; ``None`` waits forever.

        Raises:
            KernelError: the session was not started.
        """
        if self._client is None or self._manager is None:
            raise KernelError("the kernel session is not started; use `async with KernelSession() as session`")
        client, manager = self._client, self._manager
        # allow_stdin=False makes input() raise StdinNotImplementedError instead of hanging the cell.
        message_id = client.execute(code, store_history=True, allow_stdin=False)
        stdout: list[str] = []
        stderr: list[str] = []
        result: str | None = None
        error: dict | None = None
        status: Literal["ok", "error", "timeout", "dead"] = "ok"
        deadline = None if timeout is None else time.monotonic() + timeout
        interrupted = False
        while True:
            try:
                message = await client.get_iopub_msg(timeout=_POLL_SECONDS)
            except queue.Empty:
                if not await manager.is_alive():
                    return CellResult("dead", "".join(stdout), "".join(stderr), result, {"ename": "KernelDied", "evalue": "the kernel process exited during the cell", "traceback": ""})
                if deadline is not None and time.monotonic() > deadline and not interrupted:
                    await manager.interrupt_kernel()
                    interrupted = True
                    # Give the interrupt a grace period to surface as KeyboardInterrupt.
                    deadline = time.monotonic() + 10.0
                elif interrupted and deadline is not None and time.monotonic() > deadline:
                    return CellResult("timeout", "".join(stdout), "".join(stderr), result, {"ename": "Timeout", "evalue": f"the cell ran over {timeout} s and ignored the interrupt", "traceback": ""})
                continue
            if message.get("parent_header", {}).get("msg_id") != message_id:
                continue
            kind, content = message["msg_type"], message["content"]
            if kind == "stream":
                (stdout if content.get("name") == "stdout" else stderr).append(content.get("text", ""))
            elif kind == "execute_result":
                result = content.get("data", {}).get("text/plain")
            elif kind == "error":
                status = "error"
                error = {
                    "ename": content.get("ename", ""),
                    "evalue": content.get("evalue", ""),
                    "traceback": _ANSI_ESCAPE.sub("", "\n".join(content.get("traceback", []))),
                }
            elif kind == "status" and content.get("execution_state") == "idle":
                break
        execution_count = await self._execution_count(message_id)
        if interrupted:
            status = "timeout"
            error = {**(error or {}), "ename": "Timeout", "evalue": f"the cell ran over {timeout} s and was interrupted"}
        return CellResult(status, "".join(stdout), "".join(stderr), result, error, execution_count)

    async def _execution_count(self, message_id: str) -> int | None:
        """Read the shell reply of ``message_id`` (it carries the execution count)."""
        assert self._client is not None
        try:
            while True:
                reply = await self._client.get_shell_msg(timeout=5.0)
                if reply.get("parent_header", {}).get("msg_id") == message_id:
                    return reply["content"].get("execution_count")
        except queue.Empty:
            return None

    async def shutdown(self) -> None:
        """Stop the kernel and its channels; safe to call twice."""
        client, manager, sockets = self._client, self._manager, self._socket_directory
        self._client = self._manager = self._socket_directory = None
        if client is not None:
            client.stop_channels()
        try:
            if manager is not None and manager.has_kernel:
                try:
                    await asyncio.wait_for(manager.shutdown_kernel(now=False), timeout=10.0)
                except (asyncio.TimeoutError, RuntimeError):
                    await manager.shutdown_kernel(now=True)
        finally:
            if sockets is not None:
                sockets.cleanup()
