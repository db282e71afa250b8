"""CodeMode's options, grouped by the part of CodeMode each configures; each group checks itself.

:class:`toolpath.kernel.CodeMode` takes each group whole (``cells=CellPolicy(timeout=60)``) or its
fields as flat keywords, a shorthand (``timeout=60``; :data:`SHORTHAND` says which keyword sets
which field), and hands each group to the part it configures: :class:`KernelLaunch` to whatever
starts kernels, :class:`CellPolicy` to cells, :class:`KernelCapacity` to the session pool,
:class:`SnapshotPolicy` to snapshots, :class:`BridgePolicy` to the bridges.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import TYPE_CHECKING, Any, Literal

from toolpath.kernel.kernels.ipython_kernel import INTERRUPT_GRACE, IPythonKernel, check_kernel_options
from toolpath.kernel.kernels.output import OutputLimits
from toolpath.kernel.option_checks import check_count, check_flag, check_seconds

if TYPE_CHECKING:
    from toolpath.kernel.kernels.gateway import Gateway
    from toolpath.kernel.sandbox.provisioner import SandboxPolicy


@dataclass(frozen=True)
class CellPolicy:
    """How each cell runs: its time limit, what happens after it, and its output caps.

    Attributes:
        timeout: seconds before a cell is interrupted; ``None`` waits forever.
        interrupt_grace: seconds a timed-out cell gets to stop after the interrupt before it is
            reported ``"aborted"``.
        busy_wait: seconds a cell waits for an earlier aborted cell to finish.
        on_busy_kernel: what becomes of a cell that ignores its interrupt (``interrupt_grace``):
            ``"wait"`` keeps its kernel, and the next cell reports busy after ``busy_wait`` seconds;
            ``"restart"`` stops its kernel at once (the next cell gets a fresh kernel with the
            session's last snapshot), so that it spins no core meanwhile.
        limits: output caps per cell (:class:`toolpath.kernel.OutputLimits`).

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

    Attributes:
        python: the kernels' interpreter; default the running one.
        cwd: the kernels' working directory; default the current one.
        env: variables laid over the process environment for the kernels.
        startup_code: Python run in every new kernel before its first cell.
        allow_shell: keep ``%%bash`` and ``!`` shell escapes; ``False`` removes them (this keeps a
            model on Python; it is **not** a security boundary: ``subprocess`` still works).
        kernel_name: start kernels from this kernelspec instead of ipykernel on ``python``: an
            installed one, started through jupyter_client's provisioner machinery (so a
            ``metadata.kernel_provisioner`` such as gateway_provisioners' Kubernetes one decides
            where it runs), or with ``gateway`` the gateway's kernelspec (default: its default).
        gateway: run every kernel on this Jupyter Kernel Gateway or Enterprise Gateway
            (:class:`toolpath.kernel.kernels.gateway.Gateway`: its URL, token and kernelspec),
            over its REST and WebSocket API.
        sandbox: start each local kernel inside bubblewrap with this
            :class:`toolpath.kernel.sandbox.provisioner.SandboxPolicy`: it sees none of this process's files but the
            Python environment, none of its environment, other sessions' directories, the store or
            (by default) the network, within memory, CPU, process, file and disk limits. Bridges
            then take JSON only unless :attr:`BridgePolicy.accept_pickles`. Not with ``kernel_name`` or
            ``gateway``, whose kernels run where they say.

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

    Attributes:
        max_kernels: cap on live session kernels (pool kernels not included); ``None`` for no cap.
            A new session beyond it evicts the least recently used idle session (snapshotted);
            when every kernel runs a cell for ``busy_wait`` seconds, it gets a ``KernelError``.
        max_kernels_per_user: cap on one owner's live session kernels (sessions created without a
            ``user_id`` count as one owner); ``None`` for no cap. A new session beyond it evicts
            that owner's least recently used idle session, or gets a ``KernelError`` when all of
            theirs run cells for ``busy_wait`` seconds. With this cap, one owner's kernels start
            (and restore) one at a time, so one user opening many sessions at once takes one
            core for it, not every core other users' cells need.
        pool_size: kernels kept started and ready for new sessions; 0 disables the pool.
        idle_ttl: seconds after which an unused session's kernel is shut down.

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

    Attributes:
        debounce: seconds without a new cell before a session's snapshot is written.
        max_variable_bytes: a variable whose pickle is larger is not snapshotted (and named).
        max_snapshot_bytes: budget of one session's snapshot; the smallest variables are kept first.
        after_each_cell: write the snapshot after every cell that ran (ok or error), before its
            result is returned, instead of after ``debounce``: a result that was returned then
            survives this process's death (another process on a shared store restores it). It
            costs each cell the dump of the variables that changed (see ``docs/kernels.md``).
            ``None`` (the default): on with a PostgreSQL store (shared by replicas, where a process
            may die under a session), off with a SQLite one.

    Raises:
        ValueError: a negative number, or an infinite ``debounce``.
        TypeError: a size that is not a whole number, a ``debounce`` that is not a number.
    """

    debounce: float = 1.5
    max_variable_bytes: int = 2_000_000
    max_snapshot_bytes: int = 64_000_000
    after_each_cell: bool | None = None

    def __post_init__(self) -> None:
        check_seconds("snapshot_debounce", self.debounce)
        check_count("max_variable_bytes", self.max_variable_bytes)
        check_count("max_snapshot_bytes", self.max_snapshot_bytes)
        if self.after_each_cell is not None:
            check_flag("snapshot_after_each_cell", self.after_each_cell)


@dataclass(frozen=True)
class BridgePolicy:
    """What host tools' results and arguments may cross the bridge, and where remote kernels reach it.

    Attributes:
        max_result_bytes: largest host-tool result (encoded) a cell receives; a larger one raises
            ``ResultTooLarge`` in the cell, or is offloaded with CodeMode's ``offload_results``.
        accept_pickles: let cells pass non-JSON arguments (a DataFrame) to host tools as pickles,
            which the host loads. A cell already runs code as this user, so for a local kernel this
            is no new power; ``False`` makes the host accept JSON only, for kernels it should not
            trust (a cell passing other values gets a ``BridgeError`` saying so). ``None`` (the
            default): pickles from plain local kernels, JSON only from sandboxed kernels and
            kernels on other hosts.
        address: ``(host, port)``, or ``"host:port"``, through which kernels on other hosts
            (gateway kernels, or kernels a non-local provisioner launched) reach this process's
            host tools, over TLS; default ``127.0.0.1`` and a free port, which only kernels on this
            machine can reach. Port 0 means the port listened on.
        listen: ``(host, port)`` or ``"host:port"`` the bridge listens on, when it differs from
            ``address`` (``0.0.0.0:7443`` behind a Kubernetes Service named in ``address``);
            ``None`` (the default): ``address``.

    Raises:
        ValueError: a negative ``max_result_bytes``, or an address that is not ``host:port`` or ``(host, port)``.
        TypeError: a ``max_result_bytes`` that is not a whole number, an ``accept_pickles`` that is not a bool or None.
    """

    max_result_bytes: int = 1_000_000
    accept_pickles: bool | None = None
    address: tuple[str, int] = ("127.0.0.1", 0)
    listen: tuple[str, int] | None = None

    def __post_init__(self) -> None:
        check_count("max_result_bytes", self.max_result_bytes)
        if self.accept_pickles is not None:
            check_flag("accept_pickles", self.accept_pickles)
        object.__setattr__(self, "address", _host_port(self.address, "bridge_address"))
        object.__setattr__(self, "listen", self.address if self.listen is None else _host_port(self.listen, "bridge_listen"))


def _host_port(value: object, what: str) -> tuple[str, int]:
    """``value`` as ``(host, port)``: from ``"host:port"`` (:func:`parse_host_port`), or a pair of a
    host name and a port number.

    Raises:
        ValueError: anything else; the message names the option.
    """
    if isinstance(value, str):
        return parse_host_port(value, what)
    if isinstance(value, (tuple, list)) and len(value) == 2:
        host, port = value
        if isinstance(host, str) and host and isinstance(port, int) and not isinstance(port, bool) and 0 <= port <= 65535:
            return host, port
    raise ValueError(f"{what} must be 'host:port' or (host, port) with a port from 0 to 65535 (0 for a free one), got {value!r}")


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


#: CodeMode's option groups: its keyword for each, and the class it takes.
GROUPS: dict[str, type] = {"cells": CellPolicy, "capacity": KernelCapacity, "launch": KernelLaunch, "snapshots": SnapshotPolicy, "bridge": BridgePolicy}

#: CodeMode's flat keywords, each shorthand for one field of a group: ``keyword: (group, field)``.
#: The output caps are fields of ``cells.limits``; ``gateway_url`` and ``gateway_token`` (with
#: ``kernel_name``) make ``launch.gateway``.
SHORTHAND: dict[str, tuple[str, str]] = {
    "timeout": ("cells", "timeout"),
    "interrupt_grace": ("cells", "interrupt_grace"),
    "busy_wait": ("cells", "busy_wait"),
    "on_busy_kernel": ("cells", "on_busy_kernel"),
    "max_output_chars": ("cells", "limits"),
    "max_images_per_cell": ("cells", "limits"),
    "max_image_bytes": ("cells", "limits"),
    "max_kernels": ("capacity", "max_kernels"),
    "max_kernels_per_user": ("capacity", "max_kernels_per_user"),
    "pool_size": ("capacity", "pool_size"),
    "idle_ttl": ("capacity", "idle_ttl"),
    "python": ("launch", "python"),
    "cwd": ("launch", "cwd"),
    "env": ("launch", "env"),
    "startup_code": ("launch", "startup_code"),
    "allow_shell": ("launch", "allow_shell"),
    "kernel_name": ("launch", "kernel_name"),
    "gateway_url": ("launch", "gateway"),
    "gateway_token": ("launch", "gateway"),
    "sandbox": ("launch", "sandbox"),
    "snapshot_debounce": ("snapshots", "debounce"),
    "max_variable_bytes": ("snapshots", "max_variable_bytes"),
    "max_snapshot_bytes": ("snapshots", "max_snapshot_bytes"),
    "snapshot_after_each_cell": ("snapshots", "after_each_cell"),
    "max_result_bytes": ("bridge", "max_result_bytes"),
    "accept_pickles": ("bridge", "accept_pickles"),
    "bridge_address": ("bridge", "address"),
    "bridge_listen": ("bridge", "listen"),
}


class FlatDefault:
    """The default of a flat keyword: it stands for its field's default (and shows as it), and is
    told apart from any value given, so that a keyword given beside its group is refused."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value

    def __repr__(self) -> str:
        return repr(self.value)


