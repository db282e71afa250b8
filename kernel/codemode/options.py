"""CodeMode's options, grouped by the part of CodeMode each configures; each group checks itself.

:class:`toolpath.kernel.CodeMode` takes them as flat keyword arguments (its docstring documents
each) and hands each group to the part it configures: :class:`KernelLaunch` to whatever starts
kernels, :class:`CellPolicy` to cells, :class:`KernelCapacity` to the session pool,
:class:`SnapshotPolicy` to snapshots, :class:`BridgePolicy` to the bridges.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from toolpath.kernel.kernels.ipython_kernel import INTERRUPT_GRACE, IPythonKernel, check_kernel_options
from toolpath.kernel.kernels.output import OutputLimits
from toolpath.kernel.option_checks import check_count, check_flag, check_seconds

if TYPE_CHECKING:
    from toolpath.kernel.kernels.gateway import Gateway
    from toolpath.kernel.sandbox.provisioner import SandboxPolicy


@dataclass(frozen=True)
class CellPolicy:
    """How each cell runs: its time limit, what happens after it, and its output caps.

    Raises:
        ValueError: an unknown ``on_busy_kernel``, a negative or infinite number of seconds, or a
            ``timeout`` that is not positive.
        TypeError: a number of seconds that is not a number, or ``limits`` that are not :class:`OutputLimits`.
    """

    timeout: float | None = 300.0
    interrupt_grace: float = INTERRUPT_GRACE
    busy_wait: float = 5.0
    on_busy_kernel: Literal["wait", "restart"] = "wait"
    limits: OutputLimits = field(default_factory=OutputLimits)

    def __post_init__(self) -> None:
        if self.on_busy_kernel not in ("wait", "restart"):
            raise ValueError(f"on_busy_kernel must be 'wait' or 'restart', got {self.on_busy_kernel!r}")
        check_seconds("timeout", self.timeout, positive=True, allow_none=True)
        check_seconds("interrupt_grace", self.interrupt_grace)
        check_seconds("busy_wait", self.busy_wait)
        if not isinstance(self.limits, OutputLimits):
            raise TypeError(f"limits must be OutputLimits, got {self.limits!r}")


@dataclass(frozen=True)
class KernelLaunch:
    """Where and how each kernel starts, and what runs in it before its first cell.

    Raises:
        ValueError, TypeError: what :func:`toolpath.kernel.kernels.ipython_kernel.check_kernel_options` refuses.
        kernel.sandbox.provisioner.SandboxUnavailableError: ``sandbox`` on a machine without bubblewrap.
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
        check_kernel_options(self.python, self.cwd, self.env, self.kernel_name, self.gateway, self.sandbox, gateway_option="gateway_url")
        check_flag("allow_shell", self.allow_shell)
        if self.startup_code is not None and not isinstance(self.startup_code, str):
            raise TypeError(f"startup_code must be Python source text (or None), got {type(self.startup_code).__name__}")

    def kernel(self) -> IPythonKernel:
        """A new kernel (not started) as these options say."""
        return IPythonKernel(python=self.python, cwd=self.cwd, env=self.env, kernel_name=self.kernel_name, gateway=self.gateway, sandbox=self.sandbox)


@dataclass(frozen=True)
class KernelCapacity:
    """How many kernels live at once, and for how long an unused one stays.

    Raises:
        ValueError: a cap under 1, a negative ``pool_size``, or a negative or infinite ``idle_ttl``.
        TypeError: a cap or ``pool_size`` that is not a whole number, an ``idle_ttl`` that is not a number.
    """

    max_kernels: int | None = None
    max_kernels_per_user: int | None = None
    pool_size: int = 1
    idle_ttl: float = 1800.0

    def __post_init__(self) -> None:
        check_count("max_kernels", self.max_kernels, minimum=1, allow_none=True)
        check_count("max_kernels_per_user", self.max_kernels_per_user, minimum=1, allow_none=True)
        check_count("pool_size", self.pool_size)
        check_seconds("idle_ttl", self.idle_ttl)


@dataclass(frozen=True)
class SnapshotPolicy:
    """When a session's snapshot is written, and how much of it.

    Raises:
        ValueError: a negative number, or an infinite ``debounce``.
        TypeError: a size that is not a whole number, a ``debounce`` that is not a number.
    """

    debounce: float = 1.5
    max_variable_bytes: int = 2_000_000
    max_snapshot_bytes: int = 64_000_000
    #: Write the snapshot before each cell's result is returned, not ``debounce`` seconds later.
    after_each_cell: bool = False

    def __post_init__(self) -> None:
        check_seconds("snapshot_debounce", self.debounce)
        check_count("max_variable_bytes", self.max_variable_bytes)
        check_count("max_snapshot_bytes", self.max_snapshot_bytes)
        check_flag("snapshot_after_each_cell", self.after_each_cell)


@dataclass(frozen=True)
class BridgePolicy:
    """What host tools' results and arguments may cross the bridge, and where remote kernels reach it.

    Raises:
        ValueError: a negative ``max_result_bytes``.
        TypeError: a ``max_result_bytes`` that is not a whole number, an ``accept_pickles`` that is not a bool or None.
    """

    max_result_bytes: int = 1_000_000
    #: ``None``: pickles from plain local kernels, JSON only from sandboxed and remote ones.
    accept_pickles: bool | None = None
    address: tuple[str, int] = ("127.0.0.1", 0)
    listen: tuple[str, int] = ("127.0.0.1", 0)

    def __post_init__(self) -> None:
        check_count("max_result_bytes", self.max_result_bytes)
        if self.accept_pickles is not None:
            check_flag("accept_pickles", self.accept_pickles)


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
