"""Session snapshots, owners and holders in toolpath's store (a SQLite file, ``$TOOLPATH_HOME/toolpath.db``
by default, or a PostgreSQL server shared by several machines; see :mod:`toolpath.registry.database`).

Four tables (:mod:`toolpath.registry.store_schema`):

- ``sessions``: one row per session: its ``owner`` (the ``user_id`` of the run that created it, or
  ``NULL``), when it was last saved, the variables the last snapshot skipped and why (JSON), and the
  planner layer's data saved with it (JSON; see :meth:`SnapshotStore.save`).
- ``snapshot_variables``: one row per saved record: its key in ``name`` (a variable's name, or the
  names of variables that share objects and are pickled together, joined by ", "; see
  :func:`toolpath.kernel.inside.snapshot.record_names`), its size, the digest of its pickle and the
  pickle.
- ``session_holders``: which process holds each session while it runs the session's kernel (host,
  pid and the process's start time, which tells a reused pid apart) and the session's
  ``generation``, raised each time a process takes it; ``session_leases``: the holder's lease
  (``expires``, by the store's clock), renewed while it holds the session, and its kernel on a
  gateway. A process asking for a session another living process
  holds is refused (:class:`toolpath.kernel.errors.SessionHeldError`); a holder that is gone (on
  this host), or whose lease ran out (on any host), is taken over. A snapshot is written only under
  the generation its writer took, so one process never overwrites the snapshot of another that
  took the session since.

A snapshot replaces the previous one in **one transaction**, which holds the session's write lock:
a process killed while writing leaves the previous snapshot whole, and two processes never write
one session's snapshot at once. Only variables whose pickle changed are written again (a 40 MB
array that did not change costs its pickling in the kernel, not a rewrite). Session ids are keys in
these tables and nothing else (never part of a file path). Loading a snapshot runs the pickles'
code in the kernel: a SQLite store is created readable by its owner only, and a PostgreSQL one must
be kept as private.

For an operator (``toolpath sessions``), :meth:`SnapshotStore.stored` reads every session as the
store keeps it (owner, snapshot sizes, holder and lease; never a pickle) and :meth:`SnapshotStore.remove`
deletes one. Removing keeps the session's ``session_holders`` row, let go and under a new generation:
a process still driving the session is refused its next lease renewal and snapshot, and lets go of
its kernel, whatever generation a process taking the session later gets.
"""

from __future__ import annotations

import json
import math
import os
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import psutil

from toolpath.errors import ToolpathError
from toolpath.kernel.codemode.notices import shown
from toolpath.kernel.errors import SessionHeldError
from toolpath.registry.database import open_database
from toolpath.registry.storage import StoreError
from toolpath.registry.store_schema import HOLDERS, LEASES, SESSIONS, VARIABLES

_PURPOSE = "snapshot store"
#: A session's holder and, when it belongs to the holder's generation, its lease:
#: ``host, pid, started, since, generation, expires, kernel``.
_HOLDER_WITH_LEASE = (
    f"select {HOLDERS}.host, {HOLDERS}.pid, {HOLDERS}.started, {HOLDERS}.since, {HOLDERS}.generation, {LEASES}.expires, {LEASES}.kernel "
    f"from {HOLDERS} left join {LEASES} on {LEASES}.session_id = {HOLDERS}.session_id and {LEASES}.generation = {HOLDERS}.generation "
    f"where {HOLDERS}.session_id = ?"
)
#: Seconds a process's hold on a session lasts unless renewed; it renews every third of that.
DEFAULT_LEASE_SECONDS = 30.0
#: The shortest lease: a shorter one would have the store written all the time.
MIN_LEASE_SECONDS = 1.0
#: Seconds two readings of one process's start time may differ by (the kernel's boot time, from
#: which psutil computes it, can move by a second); a reused pid starts later than that.
_START_TOLERANCE = 1.0


class SnapshotConflictError(ToolpathError):
    """The stored snapshot is not the one an incremental save builds on (another process wrote the
    session meanwhile); nothing was written. Save every variable instead."""


