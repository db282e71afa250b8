"""CodeMode's sessions and their kernels: ownership, a pool of ready kernels, caps and eviction.

- A session belongs to the user of the run that created it (with snapshots, the owner recorded in
  the store wins, so ownership survives this process); only that user may use it.
- The first cell of a session takes a kernel from the pool of pre-started ones when one is ready,
  and restores the session's snapshot into it.
- ``max_kernels`` caps live session kernels, ``max_kernels_per_user`` those of one owner: a new
  session evicts the least recently used idle one (its owner's own, for the per-user cap). With the
  per-user cap, one owner's kernels start one at a time, so one user opening many sessions at once
  takes one core for it, not every core other users' cells need.
- A kernel idle for ``idle_ttl`` seconds is shut down (its snapshot written first).
- With snapshots, this process holds a session in the store while it runs the session's kernel: a
  second process asking for it is refused (:class:`~toolpath.kernel.errors.SessionHeldError`)
  until the kernel goes (idle, evicted, ended, restarted, or this process shut down or dead).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from toolpath.errors import Refusal
from toolpath.kernel.codemode.notices import exception_line, join, short_error, shown
from toolpath.kernel.codemode.options import KernelCapacity
from toolpath.kernel.codemode.session_record import SessionRecord
from toolpath.kernel.codemode.session_snapshots import SessionSnapshots
from toolpath.kernel.errors import KernelCapacityError, KernelError
from toolpath.kernel.kernels.ipython_kernel import IPythonKernel

#: Evicted sessions remembered (to tell their next cell why the kernel went).
_EVICTION_MEMORY = 10_000
#: Characters a session or user id may have.
MAX_ID_CHARS = 512


class SessionOwnerError(Refusal, PermissionError):
    """A run asked for a session that belongs to another user (or to a user, when it gave none)."""


class SessionPool:
    """Sessions by id, with their kernels, and the pool of ready kernels.

    Args:
        capacity: caps, pool size and idle time.
        busy_wait: seconds a new session waits for a kernel under a cap to become idle.
        snapshots: claims owners, writes snapshots before evictions, restores them into new kernels.
        new_kernel: starts a kernel with CodeMode's own handles bound (a pool kernel serves anyone).
        stop_kernel: closes a kernel's bridge and shuts it down.
        restored: called with a kernel whose restore loaded variables (its handles must be bound again).
    """

    def __init__(
        self,
        capacity: KernelCapacity,
        busy_wait: float,
        snapshots: SessionSnapshots,
        new_kernel: Callable[[], Awaitable[IPythonKernel]],
        stop_kernel: Callable[[IPythonKernel], Awaitable[None]],
        restored: Callable[[IPythonKernel], None],
        attach_kernel: Callable[[Mapping[str, Any]], Awaitable[IPythonKernel | None]],
        leave_kernel: Callable[[IPythonKernel], Awaitable[None]],
    ):
        self.capacity = capacity
        self.busy_wait = busy_wait
        self.snapshots = snapshots
        self._new_kernel = new_kernel
        self._stop_kernel = stop_kernel
        self._restored = restored
        self._attach_kernel = attach_kernel
        self._leave_kernel = leave_kernel
        snapshots.on_lost = self._lost
        self.sessions: dict[str, SessionRecord] = {}
        # Why an evicted session lost its kernel (told to the model on its next cell), and the
        # session, whose bound tools its next kernel binds again.
        self._evicted: dict[str, tuple[str, SessionRecord]] = {}
        self.pool: list[IPythonKernel] = []
        # With max_kernels_per_user: one kernel start at a time per owner.
        self._owner_starts: dict[str | None, asyncio.Lock] = {}
        self._filling: asyncio.Task | None = None
        self._reaper: asyncio.Task | None = None
        self.closed = False

    def start(self) -> None:
        """Start filling the pool and reaping idle kernels (on the running loop)."""
        self._reaper = asyncio.create_task(self._reap_idle_sessions())
        self._fill()

    def is_known(self, session_id: str) -> bool:
        """Whether this process knows the session (live, or evicted not long ago)."""
        return session_id in self.sessions or session_id in self._evicted

    async def owned(self, session_id: str, user_id: str | None) -> SessionRecord:
        """The session ``session_id`` (created, with no kernel yet, when new) if ``user_id`` may use it.

        A new session belongs to ``user_id``; with snapshots, the owner recorded in the store (by
        this or another process) wins over that.

        Raises:
            SessionOwnerError: the session belongs to someone else (nothing is started or shown).
            ValueError: an empty or non-string session id or user id.
            registry.storage.StoreError: the owner cannot be looked up in the store.
        """
        check_ids(session_id, user_id)
        session = self.sessions.get(session_id)
        if session is None:
            reason, evicted = self._evicted.get(session_id, ("", None))
            owner = await self.snapshots.claim(session_id, evicted.owner if evicted is not None else user_id)
            session = self.sessions.get(session_id)  # another task may have created it meanwhile
            if session is None:
                session = self.sessions[session_id] = SessionRecord(session_id, owner=owner)
                if evicted is not None:
                    del self._evicted[session_id]
                    session.tools, session.universe, session.tools_version = evicted.tools, evicted.universe, evicted.tools_version
                    session.data_provider, session.lost_kernel = evicted.data_provider, True
                    session.notice = join(evicted.notice, f"This session's previous kernel was {reason}; this is a fresh kernel.")
        if session.owner != user_id:
            if user_id is None:
                raise SessionOwnerError(f"session {shown(session_id)} belongs to a user; pass that user's user_id to use it")
            if session.owner is None:
                raise SessionOwnerError(
                    f"session {shown(session_id)} was created without a user_id and belongs to no user; use it without user_id, or use another session id"
                )
            raise SessionOwnerError(f"session {shown(session_id)} belongs to another user, so user {shown(user_id)} cannot use it; use another session id")
        return session

    async def start_kernel(self, session: SessionRecord) -> str:
        """Give ``session`` a kernel and restore its snapshot into it; the restore's notice.

        Raises:
            KernelError: no kernel could be started, or every kernel under a cap ran cells for
                ``busy_wait`` seconds.
            SessionHeldError: with snapshots, another running process holds the session (it runs
                the session's kernel); nothing was started.
        """
        if self.capacity.max_kernels_per_user is None:
            return await self._start_kernel_now(session)
        async with self._owner_starts.setdefault(session.owner, asyncio.Lock()):
            return await self._start_kernel_now(session)

    async def _start_kernel_now(self, session: SessionRecord) -> str:
        taken, left_running = await self.snapshots.take(session)  # refused before any kernel starts
        session.starting = True  # counts against the caps while its kernel starts
        attached, attach_notice = False, ""
        try:
            await self._make_room(session)
            if left_running is not None:
                attached, attach_notice = await self._attach(session, left_running)
            if session.kernel is None:
                session.kernel = await self._take_kernel()
        except BaseException:
            await self.snapshots.release(session)
            raise
        finally:
            session.starting = False
        await self.snapshots.record_kernel(session)
        if attached:
            return join(taken, attach_notice)
        notice, loaded = await self.snapshots.restore(session)
        if loaded:
            self._restored(session.kernel)
        return join(join(taken, attach_notice), notice)

    async def _lost(self, session: SessionRecord) -> None:
        """Another process took ``session`` over (this one's lease ran out unrenewed): stop driving
        it, leaving its kernel to the taker when it is on a gateway; its next cell here asks for
        the session again (and is refused while the other process holds it)."""
        async with session.lock:  # after the cell it may be running
            # The session keeps its old generation: the store refuses its snapshots until it is taken again.
            kernel, session.kernel = session.kernel, None
            if kernel is not None:
                await self._leave_kernel(kernel)
            session.lost_kernel = True
            session.notice = join(
                session.notice,
                "This process lost its hold on the session to another process (it could not renew it in time), so it let go of the session's kernel.",
            )

    async def _attach(self, session: SessionRecord, left_running: Mapping[str, Any]) -> tuple[bool, str]:
        """Give ``session`` the kernel that the process it was taken over from left running on the
        gateway, if it still runs there: whether it did, and the notice saying what happened."""
        try:
            session.kernel = await self._attach_kernel(left_running)
        except KernelError as error:
            return False, f"Its kernel {left_running.get('kernel_id')} on the gateway could not be taken over ({short_error(error)}); this is a fresh kernel."
        if session.kernel is None:
            return False, f"Its kernel {left_running.get('kernel_id')} is not on this process's gateway any more; this is a fresh kernel."
        return True, f"Its kernel {session.kernel.kernel_id} was still running on the gateway: this process attached to it, with every variable as it was."

    async def discard(self, session: SessionRecord, evicted: str = "") -> None:
        """Shut the session's kernel down; ``evicted`` (the reason) also forgets the session, after
        writing its pending snapshot (the caller must not hold the session's lock then)."""
        if evicted:
            await self.snapshots.flush(session)
        kernel, session.kernel = session.kernel, None
        if evicted:
            self.sessions.pop(session.session_id, None)
            self._evicted[session.session_id] = (evicted, session)
            if len(self._evicted) > _EVICTION_MEMORY:  # remember recent evictions only
                del self._evicted[next(iter(self._evicted))]
        if kernel is not None:
            await self._stop_kernel(kernel)
        await self.snapshots.release(session)

    async def end(self, session_id: str, user_id: str | None) -> None:
        """Write the session's pending snapshot, shut its kernel down and forget it; unknown ids are ignored."""
        if session_id not in self.sessions:
            return
        session = await self.owned(session_id, user_id)
        await self.snapshots.flush(session)
        if self.sessions.get(session_id) is session:
            del self.sessions[session_id]
            await self.discard(session)

    async def _make_room(self, joining: SessionRecord) -> None:
        """Evict the least recently used idle session when ``joining`` would exceed
        ``max_kernels_per_user`` (one of its owner's sessions) or ``max_kernels`` (anyone's),
        waiting up to ``busy_wait`` seconds for one to become idle.

        Raises:
            KernelCapacityError: every kernel under the cap reached is still running a cell after the wait.
        """
        deadline = time.monotonic() + self.busy_wait
        per_user, everyone = self.capacity.max_kernels_per_user, self.capacity.max_kernels
        while True:
            live = [session for session in self.sessions.values() if (session.kernel is not None or session.starting) and session is not joining]
            owned = [session for session in live if session.owner == joining.owner]
            if per_user is not None and len(owned) >= per_user:
                candidates, option, cap, which = owned, "max_kernels_per_user", per_user, "the cap on one user's kernels"
            elif everyone is not None and len(live) >= everyone:
                candidates, option, cap, which = live, "max_kernels", everyone, "the cap on all users' kernels together"
            else:
                return
            idle = sorted(
                (session for session in candidates if session.kernel is not None and not session.lock.locked()), key=lambda session: session.last_used
            )
            if idle:
                await self.discard(idle[0], evicted=f"shut down to make room for another session ({option}={cap}, {which})")
                continue
            if time.monotonic() > deadline:
                flag = "--" + option.replace("_", "-")
                raise KernelCapacityError(
                    f"{option}={cap} ({which}) is reached and all {len(candidates)} of those kernels are running cells; retry when one finishes, end or restart a session you no longer need, or raise the cap: CodeMode({option}=N), toolpath serve {flag} N"
                )
            await asyncio.sleep(0.05)

    def _fill(self) -> None:
        if self.capacity.pool_size and (self._filling is None or self._filling.done()):
            self._filling = asyncio.create_task(self._refill())

    async def _refill(self) -> None:
        while len(self.pool) < self.capacity.pool_size and not self.closed:
            try:
                kernel = await self._new_kernel()
            except KernelError:
                return  # a session that needs a kernel will start one itself and report the error
            if self.closed:
                await self._stop_kernel(kernel)
                return
            self.pool.append(kernel)

    async def _take_kernel(self) -> IPythonKernel:
        while self.pool:
            kernel = self.pool.pop(0)
            self._fill()
            if await kernel.is_alive():
                return kernel
            await self._stop_kernel(kernel)
        kernel = await self._new_kernel()
        self._fill()
        return kernel

    async def _reap_idle_sessions(self) -> None:
        idle_ttl = self.capacity.idle_ttl
        interval = max(0.05, min(idle_ttl / 4, 60.0))
        while True:
            await asyncio.sleep(interval)
            now = time.monotonic()
            for session in list(self.sessions.values()):
                if session.kernel is not None and not session.lock.locked() and now - session.last_used > idle_ttl:
                    try:
                        await self.discard(session, evicted=f"shut down after {idle_ttl:g} s without use")
                    except Exception as error:  # one kernel that fails to stop must not end eviction for all
                        session.notice = join(session.notice, f"Stopping this session's idle kernel failed ({exception_line(error)}).")

    async def close(self) -> None:
        """Stop the background tasks and shut every kernel down (sessions and pool); write pending
        snapshots first (:meth:`SessionSnapshots.flush_all`)."""
        self.closed = True
        background = [task for task in (self._reaper, self._filling) if task is not None]
        for task in background:
            task.cancel()
        # A kernel being started for the pool stops it itself on cancellation: let it finish that.
        await asyncio.gather(*background, return_exceptions=True)
        kernels = [session.kernel for session in self.sessions.values() if session.kernel is not None] + self.pool
        held = list(self.sessions.values())
        self.sessions.clear()
        self.pool = []
        await asyncio.gather(*(self._stop_kernel(kernel) for kernel in kernels), return_exceptions=True)
        await asyncio.gather(*(self.snapshots.release(session) for session in held))


def check_ids(session_id: object, user_id: object) -> None:
    """A session id, and a user id unless it is ``None`` (see :func:`check_id`).

    Raises:
        ValueError: either is not a non-blank string the store can keep.
    """
    check_id(session_id, "session_id")
    if user_id is not None:
        check_id(user_id, "user_id")


def check_id(value: object, what: str) -> None:
    """A session or user id: a string with a non-blank character that every store can keep (UTF-8,
    no NUL, at most :data:`MAX_ID_CHARS` characters).

    Raises:
        ValueError: anything else.
    """
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{what} must be a non-blank string given by the program, got {shown(value)}")
    try:
        value.encode()
    except UnicodeEncodeError as error:
        raise ValueError(f"{what} {shown(value)} is not valid Unicode text (it has a lone surrogate at position {error.start})") from error
    # Limits of the store's keys on every engine: PostgreSQL text holds no NUL, and an index entry
    # at most about 2,700 bytes (512 characters are at most 2,048 bytes of UTF-8).
    if "\x00" in value:
        raise ValueError(f"{what} {shown(value)} has a NUL character, which no store can keep; remove it")
    if len(value) > MAX_ID_CHARS:
        raise ValueError(f"{what} is {len(value):,} characters long; at most {MAX_ID_CHARS} are kept by the store, use a shorter id")
