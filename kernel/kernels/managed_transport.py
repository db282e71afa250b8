"""ManagedTransport: a kernel started and reached through jupyter_client, here or where a provisioner puts it."""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING, Any

from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
from jupyter_client.manager import AsyncKernelManager
from jupyter_client.provisioning import LocalProvisioner

if TYPE_CHECKING:
    from toolpath.kernel.sandbox.provisioner import SandboxPolicy

_KERNEL_NAME = "toolpath-python"


class _InterpreterSpecs(KernelSpecManager):
    """A kernel-spec source with one spec: ipykernel on a given interpreter, whatever specs are
    installed; sandboxed by :mod:`toolpath.kernel.sandbox.provisioner`'s provisioner when given its config."""

    def __init__(self, python: str, sandbox: dict[str, Any] | None = None, **kwargs):
        super().__init__(**kwargs)
        self._python = python
        self._sandbox = sandbox

    def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
        if self._sandbox is None:
            return KernelSpec(argv=[self._python, "-m", "ipykernel_launcher", "-f", "{connection_file}"], display_name="toolpath (Python)", language="python")
        from toolpath.kernel.sandbox.provisioner import PROVISIONER_NAME

        return KernelSpec(
            argv=[self._python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            display_name="toolpath (Python, sandboxed)",
            language="python",
            interrupt_mode="message",  # a signal would reach bubblewrap, not the kernel
            metadata={"kernel_provisioner": {"provisioner_name": PROVISIONER_NAME, "config": {"policy": self._sandbox}}},
        )


class ManagedTransport:
    """A kernel started by jupyter_client's ``AsyncKernelManager`` and driven through its client:
    ipykernel on an interpreter over IPC sockets in ``directory``, or a kernelspec through the
    provisioner its ``metadata.kernel_provisioner`` names (jupyter_client's provisioner machinery;
    ``gateway_provisioners`` ships Kubernetes, Docker, YARN and SSH ones). A :class:`KernelTransport`.

    Args:
        directory: the kernel's private directory (its connection file, sockets and log).
        python: the interpreter of ipykernel, when no ``kernel_name`` is given.
        kernel_name: an installed kernelspec to start instead.
        sandbox: start ipykernel inside bubblewrap (:mod:`toolpath.kernel.sandbox.provisioner`).
        cwd: the kernel's working directory.
        env: the kernel's whole environment.
    """

    def __init__(self, directory: str, python: str, kernel_name: str | None, sandbox: SandboxPolicy | None, cwd: str | None, env: dict[str, str]):
        self._cwd = cwd
        self._env = env
        # The kernel's own stdout/stderr (startup warnings, crashes) go to a log, not the user's terminal.
        self._log = open(os.path.join(directory, "kernel.log"), "w+b")
        if kernel_name is None:
            # IPC sockets in a private directory rather than TCP: no ports on the machine, and only
            # this user can reach the kernel (jupyter_client's TCP transport is unencrypted).
            self.manager = AsyncKernelManager(
                kernel_name=_KERNEL_NAME,
                kernel_spec_manager=_InterpreterSpecs(python, None if sandbox is None else {**sandbox.to_config(), "directory": directory}),
                transport="ipc",
                ip=os.path.join(directory, "kernel"),
                connection_file=os.path.join(directory, "connection.json"),
            )
        else:
            # The kernelspec and its provisioner decide where the kernel runs and how it is reached.
            self.manager = AsyncKernelManager(kernel_name=kernel_name, connection_file=os.path.join(directory, "connection.json"))
        self.client: Any = None
        self.kernel_id: str | None = None

    @property
    def remote(self) -> bool:
        """True unless jupyter_client's local provisioner (or a subclass) launched the kernel here."""
        return self.manager.provisioner is not None and not isinstance(self.manager.provisioner, LocalProvisioner)

    async def start(self, timeout: float) -> None:
        await self.manager.start_kernel(cwd=self._cwd, env=self._env, stdout=self._log, stderr=self._log)
        self.client = self.manager.client()
        self.client.start_channels()
        await self.client.wait_for_ready(timeout=timeout)
        self.kernel_id = self.manager.kernel_id

    async def execute(
        self, code: str, silent: bool, store_history: bool, user_expressions: dict[str, str] | None = None, metadata: dict[str, Any] | None = None
    ) -> str:
        # Without stdin, input() in a cell raises at once instead of hanging it.
        if not metadata:
            return self.client.execute(code, silent=silent, store_history=store_history, user_expressions=user_expressions, allow_stdin=False)
        # KernelClient.execute sends no metadata: the same request, built as it builds it, with metadata.
        content = {
            "code": code,
            "silent": silent,
            "store_history": store_history,
            "user_expressions": user_expressions or {},
            "allow_stdin": False,
            "stop_on_error": True,
        }
        message = self.client.session.msg("execute_request", content, metadata=metadata)
        self.client.shell_channel.send(message)
        return message["header"]["msg_id"]

    async def send_shell(self, message_type: str, content: dict[str, Any]) -> str:
        message = self.client.session.msg(message_type, content)
        self.client.shell_channel.send(message)
        return message["header"]["msg_id"]

    async def get_iopub_msg(self, timeout: float) -> dict[str, Any]:
        return await self.client.get_iopub_msg(timeout=timeout)

    async def get_shell_msg(self, timeout: float) -> dict[str, Any]:
        return await self.client.get_shell_msg(timeout=timeout)

    async def interrupt(self) -> None:
        await self.manager.interrupt_kernel()

    def connection_lost(self) -> str:
        """ZMQ reconnects by itself: a local or provisioned kernel's channels are never lost."""
        return ""

    async def reconnect(self) -> None:
        """Nothing to do (see :meth:`connection_lost`)."""

    async def is_alive(self) -> bool:
        return await self.manager.is_alive()

    async def shutdown(self) -> None:
        try:
            if self.client is not None:
                self.client.stop_channels()
            if self.manager.has_kernel:
                try:
                    await asyncio.wait_for(self.manager.shutdown_kernel(now=False), timeout=10.0)
                except (TimeoutError, RuntimeError):
                    await self.manager.shutdown_kernel(now=True)
        finally:
            self._log.close()

    def log_tail(self, limit: int = 2000) -> str:
        """The last ``limit`` characters the kernel process wrote to its stdout/stderr."""
        if self._log.closed:
            return ""
        self._log.flush()
        self._log.seek(0, os.SEEK_END)
        size = self._log.tell()
        self._log.seek(max(0, size - limit))
        return self._log.read().decode("utf-8", "replace").strip()
