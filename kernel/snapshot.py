"""Session snapshots and owners in toolpath's SQLite file (``$TOOLPATH_HOME/toolpath.db``).

Two tables:

- ``sessions``: one row per session: its ``owner`` (the ``user_id`` of the run that created it, or
  ``NULL``), when it was last saved, the variables the last snapshot skipped and why (JSON), and the
  planner layer's data saved with it (JSON; see :meth:`SnapshotStore.save`).
- ``snapshot_variables``: one row per saved record: its key in ``name`` (a variable's name, or the
  names of variables that share objects and are pickled together, joined by ", "; see
  :func:`toolpath.kernel.kernel_snapshot.record_names`), its size, the digest of its pickle and the
  pickle.

A snapshot replaces the previous one in **one transaction**: a process killed while writing leaves
the previous snapshot whole. Only variables whose pickle changed are written again (a 40 MB array
that did not change costs its pickling in the kernel, not a rewrite). Session ids are keys in these tables and nothing else (never part of a
file path). Loading a snapshot runs the pickles' code in the kernel: the file is created readable
by its owner only.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from toolpath.errors import ToolpathError
from toolpath.registry.storage import StoreError, connected, database_file, table_exists, transaction

_PURPOSE = "snapshot store"
_SESSIONS = "sessions"
_SESSION_COLUMNS = ("session_id", "owner", "saved", "skipped", "data")
_VARIABLES = "snapshot_variables"
_VARIABLE_COLUMNS = ("session_id", "name", "size", "digest", "pickle")


class SnapshotConflictError(ToolpathError):
    """The stored snapshot is not the one an incremental save builds on (another process wrote the
    session meanwhile); nothing was written. Save every variable instead."""


@dataclass(frozen=True)
class Snapshot:
    """A session's saved state.

    Attributes:
        pickles: ``{record key: pickle}`` (a key is a variable's name, or several joined by ", ").
        digests: ``{record key: digest of its pickle}``.
        skipped: ``{record key: why it was not saved}``.
        data: what the planner layer saved with it (``None`` when nothing).
        saved: when it was written (seconds since the epoch).
    """

    pickles: dict[str, bytes] = field(default_factory=dict)
    digests: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    data: dict[str, Any] | None = None
    saved: float = 0.0


class SnapshotStore:
    """Snapshots and owners of sessions in one SQLite file.

    Args:
        path: the database file; default ``$TOOLPATH_HOME/toolpath.db``. Created (mode 0600, parent
            directories 0700) when missing.

    Raises:
        registry.storage.StoreError: ``path`` is a directory or cannot be created. Every method raises
            it too when the file is unusable (not a database, corrupt, read-only, tables with other
            columns, a full disk, locked by another process for over 5 s).
    """

    def __init__(self, path: str | os.PathLike[str] | None = None):
        self.path = database_file(path, _PURPOSE)

    @contextmanager
    def _writing(self) -> Iterator[sqlite3.Connection]:
        """A write transaction holding SQLite's write lock from its start; the tables are created
        inside it when missing."""
        with connected(self.path, _PURPOSE) as database, transaction(database, immediate=True):
            self._tables(database)
            yield database

    def _tables(self, database: sqlite3.Connection) -> None:
        """Create the tables when missing (after checking any that exist)."""
        if not table_exists(database, _SESSIONS, _SESSION_COLUMNS, ("session_id",), self.path, _PURPOSE):
            database.execute(f"create table {_SESSIONS} (session_id text primary key, owner text, saved float, skipped text, data text)")
        if not table_exists(database, _VARIABLES, _VARIABLE_COLUMNS, ("session_id", "name"), self.path, _PURPOSE):
            database.execute(f"create table {_VARIABLES} (session_id text, name text, size integer, digest text, pickle blob, primary key (session_id, name))")

    def claim(self, session_id: str, owner: str | None) -> str | None:
        """Record ``owner`` as the owner of ``session_id`` unless the session is known already.

        Returns:
            The session's owner: ``owner`` for a new session, else the one recorded first (another
            process may have created the session since it was last looked up).
        """
        with self._writing() as database:
            database.execute(f"insert or ignore into {_SESSIONS} (session_id, owner, saved, skipped, data) values (?, ?, 0, '{{}}', null)", [session_id, owner])
            return database.execute(f"select owner from {_SESSIONS} where session_id = ?", [session_id]).fetchone()[0]

    def owner(self, session_id: str) -> tuple[bool, str | None]:
        """``(known, owner)``: whether the session has a row here, and its owner (``None`` for none)."""
        with connected(self.path, _PURPOSE) as database:
            if not table_exists(database, _SESSIONS, _SESSION_COLUMNS, ("session_id",), self.path, _PURPOSE):
                return False, None
            row = database.execute(f"select owner from {_SESSIONS} where session_id = ?", [session_id]).fetchone()
        return (row is not None, row[0] if row is not None else None)

    def save(
        self,
        session_id: str,
        owner: str | None,
        saved: Mapping[str, str],
        changed: Mapping[str, bytes],
        skipped: Mapping[str, str],
        data: Mapping[str, Any] | None,
    ) -> None:
        """Make the session's snapshot hold exactly the records ``saved`` names, in one transaction.

        Args:
            saved: ``{record key: digest of its pickle}`` for every record the snapshot holds.
            changed: ``{record key: pickle}`` of those to write; the others of ``saved`` must be
                stored already with that digest.
            skipped: ``{record key: why it was not saved}``, told to the model on restore.
            data: JSON-ready data saved with the variables (the planner session's held states).

        Raises:
            SnapshotConflictError: a record of ``saved`` not in ``changed`` is not stored with its
                digest; nothing was written.
        """
        with self._writing() as database:
            stored = dict(database.execute(f"select name, digest from {_VARIABLES} where session_id = ?", [session_id]).fetchall())
            missing = sorted(name for name, digest in saved.items() if name not in changed and stored.get(name) != digest)
            if missing:
                raise SnapshotConflictError(f"the stored snapshot of session {session_id!r} lacks {', '.join(missing)}")
            gone = [(session_id, name) for name in stored if name not in saved]
            database.executemany(f"delete from {_VARIABLES} where session_id = ? and name = ?", gone)
            database.executemany(
                f"insert or replace into {_VARIABLES} (session_id, name, size, digest, pickle) values (?, ?, ?, ?, ?)",
                [(session_id, name, len(value), saved[name], value) for name, value in changed.items()],
            )
            database.execute(
                f"insert into {_SESSIONS} (session_id, owner, saved, skipped, data) values (?, ?, ?, ?, ?) "
                "on conflict(session_id) do update set saved = excluded.saved, skipped = excluded.skipped, data = excluded.data",
                [session_id, owner, time.time(), json.dumps(dict(skipped)), json.dumps(dict(data)) if data is not None else None],
            )

    def load(self, session_id: str) -> Snapshot | None:
        """The session's snapshot, or ``None`` when it has none (never saved, or discarded)."""
        with connected(self.path, _PURPOSE) as database:
            if not table_exists(database, _SESSIONS, _SESSION_COLUMNS, ("session_id",), self.path, _PURPOSE) or not table_exists(
                database, _VARIABLES, _VARIABLE_COLUMNS, ("session_id", "name"), self.path, _PURPOSE
            ):
                return None
            with transaction(database):  # variables and session row of one snapshot, not of two
                row = database.execute(f"select saved, skipped, data from {_SESSIONS} where session_id = ?", [session_id]).fetchone()
                variables = database.execute(f"select name, digest, pickle from {_VARIABLES} where session_id = ?", [session_id]).fetchall()
        if row is None or not row[0]:
            return None
        try:
            skipped, data = json.loads(row[1] or "{}"), json.loads(row[2]) if row[2] else None
        except ValueError as error:
            raise StoreError(
                self.path, _PURPOSE, f"the snapshot of session {session_id!r} is damaged ({error})", "Restart the session to discard that snapshot"
            ) from error
        return Snapshot({name: pickle for name, _, pickle in variables}, {name: digest for name, digest, _ in variables}, skipped, data, row[0])

    def saved_data(self, session_id: str) -> dict[str, Any] | None:
        """The data saved with the session's snapshot (without its variables), or ``None``."""
        with connected(self.path, _PURPOSE) as database:
            if not table_exists(database, _SESSIONS, _SESSION_COLUMNS, ("session_id",), self.path, _PURPOSE):
                return None
            row = database.execute(f"select data from {_SESSIONS} where session_id = ?", [session_id]).fetchone()
        try:
            return json.loads(row[0]) if row is not None and row[0] else None
        except ValueError as error:
            raise StoreError(
                self.path, _PURPOSE, f"the snapshot of session {session_id!r} is damaged ({error})", "Restart the session to discard that snapshot"
            ) from error

    def discard(self, session_id: str) -> None:
        """Delete the session's snapshot; its owner stays (the session still belongs to them)."""
        with self._writing() as database:
            database.execute(f"delete from {_VARIABLES} where session_id = ?", [session_id])
            database.execute(f"update {_SESSIONS} set saved = 0, skipped = '{{}}', data = null where session_id = ?", [session_id])
