"""Sessions in the store, for an operator: list them, show one, close one (``toolpath sessions``).

Everything is read from the shared store (:mod:`toolpath.registry.database`: a SQLite file or a
PostgreSQL server), through :class:`toolpath.kernel.codemode.snapshot_store.SnapshotStore`,
:class:`toolpath.kernel.tools.approval_log.ApprovalLog` and the record of use; no running
``toolpath serve`` is asked anything.

**Rights.** Whoever can open the store sees and closes every user's sessions: the ``user_id`` checks
of sessions (a session belongs to its owner) are for a server's users, and this is the host's
operator, whose rights are the store's: the SQLite file's (mode 0600, the user who runs the server)
or the PostgreSQL role's of the URL.

**Never values.** A variable is shown by its name, the size of its pickle and the states it carries
(the artifacts the session's state names); no pickle is read (loading one runs its code). Why a
variable was not saved is left out (the kernel's text may quote a value), and so are a paused
task's arguments, inputs and words.

**What "kernel alive" means.** A process holds a session in the store exactly while it has the
session's kernel, and renews a lease on it; see :meth:`toolpath.kernel.codemode.snapshot_store.StoredSession.kernel_status`.
Closing a held session removes its owner and snapshot and voids the hold: the holding process finds
out at its next lease renewal (every third of its lease, 10 s by default) and stops the kernel.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolpath.errors import Refusal
from toolpath.kernel.codemode.snapshot_store import KernelStatus, SnapshotStore, StoredSession
from toolpath.kernel.tools.approval_log import ApprovalLog, RecordedDecision
from toolpath.planner.tasks.session_state import SessionState
from toolpath.registry.database import is_postgres, store_location

if TYPE_CHECKING:
    from toolpath.planner.tasks.record_of_use import RecordedUse

#: Recent runs and approval decisions :func:`show_session` gives by default.
DEFAULT_RUNS = 10
DEFAULT_DECISIONS = 20


class SessionIdError(Refusal, ValueError):
    """A session id no store can keep (empty, too long, with a NUL or not Unicode text): there is no such session."""


class UnknownSessionError(Refusal, LookupError):
    """The store has no session of that id; nothing was changed.

    Attributes:
        session_id: the id asked for.
        location: the store, as messages name it.
    """

    def __init__(self, session_id: str, location: str, absent: bool = False):
        self.session_id = session_id
        self.location = location
        where = f"there is no store at {location} yet" if absent else f"the store {location} has no session {session_id!r}"
        super().__init__(f"{where}; nothing was changed (`toolpath sessions list` lists the sessions of a store, --store or $TOOLPATH_STORE names another)")


def check_session_id(session_id: object) -> str:
    """``session_id`` if a store could keep it (the rules of
    :func:`toolpath.kernel.codemode.session_pool.check_id`).

    Raises:
        SessionIdError: empty or blank, over ``MAX_ID_CHARS`` (512) characters, with a NUL, or not
            Unicode text (a lone surrogate: bytes of a command line that are not UTF-8).
    """
    # The module of the rule loads the kernel machinery (jupyter_client): only when an id is checked.
    from toolpath.kernel.codemode.session_pool import MAX_ID_CHARS

    if not isinstance(session_id, str) or not session_id.strip():
        raise SessionIdError("the session id is empty; give one that `toolpath sessions list` shows")
    if len(session_id) > MAX_ID_CHARS:
        raise SessionIdError(
            f"the session id is {len(session_id):,} characters long and stores keep ids of at most {MAX_ID_CHARS}, so there is no such session"
        )
    if "\x00" in session_id:
        raise SessionIdError("the session id has a NUL character, which no store keeps, so there is no such session")
    try:
        session_id.encode()
    except UnicodeEncodeError as error:
        raise SessionIdError(f"the session id is not UTF-8 text (at character {error.start + 1}), which no store keeps, so there is no such session") from None
    return session_id


@dataclass(frozen=True)
class SessionSummary:
    """One session of :func:`list_sessions`.

    Attributes:
        session_id / owner: its key in the store and the ``user_id`` it belongs to (``None``: nobody's).
        last_used: the later of its last snapshot and the moment its holder took it (seconds since
            the epoch), ``None`` when neither is known.
        saved: when its snapshot was written (``None``: it has none).
        snapshot_bytes / variables: the size of its snapshot's pickles, and how many records it holds
            (``snapshot_records`` in :meth:`to_dict`; a record is one variable, or several that share objects).
        kernel: whether its kernel runs (:class:`toolpath.kernel.codemode.snapshot_store.KernelStatus`).
        holder: the process holding it: ``host``, ``pid``, ``since``, ``lease_expires`` (seconds since
            the epoch, by the store's clock) and ``gateway_kernel`` (what that process recorded), or ``None``.
        held: the states held when its snapshot was written (sorted; empty when it has none).
        paused: whether a task of it waits for an approval.
        problem: why the data saved with its snapshot could not be read (then ``held`` is empty), or ``None``.
    """

    session_id: str
    owner: str | None
    last_used: float | None
    saved: float | None
    snapshot_bytes: int
    variables: int
    kernel: KernelStatus
    holder: dict[str, Any] | None
    held: tuple[str, ...]
    paused: bool
    problem: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "owner": self.owner,
            "last_used": self.last_used,
            "saved": self.saved,
            "snapshot_bytes": self.snapshot_bytes,
            "snapshot_records": self.variables,
            "kernel_alive": self.kernel.alive,
            "kernel": self.kernel.why,
            "holder": self.holder,
            "held": list(self.held),
            "paused": self.paused,
            "problem": self.problem,
        }


@dataclass(frozen=True)
class StoredVariable:
    """A record of a session's snapshot: its variable ``names`` (several that share objects are
    saved together), the ``bytes`` of its pickle, and the states it ``carries``: ``(state, path)``,
    path ``None`` for the whole value, else the output path inside it (never its value)."""

    names: tuple[str, ...]
    bytes: int
    carries: tuple[tuple[str, str | None], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"names": list(self.names), "bytes": self.bytes, "carries": [{"state": state, "path": path} for state, path in self.carries]}


@dataclass(frozen=True)
class SessionDetails:
    """One session of :func:`show_session`: its :class:`SessionSummary` and what it holds.

    Attributes:
        variables: its snapshot's records, largest first.
        not_saved: variables its last snapshot could not save (why is not shown: see the module docstring).
        domains: the domains whose handles it bound.
        pending: the approval its paused task waits for: ``tool``, ``reason``, ``digest`` (of the
            arguments) and ``step`` (its index), or nothing.
        decisions: the newest approval decisions on its calls, every user's, newest first; ``decisions_total`` counts them all.
        runs: the newest tasks planned or run in it (the record of use, as redacted when written), newest first.
    """

    summary: SessionSummary
    variables: tuple[StoredVariable, ...] = ()
    not_saved: tuple[str, ...] = ()
    domains: tuple[str, ...] = ()
    pending: tuple[dict[str, Any], ...] = ()
    decisions: tuple[RecordedDecision, ...] = ()
    decisions_total: int = 0
    runs: tuple[RecordedUse, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.summary.to_dict(),
            "variables": [variable.to_dict() for variable in self.variables],
            "not_saved": list(self.not_saved),
            "domains": list(self.domains),
            "approvals": {
                "pending": list(self.pending),
                "answered": [decision.to_dict() for decision in self.decisions],
                "answered_total": self.decisions_total,
            },
            "recent_runs": [_run_dict(run) for run in self.runs],
        }


@dataclass(frozen=True)
class ClosedSession:
    """What :func:`close_session` did: the session as it was (``summary``) and what became of its
    kernel (``kernel``, a sentence)."""

    summary: SessionSummary
    kernel: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "closed": self.summary.session_id,
            "owner": self.summary.owner,
            "removed": {"snapshot_records": self.summary.variables, "snapshot_bytes": self.summary.snapshot_bytes},
            "kernel_alive": self.summary.kernel.alive,
            "kernel": self.kernel,
            "kept": ["approval decisions", "record of use"],
        }


def store_name(location: str | os.PathLike[str] | None) -> str:
    """The store ``location`` names (default ``$TOOLPATH_STORE``, else ``$TOOLPATH_HOME/toolpath.db``),
    as messages show it (a URL without its password).

    Raises:
        registry.storage.StoreError: a location no store can be at (see :func:`toolpath.registry.database.store_location`).
    """
    where = store_location(location)
    if is_postgres(where):
        from toolpath.registry.postgres import shown_url

        return shown_url(where)
    return where


def store_exists(location: str | os.PathLike[str] | None) -> bool:
    """Whether there is a store at ``location``: a SQLite file that exists, or any PostgreSQL URL
    (whose server is only reached when it is read).

    Raises:
        registry.storage.StoreError: as :func:`store_name`.
    """
    where = store_location(location)
    return is_postgres(where) or Path(where).exists()


def _open(location: str | os.PathLike[str] | None) -> SnapshotStore | None:
    """The store at ``location``; ``None`` for a SQLite file that does not exist (reading sessions
    must not make an empty store where a mistyped path points)."""
    return SnapshotStore(store_location(location)) if store_exists(location) else None


def list_sessions(location: str | os.PathLike[str] | None = None, owner: str | None = None) -> list[SessionSummary]:
    """Every session in the store (only ``owner``'s when given), most recently used first; none
    when there is no store at ``location`` (:func:`store_exists`: nothing is made there).

    Raises:
        registry.storage.StoreError: the store cannot be read.
    """
    store = _open(location)
    if store is None:
        return []
    summaries = [_summary(stored)[0] for stored in store.stored() if owner is None or stored.owner == owner]
    return sorted(summaries, key=lambda summary: (-(summary.last_used or 0), summary.session_id))


def show_session(location: str | os.PathLike[str] | None, session_id: str, runs: int = DEFAULT_RUNS, decisions: int = DEFAULT_DECISIONS) -> SessionDetails:
    """One session: its summary, its snapshot's variables (names, sizes, states carried), its
    approvals and its recent runs.

    Raises:
        SessionIdError: an id no store can keep.
        UnknownSessionError: the store has no such session.
        registry.storage.StoreError: the store cannot be read.
    """
    store, stored = _found(location, session_id)
    summary, state, not_saved = _summary(stored)
    carried: dict[str, list[tuple[str, str | None]]] = {}
    if state is not None:
        for variable, carried_state in state.artifacts.items():
            carried.setdefault(variable, []).append((carried_state, None))
        for variable, places in state.outputs.items():
            carried.setdefault(variable, []).extend((held, place.path) for held, place in places.items())
    variables = []
    for key, size in sorted(stored.variables.items(), key=lambda item: (-item[1], item[0])):
        names = tuple(_record_names(key))
        variables.append(StoredVariable(names, size, tuple(place for name in names for place in carried.get(name, ()))))
    pending = ()
    if state is not None and state.paused is not None:
        request = state.paused["request"]
        pending = ({"tool": request["tool"], "reason": request["reason"], "digest": request["digest"], "step": state.paused["step"]},)
    answered, total = ApprovalLog(store.database).session_decisions(session_id, decisions)
    from toolpath.planner.tasks.record_of_use import session_history  # loads the planner's graph: only to show one session

    recent = session_history(store.database, session_id, runs)
    return SessionDetails(
        summary,
        tuple(variables),
        not_saved,
        state.domains if state is not None else (),
        pending,
        tuple(answered),
        total,
        tuple(recent),
    )


def find_session(location: str | os.PathLike[str] | None, session_id: str) -> SessionSummary:
    """The summary of one session (what :func:`close_session` would close).

    Raises:
        SessionIdError, UnknownSessionError, registry.storage.StoreError: as :func:`show_session`.
    """
    return _summary(_found(location, session_id)[1])[0]


def _found(location: str | os.PathLike[str] | None, session_id: str) -> tuple[SnapshotStore, StoredSession]:
    """The store at ``location`` and its session ``session_id``.

    Raises:
        SessionIdError, UnknownSessionError, registry.storage.StoreError: as :func:`show_session`.
    """
    check_session_id(session_id)
    store = _open(location)
    if store is None:
        raise UnknownSessionError(session_id, store_name(location), absent=True)
    found = store.stored(session_id)
    if not found:
        raise UnknownSessionError(session_id, store.database.location)
    return store, found[0]


def close_session(location: str | os.PathLike[str] | None, session_id: str) -> ClosedSession:
    """Remove the session from the store (its owner and snapshot, in one transaction) and void its
    holder's hold, so a process running its kernel stops it at its next lease renewal.

    A process that still has the session open (an agent connected to ``toolpath serve``) starts a
    fresh kernel, with nothing restored, if it is used again: closing does not keep a user out.

    Raises:
        SessionIdError, UnknownSessionError, registry.storage.StoreError: as :func:`show_session`;
            nothing was changed.
    """
    check_session_id(session_id)
    store = _open(location)
    if store is None:
        raise UnknownSessionError(session_id, store_name(location), absent=True)
    removed = store.remove(session_id)
    if removed is None:
        raise UnknownSessionError(session_id, store.database.location)
    summary = _summary(removed)[0]
    return ClosedSession(summary, _kernel_outcome(removed, summary.kernel))


def _kernel_outcome(removed: StoredSession, status: KernelStatus) -> str:
    """What becomes of the kernel of a session just removed, in one sentence."""
    if status.alive is False:
        return f"it had no running kernel ({status.why})"
    if status.alive is None:
        return f"its kernel may still run: {status.why}; nothing here can stop it"
    if removed.lease_expires is None:
        return f"{removed.holder} holds it without a lease (a toolpath from before leases) and is not told: its snapshots are refused from now on, but its kernel runs until that process ends the session"
    within = max(0, math.ceil(removed.lease_expires - removed.checked_at))
    if removed.kernel and removed.kernel.get("kernel_id"):
        # A holder that loses a session leaves its gateway kernel for the process taking it over.
        return (
            f"{removed.holder} lets go of its kernel when it next renews its hold, within {within} s; that kernel, "
            f"{removed.kernel.get('kernel_id')} on the gateway {removed.kernel.get('gateway')}, runs on there until the gateway culls it"
        )
    return f"{removed.holder} stops its kernel when it next renews its hold, within {within} s"


def _summary(stored: StoredSession) -> tuple[SessionSummary, SessionState | None, tuple[str, ...]]:
    """The summary of ``stored``, the session state saved with it (``None``: none or unreadable)
    and the names its last snapshot could not save."""
    problems = []
    state = None
    if stored.data_json:
        try:
            data = json.loads(stored.data_json)
        except ValueError as error:
            problems.append(f"the data saved with its snapshot is not JSON ({error})")
        else:
            try:
                state = SessionState.from_dict(data)
            except ValueError as error:
                problems.append(f"the data saved with its snapshot is not an agent session's state ({error})")
    not_saved: tuple[str, ...] = ()
    if stored.skipped_json:
        try:
            skipped = json.loads(stored.skipped_json)
            if not isinstance(skipped, dict):
                raise ValueError(f"a JSON {type(skipped).__name__}, not an object")
            not_saved = tuple(sorted(name for key in skipped for name in _record_names(str(key))))
        except ValueError as error:
            problems.append(f"its list of variables not saved cannot be read ({error})")
    holder = None
    if stored.holder is not None:
        holder = {
            "host": stored.holder.host,
            "pid": stored.holder.pid,
            "since": stored.held_since,
            "lease_expires": stored.lease_expires,
            "gateway_kernel": stored.kernel,
        }
    times = [moment for moment in (stored.saved or None, stored.held_since) if moment]
    summary = SessionSummary(
        session_id=stored.session_id,
        owner=stored.owner,
        last_used=max(times) if times else None,
        saved=stored.saved or None,
        snapshot_bytes=stored.snapshot_bytes,
        variables=len(stored.variables),
        kernel=stored.kernel_status(),
        holder=holder,
        held=state.held if state is not None else (),
        paused=state is not None and state.paused is not None,
        problem="; ".join(problems) or None,
    )
    return summary, state, not_saved


def _record_names(key: str) -> list[str]:
    from toolpath.kernel.inside.snapshot import record_names

    return record_names(key)


def _run_dict(run: RecordedUse) -> dict[str, Any]:
    """A run of :attr:`SessionDetails.runs` as ``--json`` gives it: when, whose, what was asked (as
    the record of use keeps it) and what was planned and ran."""
    return {
        "recorded_at": run.recorded_at,
        "user": run.user,
        "interface": run.interface,
        "outcome": run.outcome,
        "request": run.request,
        "steps": list(run.steps) or None,
        "ran": list(run.ran),
        "shown": list(run.shown),
        "detail": run.detail,
        "redaction": run.redaction,
    }
