"""Session snapshots: each session's variables kept in the store and restored into its next kernel.

A snapshot is written once no cell has run for ``debounce`` seconds (and before an eviction), holding
only the variables whose pickle changed; the next kernel the session gets (after this process
restarts, an eviction or a death) loads it before its first cell. The pickling and loading run in
the kernel (:mod:`toolpath.kernel.inside.snapshot`); files move through its private directory.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from toolpath.kernel.codemode.notices import exception_line, join, sentence, short_error
from toolpath.kernel.codemode.options import SnapshotPolicy
from toolpath.kernel.codemode.session_record import SessionRecord
from toolpath.kernel.codemode.snapshot_store import SessionHolder, SnapshotConflictError, SnapshotStore
from toolpath.kernel.errors import KernelError, SessionHeldError
from toolpath.kernel.inside.protocol import SNAPSHOT_MODULE
from toolpath.kernel.inside.snapshot import pack, record_names, report_path, unpack
from toolpath.kernel.kernels.ipython_kernel import INTERRUPT_GRACE, IPythonKernel
from toolpath.kernel.observer import CodeModeObserver
from toolpath.registry.storage import StoreError

#: Files in a kernel's private directory through which variables leave and enter it.
_DUMP_FILE = "snapshot-dump"
_RESTORE_FILE = "snapshot-restore"
#: The largest report the host reads of a dump or restore (names and reasons; a few kB in practice).
MAX_REPORT_BYTES = 4 * 2**20
#: What a dump file may hold beyond ``max_snapshot_bytes`` of pickles: each record's header and name.
_DUMP_OVERHEAD_BYTES = 4 * 2**20
#: Variables named in a restore notice before the rest are counted.
_NOTICE_NAMES = 20
#: Seconds a process asking for a session another one holds waits for it to be let go before
#: being refused (a replica ending the session, or a lease about to run out).
HOLD_WAIT_SECONDS = 3.0
_HOLD_POLL_SECONDS = 0.25


class SessionSnapshots:
    """Writes and restores the snapshots of CodeMode's sessions; with no ``store``, keeps nothing.

    Args:
        store: where snapshots and session owners are kept; ``None``: snapshots are off.
        policy: when and how much to write.
        timeout: seconds a dump or restore cell may run (the cells' own limit).
        busy_wait: seconds a flush waits for a running cell before it keeps the previous snapshot.
        loop: the loop that drives the kernels (CodeMode's own): the debounce timers run on it.
        interrupt_grace: seconds a dump or restore cell gets to stop after its interrupt (the cells'
            own; a cell may have replaced the dump with one that ignores it).
        observer: told of each snapshot written, and of each that failed.
    """

    def __init__(
        self,
        store: SnapshotStore | None,
        policy: SnapshotPolicy,
        timeout: float | None,
        busy_wait: float,
        loop: asyncio.AbstractEventLoop,
        interrupt_grace: float = INTERRUPT_GRACE,
        observer: CodeModeObserver | None = None,
    ):
        self.store = store
        self.observer = observer or CodeModeObserver()
        self.policy = policy
        self.timeout = timeout
        self.interrupt_grace = interrupt_grace
        self.busy_wait = busy_wait
        self.loop = loop
        # Snapshots the debounce timer started and that are still being written.
        self._writing: set[asyncio.Task] = set()
        self.holder = SessionHolder.this_process() if store is not None else None
        # The sessions this process holds in the store, whose leases it renews.
        self._held: dict[str, SessionRecord] = {}
        self._renewing: asyncio.Task | None = None
        #: Called with a session another process took over (its lease ran out unrenewed): this
        #: process must stop driving it (the session pool lets go of its kernel).
        self.on_lost: Callable[[SessionRecord], Awaitable[None]] | None = None
        self._letting_go: set[asyncio.Task] = set()

    async def take(self, session: SessionRecord) -> tuple[str, dict[str, Any] | None]:
        """Hold the session in the store for this process (before its kernel starts), waiting up
        to :data:`HOLD_WAIT_SECONDS` for another holder to let go. Returns a notice when it was
        taken over from a process that ended, or stopped renewing its lease, without letting go,
        and the kernel that process recorded (:meth:`record_kernel`), which may still run.

        Raises:
            SessionHeldError: another process still holds it after the wait.
            registry.storage.StoreError: the store cannot be written.
        """
        if self.store is None or self.holder is None:
            return "", None
        deadline = time.monotonic() + HOLD_WAIT_SECONDS
        while True:
            try:
                taken = await asyncio.to_thread(self.store.take, session.session_id, self.holder)
                break
            except SessionHeldError:
                if time.monotonic() >= deadline:
                    raise
                await asyncio.sleep(_HOLD_POLL_SECONDS)
        session.generation = taken.generation
        self._held[session.session_id] = session
        if self._renewing is None or self._renewing.done():
            self._renewing = asyncio.ensure_future(self._renew_leases())
        if taken.previous is None:
            return "", None
        return (
            f"This session was held by {taken.previous}, which ended or stopped renewing its hold without letting go of it; this process took it over.",
            taken.kernel,
        )

    async def record_kernel(self, session: SessionRecord) -> None:
        """Record in the store where the session's kernel runs when it is on a gateway (where
        another process can reach it after this one fails); a store that cannot be written only
        loses that hint."""
        kernel = session.kernel
        if self.store is None or session.generation is None or kernel is None or kernel.gateway is None or kernel.kernel_id is None:
            return
        with contextlib.suppress(StoreError):
            record = {"gateway": kernel.gateway.url, "kernel_id": kernel.kernel_id}
            await asyncio.to_thread(self.store.record_kernel, session.session_id, session.generation, record)

    async def _renew_leases(self) -> None:
        """Renew the leases of the sessions this process holds, every third of a lease, until it
        holds none. A session another process took over meanwhile is no longer renewed; its
        snapshots are refused by the store (the generation moved on)."""
        assert self.store is not None
        while self._held:
            await asyncio.sleep(self.store.lease_seconds / 3)
            held = {session_id: session.generation for session_id, session in self._held.items() if session.generation is not None}
            try:
                lost = await asyncio.to_thread(self.store.renew, held)
            except StoreError:
                continue  # the next round tries again; the lease runs out only if every round fails
            for session_id in lost:
                session = self._held.get(session_id)
                if session is None or session.generation != held[session_id]:
                    continue  # released, or taken again, while this round ran
                del self._held[session_id]
                if self.on_lost is not None:
                    # Apart from this loop: letting go waits for the session's running cell, and
                    # the other sessions' leases must not wait for that.
                    letting_go = asyncio.ensure_future(self.on_lost(session))
                    self._letting_go.add(letting_go)
                    letting_go.add_done_callback(self._letting_go.discard)

    async def stop_renewing(self) -> None:
        """Stop renewing leases (the sessions have been released, or this process is ending)."""
        if self._renewing is not None:
            self._renewing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._renewing
            self._renewing = None

    async def release(self, session: SessionRecord) -> None:
        """Let go of the session in the store (its kernel is gone). A store that cannot be written
        keeps the hold, which another process takes over once this one has ended or its lease
        has run out."""
        generation, session.generation = session.generation, None
        if self._held.get(session.session_id) is session:
            del self._held[session.session_id]
        if self.store is not None and generation is not None:
            with contextlib.suppress(StoreError):
                await asyncio.to_thread(self.store.release, session.session_id, generation)

    async def check_not_held(self, session: SessionRecord) -> None:
        """Raise when another running process holds the session (before discarding its snapshot).

        Raises:
            SessionHeldError: another running process holds it.
        """
        if self.store is not None and self.holder is not None and session.generation is None:
            await asyncio.to_thread(self.store.check_not_held, session.session_id, self.holder)

    async def claim(self, session_id: str, owner: str | None) -> str | None:
        """The session's owner: the one recorded in the store, else ``owner`` (then recorded).

        Raises:
            registry.storage.StoreError: the store cannot be read or written.
        """
        if self.store is None:
            return owner
        return await asyncio.to_thread(self.store.claim, session_id, owner)

    async def is_stored(self, session_id: str) -> bool:
        """Whether the store knows the session (it has an owner or a snapshot there)."""
        return self.store is not None and (await asyncio.to_thread(self.store.owner, session_id))[0]

    async def saved_data(self, session: SessionRecord) -> Any:
        """The data saved with the session's last snapshot (read from the store before its kernel
        restores it); ``None`` when there is none."""
        if self.store is not None and session.kernel is None and session.saved_data is None:
            # A damaged store is reported by the kernel's restore, which meets the same damage.
            with contextlib.suppress(StoreError):
                session.saved_data = await asyncio.to_thread(self.store.saved_data, session.session_id)
        return session.saved_data

    async def restore(self, session: SessionRecord) -> tuple[str, bool]:
        """Load the session's snapshot into its new kernel.

        Returns:
            What was restored and skipped, in words; and whether variables were loaded, after which
            the caller binds the handles again, over anything restored under their names.

        Never raises: a snapshot that cannot be read leaves the kernel empty and is protected from
        being overwritten by it (``keep_snapshot``) until :meth:`discard` drops it.
        """
        session.restored = False
        lost, session.lost_kernel = session.lost_kernel, False
        gone = "earlier variables are gone" if lost else ""
        if self.store is None or session.kernel is None:
            return sentence(gone), False
        kernel = session.kernel
        try:
            snapshot = await asyncio.to_thread(self.store.load, session.session_id)
        except StoreError as error:
            session.keep_snapshot = True
            return (
                f"This session's snapshot could not be read ({error}); this kernel starts empty, and its variables will not be saved over that snapshot (restart discards it).",
                False,
            )
        if snapshot is None:
            return sentence(gone and f"{gone}: the session has no snapshot"), False
        session.saved_data = snapshot.data
        session.digests = dict(snapshot.digests)
        report: dict[str, Any] = {"restored": [], "failed": {}}
        if snapshot.pickles:
            try:
                await kernel.write_file(_RESTORE_FILE, pack(snapshot.pickles))
                report = await self._in_kernel(kernel, f"restore({kernel.path(_RESTORE_FILE)!r})", _RESTORE_FILE, _RESTORE_REPORT)
            except (OSError, KernelError, ValueError) as error:
                # Some variables may have loaded before it stopped; keep the snapshot whole.
                session.keep_snapshot = True
                return (
                    f"Restoring this session's snapshot stopped ({error}); some variables may be missing, so this kernel's variables will not be saved over that snapshot (restart discards it).",
                    True,
                )
        session.restored = True
        session.unrestored = {name: snapshot.digests[name] for name in report["failed"] if name in snapshot.digests}
        notice = restore_notice(snapshot.saved, report["restored"], {**snapshot.skipped, **report["failed"]}, kept=sorted(session.unrestored))
        return notice, bool(snapshot.pickles)

    def schedule(self, session: SessionRecord) -> None:
        """Snapshot ``session`` once no cell has run for ``debounce`` seconds (call on :attr:`loop`)."""
        if self.store is None or session.keep_snapshot:
            return
        session.dirty = True
        if session.snapshot_timer is not None:
            session.snapshot_timer.cancel()
        session.snapshot_timer = self.loop.call_later(self.policy.debounce, self._start, session)

    async def write_now(self, session: SessionRecord) -> str:
        """Write the session's snapshot now (the caller holds its lock); why it failed, or ``""``."""
        if self.store is None or session.keep_snapshot:
            return ""
        session.dirty = True
        before, session.notice = session.notice, ""
        await self._snapshot(session)
        failed, session.notice = session.notice, before
        return failed

    def _start(self, session: SessionRecord) -> None:
        session.snapshot_timer = None
        task = self.loop.create_task(self.flush(session, wait=False))
        self._writing.add(task)
        task.add_done_callback(self._writing.discard)

    async def flush(self, session: SessionRecord, wait: bool = True) -> None:
        """Write the session's pending snapshot. ``wait=False`` (the debounce timer) gives up when a
        cell is running, since that cell schedules the next snapshot; ``wait=True`` waits up to
        ``busy_wait`` seconds for it, then keeps the previous snapshot."""
        if not session.dirty or session.kernel is None:
            return
        if session.lock.locked() and not wait:
            return
        try:
            async with asyncio.timeout(self.busy_wait):
                await session.lock.acquire()
        except TimeoutError:
            return
        try:
            await self._snapshot(session)
        finally:
            session.lock.release()

    async def flush_all(self, sessions: list[SessionRecord]) -> None:
        """Write every pending snapshot of ``sessions`` (after any the debounce timer already started)."""
        if self._writing:
            await asyncio.gather(*list(self._writing), return_exceptions=True)
        await asyncio.gather(*(self.flush(session) for session in sessions if session.dirty))

    async def discard(self, session: SessionRecord) -> None:
        """Forget the session's snapshot, here and in the store (a restart)."""
        if session.snapshot_timer is not None:
            session.snapshot_timer.cancel()
            session.snapshot_timer = None
        session.dirty = session.keep_snapshot = session.restored = session.lost_kernel = False
        session.saved_data, session.digests, session.unrestored = None, {}, {}
        if self.store is not None:
            await asyncio.to_thread(self.store.discard, session.session_id)

    async def _in_kernel(self, kernel: IPythonKernel, call: str, file: str, shape: dict[str, type]) -> dict[str, Any]:
        """Run ``toolpath.kernel.inside.snapshot.<call>`` in a silent cell; the report it wrote next to
        ``file``, checked to have ``shape`` (:func:`checked_report`).

        Raises:
            KernelError: the cell failed (its exception in one line), or its report is not a report
                (:class:`UnsafeKernelFileError` when it is no regular file or too large).
        """
        done = await kernel.execute(
            f"import {SNAPSHOT_MODULE} as _toolpath_snapshot\n_toolpath_snapshot.{call}\ndel _toolpath_snapshot",
            timeout=self.timeout,
            silent=True,
            interrupt_grace=self.interrupt_grace,
        )
        if done.status != "ok":
            raise KernelError(short_error(done))
        return checked_report(await kernel.take_file(report_path(file), MAX_REPORT_BYTES), shape)

    async def _snapshot(self, session: SessionRecord) -> None:
        """Write the snapshot of ``session``'s kernel (the caller holds its lock); a failure is told in
        the next notice and keeps the previous snapshot."""
        if session.snapshot_timer is not None:
            session.snapshot_timer.cancel()
            session.snapshot_timer = None
        if not session.dirty or session.kernel is None or self.store is None or session.keep_snapshot:
            return
        session.dirty = False
        try:
            try:
                await self._write(session)
            except SnapshotConflictError:  # the stored snapshot changed under us: write every variable
                session.digests = {}
                await self._write(session)
        except SessionHeldError as error:  # another holder's snapshot is newer: never write over it again
            session.keep_snapshot = True
            self.observer.snapshot_failed()
            session.notice = join(session.notice, f"This session's variables were not saved: {error}.")
        except Exception as error:  # the cell has already returned: tell the model next time, keep the old snapshot
            self.observer.snapshot_failed()
            session.notice = join(session.notice, f"Saving this session's snapshot failed ({exception_line(error)}); the previous snapshot, if any, is kept.")

    async def _write(self, session: SessionRecord) -> None:
        """Pickle the kernel's variables and store those whose pickle changed, in one transaction."""
        assert session.kernel is not None and self.store is not None
        kernel = session.kernel
        policy = self.policy
        report = await self._in_kernel(
            kernel,
            f"dump({kernel.path(_DUMP_FILE)!r}, {policy.max_variable_bytes}, {policy.max_snapshot_bytes}, {session.digests!r})",
            _DUMP_FILE,
            _DUMP_REPORT,
        )
        changed = unpack(await kernel.take_file(_DUMP_FILE, policy.max_snapshot_bytes + _DUMP_OVERHEAD_BYTES))
        # Records that could not be loaded stay stored until the kernel defines one of their names itself.
        defined = {name for key in [*report["saved"], *report["skipped"]] for name in record_names(key)}
        session.unrestored = {key: digest for key, digest in session.unrestored.items() if defined.isdisjoint(record_names(key))}
        saved = {**report["saved"], **session.unrestored}
        data = session.data_provider() if session.data_provider is not None else None
        await asyncio.to_thread(self.store.save, session.session_id, session.owner, saved, changed, report["skipped"], data, session.generation)
        session.digests, session.saved_data = saved, data
        self.observer.snapshot_written(sum(len(pickle) for pickle in changed.values()))


