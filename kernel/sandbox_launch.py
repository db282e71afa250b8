"""Inside a sandboxed kernel's bubblewrap: set the kernel's resource limits, then become ipykernel.

``python -m kernel.sandbox_launch RLIMIT_DATA=N,RLIMIT_CPU=N,... -- COMMAND...`` (written by
:class:`kernel.sandbox.SandboxedProvisioner`). Limits are lowered only (a hard limit already lower
than asked stays), and ``exec`` keeps them for the kernel and every process it starts.
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


def main(arguments: list[str]) -> None:
    if len(arguments) < 3 or arguments[1] != "--":
        raise SystemExit("usage: python -m kernel.sandbox_launch LIMITS -- COMMAND...")
    apply_limits(arguments[0])
    os.execvp(arguments[2], arguments[2:])


if __name__ == "__main__":
    main(sys.argv[1:])