@dataclass(frozen=True)
class SessionHolder:
    """A process that can hold sessions: its host name, pid and start time (seconds since the
    epoch, as :mod:`psutil` gives it; with the pid, it names the process even after the pid is reused)."""

    host: str
    pid: int
    started: float

    @classmethod
    def this_process(cls) -> SessionHolder:
        return cls(socket.gethostname(), os.getpid(), psutil.Process().create_time())

    def is_running(self) -> bool | None:
        """Whether the process still runs: ``None`` when it is on another host (this one cannot tell)."""
        if self.host != socket.gethostname():
            return None
        try:
            process = psutil.Process(self.pid)
            return abs(process.create_time() - self.started) < _START_TOLERANCE and process.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False
        except psutil.AccessDenied:  # another user's process of that pid and start: it runs
            return True

    def same_process(self, other: SessionHolder) -> bool:
        return self.host == other.host and self.pid == other.pid and abs(self.started - other.started) < _START_TOLERANCE

    def __str__(self) -> str:
        return f"process {self.pid} on host {self.host!r}"


@dataclass(frozen=True)
class TakenSession:
    """What :meth:`SnapshotStore.take` gives: the generation the session is held under now, the
    holder it was taken over from (a process that ended, or stopped renewing its lease, without
    letting go) or ``None``, and the kernel that holder recorded (:meth:`SnapshotStore.record_kernel`),
    which may still be running on a gateway."""

    generation: int
    previous: SessionHolder | None = None
    kernel: dict[str, Any] | None = None


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


@dataclass(frozen=True)
class KernelStatus:
    """Whether a stored session's kernel runs, as far as the store tells (see :meth:`StoredSession.kernel_status`).

    Attributes:
        alive: ``True``: a running process holds the session (a process holds one exactly while it
            has the session's kernel); ``False``: nobody does, or its holder ended or stopped renewing
            its hold; ``None``: this host cannot tell (a holder on another host from before leases,
            or a kernel a holder left on a gateway).
        why: one sentence saying how that was decided.
    """

    alive: bool | None
    why: str


@dataclass(frozen=True)
class StoredSession:
    """One session as the store keeps it, read for an operator: nothing of its variables but their
    record keys and sizes (no pickle is read).

    Attributes:
        session_id: its key in the store.
        owner: the ``user_id`` that created it (``None``: nobody's).
        saved: when its snapshot was last written (seconds since the epoch); ``0``: it has none.
        variables: ``{record key: bytes of its pickle}`` of its snapshot.
        skipped_json / data_json: the ``skipped`` and ``data`` columns, JSON text as written (the
            variables the last snapshot could not save and why; the planner's session state), or ``None``.
        holder: the process holding it now (``None``: nobody), with ``held_since`` (seconds since
            the epoch), its ``lease_expires`` (by the store's clock; ``None``: no lease) and the
            ``kernel`` it recorded on a gateway (``{"gateway": url, "kernel_id": id}``, a hint
            written by that process; ``None`` when none).
        checked_at: the store's clock when this was read.
    """

    session_id: str
    owner: str | None
    saved: float
    variables: dict[str, int]
    skipped_json: str | None
    data_json: str | None
    holder: SessionHolder | None
    held_since: float | None
    lease_expires: float | None
    kernel: dict[str, Any] | None
    checked_at: float

    @property
    def snapshot_bytes(self) -> int:
        """Bytes of its snapshot's pickles."""
        return sum(self.variables.values())

    def kernel_status(self) -> KernelStatus:
        """Whether its kernel runs, decided as :meth:`SnapshotStore.take` decides whether a holder
        has let go: a holder whose lease ran out, or whose process ended (on this host), has;
        one on this host whose process runs, or on another host with a current lease, has not."""
        kernel = self.kernel or {}
        left = (
            f"; its kernel {kernel.get('kernel_id')} may still run on the gateway {kernel.get('gateway')}, until that gateway culls it"
            if kernel.get("kernel_id")
            else ""
        )
        if self.holder is None:
            return KernelStatus(False, "no process holds the session, so it has no kernel")
        if self.lease_expires is not None and self.lease_expires < self.checked_at:
            return KernelStatus(None if left else False, f"{self.holder} stopped renewing its hold {self.checked_at - self.lease_expires:.0f} s ago{left}")
        running = self.holder.is_running()
        if running is False:
            return KernelStatus(None if left else False, f"{self.holder} has ended without letting go of the session{left}")
        if running:
            return KernelStatus(True, f"{self.holder} holds the session and runs")
        if self.lease_expires is not None:
            return KernelStatus(True, f"{self.holder} holds the session; its hold runs out in {self.lease_expires - self.checked_at:.0f} s unless renewed")
        return KernelStatus(None, f"{self.holder} holds the session without a lease (a toolpath from before leases), and this host cannot check it")


