"""The memory a server's sandboxed kernels may be promised together, and how many kernels that is.

Each sandboxed kernel may use up to its control group's limit
(:meth:`toolpath.kernel.sandbox.provisioner.SandboxPolicy.group_memory_bytes`: its memory plus its home, ``/tmp``
and ``/dev/shm``). Promising more kernels than the machine can hold at their limits lets one busy
server reach the machine's OOM killer, which may take the server and every user's kernels with it.
So kernels are admitted only while the sum of their limits fits a budget: by default a share of
the memory this process may use (the machine's, or the control group's it runs in when that is
less), the rest left for the server itself and the system.
"""

from __future__ import annotations

import contextlib
import os

import psutil

#: The share of the available memory kernels may be promised by default: the rest is the server's
#: (its catalogs, embedding model and buffers take a few hundred MB) and the system's.
DEFAULT_SHARE = 0.75


def available_memory_bytes() -> int:
    """The memory this process may use: the machine's, or its control group's limit (v2
    ``memory.max`` or v1 ``memory.limit_in_bytes``, of its group or any parent) when that is less."""
    limits = [psutil.virtual_memory().total]
    with contextlib.suppress(OSError, ValueError):
        with open("/proc/self/cgroup", encoding="utf-8") as file:
            for line in file:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                if controllers == "":
                    root, name = "/sys/fs/cgroup", "memory.max"
                elif "memory" in controllers.split(","):
                    root, name = "/sys/fs/cgroup/memory", "memory.limit_in_bytes"
                else:
                    continue
                limits += _group_limits(root, path, name)
    return min(limits)


def _group_limits(root: str, path: str, name: str) -> list[int]:
    """The memory limits set on the group at ``path`` and its parents (``max`` is none)."""
    limits = []
    parts = [part for part in path.split("/") if part]
    for depth in range(len(parts), -1, -1):
        with contextlib.suppress(OSError, ValueError):
            with open(os.path.join(root, *parts[:depth], name), encoding="ascii") as file:
                text = file.read().strip()
            if text != "max":
                limits.append(int(text))
    return limits


def default_budget_bytes() -> int:
    """:data:`DEFAULT_SHARE` of :func:`available_memory_bytes`."""
    return int(available_memory_bytes() * DEFAULT_SHARE)


def kernels_within(budget_bytes: int, kernel_bytes: int, pool_size: int = 0) -> int:
    """How many session kernels fit ``budget_bytes`` at ``kernel_bytes`` each, once the
    ``pool_size`` kernels started ahead of use have their share; at least 0."""
    return max(0, budget_bytes // kernel_bytes - pool_size)
