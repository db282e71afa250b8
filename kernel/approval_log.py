"""The audit log of approvals: every decision on a call that asked (:mod:`toolpath.kernel.approvals`),
in toolpath's SQLite file beside the sessions' snapshots and owners.

A row keeps who decided, when, the tool, the session and its user, why the call asked, a digest of
the arguments (never the values: they may hold what the user would not keep in a log), the answer
and its note. toolpath only ever adds rows. The file is the store's, readable and writable by its
owner only; a kernel that is not sandboxed runs as that owner and could reach it, so a log that
must hold against the code in cells needs sandboxed kernels (or a gateway's), see
``docs/security.md``.
"""

from __future__ import annotations

import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from toolpath.kernel.approvals import ApprovalRequest
from toolpath.registry.storage import connected, database_file, default_database_path, table_exists, transaction

_TABLE = "approval_decisions"
_COLUMNS = ("id", "session_id", "user_id", "tool", "reason", "digest", "decision", "note", "decided_by", "decided_at")
_PURPOSE = "approval log"
#: What a decision can be: a yes, a no, no answer in time, or an approver that failed.
DECISIONS = ("approved", "denied", "timeout", "failed")


@dataclass(frozen=True)
class RecordedDecision:
    """One row of the log. ``decided_at`` is seconds since the epoch (UTC)."""

    session_id: str | None
    user_id: str | None
    tool: str
    reason: str
    digest: str
    decision: str
    note: str
    decided_by: str
    decided_at: float

    def to_dict(self) -> dict:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


class ApprovalLog:
    """Approval decisions in one SQLite file.

    Args:
        path: the database file; default ``$TOOLPATH_HOME/toolpath.db``. Created (mode 0600, parent
            directories 0700) with the first decision.

    Every method raises ``registry.storage.StoreError`` when the file is unusable (see
    :mod:`toolpath.registry.storage`); a decision that cannot be recorded is not acted on.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None):
        self.path = Path(path) if path is not None else default_database_path()

    def record(self, request: ApprovalRequest, decision: str, note: str, decided_by: str) -> None:
        """Add one decision on ``request`` (``decision`` one of :data:`DECISIONS`).

        Raises:
            ValueError: an unknown ``decision``.
        """
        if decision not in DECISIONS:
            raise ValueError(f"decision must be one of {', '.join(DECISIONS)}, got {decision!r}")
        with connected(database_file(self.path, _PURPOSE), _PURPOSE) as database, transaction(database, immediate=True):
            self._table(database)
            database.execute(
                f"insert into {_TABLE} ({', '.join(_COLUMNS[1:])}) values (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [request.session_id, request.user_id, request.tool, request.reason, request.digest, decision, note, decided_by, time.time()],
            )

    def decisions(self, session_id: str, user_id: str | None) -> list[RecordedDecision]:
        """The decisions on the calls of ``session_id`` made for ``user_id`` (``None``: nobody's
        sessions), oldest first: another user's session gives nothing."""
        if not self.path.exists():
            return []
        with connected(self.path, _PURPOSE) as database:
            if not table_exists(database, _TABLE, _COLUMNS, ("id",), self.path, _PURPOSE):
                return []
            rows = database.execute(
                f"select {', '.join(_COLUMNS[1:])} from {_TABLE} where session_id = ? and user_id is ? order by id", [session_id, user_id]
            ).fetchall()
        return [RecordedDecision(*row) for row in rows]

    def _table(self, database: sqlite3.Connection) -> None:
        if not table_exists(database, _TABLE, _COLUMNS, ("id",), self.path, _PURPOSE):
            database.execute(
                f"create table {_TABLE} (id integer primary key autoincrement, session_id text, user_id text, tool text, reason text,"
                " digest text, decision text, note text, decided_by text, decided_at float)"
            )