class SnapshotStore:
    """Snapshots, owners and holders of sessions in toolpath's store.

    Args:
        location: a SQLite file's path or a ``postgresql://`` URL; default ``$TOOLPATH_STORE``, else
            ``$TOOLPATH_HOME/toolpath.db`` (see :func:`toolpath.registry.database.open_database`).
        lease_seconds: how long a hold on a session lasts unless renewed (:meth:`renew`); a process
            on another host may take a session over once its holder's lease has run out.

    Raises:
        registry.storage.StoreError: a SQLite ``location`` is a directory or cannot be created. Every
            method raises it too when the store is unusable (not a database, corrupt, read-only,
            tables with other columns, a full disk, locked by another process for over 5 s, a
            server that cannot be reached).
    """

    def __init__(self, location: str | os.PathLike[str] | None = None, lease_seconds: float = DEFAULT_LEASE_SECONDS):
        if isinstance(lease_seconds, bool) or not isinstance(lease_seconds, (int, float)) or not MIN_LEASE_SECONDS <= lease_seconds < math.inf:
            raise ValueError(
                f"a session lease must be a number of seconds from {MIN_LEASE_SECONDS:g} (it is renewed every third of it, a write to the store each time), got {lease_seconds!r}"
            )
        self.database = open_database(location, _PURPOSE)
        self.lease_seconds = lease_seconds

    def take(self, session_id: str, holder: SessionHolder) -> TakenSession:
        """Hold ``session_id`` for ``holder`` (this process), under a new generation and a lease of
        :attr:`lease_seconds`.

        A session held by a process that has ended (on this host), or whose lease has run out, is
        taken over; one held by this same process (another CodeMode of it) is taken too, and that
        one's later snapshots are refused by :meth:`save`.

        Raises:
            SessionHeldError: another process holds it and runs (or is on another host and its
                lease has not run out); nothing changed.
        """
        with self.database.writing(_PURPOSE, key=session_id) as database:
            row = database.execute(_HOLDER_WITH_LEASE, [session_id]).fetchone()
            now = database.now()
            previous = _ended_holder(session_id, row, holder, now)
            generation = (row[4] if row is not None else 0) + 1
            database.execute(
                f"insert into {HOLDERS} (session_id, host, pid, started, since, generation) values (?, ?, ?, ?, ?, ?) "
                "on conflict (session_id) do update set host = excluded.host, pid = excluded.pid, started = excluded.started, since = excluded.since, "
                "generation = excluded.generation",
                [session_id, holder.host, holder.pid, holder.started, now, generation],
            )
            database.execute(
                f"insert into {LEASES} (session_id, generation, expires, kernel) values (?, ?, ?, null) "
                "on conflict (session_id) do update set generation = excluded.generation, expires = excluded.expires, kernel = null",
                [session_id, generation, now + self.lease_seconds],
            )
        kernel = _recorded_kernel(row[6]) if previous is not None and row is not None else None
        return TakenSession(generation, previous, kernel)

    def record_kernel(self, session_id: str, generation: int, kernel: Mapping[str, Any] | None) -> None:
        """Record where the session's kernel runs (JSON-ready: a gateway's URL and the kernel's id),
        so a process taking the session over can attach to it; ``None`` forgets it. Nothing
        changes when the session is no longer held under ``generation``."""
        with self.database.writing(_PURPOSE, key=session_id) as database:
            database.execute(
                f"update {LEASES} set kernel = ? where session_id = ? and generation = ?",
                [json.dumps(dict(kernel)) if kernel is not None else None, session_id, generation],
            )

    def renew(self, session_ids_by_generation: Mapping[str, int]) -> list[str]:
        """Extend the leases of the sessions held under these generations by :attr:`lease_seconds`.

        Returns:
            The session ids no longer held under their generation (another process took them over).
        """
        lost = []
        with self.database.writing(_PURPOSE) as database:
            expires = database.now() + self.lease_seconds
            for session_id, generation in session_ids_by_generation.items():
                renewed = database.execute(
                    f"update {LEASES} set expires = ? where session_id = ? and generation = ? and exists "
                    f"(select 1 from {HOLDERS} where {HOLDERS}.session_id = {LEASES}.session_id and {HOLDERS}.generation = {LEASES}.generation and host is not null)",
                    [expires, session_id, generation],
                )
                if renewed.rowcount != 1:
                    lost.append(session_id)
        return lost

    def release(self, session_id: str, generation: int) -> None:
        """Let go of ``session_id`` if it is still held under ``generation`` (a later holder keeps it)."""
        with self.database.writing(_PURPOSE, key=session_id) as database:
            database.execute(
                f"update {HOLDERS} set host = null, pid = null, started = null, since = null where session_id = ? and generation = ?", [session_id, generation]
            )
            database.execute(f"update {LEASES} set expires = null, kernel = null where session_id = ? and generation = ?", [session_id, generation])

    def check_not_held(self, session_id: str, holder: SessionHolder) -> None:
        """Raise when another running process holds ``session_id`` (before changing its stored state).

        Raises:
            SessionHeldError: as :meth:`take` would.
        """
        with self.database.reading(_PURPOSE) as database:
            row = database.execute(_HOLDER_WITH_LEASE, [session_id]).fetchone()
            now = database.now()
        _ended_holder(session_id, row, holder, now)

    def claim(self, session_id: str, owner: str | None) -> str | None:
        """Record ``owner`` as the owner of ``session_id`` unless the session is known already.

        Returns:
            The session's owner: ``owner`` for a new session, else the one recorded first (another
            process may have created the session since it was last looked up).
        """
        with self.database.writing(_PURPOSE, key=session_id) as database:
            database.execute(
                f"insert into {SESSIONS} (session_id, owner, saved, skipped, data) values (?, ?, 0, '{{}}', null) on conflict (session_id) do nothing",
                [session_id, owner],
            )
            return database.execute(f"select owner from {SESSIONS} where session_id = ?", [session_id]).fetchone()[0]

    def owner(self, session_id: str) -> tuple[bool, str | None]:
        """``(known, owner)``: whether the session has a row here, and its owner (``None`` for none)."""
        with self.database.reading(_PURPOSE) as database:
            row = database.execute(f"select owner from {SESSIONS} where session_id = ?", [session_id]).fetchone()
        return (row is not None, row[0] if row is not None else None)

    def save(
        self,
        session_id: str,
        owner: str | None,
        saved: Mapping[str, str],
        changed: Mapping[str, bytes],
        skipped: Mapping[str, str],
        data: Mapping[str, Any] | None,
        generation: int | None = None,
    ) -> None:
        """Make the session's snapshot hold exactly the records ``saved`` names, in one transaction.

        Args:
            saved: ``{record key: digest of its pickle}`` for every record the snapshot holds.
            changed: ``{record key: pickle}`` of those to write; the others of ``saved`` must be
                stored already with that digest.
            skipped: ``{record key: why it was not saved}``, told to the model on restore.
            data: JSON-ready data saved with the variables (the planner session's held states).
            generation: the generation :meth:`take` gave the writer; ``None`` writes without a check.

        Raises:
            SnapshotConflictError: a record of ``saved`` not in ``changed`` is not stored with its
                digest; nothing was written.
            SessionHeldError: the session is held under another generation now (another process, or
                another CodeMode of this one, took it since); nothing was written.
        """
        with self.database.writing(_PURPOSE, key=session_id) as database:
            if generation is not None:
                row = database.execute(f"select host, pid, started, since, generation from {HOLDERS} where session_id = ?", [session_id]).fetchone()
                if row is None or row[4] != generation:
                    taker = SessionHolder(row[0], row[1], row[2]) if row is not None and row[0] is not None else None
                    by = f" by {taker}" if taker is not None else ""
                    raise SessionHeldError(
                        f"session {shown(session_id)} was taken{by} after this process took it, so this process's variables were not saved over the newer snapshot; restart the session here to start over from it, or use another session id",
                        session_id,
                        taker,
                    )
            stored = dict(database.execute(f"select name, digest from {VARIABLES} where session_id = ?", [session_id]).fetchall())
            missing = sorted(name for name, digest in saved.items() if name not in changed and stored.get(name) != digest)
            if missing:
                raise SnapshotConflictError(f"the stored snapshot of session {session_id!r} lacks {', '.join(missing)}")
            gone = [(session_id, name) for name in stored if name not in saved]
            database.executemany(f"delete from {VARIABLES} where session_id = ? and name = ?", gone)
            database.executemany(
                f"insert into {VARIABLES} (session_id, name, size, digest, pickle) values (?, ?, ?, ?, ?) "
                "on conflict (session_id, name) do update set size = excluded.size, digest = excluded.digest, pickle = excluded.pickle",
                [(session_id, name, len(value), saved[name], value) for name, value in changed.items()],
            )
            database.execute(
                f"insert into {SESSIONS} (session_id, owner, saved, skipped, data) values (?, ?, ?, ?, ?) "
                "on conflict (session_id) do update set saved = excluded.saved, skipped = excluded.skipped, data = excluded.data",
                [session_id, owner, time.time(), json.dumps(dict(skipped)), json.dumps(dict(data)) if data is not None else None],
            )

    def load(self, session_id: str) -> Snapshot | None:
        """The session's snapshot, or ``None`` when it has none (never saved, or discarded)."""
        with self.database.reading(_PURPOSE) as database:  # variables and session row of one snapshot, not of two
            row = database.execute(f"select saved, skipped, data from {SESSIONS} where session_id = ?", [session_id]).fetchone()
            variables = database.execute(f"select name, digest, pickle from {VARIABLES} where session_id = ?", [session_id]).fetchall()
        if row is None or not row[0]:
            return None
        try:
            skipped, data = json.loads(row[1] or "{}"), json.loads(row[2]) if row[2] else None
        except ValueError as error:
            raise self._damaged(session_id, error) from error
        return Snapshot({name: bytes(pickle) for name, _, pickle in variables}, {name: digest for name, digest, _ in variables}, skipped, data, row[0])

    def saved_data(self, session_id: str) -> dict[str, Any] | None:
        """The data saved with the session's snapshot (without its variables), or ``None``."""
        with self.database.reading(_PURPOSE) as database:
            row = database.execute(f"select data from {SESSIONS} where session_id = ?", [session_id]).fetchone()
        try:
            return json.loads(row[0]) if row is not None and row[0] else None
        except ValueError as error:
            raise self._damaged(session_id, error) from error

    def discard(self, session_id: str) -> None:
        """Delete the session's snapshot; its owner stays (the session still belongs to them)."""
        with self.database.writing(_PURPOSE, key=session_id) as database:
            database.execute(f"delete from {VARIABLES} where session_id = ?", [session_id])
            database.execute(f"update {SESSIONS} set saved = 0, skipped = '{{}}', data = null where session_id = ?", [session_id])

    def stored(self, session_id: str | None = None) -> list[StoredSession]:
        """Every session the store knows (one with an owner or a snapshot, or held by a process),
        or only ``session_id``'s (an empty list when it is unknown), read in one transaction;
        in no particular order.

        Raises:
            registry.storage.StoreError: the store cannot be read.
        """
        with self.database.reading(_PURPOSE) as database:
            return _stored_sessions(database, session_id)

    def remove(self, session_id: str) -> StoredSession | None:
        """Delete ``session_id``'s owner and snapshot in one transaction, and let go of its hold
        under a new generation: a process still driving the session has its next lease renewal and
        snapshot refused, so it lets go of its kernel (see :meth:`renew`). Its approval decisions
        and record of use are kept (an audit log only grows; a user's record is theirs).

        Returns:
            The session as it was when removed; ``None`` when the store does not know it (nothing changed).
        """
        with self.database.writing(_PURPOSE, key=session_id) as database:
            found = _stored_sessions(database, session_id)
            if not found:
                return None
            database.execute(f"delete from {VARIABLES} where session_id = ?", [session_id])
            database.execute(f"delete from {SESSIONS} where session_id = ?", [session_id])
            # The row stays, with a new generation: a later take never reuses a generation a
            # process that still drives the session may write under.
            database.execute(
                f"update {HOLDERS} set host = null, pid = null, started = null, since = null, generation = generation + 1 where session_id = ?", [session_id]
            )
            database.execute(f"delete from {LEASES} where session_id = ?", [session_id])
        return found[0]

    def _damaged(self, session_id: str, error: ValueError) -> StoreError:
        return StoreError(
            self.database.location, _PURPOSE, f"the snapshot of session {session_id!r} is damaged ({error})", "Restart the session to discard that snapshot"
        )


