"""Start a stdio MCP server so that it dies with the toolpath process that started it.

``python -I -S mcp_launcher.py PARENT_PID COMMAND [ARGS...]`` asks Linux to send the process
``SIGKILL`` when its parent goes (``prctl(PR_SET_PDEATHSIG)``), checks that the parent is still
``PARENT_PID`` (it may have died before the request), then becomes ``COMMAND`` (``execvp``: the
same process, so the request holds for the server itself, and its pid and command line are the
server's). A host that is killed (``SIGKILL``, the OOM killer) cannot close the server's stdin
and stop it: this way the server goes with it.

Linux delivers the signal when the *thread* that started the process ends, not the whole process:
toolpath starts a server from the thread of the event loop its connection lives on, and a
connection cannot outlive that loop. Other systems have no such request: there the launcher
only starts the command. A server's own children are not covered (they still see their stdin or
pipes close); and a set-user-ID command loses the request at exec.

Only the standard library, so it runs with ``-I -S`` (no site packages, no environment).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1
#: Exit status when the command cannot be run (as a shell's "command not found").
CANNOT_RUN = 127


def main(arguments: list[str]) -> None:
    """Arrange to die with ``arguments[0]`` (a pid), then exec ``arguments[1:]``; exits on failure."""
    if len(arguments) < 2 or not arguments[0].isdigit():
        sys.exit(f"usage: {sys.argv[0]} PARENT_PID COMMAND [ARGS...]")
    parent, command = int(arguments[0]), arguments[1:]
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            sys.exit(f"toolpath: prctl(PR_SET_PDEATHSIG) failed: {os.strerror(ctypes.get_errno())}")
        if os.getppid() != parent:  # the parent died before the request: nobody would stop us
            sys.exit(f"toolpath: the process that started the MCP server ({parent}) has exited")
    try:
        os.execvp(command[0], command)
    except OSError as error:
        print(f"toolpath: cannot run the MCP server command {command[0]!r}: {error.strerror}", file=sys.stderr)
        sys.exit(CANNOT_RUN)


if __name__ == "__main__":
    main(sys.argv[1:])
