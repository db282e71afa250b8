"""Kernel provisioners for the tests, registered through a ``jupyter_client.kernel_provisioners``
entry point the way an installed package registers its own (see ``test_provisioners.py``).

Both mark the kernels they launch with ``TOOLPATH_TEST_PROVISIONER`` in the kernel's environment, so a
cell can tell which provisioner started it.
"""

from __future__ import annotations

import asyncio
import subprocess
from typing import Any

from jupyter_client.provisioning import KernelProvisionerBase, LocalProvisioner

MARK = "TOOLPATH_TEST_PROVISIONER"


class RecordingProvisioner(LocalProvisioner):
    """jupyter_client's local provisioner, marking its kernels: CodeMode treats them as local."""

    async def pre_launch(self, **kwargs: Any) -> dict[str, Any]:
        kwargs["env"] = {**kwargs.get("env", {}), MARK: "recording"}
        return await super().pre_launch(**kwargs)


class ElsewhereProvisioner(KernelProvisionerBase):
    """Launches the kernel as its own process reached over TCP, as remote provisioners (gateway_provisioners'
    Kubernetes, Docker, YARN and SSH ones) do on another host. It is no LocalProvisioner, so CodeMode
    treats its kernels as remote: the TLS bridge, JSON only, snapshot files over the channels."""

    process: subprocess.Popen | None = None

    @property
    def has_process(self) -> bool:
        return self.process is not None

    async def pre_launch(self, **kwargs: Any) -> dict[str, Any]:
        manager = self.parent
        manager.write_connection_file()
        self.connection_info = manager.get_connection_info()
        kwargs["env"] = {**kwargs.get("env", {}), MARK: "elsewhere"}
        return await super().pre_launch(cmd=manager.format_kernel_cmd(), **kwargs)

    async def launch_kernel(self, cmd: list[str], **kwargs: Any) -> dict[str, Any]:
        self.process = subprocess.Popen(cmd, env=kwargs.get("env"), cwd=kwargs.get("cwd"), stdout=kwargs.get("stdout"), stderr=kwargs.get("stderr"))
        return self.connection_info

    async def poll(self) -> int | None:
        return self.process.poll() if self.process is not None else 0

    async def wait(self) -> int | None:
        return await asyncio.to_thread(self.process.wait) if self.process is not None else 0

    async def send_signal(self, signum: int) -> None:
        if self.process is not None:
            self.process.send_signal(signum)

    async def kill(self, restart: bool = False) -> None:
        if self.process is not None:
            self.process.kill()

    async def terminate(self, restart: bool = False) -> None:
        if self.process is not None:
            self.process.terminate()

    async def cleanup(self, restart: bool = False) -> None:
        self.process = None