def _stored_sessions(database: Any, session_id: str | None) -> list[StoredSession]:
    """The sessions :meth:`SnapshotStore.stored` reads, inside the caller's transaction."""
    parameters = [session_id] if session_id is not None else []
    only = "where session_id = ?" if session_id is not None else ""
    rows = database.execute(f"select session_id, owner, saved, skipped, data from {SESSIONS} {only}", parameters).fetchall()
    sizes: dict[str, dict[str, int]] = {}
    for key, name, size in database.execute(f"select session_id, name, size from {VARIABLES} {only}", parameters).fetchall():
        sizes.setdefault(key, {})[name] = int(size)
    held_only = f" and {HOLDERS}.session_id = ?" if session_id is not None else ""
    holds = {
        row[0]: row[1:]
        for row in database.execute(
            f"select {HOLDERS}.session_id, {HOLDERS}.host, {HOLDERS}.pid, {HOLDERS}.started, {HOLDERS}.since, {LEASES}.expires, {LEASES}.kernel "
            f"from {HOLDERS} left join {LEASES} on {LEASES}.session_id = {HOLDERS}.session_id and {LEASES}.generation = {HOLDERS}.generation "
            f"where {HOLDERS}.host is not null{held_only}",
            parameters,
        ).fetchall()
    }
    now = database.now()
    known = {row[0]: row for row in rows}
    # A session held with no row of its own (its row removed while a process held it, and taken again) is listed too.
    for held in holds.keys() - known.keys():
        known[held] = (held, None, 0.0, None, None)
    found = []
    for key, (_, owner, saved, skipped, data) in known.items():
        hold = holds.get(key)
        holder = SessionHolder(hold[0], int(hold[1]), float(hold[2])) if hold is not None else None
        found.append(
            StoredSession(
                key,
                owner,
                float(saved or 0),
                sizes.get(key, {}),
                skipped,
                data,
                holder,
                float(hold[3]) if hold is not None and hold[3] is not None else None,
                float(hold[4]) if hold is not None and hold[4] is not None else None,
                _recorded_kernel(hold[5]) if hold is not None else None,
                now,
            )
        )
    return found


