"""CodeMode's options, grouped by the part of CodeMode each configures; each group checks itself.

:class:`toolpath.kernel.CodeMode` takes them as flat keyword arguments (its docstring documents
each) and hands each group to the part it configures: :class:`KernelLaunch` to whatever starts
kernels, :class:`CellPolicy` to cells, :class:`KernelCapacity` to the session pool,
:class:`SnapshotPolicy` to snapshots, :class:`BridgePolicy` to the bridges.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from toolpath.kernel.ipython_kernel import INTERRUPT_GRACE, IPythonKernel, check_kernel_placement
from toolpath.kernel.output import OutputLimits

if TYPE_CHECKING:
    from toolpath.kernel.gateway import Gateway
    from toolpath.kernel.sandbox import SandboxPolicy


def check_not_negative(**values: float) -> None:
    """Raises ``ValueError`` naming the first of ``values`` that is negative."""
    for name, value in values.items():
        if value < 0:
            raise ValueError(f"{name} must not be negative, got {value}")


@dataclass(frozen=True)
class CellPolicy:
    """How each cell runs: its time limit, what happens after it, and its output caps.

    Raises:
        ValueError: an unknown ``on_busy_kernel``, a negative number, or a ``timeout`` that is not positive.
    """

    timeout: float | None = 300.0
    interrupt_grace: float = INTERRUPT_GRACE
    busy_wait: float = 5.0
    on_busy_kernel: Literal["wait", "restart"] = "wait"
    limits: OutputLimits = field(default_factory=OutputLimits)

    def __post_init__(self) -> None:
        if self.on_busy_kernel not in ("wait", "restart"):
            raise ValueError(f"on_busy_kernel must be 'wait' or 'restart', got {self.on_busy_kernel!r}")
        check_not_negative(interrupt_grace=self.interrupt_grace, busy_wait=self.busy_wait)
        if self.timeout is not None and not self.timeout > 0:
            raise ValueError(f"timeout must be positive (or None), got {self.timeout}")


@dataclass(frozen=True)
class KernelLaunch:
    """Where and how each kernel starts, and what runs in it before its first cell.

    Raises:
        ValueError: the same combinations :class:`toolpath.kernel.ipython_kernel.IPythonKernel` refuses.
        kernel.sandbox.SandboxUnavailableError: ``sandbox`` on a machine without bubblewrap.
    """

    python: str | None = None
    cwd: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    startup_code: str | None = None
    allow_shell: bool = True
    kernel_name: str | None = None
    gateway: Gateway | None = None
    sandbox: SandboxPolicy | None = None

    def __post_init__(self) -> None:
        check_kernel_placement(self.python, self.cwd, self.kernel_name, self.gateway, self.sandbox, gateway_option="gateway_url")

    def kernel(self) -> IPythonKernel:
        """A new kernel (not started) as these options say."""
        return IPythonKernel(python=self.python, cwd=self.cwd, env=self.env, kernel_name=self.kernel_name, gateway=self.gateway, sandbox=self.sandbox)


@dataclass(frozen=True)
class KernelCapacity:
    """How many kernels live at once, and for how long an unused one stays.

    Raises:
        ValueError: a cap under 1, or a negative ``pool_size`` or ``idle_ttl``.
    """

    max_kernels: int | None = None
    max_kernels_per_user: int | None = None
    pool_size: int = 1
    idle_ttl: float = 1800.0

    def __post_init__(self) -> None:
        check_not_negative(pool_size=self.pool_size, idle_ttl=self.idle_ttl)
        for name, cap in (("max_kernels", self.max_kernels), ("max_kernels_per_user", self.max_kernels_per_user)):
            if cap is not None and cap < 1:
                raise ValueError(f"{name} must be at least 1 (or None), got {cap}")


@dataclass(frozen=True)
class SnapshotPolicy:
    """When a session's snapshot is written, and how much of it.

    Raises:
        ValueError: a negative number.
    """

    debounce: float = 1.5
    max_variable_bytes: int = 2_000_000
    max_snapshot_bytes: int = 64_000_000

    def __post_init__(self) -> None:
        check_not_negative(snapshot_debounce=self.debounce, max_variable_bytes=self.max_variable_bytes, max_snapshot_bytes=self.max_snapshot_bytes)


@dataclass(frozen=True)
class BridgePolicy:
    """What host tools' results and arguments may cross the bridge, and where remote kernels reach it.

    Raises:
        ValueError: a negative ``max_result_bytes``.
    """

    max_result_bytes: int = 1_000_000
    #: ``None``: pickles from plain local kernels, JSON only from sandboxed and remote ones.
    accept_pickles: bool | None = None
    address: tuple[str, int] = ("127.0.0.1", 0)
    listen: tuple[str, int] = ("127.0.0.1", 0)

    def __post_init__(self) -> None:
        check_not_negative(max_result_bytes=self.max_result_bytes)


def parse_host_port(text: str, what: str) -> tuple[str, int]:
    """``(host, port)`` from ``"host:port"`` (``"[::1]:7443"`` for IPv6).

    Raises:
        ValueError: no port, or a port outside 0–65535; the message names the option.
    """
    host, _, port = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not host or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"{what} must be 'host:port' (port 0 for a free one), like 127.0.0.1:0 or [::1]:7443, got {text!r}")
    return host, int(port)
