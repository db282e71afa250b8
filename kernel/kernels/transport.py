"""KernelTransport: how :class:`toolpath.kernel.kernels.ipython_kernel.IPythonKernel` reaches one kernel.

Two transports implement it: :class:`toolpath.kernel.kernels.managed_transport.ManagedTransport` (a kernel
jupyter_client starts, here or wherever a kernelspec's provisioner puts it, over ZMQ) and
:class:`toolpath.kernel.kernels.gateway.GatewayTransport` (a kernel on a Jupyter Kernel or Enterprise
Gateway, over REST and a WebSocket). The session speaks the Jupyter messaging protocol through
either alike: cells, interrupts, files, and detecting a dead kernel or lost channels.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class KernelTransport(Protocol):
    """One kernel's lifecycle and Jupyter channels.

    Attributes:
        kernel_id: the kernel's id, once :meth:`start` returned (jupyter_client's or the gateway's).
        remote: the kernel may run on another host and shares no files with this process.
    """

    kernel_id: str | None

    @property
    def remote(self) -> bool: ...

    async def start(self, timeout: float) -> None:
        """Start the kernel and wait up to ``timeout`` seconds until it answers.

        Raises:
            KernelError: (gateway) the gateway refused or failed, with why; other exceptions
                (jupyter_client's) are worded by the session.
        """

    async def execute(
        self, code: str, silent: bool, store_history: bool, user_expressions: dict[str, str] | None = None, metadata: dict[str, Any] | None = None
    ) -> str:
        """Send an ``execute_request`` without stdin (``input()`` raises at once); its message id.
        ``user_expressions`` (Jupyter's ``{name: expression}``) are evaluated after a cell that
        succeeds, and answered in its execute reply; ``metadata`` goes in the message's metadata
        (a traced cell's trace context, :mod:`toolpath.kernel.inside.call_traces`)."""

    async def send_shell(self, message_type: str, content: dict[str, Any]) -> str:
        """Send any shell-channel message (comm messages carry files); its message id."""

    async def get_iopub_msg(self, timeout: float) -> dict[str, Any]:
        """The next IOPub message. Raises ``queue.Empty`` when none arrives within ``timeout`` seconds."""

    async def get_shell_msg(self, timeout: float) -> dict[str, Any]:
        """The next shell reply. Raises ``queue.Empty`` when none arrives within ``timeout`` seconds."""

    async def interrupt(self) -> None:
        """Interrupt the running cell (a signal or an ``interrupt_request``, as the kernelspec says)."""

    def connection_lost(self) -> str:
        """Why the channels closed while the kernel may still run; ``""`` while they are open."""

    async def reconnect(self) -> None:
        """Open the channels again after :meth:`connection_lost`; messages sent meanwhile are lost."""

    async def is_alive(self) -> bool:
        """Whether the kernel is still running."""

    async def shutdown(self) -> None:
        """Stop the kernel and close its channels; best effort, safe to call twice."""

    def log_tail(self, limit: int = 2000) -> str:
        """The last ``limit`` characters the kernel process wrote to its stdout/stderr, where this
        process can see them (``""`` otherwise)."""
