"""A control group per sandboxed kernel: caps on the processes and the memory of the kernel and of
everything it starts, together.

Resource limits alone leave two holes: ``RLIMIT_NPROC`` does not bind a kernel started by root
(Linux exempts user id 0), and ``RLIMIT_DATA`` caps each process, not their sum (256 processes of
2 GiB each). A control group closes both: ``pids.max`` counts every process and thread of the group,
and its memory limit (``memory.max`` on cgroup v2, ``memory.limit_in_bytes`` on v1) counts every
page of the group, including the files it writes to its tmpfs home and ``/tmp`` (Linux charges
tmpfs pages to the writer's group). Past the memory limit the kernel's own out-of-memory killer
stops the group's largest process, usually the kernel.

The group is made under this process's own group, in each hierarchy that holds the ``pids`` and
``memory`` controllers (cgroup v1 has one hierarchy per controller, v2 one for all), so limits set
above it still apply. It needs a writable hierarchy: a server run as root, or one given a delegated
subtree (Linux's cgroup v2 documentation, "Delegation"). Where none is writable,
:func:`control_group_problem` says why and kernels keep their per-process limits.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import time
import uuid
from dataclasses import dataclass

from toolpath.errors import ToolpathError

#: Controllers a kernel's group uses.
CONTROLLERS = ("pids", "memory")
#: How long :meth:`KernelControlGroup.remove` waits for the group's processes to go, in seconds.
REMOVE_SECONDS = 5.0
#: A group's name starts with this, under the server's own group.
GROUP_PREFIX = "toolpath-kernel-"
#: An empty group older than this, in seconds, is a dead server's (see :func:`remove_stale_groups`).
STALE_SECONDS = 60.0


class ControlGroupUnavailableError(ToolpathError, OSError):
    """No writable cgroup hierarchy holds a controller a kernel's group needs (the message says which and why)."""


def _own_groups() -> dict[str, str]:
    """This process's group in each hierarchy: ``{controller: path}``, ``""`` for the v2 hierarchy
    (``/proc/self/cgroup`` lines are ``ID:CONTROLLERS:PATH``; v2's controller list is empty)."""
    groups = {}
    with open("/proc/self/cgroup", encoding="utf-8") as file:
        for line in file:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for controller in controllers.split(",") if controllers else [""]:
                groups[controller] = path
    return groups


def _mounts() -> list[tuple[str, str, str, set[str]]]:
    """cgroup mounts from ``/proc/self/mountinfo``: ``(root, mount point, type, super options)``
    (the format is in proc(5))."""
    mounts = []
    with open("/proc/self/mountinfo", encoding="utf-8") as file:
        for line in file:
            fields, _, tail = line.partition(" - ")
            kind, _, options = (tail.split() + ["", "", ""])[:3]
            if kind in ("cgroup", "cgroup2"):
                root, mount_point = fields.split()[3:5]
                mounts.append((root, mount_point, kind, set(options.split(","))))
    return mounts


def _parents(controllers: tuple[str, ...]) -> dict[str, list[str]]:
    """This process's group directory in each hierarchy holding one of ``controllers``:
    ``{directory: [controller, ...]}``.

    Raises:
        ControlGroupUnavailableError: a controller is in no mounted hierarchy.
    """
    own = _own_groups()
    parents: dict[str, list[str]] = {}
    for controller in controllers:
        for root, mount_point, kind, options in _mounts():
            key = controller if kind == "cgroup" else ""
            if key not in own or (kind == "cgroup" and controller not in options):
                continue
            directory = os.path.join(mount_point, os.path.relpath(own[key], root))
            if kind == "cgroup2":
                with contextlib.suppress(OSError), open(os.path.join(directory, "cgroup.controllers"), encoding="utf-8") as file:
                    if controller not in file.read().split():
                        continue
            parents.setdefault(os.path.normpath(directory), []).append(controller)
            break
        else:
            raise ControlGroupUnavailableError(f"no mounted cgroup hierarchy offers the {controller!r} controller")
    return parents


def _write(directory: str, names: tuple[str, ...], value: str) -> None:
    """Write ``value`` to the first of the files ``names`` that ``directory`` has (v2's name, then v1's)."""
    for name in names:
        path = os.path.join(directory, name)
        if os.path.exists(path):
            with open(path, "w", encoding="utf-8") as file:
                file.write(value)
            return
    raise ControlGroupUnavailableError(f"{directory} has none of {', '.join(names)}")


