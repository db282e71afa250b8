"""Kernel-side snapshots (this module is imported *in the kernel process*).

CodeMode calls :func:`dump` in a silent cell to snapshot the user's variables and :func:`restore` in
a fresh kernel to bring them back. Both exchange the variables through one file in the kernel's
private directory (mode 0700): a sequence of records, each a variable's name and its own dill
pickle (:func:`pack` / :func:`unpack`), so every variable loads or fails on its own and the host
never unpickles anything. Both write their report (what was saved or restored, what was skipped
and why) as JSON to a second file beside it, not to stdout, which a cell may have redirected or a
background thread may be writing to.

Each variable gets at most :data:`VARIABLE_SECONDS` to pickle or to load (a ``__reduce__`` that
sleeps, or exits): past that, or on any exception, that variable alone is skipped and named.

What is snapshotted: the names IPython's ``%who_ls`` lists (no ``_``-prefixed names, none of
IPython's own), except toolpath's own objects: the tool handles and the functions that bind them
(those are bound again in every kernel). A module (``pd``
from ``import pandas as pd``) is saved by name, as dill does, and imported again on restore.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import pickle
import signal
import struct
import types
from collections.abc import Iterator, Mapping
from typing import Any

import dill

from toolpath.kernel import kernel_setup

#: The longest reason kept for a variable that could not be pickled or restored.
_REASON_CHARS = 200
#: Seconds one variable may take to pickle or to load (a 40 MB array takes about 0.05 s).
VARIABLE_SECONDS = 10.0


class _TooSlow(BaseException):
    """Not an ``Exception``: a ``__reduce__`` that catches ``Exception`` must not swallow it."""


@contextlib.contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    """Raise :class:`_TooSlow` in the block after ``seconds`` (SIGALRM: cells run in the kernel's
    main thread, where the signal is delivered)."""

    def expire(signum: int, frame: Any) -> None:
        raise _TooSlow

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def report_path(path: str) -> str:
    """The file beside ``path`` that holds the JSON report of a dump or restore."""
    return f"{path}.report"


def _write_report(path: str, report: dict[str, Any]) -> None:
    partial = f"{report_path(path)}.partial"
    with open(partial, "w", encoding="utf-8") as file:
        json.dump(report, file)
    os.replace(partial, report_path(path))


class _TooLarge(Exception):
    pass


class _BoundedBuffer(io.BytesIO):
    """A buffer that refuses to grow past ``limit`` bytes, so an oversized variable is never pickled whole."""

    def __init__(self, limit: int):
        super().__init__()
        self.limit = limit

    def write(self, data: Any) -> int:
        if self.tell() + memoryview(data).nbytes > self.limit:
            raise _TooLarge
        return super().write(data)


_HEADER = struct.Struct(">IQ")  # name length, pickle length


def pack(pickles: Mapping[str, bytes]) -> bytes:
    """``{name: pickle}`` as one byte string of records (name length, pickle length, name, pickle)."""
    parts = []
    for name, data in pickles.items():
        encoded = name.encode()
        parts += [_HEADER.pack(len(encoded), len(data)), encoded, data]
    return b"".join(parts)


def unpack(data: bytes) -> dict[str, bytes]:
    """The inverse of :func:`pack`.

    Raises:
        ValueError: ``data`` is not a whole sequence of records.
    """
    pickles: dict[str, bytes] = {}
    view, position = memoryview(data), 0
    while position < len(data):
        if position + _HEADER.size > len(data):
            raise ValueError("snapshot records end in the middle of a header")
        name_length, pickle_length = _HEADER.unpack_from(view, position)
        position += _HEADER.size
        end = position + name_length + pickle_length
        if end > len(data):
            raise ValueError("snapshot records end in the middle of a record")
        pickles[bytes(view[position : position + name_length]).decode()] = bytes(view[position + name_length : end])
        position = end
    return pickles


def _reason(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}"
    return text if len(text) <= _REASON_CHARS else text[: _REASON_CHARS - 3] + "..."


#: toolpath's kernel-side modules: their functions and objects are toolpath's, not the user's.
_TOOLPATH_MODULES = frozenset({"toolpath.kernel.handles", "toolpath.kernel.bridge_client", "toolpath.kernel.kernel_setup", __name__})


def _is_toolpath_object(value: Any) -> bool:
    module = value.__module__ if isinstance(value, (types.FunctionType, type)) else type(value).__module__
    return module in _TOOLPATH_MODULES


def _candidates(shell: Any) -> list[str]:
    names = shell.run_line_magic("who_ls", "") or []
    return [name for name in names if name not in kernel_setup._handles and not _is_toolpath_object(shell.user_ns[name])]


class _Pickler(pickle.Pickler):
    """The C pickler (fast on arrays and frames), with functions and classes defined in cells
    pickled by dill, by value. One that is itself a variable of the namespace is saved by reference
    when another variable uses it (``origin = Point(3)`` refers to the variable ``Point``), so after a
    restore ``isinstance(origin, Point)`` still holds."""

    def __init__(self, file: io.BytesIO, namespace: dict[str, Any], variable: Any):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.namespace = namespace
        self.variable = variable

    def reducer_override(self, obj: Any) -> Any:
        if not isinstance(obj, (types.FunctionType, type)) or getattr(obj, "__module__", None) != "__main__":
            return NotImplemented
        if obj is not self.variable and self.namespace.get(obj.__qualname__) is obj:
            return NotImplemented  # the C pickler saves __main__.<name>, restored on its own
        return dill.loads, (dill.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL),)


def _pickled(value: Any, namespace: dict[str, Any], limit: int) -> bytes:
    """``value``'s pickle; dill's own pickler (slower, pickles more) when the C pickler refuses it.

    Raises:
        _TooLarge: the pickle is over ``limit`` bytes.
        Exception: neither can pickle it.
    """
    buffer = _BoundedBuffer(limit)
    try:
        _Pickler(buffer, namespace, value).dump(value)
    except (_TooLarge, _TooSlow):
        raise
    except Exception:  # a closure, a lambda held by an object ...: let dill try
        buffer = _BoundedBuffer(limit)
        dill.dump(value, buffer, protocol=pickle.HIGHEST_PROTOCOL)
    return buffer.getvalue()


def dump(path: str, max_variable_bytes: int, max_snapshot_bytes: int, known: dict[str, str]) -> None:
    """Pickle each user variable and write those that fit, and changed, to ``path``.

    A variable is skipped when it cannot be pickled, when its pickle is over ``max_variable_bytes``,
    or when it does not fit in ``max_snapshot_bytes`` with the others. The budget keeps the most
    variables: smallest first, so one large variable never evicts many small ones. A variable whose
    pickle has the digest ``known`` gives for it (it is in the snapshot already) is not written.

    Writes ``{"saved": {name: digest}, "skipped": {name: reason}}`` to :func:`report_path`: every
    variable the snapshot is to hold, written or not.
    """
    shell = kernel_setup._shell()
    pickles: dict[str, bytes] = {}
    skipped: dict[str, str] = {}
    for name in _candidates(shell):
        try:
            with _time_limit(VARIABLE_SECONDS):
                pickles[name] = _pickled(shell.user_ns[name], shell.user_ns, max_variable_bytes)
        except _TooLarge:
            skipped[name] = f"too large: its pickle is over max_variable_bytes ({max_variable_bytes:,} bytes)"
        except _TooSlow:
            skipped[name] = f"too slow: pickling it took over {VARIABLE_SECONDS:g} s"
        except BaseException as error:  # anything dill cannot pickle either (a generator, a socket), or a __reduce__ that exits
            if isinstance(error, KeyboardInterrupt):
                raise  # the cell's own interrupt (timeout): stop the snapshot
            skipped[name] = f"cannot be pickled ({_reason(error)})"
    total = 0
    saved: dict[str, str] = {}
    changed: dict[str, bytes] = {}
    for name in sorted(pickles, key=lambda name: (len(pickles[name]), name)):
        if total + len(pickles[name]) > max_snapshot_bytes:
            skipped[name] = f"over the snapshot budget: the smaller variables fill max_snapshot_bytes ({max_snapshot_bytes:,} bytes)"
            continue
        total += len(pickles[name])
        saved[name] = hashlib.blake2b(pickles[name], digest_size=16).hexdigest()
        if known.get(name) != saved[name]:
            changed[name] = pickles[name]
    # Written next to its final name, then renamed: the host never reads half a file.
    partial = f"{path}.partial"
    with open(partial, "wb") as file:
        file.write(pack(changed))
    os.replace(partial, path)
    _write_report(path, {"saved": saved, "skipped": skipped})


def restore(path: str) -> None:
    """Load the variables in ``path`` (written by the host from a snapshot) into the user namespace,
    each on its own: one that fails to load is named with the reason, never raised. The file is
    removed afterwards.

    Writes ``{"restored": [names], "failed": {name: reason}}`` to :func:`report_path`.
    """
    shell = kernel_setup._shell()
    try:
        with open(path, "rb") as file:
            pickles = unpack(file.read())
    finally:
        os.remove(path)
    restored: list[str] = []
    failed: dict[str, str] = {}
    pending = dict(pickles)
    # Rounds, since a variable may refer to another by name (an instance to its class): whatever
    # failed is tried again while a round restores something.
    while pending:
        failed = {}
        for name, data in pending.items():
            try:
                with _time_limit(VARIABLE_SECONDS):
                    shell.user_ns[name] = dill.loads(data)
            except _TooSlow:
                failed[name] = f"could not be restored (loading it took over {VARIABLE_SECONDS:g} s)"
                continue
            except BaseException as error:  # a class or module it needs is gone, a library changed, a __reduce__ that exits ...
                if isinstance(error, KeyboardInterrupt):
                    raise
                failed[name] = f"could not be restored ({_reason(error)})"
                continue
            restored.append(name)
        if len(failed) == len(pending):
            break
        pending = {name: pending[name] for name in failed}
    _write_report(path, {"restored": sorted(restored), "failed": failed})
