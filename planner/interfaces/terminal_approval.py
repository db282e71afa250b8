"""Approvals on a terminal, for ``toolpath run``: a call that asks (:mod:`toolpath.kernel.tools.approvals`)
is shown on standard error and answered on standard input.

Without a terminal nobody can be asked, so every such call is denied with a note saying how to run
it (``--yes`` approves them all, and says so in the audit log).
"""

from __future__ import annotations

import getpass
import sys
import threading
from typing import TextIO

from toolpath.kernel.inside.approval_policy import ApprovalRequest
from toolpath.kernel.tools.approvals import ApprovalDecision

#: What a denial says when there is no terminal to ask on.
NO_TERMINAL = "nobody to ask: toolpath run has no terminal here; run it in one to answer, or pass --yes to approve every call"


class TerminalApprover:
    """An approver (:data:`toolpath.kernel.tools.approvals.Approver`) that asks on a terminal.

    Args:
        approve_all: approve every call without asking (``--yes``).
        stdin / stderr: where answers are read and questions written (default the process's).

    Questions from calls made at once (a gathered batch) are asked one after another.
    """

    def __init__(self, approve_all: bool = False, stdin: TextIO | None = None, stderr: TextIO | None = None):
        self.approve_all = approve_all
        self.stdin = stdin or sys.stdin
        self.stderr = stderr or sys.stderr
        self._lock = threading.Lock()

    def __call__(self, request: ApprovalRequest) -> ApprovalDecision:
        if self.approve_all:
            return ApprovalDecision(True, note="approved by --yes", by="--yes")
        if not self.stdin.isatty():
            return ApprovalDecision(False, note=NO_TERMINAL, by="toolpath run")
        with self._lock:
            self.stderr.write(f"\n{request.describe()}\n  Approve? [y/N] ")
            self.stderr.flush()
            answer = self.stdin.readline().strip().lower()
        approved = answer in ("y", "yes")
        return ApprovalDecision(approved, note="" if approved else "declined at the terminal", by=getpass.getuser())