@dataclass(frozen=True)
class KernelControlGroup:
    """One kernel's group: a directory in each hierarchy it uses.

    Attributes:
        directories: the group's directories, one per hierarchy.
    """

    directories: tuple[str, ...]

    @classmethod
    def create(cls, processes: int | None, memory_bytes: int | None) -> KernelControlGroup:
        """Make a group capping ``processes`` (processes and threads) and ``memory_bytes`` (every
        page of the group, its tmpfs files included, and no swap beyond it); a ``None`` cap is not
        set. The group is empty: a process joins it by writing its id to :meth:`join_files`.

        Raises:
            ControlGroupUnavailableError: no hierarchy offers a needed controller, or it is not
                writable here (e.g. a server not run as root, without a delegated subtree).
        """
        wanted = tuple(name for name, limit in zip(CONTROLLERS, (processes, memory_bytes)) if limit is not None)
        name = GROUP_PREFIX + uuid.uuid4().hex[:12]
        made: list[str] = []
        try:
            for parent, controllers in _parents(wanted).items():
                if os.path.exists(os.path.join(parent, "cgroup.subtree_control")):
                    # cgroup v2 gives a child only the controllers its parent enables for children.
                    _write(parent, ("cgroup.subtree_control",), " ".join(f"+{controller}" for controller in controllers))
                directory = os.path.join(parent, name)
                os.mkdir(directory, 0o755)
                made.append(directory)
                if "pids" in controllers:
                    _write(directory, ("pids.max",), str(processes))
                if "memory" in controllers:
                    _write(directory, ("memory.max", "memory.limit_in_bytes"), str(memory_bytes))
                    # With swap, the group could page out past its limit: no swap (v2), or
                    # memory and swap together under the same limit (v1, with swap accounting).
                    if os.path.exists(os.path.join(directory, "memory.swap.max")):
                        _write(directory, ("memory.swap.max",), "0")
                    elif os.path.exists(os.path.join(directory, "memory.memsw.limit_in_bytes")):
                        _write(directory, ("memory.memsw.limit_in_bytes",), str(memory_bytes))
        except OSError as error:
            cls(tuple(made)).remove()
            if isinstance(error, ControlGroupUnavailableError):
                raise
            raise ControlGroupUnavailableError(f"cannot make a control group for the kernel: {error}") from error
        return cls(tuple(made))

    def join_files(self) -> list[str]:
        """The files a process writes its id to, to join the group (``cgroup.procs`` of each directory)."""
        return [os.path.join(directory, "cgroup.procs") for directory in self.directories]

    def processes(self) -> set[int]:
        """Ids of the processes in the group now."""
        found: set[int] = set()
        for path in self.join_files():
            with contextlib.suppress(OSError), open(path, encoding="utf-8") as file:
                found.update(int(line) for line in file if line.strip())
        return found

    def remove(self) -> None:
        """Stop every process left in the group and remove its directories; safe to call twice.
        A directory that stays busy past :data:`REMOVE_SECONDS` is left (its processes are gone by
        then unless they are stuck in the kernel)."""
        deadline = time.monotonic() + REMOVE_SECONDS
        for process in self.processes():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(process, signal.SIGKILL)
        for directory in self.directories:
            while True:
                try:
                    os.rmdir(directory)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.05)


def remove_stale_groups() -> list[str]:
    """Remove kernels' groups (under this process's own) that have been empty for
    :data:`STALE_SECONDS`: left by a server that was killed before it could remove them. A new
    group is joined within milliseconds of being made, so an old empty one belongs to no kernel.

    Returns:
        The directories removed; one that cannot be read or removed is left.
    """
    removed = []
    with contextlib.suppress(ControlGroupUnavailableError, OSError):
        for parent in _parents(CONTROLLERS):
            for entry in os.scandir(parent):
                with contextlib.suppress(OSError):
                    if (
                        entry.name.startswith(GROUP_PREFIX)
                        and time.time() - entry.stat().st_mtime > STALE_SECONDS
                        and not KernelControlGroup((entry.path,)).processes()
                    ):
                        os.rmdir(entry.path)
                        removed.append(entry.path)
    return removed


@functools.cache
def control_group_problem() -> str:
    """Why kernels cannot get a control group here, or ``""`` when they can (probed once per
    process by making and removing one; stale groups are removed then too)."""
    try:
        KernelControlGroup.create(processes=1, memory_bytes=2**30).remove()
    except ControlGroupUnavailableError as error:
        return str(error)
    remove_stale_groups()
    return ""