#: The shapes of the reports :mod:`toolpath.kernel.inside.snapshot` writes: ``dict`` is
#: ``{str: str}`` (variable or record names to digests or reasons), ``list`` is ``[str]``.
_DUMP_REPORT = {"saved": dict, "skipped": dict}
_RESTORE_REPORT = {"restored": list, "failed": dict}


def checked_report(data: bytes, shape: dict[str, type]) -> dict[str, Any]:
    """A dump or restore report read from the kernel, which the cell's code may have written instead
    of toolpath's: JSON of exactly ``shape``'s fields, each a ``{str: str}`` or a ``[str]``.

    Raises:
        KernelError: anything else, named.
    """
    try:
        report = json.loads(data)
    except (ValueError, RecursionError) as error:
        raise KernelError(f"the kernel's snapshot report is not JSON ({exception_line(error)})") from None
    if not isinstance(report, dict) or set(report) != set(shape):
        raise KernelError(f"the kernel's snapshot report does not have the fields {', '.join(sorted(shape))}")
    for field, kind in shape.items():
        value = report[field]
        strings = [*value.keys(), *value.values()] if isinstance(value, dict) else value
        if not isinstance(value, kind) or not all(isinstance(item, str) for item in strings):
            raise KernelError(f"the kernel's snapshot report's {field} is not a {'mapping of names to text' if kind is dict else 'list of names'}")
    try:
        json.dumps(report, ensure_ascii=False).encode("utf-8")
    except UnicodeError:  # a lone surrogate (JSON's "\ud800") would break every reply that quotes it
        raise KernelError("the kernel's snapshot report holds text that is not Unicode (a lone surrogate)") from None
    return report


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:_NOTICE_NAMES])
    return shown + (f" and {len(names) - _NOTICE_NAMES} more" if len(names) > _NOTICE_NAMES else "")


def restore_notice(saved: float, restored: list[str], not_restored: dict[str, str], kept: list[str] = ()) -> str:
    """What a restore brought back and what it did not, for the model (nothing for an empty snapshot).

    Args:
        saved: when the snapshot was written, in seconds since the epoch.
    """
    if not restored and not not_restored:
        return ""
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(saved))
    text = f"Restored {len(restored)} variable(s) from this session's snapshot of {when}" + (f": {_names(restored)}." if restored else ".")
    if not_restored:
        reasons = [f"{name} ({reason})" for name, reason in sorted(not_restored.items())]
        text += f" Not restored: {_names(reasons)}."
    if kept:
        text += f" The snapshot keeps {_names(list(kept))} for a later kernel that can load them (define the name, or restart, to drop them)."
    return text
