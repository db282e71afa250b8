"""Start a sandboxed kernel's command inside its control group and resource limits.

``python -I -S kernel/sandbox/launch.py [--join=FILE]... [--limits=RLIMIT_DATA=N,RLIMIT_CPU=N,...] -- COMMAND...``
(written by :class:`toolpath.kernel.sandbox.provisioner.SandboxedProvisioner`): ``--join`` writes this process's id to a
control group's ``cgroup.procs`` (outside bubblewrap, before it starts, so nothing it starts is
outside the group); ``--limits`` sets resource limits (inside bubblewrap, where ``RLIMIT_NPROC``
counts the sandbox's processes only, not every process of the host user). Limits are lowered only
(a hard limit already lower than asked stays); ``exec`` keeps the group and the limits for the
command and every process it starts.
"""

from __future__ import annotations

import os
import resource
import sys


def apply_limits(text: str) -> None:
    """Set each ``NAME=VALUE`` of ``text`` (comma-separated ``resource.RLIMIT_*`` names) as soft and
    hard limit, never above the current hard limit.

    Raises:
        ValueError: an unknown limit name or a value that is not a whole number.
    """
    for item in filter(None, text.split(",")):
        name, _, value = item.partition("=")
        limit = getattr(resource, name, None)
        if not name.startswith("RLIMIT_") or limit is None:
            raise ValueError(f"unknown resource limit {name!r}")
        _, hard = resource.getrlimit(limit)
        wanted = int(value)
        if hard != resource.RLIM_INFINITY:
            wanted = min(wanted, hard)
        resource.setrlimit(limit, (wanted, wanted))


def join_group(path: str) -> None:
    """Move this process into the control group whose ``cgroup.procs`` file is ``path``."""
    with open(path, "w", encoding="utf-8") as file:
        file.write(str(os.getpid()))


def main(arguments: list[str]) -> None:
    while arguments and arguments[0] != "--":
        option, _, value = arguments.pop(0).partition("=")
        if option == "--join":
            join_group(value)
        elif option == "--limits":
            apply_limits(value)
        else:
            raise SystemExit(f"unknown option {option!r}; usage: python -I -S kernel/sandbox/launch.py [--join=FILE]... [--limits=LIMITS] -- COMMAND...")
    if len(arguments) < 2:
        raise SystemExit("usage: python -I -S kernel/sandbox/launch.py [--join=FILE]... [--limits=LIMITS] -- COMMAND...")
    os.execvp(arguments[1], arguments[1:])


if __name__ == "__main__":
    main(sys.argv[1:])
