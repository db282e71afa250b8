"""IPythonKernel: one IPython kernel, started and driven through public APIs.

It starts the kernel with a chosen interpreter (default: the running one, so the kernel
sees the same installed packages, toolpath's included), executes cells and collects what a person
would see: stdout, stderr, the ``Out[n]`` text, or the traceback. Leaving the ``async with`` block
always shuts the kernel down; a local kernel also exits by itself if the host process dies, because
jupyter_client starts it with the parent-process watchdog ipykernel provides.

Where the kernel runs: on this machine through jupyter_client's ``AsyncKernelManager`` (default),
wherever an installed kernelspec's provisioner puts it (``kernel_name``), or on a Jupyter Kernel
Gateway or Enterprise Gateway (``gateway``, :mod:`toolpath.kernel.kernels.gateway`). The cell protocol is the same.

How it reaches the kernel is a :class:`~toolpath.kernel.kernels.transport.KernelTransport`; each local kernel
has a private directory (:mod:`toolpath.kernel.kernels.private_directories`).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import math
import os
import posixpath
import queue
import sys
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from toolpath.kernel.errors import KernelBusyError, KernelError
from toolpath.kernel.inside.protocol import COMM_TARGET, FILES_MODULE
from toolpath.kernel.kernels import directory_files
from toolpath.kernel.kernels.cell_messages import POLL_SECONDS, VARIABLES_EXPRESSION, finished_result, shell_reply, traced_calls, until_idle
from toolpath.kernel.kernels.managed_transport import ManagedTransport
from toolpath.kernel.kernels.output import CellOutput, CellResult, OutputLimits
from toolpath.kernel.kernels.private_directories import new_private_directory, remove_directory
from toolpath.kernel.kernels.transport import KernelTransport
from toolpath.observability.cell_spans import execute_metadata
from toolpath.observability.tool_spans import kernel_call_spans

if TYPE_CHECKING:
    from toolpath.kernel.kernels.gateway import Gateway
    from toolpath.kernel.sandbox.provisioner import SandboxPolicy

#: Seconds a cell gets to stop after its timeout interrupt before it is reported as stuck.
INTERRUPT_GRACE = 10.0
#: Seconds a remote kernel gets to take or send one file.
_TRANSFER_SECONDS = 300.0
#: Bytes of a file carried by one message to or from a remote kernel: about 1.4 MB of base64 per
#: message, well under the 10 MiB a gateway's WebSocket accepts by default (Tornado's).
TRANSFER_CHUNK_BYTES = 1 << 20
_TRANSFER_LIMITS = OutputLimits(max_output_chars=4 * TRANSFER_CHUNK_BYTES)


def check_kernel_options(
    python: str | None,
    cwd: str | None,
    env: dict[str, str],
    kernel_name: str | None,
    gateway: Gateway | None,
    sandbox: SandboxPolicy | None,
    gateway_option: str = "gateway",
) -> None:
    """Refuse kernel options that cannot work, before any kernel starts; messages call the gateway ``gateway_option``.

    Raises:
        ValueError: ``python`` with ``kernel_name`` or ``gateway`` (the kernelspec names the
            interpreter), ``cwd`` with ``gateway`` (the gateway chooses it), ``sandbox`` with
            ``kernel_name`` or ``gateway``, or a ``cwd`` that is not a directory here (for a kernel
            started here).
        TypeError: ``env`` that is not a mapping of strings to strings; a ``gateway`` that is not a
            :class:`toolpath.kernel.kernels.gateway.Gateway`, a ``sandbox`` that is not a
            :class:`toolpath.kernel.sandbox.provisioner.SandboxPolicy`.
        kernel.sandbox.provisioner.SandboxUnavailableError: ``sandbox`` on a machine without bubblewrap (now,
            not at the first cell).
    """
    if gateway is not None:
        from toolpath.kernel.kernels.gateway import Gateway

        if not isinstance(gateway, Gateway):
            raise TypeError(
                f"the gateway must be a toolpath.kernel.kernels.gateway.Gateway (its URL, token and kernelspec), got {type(gateway).__name__} {gateway!r}; "
                f"a URL alone is given as {gateway_option}=..."
            )
    if sandbox is not None:
        from toolpath.kernel.sandbox.provisioner import SandboxPolicy

        if not isinstance(sandbox, SandboxPolicy):
            raise TypeError(f"sandbox must be a toolpath.SandboxPolicy (or None), got {type(sandbox).__name__} {sandbox!r}")
    if python is not None and (kernel_name is not None or gateway is not None):
        raise ValueError(f"python cannot be combined with kernel_name or {gateway_option}: the kernelspec names the kernels' interpreter")
    if sandbox is not None and (kernel_name is not None or gateway is not None):
        raise ValueError(
            f"sandbox applies to kernels this process starts itself, not with kernel_name or {gateway_option} (their kernels run where the kernelspec or gateway says)"
        )
    if sandbox is not None:
        from toolpath.kernel.sandbox.provisioner import bwrap_path

        bwrap_path()
    if cwd is not None and gateway is not None:
        raise ValueError(
            "cwd cannot be set for gateway kernels: the gateway chooses their working directory (Enterprise Gateway reads KERNEL_WORKING_DIR from env)"
        )
    if cwd is not None and kernel_name is None and not os.path.isdir(cwd):
        raise ValueError(f"cwd {cwd!r} is not a directory on this machine; give the kernels' working directory, or None for the current one")
    if not isinstance(env, dict):
        raise TypeError(f"env must be a dict of environment variables, got {type(env).__name__}")
    wrong = next(((name, value) for name, value in env.items() if not isinstance(name, str) or not isinstance(value, str)), None)
    if wrong is not None:
        raise TypeError(f"env values and names must be strings, got {wrong[0]!r}: {wrong[1]!r}; pass str(value)")


def check_code(code: object) -> None:
    """A cell's code: text that UTF-8 can carry (the Jupyter wire format).

    Raises:
        TypeError: not a ``str``.
        ValueError: a lone surrogate in it, naming its position.
    """
    if not isinstance(code, str):
        raise TypeError(f"a cell's code must be a str of Python source, got {type(code).__name__}")
    try:
        code.encode()
    except UnicodeEncodeError as error:
        raise ValueError(
            f"the cell's code is not valid Unicode text: it has a lone surrogate at position {error.start} (write it as an escape, e.g. '\\ud800')"
        ) from None


class IPythonKernel:
    """A running IPython kernel (one per CodeMode session).

    Args:
        python: the kernel's interpreter; default ``sys.executable``.
        cwd: the kernel's working directory (and first entry of its import path); default the
            current directory.
        env: variables laid over the host's environment for the kernel (a gateway kernel gets these
            alone: the gateway passes on the ones its configuration allows, and ``KERNEL_*`` ones).
        startup_timeout: seconds to wait for the kernel to answer after starting.
        kernel_name: start this installed kernelspec instead, through jupyter_client's provisioner
            machinery (its ``metadata.kernel_provisioner``); with ``gateway``, the gateway's kernelspec.
        gateway: start the kernel on this :class:`toolpath.kernel.kernels.gateway.Gateway` instead of on this machine.
        sandbox: start the local kernel inside bubblewrap with this
            :class:`toolpath.kernel.sandbox.provisioner.SandboxPolicy` (see :mod:`toolpath.kernel.sandbox.provisioner`): it sees none of the
            host's files but the Python environment, gets none of its environment but ``env`` and
            runs in a private home (its working directory, whatever ``cwd`` says).

    Raises:
        ValueError, TypeError, kernel.sandbox.provisioner.SandboxUnavailableError: options that cannot work
            (:func:`check_kernel_options`).

    A local kernel's sockets, connection file (it holds the kernel's key) and output log live in a
    private temporary directory that :meth:`shutdown` removes. A :attr:`remote` kernel (on a gateway,
    or launched elsewhere by a provisioner) gets its private directory on its own host, and files
    move in and out of it over its Jupyter channels (:meth:`write_file`, :meth:`take_file`); it
    needs toolpath installed where it runs.

    Use as ``async with IPythonKernel() as kernel: result = await kernel.execute(code)``.
    """

    def __init__(
        self,
        python: str | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        startup_timeout: float = 60.0,
        kernel_name: str | None = None,
        gateway: Gateway | None = None,
        sandbox: SandboxPolicy | None = None,
    ):
        check_kernel_options(python, cwd, env or {}, kernel_name, gateway, sandbox)
        self.python = python or sys.executable
        self.cwd = cwd if gateway is not None else cwd or os.getcwd()
        self.env = env or {}
        self.startup_timeout = startup_timeout
        self.kernel_name = kernel_name
        self.gateway = gateway
        self.sandbox = sandbox
        self._kernel: KernelTransport | None = None
        self._directory: str | None = None
        self._kernel_directory = ""
        self._stuck_message_id: str | None = None
        # One reader of the kernel's channels at a time: two coroutines receiving on one ZeroMQ
        # socket can leave one waiting forever for a message the other took.
        self._channels = asyncio.Lock()
        #: The kernel's id (jupyter_client's, or the gateway's), set once it has started; a restarted kernel is a new kernel with a new id.
        self.kernel_id: str | None = None

    async def __aenter__(self) -> IPythonKernel:
        await self.start()
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self.shutdown()

    @property
    def started(self) -> bool:
        return self._kernel is not None and self.kernel_id is not None

    @property
    def remote(self) -> bool:
        """True when the kernel may run on another host (a gateway kernel, or one a non-local
        provisioner launched): it shares no files with this process."""
        return self._kernel is not None and self._kernel.remote

    async def start(self) -> None:
        """Start the kernel and wait until it answers.

        Raises:
            KernelError: the kernel did not start or answer within ``startup_timeout`` seconds, or a
                remote kernel cannot import toolpath.
        """
        try:
            if self.gateway is not None:
                from toolpath.kernel.kernels.gateway import GatewayTransport

                self._kernel = GatewayTransport(self.gateway, self.env)
            else:
                root = None
                if self.sandbox is not None:
                    from toolpath.kernel.sandbox.provisioner import private_directory_root

                    root = private_directory_root()
                self._directory = new_private_directory(root)
                # A sandboxed kernel gets only what it is given (the provisioner adds locale and PATH).
                env = dict(self.env) if self.sandbox is not None else {**os.environ, **self.env}
                self._kernel = ManagedTransport(self._directory, self.python, self.kernel_name, self.sandbox, self.cwd, env)
            await self._kernel.start(self.startup_timeout)
            self.kernel_id = self._kernel.kernel_id
            if self._kernel.remote:
                self._kernel_directory = await self._remote_directory()
            else:
                assert self._directory is not None
                self._kernel_directory = self._directory
        except BaseException as error:
            log = self._kernel.log_tail() if self._kernel is not None else ""
            await self.shutdown()
            if not isinstance(error, Exception) or isinstance(error, KernelError):
                raise
            if self.gateway is not None:
                where, check = f"on the gateway at {self.gateway.url}", "Check the gateway's log"
            elif self.kernel_name is not None:
                where, check = f"from kernelspec {self.kernel_name!r}", "Check the kernelspec (jupyter kernelspec list) and its provisioner"
            else:
                where, check = f"with {self.python}", "Check that ipykernel is installed for that interpreter"
            detail = f"; the kernel said:\n{log}" if log else ""
            raise KernelError(f"could not start an IPython kernel {where}: {type(error).__name__}: {error}. {check}{detail}") from error

    async def attach(self, kernel_id: str) -> bool:
        """Take over kernel ``kernel_id`` on this kernel's gateway, left running by another process,
        instead of starting one; ``False`` (nothing held) when the gateway no longer has it.

        Raises:
            ValueError: this kernel is not on a gateway.
            KernelError: the gateway cannot be reached, or the kernel does not answer or cannot run
                toolpath's kernel code; the kernel is left running on the gateway.
        """
        if self.gateway is None:
            raise ValueError("only a kernel on a gateway can be attached to")
        from toolpath.kernel.kernels.gateway import GatewayTransport

        transport = GatewayTransport(self.gateway, self.env)
        if not await transport.attach(kernel_id, self.startup_timeout):
            return False
        self._kernel = transport
        try:
            self.kernel_id = kernel_id
            self._kernel_directory = await self._remote_directory()
        except BaseException:
            self._kernel, self.kernel_id = None, None
            await transport.detach()
            raise
        return True

    async def detach(self) -> None:
        """Let go of the kernel without stopping it when it is on a gateway (another process may
        attach to it); a kernel of this machine is shut down."""
        if self.gateway is None or self._kernel is None:
            await self.shutdown()
            return
        from toolpath.kernel.kernels.gateway import GatewayTransport

        transport, self._kernel = self._kernel, None
        self._stuck_message_id, self._kernel_directory = None, ""
        assert isinstance(transport, GatewayTransport)
        await transport.detach()

    async def _remote_directory(self) -> str:
        """Create the remote kernel's private directory (this also checks toolpath is importable there)."""
        reply = await self._file_call(
            "create_directory()",
            "the remote kernel cannot run toolpath's kernel code; install toolpath where the kernel runs (in its image, for Enterprise Gateway)",
        )
        return reply["directory"]

    @property
    def busy(self) -> bool:
        """True while a cell that ignored its interrupt may still be running."""
        return self._stuck_message_id is not None

    async def wait_until_idle(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds (a cell of another caller running meanwhile included) for a
        stuck cell to finish; True when the kernel is free."""
        deadline = time.monotonic() + timeout
        try:
            async with asyncio.timeout(timeout):
                await self._channels.acquire()
        except TimeoutError:
            return False
        try:
            if self._stuck_message_id is None:
                return True
            if not await until_idle(self._kernel, self._stuck_message_id, deadline - time.monotonic()):
                return False
            self._stuck_message_id = None
            return True
        finally:
            self._channels.release()

    async def is_alive(self) -> bool:
        return self._kernel is not None and await self._kernel.is_alive()

    @property
    def directory(self) -> str:
        """The kernel's private directory on this host (mode 0700; its connection file, and for a
        local kernel its sockets), removed by :meth:`shutdown`.

        Raises:
            KernelError: the kernel is not started, or runs on a gateway.
        """
        if self._directory is None:
            raise KernelError("the kernel is not started" if self._kernel is None else "a gateway kernel has no directory on this host")
        return self._directory

    def path(self, name: str) -> str:
        """Where the kernel sees file ``name`` of its private directory (on the kernel's host)."""
        if not self._kernel_directory:
            raise KernelError("the kernel is not started")
        return posixpath.join(self._kernel_directory, name) if self.remote else os.path.join(self._kernel_directory, name)

    async def write_file(self, name: str, data: bytes) -> None:
        """Write ``data`` to file ``name`` of the kernel's private directory, readable by its user only,
        replacing whatever the kernel left at that name (a link is replaced, never written through:
        :func:`toolpath.kernel.kernels.directory_files.write_replacing`).

        A remote kernel receives it as comm messages of :data:`TRANSFER_CHUNK_BYTES` each (see
        :mod:`toolpath.kernel.inside.files`), then says how many bytes it wrote.

        Raises:
            UnsafeKernelFileError: the kernel left a directory at ``name``.
            KernelError: a remote kernel failed to store a chunk.
            OSError: a local file could not be written.
        """
        if not self.remote:
            await asyncio.to_thread(directory_files.write_replacing, self._kernel_directory, name, data)
            return
        async with self._channels:
            assert self._kernel is not None
            comm_id = uuid.uuid4().hex
            await self._kernel.send_shell("comm_open", {"comm_id": comm_id, "target_name": COMM_TARGET, "data": {"name": name}})
            for start in range(0, len(data), TRANSFER_CHUNK_BYTES):
                await self._kernel.send_shell(
                    "comm_msg", {"comm_id": comm_id, "data": {"chunk": base64.b64encode(data[start : start + TRANSFER_CHUNK_BYTES]).decode()}}
                )
            closed = await self._kernel.send_shell("comm_close", {"comm_id": comm_id, "data": {}})
            # The kernel handles shell messages in order: once the close is done, every chunk is written.
            taken = await until_idle(self._kernel, closed, _TRANSFER_SECONDS)
        if not taken:
            raise KernelError(f"the remote kernel did not take file {name} (it is gone, its channels closed, or it took over {_TRANSFER_SECONDS:g} s)")
        written = await self._file_call(f"size({name!r})")
        if written["size"] != len(data):
            raise KernelError(f"the remote kernel wrote {written['size']:,} of the {len(data):,} bytes of file {name}; see the kernel's log")

    async def take_file(self, name: str, max_bytes: int) -> bytes:
        """Read file ``name`` of the kernel's private directory and remove it. The kernel's code
        chose what is there: a local file is read only when it is a regular file of at most
        ``max_bytes`` (:func:`toolpath.kernel.kernels.directory_files.read_and_remove`), and a remote
        kernel may send at most ``max_bytes``.

        Raises:
            UnsafeKernelFileError: a local file that is not a regular file of its own (a link, a
                FIFO, ...), or over ``max_bytes``; or a remote kernel that sent more.
            KernelError: a remote kernel could not send it (the message says why).
            OSError: a local file could not be read.
        """
        if not self.remote:
            return await asyncio.to_thread(directory_files.read_and_remove, self._kernel_directory, name, max_bytes)
        chunks = []
        offset = 0
        while True:
            answer = await self._file_call(f"send({name!r}, {offset}, {TRANSFER_CHUNK_BYTES})")
            if not isinstance(answer.get("size"), int) or not isinstance(answer.get("data"), str):
                raise KernelError(f"the remote kernel's answer for file {name} is not a chunk (size and data)")
            if answer["size"] > max_bytes:
                raise directory_files.UnsafeKernelFileError(f"the kernel's file {name} has {answer['size']:,} bytes, over the {max_bytes:,} the host reads")
            chunk = base64.b64decode(answer["data"])
            chunks.append(chunk)
            offset += len(chunk)
            if offset > max_bytes:
                raise directory_files.UnsafeKernelFileError(f"the kernel sent over the {max_bytes:,} bytes the host reads of its file {name}")
            if offset >= answer["size"] or not chunk:
                break
        await self._file_call(f"remove({name!r})")
        return b"".join(chunks)

    async def _file_call(self, call: str, failure: str = "moving a file to or from the remote kernel failed") -> dict:
        """Run ``toolpath.kernel.inside.files.<call>`` in a silent cell; its JSON answer.

        Raises:
            KernelError: ``failure``, and why: the cell failed, its answer did not arrive, or it is
                an ``{"error": ...}``.
        """
        answer = await self.execute(
            f"import {FILES_MODULE} as _toolpath_files\n_toolpath_files.{call}\ndel _toolpath_files",
            timeout=_TRANSFER_SECONDS,
            silent=True,
            limits=_TRANSFER_LIMITS,
        )
        if answer.status != "ok":
            raise KernelError(f"{failure} ({_error_line(answer)})")
        lines = answer.stdout.strip().splitlines()
        if not lines:
            dropped = f" ({answer.stderr.strip()[:200]})" if answer.stderr.strip() else ""
            raise KernelError(
                f"{failure}: the kernel's answer did not arrive{dropped}; a gateway drops output over its IOPub data rate limit: set it higher, or to 0 (Kernel Gateway: --ZMQChannelsWebsocketConnection.iopub_data_rate_limit=0)"
            )
        reply = json.loads(lines[-1])
        if "error" in reply:
            raise KernelError(f"{failure}: {reply['error']}")
        return reply

    async def execute(
        self,
        code: str,
        timeout: float | None = 300.0,
        limits: OutputLimits | None = None,
        silent: bool = False,
        interrupt_grace: float = INTERRUPT_GRACE,
        on_start: Callable[[str], None] | None = None,
        report_variables: bool = False,
    ) -> CellResult:
        """Run ``code`` as one cell (top-level ``await`` allowed) and collect its output.

        Cells executed at once run one after another, in the order their calls began (a timeout
        counts from a cell's own start).

        Args:
            code: the cell.
            timeout: seconds before the kernel is interrupted (must be positive); ``None`` waits
                forever. A cell still running ``interrupt_grace`` seconds after the interrupt is
                ``"aborted"`` and the kernel stays :attr:`busy` until it finishes.
            limits: output caps (default :class:`OutputLimits`).
            silent: run without a history entry or ``Out[n]`` (for housekeeping cells).
            on_start: called with the cell's Jupyter message id once the cell is sent.
            report_variables: ask for the kernel's variable names after the cell in its execute
                reply (Jupyter's ``user_expressions``, evaluated when the cell succeeds):
                :attr:`CellResult.variables`, with no second cell.

        Raises:
            KernelError: the kernel was not started.
            KernelBusyError: an earlier aborted cell still holds the kernel.
            ValueError: a timeout that is not a positive number, or code with a lone surrogate.
            TypeError: code that is not a ``str``.
        """
        check_code(code)
        if timeout is not None and not (timeout > 0 and math.isfinite(timeout)):
            raise ValueError(f"timeout must be a positive number of seconds or None, got {timeout!r}")
        async with self._channels:
            return await self._run_cell(code, timeout, limits, silent, interrupt_grace, on_start, report_variables)

    async def _run_cell(
        self,
        code: str,
        timeout: float | None,
        limits: OutputLimits | None,
        silent: bool,
        interrupt_grace: float,
        on_start: Callable[[str], None] | None,
        report_variables: bool,
    ) -> CellResult:
        """:meth:`execute`, its caller holding the channels."""
        # Checked here, not before the wait: the kernel may have stopped, or the cell before this one stuck, meanwhile.
        if self._kernel is None or self.kernel_id is None:
            raise KernelError("the kernel is not running (never started, or shut down); use `async with IPythonKernel() as kernel`")
        if self._stuck_message_id is not None:
            raise KernelBusyError("an earlier cell ignored its interrupt and is still running; wait for it or restart the kernel")
        kernel = self._kernel
        output = CellOutput(limits or OutputLimits())
        expressions = VARIABLES_EXPRESSION if report_variables else None
        message_id = await kernel.execute(code, silent=silent, store_history=not silent, user_expressions=expressions, metadata=execute_metadata(silent))
        if on_start is not None:
            on_start(message_id)
        deadline = None if timeout is None else time.monotonic() + timeout
        interrupted = False
        try:
            while True:
                # The deadline is checked on every message, so a cell that prints continuously still times out.
                if deadline is not None and time.monotonic() > deadline:
                    if interrupted:
                        self._stuck_message_id = message_id
                        evalue = f"the cell ran over {timeout:g} s and ignored the interrupt for {interrupt_grace:g} s; it may still be running"
                        return output.build("aborted", error={"ename": "Aborted", "evalue": evalue, "traceback": ""})
                    await kernel.interrupt()
                    interrupted = True
                    deadline = time.monotonic() + interrupt_grace
                try:
                    message = await kernel.get_iopub_msg(timeout=POLL_SECONDS)
                except queue.Empty:
                    if not await kernel.is_alive():
                        log = kernel.log_tail()
                        evalue = "the kernel process exited during the cell; its variables are gone" + (f". Its last output:\n{log}" if log else "")
                        return output.build("dead", error={"ename": "KernelDied", "evalue": evalue, "traceback": ""})
                    lost = kernel.connection_lost()
                    if lost:
                        await kernel.reconnect()
                        evalue = f"{lost}; the kernel is still running and keeps its variables, but this cell's output is lost, and the cell may not have run (a gateway closes the connection on a message over its size limit, 10 MiB by default)"
                        return output.build("error", error={"ename": "ConnectionLost", "evalue": evalue, "traceback": ""})
                    continue
                if message.get("parent_header", {}).get("msg_id") != message_id:
                    continue
                kind, content = message["msg_type"], message["content"]
                if kind == "status":
                    if content.get("execution_state") == "idle":
                        break
                    continue
                output.add(kind, content)
        except asyncio.CancelledError:
            if self._kernel is not kernel and not asyncio.current_task().cancelling():  # type: ignore[union-attr]
                # shutdown() closed the channels under the cell; no one cancelled its caller.
                evalue = "the kernel was shut down while the cell ran; its variables are gone"
                return output.build("dead", error={"ename": "KernelShutDown", "evalue": evalue, "traceback": ""})
            # Whoever awaited the cell is gone (a client that disconnected, a cancelled task): the
            # cell is stopped rather than left running for no one, holding the kernel.
            with contextlib.suppress(Exception):
                await asyncio.shield(self._stop_cell(message_id, interrupt_grace))
            raise

        reply = await shell_reply(kernel, message_id)
        kernel_call_spans(traced_calls(reply))  # the cell's calls of tools bound in the kernel, under its span
        return finished_result(output, reply, interrupted, timeout, report_variables)

    async def _stop_cell(self, message_id: str, interrupt_grace: float) -> None:
        """Interrupt the running cell ``message_id`` and wait up to ``interrupt_grace`` seconds for
        it to end: a cell sent while it still unwinds would be skipped by the kernel (Jupyter aborts
        requests queued behind a failing one). One still running then holds the kernel (:attr:`busy`)."""
        assert self._kernel is not None
        await self._kernel.interrupt()
        if not await until_idle(self._kernel, message_id, interrupt_grace):
            self._stuck_message_id = message_id

    async def shutdown(self) -> None:
        """Stop the kernel and its channels and remove its private directory; safe to call twice."""
        kernel, directory = self._kernel, self._directory
        self._kernel = self._directory = None
        self._stuck_message_id = None
        self._kernel_directory = ""
        try:
            if kernel is not None:
                await kernel.shutdown()
        finally:
            if directory is not None:
                remove_directory(directory)


def _error_line(result: CellResult) -> str:
    """A failed housekeeping cell's exception in one line."""
    if result.error:
        return f"{result.error.get('ename')}: {result.error.get('evalue')}"[:300]
    return result.status