def _recorded_kernel(text: str | None) -> dict[str, Any] | None:
    """A ``kernel`` column's JSON object; ``None`` for none, or for anything else (it is only a hint)."""
    try:
        kernel = json.loads(text) if text else None
    except ValueError:
        return None
    return kernel if isinstance(kernel, dict) else None


def _ended_holder(session_id: str, row: tuple | None, asking: SessionHolder, now: float) -> SessionHolder | None:
    """The holder of a ``session_holders`` row with its lease (``host, pid, started, since,
    generation, expires, ...``)
    when it has let go without saying so: a process that has ended (on this host), or whose lease
    ran out before ``now``; ``None`` when nobody or ``asking`` itself holds the session.

    Raises:
        SessionHeldError: another process holds it and runs, or is on another host with a lease
            that has not run out (or no lease: a toolpath from before leases).
    """
    if row is None or row[0] is None:
        return None
    holder = SessionHolder(row[0], row[1], row[2])
    if holder.same_process(asking):
        return None
    expires = row[5]
    if expires is not None and expires < now:
        return holder
    running = holder.is_running()
    if running is False:
        return holder
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(row[3])) if row[3] else "an unknown time"
    if running:
        state = "which is still running"
    elif expires is not None:
        state = f"busy on another server (its hold on the session runs out in {expires - now:.0f} s unless that server keeps using it)"
    else:
        state = "which may still be running (it is on another host, so this one cannot check)"
    raise SessionHeldError(
        f"session {shown(session_id)} is in use by {holder} since {when}, {state}: two processes driving one session would overwrite each other's variables. "
        "Run this session's cells in that process, end the session there (end_session, or its kernel idling out or that process exiting lets go of it), or use another session id",
        session_id,
        holder,
    )
