"""The audit log of approvals: every decision on a call that asked (:mod:`toolpath.kernel.tools.approvals`),
in toolpath's store beside the sessions' snapshots and owners (:mod:`toolpath.registry.database`).

A row keeps who decided, when, the tool, the session and its user, why the call asked, a digest of
the arguments (never the values: they may hold what the user would not keep in a log), the answer
and its note. toolpath only ever adds rows. A SQLite store is readable and writable by its owner
only; a kernel that is not sandboxed runs as that owner and could reach it, so a log that must hold
against the code in cells needs sandboxed kernels (or a gateway's), see ``docs/security.md``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from toolpath.kernel.inside.approval_policy import ApprovalRequest
from toolpath.registry.database import Database, open_database
from toolpath.registry.store_schema import APPROVAL_DECISIONS

_COLUMNS = ("session_id", "user_id", "tool", "reason", "digest", "decision", "note", "decided_by", "decided_at")
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
    """Approval decisions in the store ``database``; ``None``: the default store
    (:func:`toolpath.registry.database.open_database`), opened when the first decision is written
    or read, so a program that never asks needs no usable store.

    Every method raises ``registry.storage.StoreError`` when the store is unusable; a decision that
    cannot be recorded is not acted on.
    """

    def __init__(self, database: Database | None = None):
        self._database = database

    @property
    def database(self) -> Database:
        if self._database is None:
            self._database = open_database(purpose=_PURPOSE)
        return self._database

    def record(self, request: ApprovalRequest, decision: str, note: str, decided_by: str) -> None:
        """Add one decision on ``request`` (``decision`` one of :data:`DECISIONS`).

        Raises:
            ValueError: an unknown ``decision``.
        """
        if decision not in DECISIONS:
            raise ValueError(f"decision must be one of {', '.join(DECISIONS)}, got {decision!r}")
        with self.database.writing(_PURPOSE) as database:
            database.execute(
                f"insert into {APPROVAL_DECISIONS} ({', '.join(_COLUMNS)}) values ({', '.join('?' * len(_COLUMNS))})",
                [request.session_id, request.user_id, request.tool, request.reason, request.digest, decision, note, decided_by, time.time()],
            )

    def decisions(self, session_id: str, user_id: str | None) -> list[RecordedDecision]:
        """The decisions on the calls of ``session_id`` made for ``user_id`` (``None``: nobody's
        sessions), oldest first: another user's session gives nothing."""
        user_is = "user_id is null" if user_id is None else "user_id = ?"
        with self.database.reading(_PURPOSE) as database:
            rows = database.execute(
                f"select {', '.join(_COLUMNS)} from {APPROVAL_DECISIONS} where session_id = ? and {user_is} order by id",
                [session_id] if user_id is None else [session_id, user_id],
            ).fetchall()
        return [RecordedDecision(*row) for row in rows]

    def session_decisions(self, session_id: str, limit: int) -> tuple[list[RecordedDecision], int]:
        """Every user's decisions on the calls of ``session_id``, for an operator (``toolpath
        sessions show``; :meth:`decisions` gives a user their own): the ``limit`` newest, newest
        first, and how many there are in all.

        Raises:
            ValueError: ``limit`` is not a whole number of at least 0.
        """
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise ValueError(f"limit must be a whole number of at least 0, got {limit!r}")
        with self.database.reading(_PURPOSE) as database:
            total = database.execute(f"select count(*) from {APPROVAL_DECISIONS} where session_id = ?", [session_id]).fetchone()[0]
            rows = database.execute(
                f"select {', '.join(_COLUMNS)} from {APPROVAL_DECISIONS} where session_id = ? order by id desc limit ?", [session_id, limit]
            ).fetchall()
        return [RecordedDecision(*row) for row in rows], int(total)