def _field_default(group: type, name: str) -> Any:
    (found,) = (item for item in fields(group) if item.name == name)
    return None if found.default is MISSING else found.default


#: Each flat keyword's :class:`FlatDefault`: its field's, the output caps' :class:`OutputLimits`',
#: and ``None`` for those without a field of their own (``env`` is then empty).
FLAT_DEFAULT: dict[str, FlatDefault] = {
    keyword: FlatDefault(
        _field_default(OutputLimits, keyword) if name == "limits" else None if name in ("gateway", "env", "address") else _field_default(GROUPS[group], name)
    )
    for keyword, (group, name) in SHORTHAND.items()
}


def option_groups(groups: Mapping[str, Any], flat: Mapping[str, Any]) -> dict[str, Any]:
    """CodeMode's option groups, ``{keyword: group}``: each one given in ``groups`` (``None``: not
    given), else one built from its flat keywords in ``flat`` (those still a :class:`FlatDefault`
    leave their field's default).

    Raises:
        TypeError: a group given with one of its flat keywords (the message names both), or a group
            that is not of its class.
        ValueError, TypeError: what a group refuses; ``gateway_token`` without ``gateway_url``.
    """
    given = {keyword: value for keyword, value in flat.items() if not isinstance(value, FlatDefault)}
    built = {}
    for keyword, group_class in GROUPS.items():
        shorthand = {name: value for name, value in given.items() if SHORTHAND[name][0] == keyword}
        group = groups.get(keyword)
        if group is None:
            built[keyword] = _from_shorthand(keyword, shorthand)
            continue
        if not isinstance(group, group_class):
            raise TypeError(f"{keyword} must be a {group_class.__name__}, got {type(group).__name__}")
        if shorthand:
            names, one = ", ".join(f"{name}=" for name in shorthand), len(shorthand) == 1
            raise TypeError(
                f"CodeMode got both {keyword}= and {names}, shorthand for {'a field' if one else 'fields'} of it: "
                f"give {'it' if one else 'them'} inside {keyword}={group_class.__name__}(...), or drop {keyword}="
            )
        built[keyword] = group
    return built


def _from_shorthand(keyword: str, shorthand: dict[str, Any]) -> Any:
    """The group ``keyword`` with the fields its given flat keywords set."""
    values = {SHORTHAND[name][1]: value for name, value in shorthand.items() if SHORTHAND[name][1] not in ("limits", "gateway")}
    if keyword == "cells" and any(SHORTHAND[name][1] == "limits" for name in shorthand):
        values["limits"] = OutputLimits(**{name: value for name, value in shorthand.items() if SHORTHAND[name][1] == "limits"})
    if keyword == "launch":
        values["env"] = dict(values.get("env") or {})
        if shorthand.get("gateway_token") is not None and shorthand.get("gateway_url") is None:
            raise ValueError("gateway_token is only used with gateway_url")
        if shorthand.get("gateway_url") is not None:
            from toolpath.kernel.kernels.gateway import Gateway  # its HTTP and WebSocket clients only for gateway users

            values["gateway"] = Gateway(shorthand["gateway_url"], shorthand.get("gateway_token"), shorthand.get("kernel_name"))
    if keyword == "bridge":
        values["address"] = values.get("address") or "127.0.0.1:0"
    return GROUPS[keyword](**values)
