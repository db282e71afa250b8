"""Kernel-side snapshots (this module is imported *in the kernel process*).

CodeMode calls :func:`dump` in a silent cell to snapshot the user's variables and :func:`restore` in
a fresh kernel to bring them back. Both exchange the variables through one file in the kernel's
private directory (mode 0700): a sequence of records, each a key and a pickle (:func:`pack` /
:func:`unpack`), so every record loads or fails on its own and the host never unpickles anything.
A record holds one variable, under its name, or several that share objects (``left = [d]`` and
``right = [d]``, with ``d`` no variable), under their names joined by ", " (:func:`record_names`):
pickled together, they keep sharing them. A value that is another variable's (``b = a``, a
cell-defined class of an instance) is pickled as a reference to that variable, which restores on
its own first. Both write their report (what was saved or restored, what was skipped
and why) as JSON to a second file beside it, not to stdout, which a cell may have redirected or a
background thread may be writing to.

Each variable gets at most :data:`VARIABLE_SECONDS` to pickle or to load (a ``__reduce__`` that
sleeps, or exits): past that, or on any exception, that variable alone is skipped and named. So is a
variable that holds what a new kernel cannot get back as it was (a lock, an open file, a thread),
which dill would replace with something else, and one that refers to a variable not saved.

What is snapshotted: the names IPython's ``%who_ls`` lists (no ``_``-prefixed names, none of
IPython's own), except toolpath's own objects: the tool handles and the functions that bind them
(those are bound again in every kernel). A module (``pd``
from ``import pandas as pd``) is saved by name, as dill does, and imported again on restore.
"""

from __future__ import annotations

import contextlib
import enum
import gc
import hashlib
import io
import json
import os
import pickle
import signal
import struct
import threading
import types
from collections.abc import Iterator, Mapping
from typing import Any

import dill

from toolpath.kernel.inside import setup

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
_TOOLPATH_MODULES = frozenset({"toolpath.kernel.inside.handles", "toolpath.kernel.inside.bridge_client", "toolpath.kernel.inside.setup", __name__})


def _is_toolpath_object(value: Any) -> bool:
    module = value.__module__ if isinstance(value, (types.FunctionType, type)) else type(value).__module__
    return module in _TOOLPATH_MODULES


def _candidates(shell: Any) -> list[str]:
    names = shell.run_line_magic("who_ls", "") or []
    return [name for name in names if name not in setup._handles and not _is_toolpath_object(shell.user_ns[name])]


#: The start of every pickle this version writes, followed by its format version and a newline.
#: Format 1 (no such start) is a plain dill pickle; format 2 may refer to other variables by name
#: (persistent ids), so it loads only with :class:`_Unpickler`.
_FORMAT_PREFIX = b"toolpath-snapshot-"
FORMAT_VERSION = 2
_FORMAT_HEADER = _FORMAT_PREFIX + str(FORMAT_VERSION).encode() + b"\n"
#: The header of a record of several variables that share objects: a pickle of ``{name: value}``.
_GROUP_HEADER = _FORMAT_PREFIX + str(FORMAT_VERSION).encode() + b" variables\n"
#: Joins the names of a record of several variables into its key.
_NAME_SEPARATOR = ", "
#: The objects :meth:`_Sharing.walk` looks inside (with instances of cell-defined classes): not
#: library objects, whose state may hold what all of their kind share (every DataFrame's pickle
#: holds the class's one ``_metadata`` list), which would make their variables one record.
_CONTAINER_TYPES = (list, tuple, set, frozenset, dict)

#: Values whose identity no program relies on and that hold nothing else.
_ATOMIC_TYPES = frozenset({int, float, complex, str, bytes, bool, types.NoneType})
#: Values whose identity no program relies on, or that are pickled by reference (modules, built-in
#: functions): every variable that holds one pickles it itself.
_VALUE_TYPES = (int, float, complex, str, bytes, types.NoneType, types.ModuleType, types.BuiltinFunctionType)
#: Values :meth:`_Sharing.walk` leaves out: their identity does not matter or is kept anyway (an
#: enum member is its class's).
_IDENTITY_KEPT_TYPES = (*_VALUE_TYPES, enum.Enum)
#: Locks, in the kernel's ``_thread`` module (``threading.Lock`` and ``threading.RLock``).
_LOCK_TYPES = (type(threading.Lock()), type(threading.RLock()))


class _Unfaithful(Exception):
    """A variable holds something a new kernel cannot get back as it was (dill would make a
    different object: a fresh lock, a file opened again, a dangling C pointer)."""


def _unfaithful_kind(value: Any) -> str | None:
    """What ``value`` is, in words, when a restore cannot bring it back faithfully; else ``None``."""
    if isinstance(value, _LOCK_TYPES):
        return "a lock"
    if isinstance(value, threading.Thread):
        return "a thread"
    if isinstance(value, io.IOBase) and not isinstance(value, (io.BytesIO, io.StringIO)):
        return "an open file or stream"
    if type(value).__name__ == "PyCapsule":
        return "a C pointer"
    if type(value).__module__ in _TOOLPATH_MODULES and not isinstance(value, (types.FunctionType, type)):
        return "a toolpath tool handle (bound again in every kernel: use it by its name)"
    return None


def _is_cell_defined(value: Any) -> bool:
    return isinstance(value, (types.FunctionType, type)) and getattr(value, "__module__", None) == "__main__"


def _owners(namespace: Mapping[str, Any], names: list[str]) -> dict[int, str]:
    """``{id(value): name}`` of the variables other variables refer to by name instead of copying:
    every value whose identity matters, under one name (a cell-defined class or function under its
    own name, else the first name in sorted order)."""
    owners: dict[int, str] = {}
    for name in sorted(names, key=lambda name: (not (_is_cell_defined(namespace[name]) and namespace[name].__qualname__ == name), name)):
        value = namespace[name]
        if isinstance(value, _IDENTITY_KEPT_TYPES) or (isinstance(value, (types.FunctionType, type)) and not _is_cell_defined(value)):
            continue  # copied, or pickled by reference (importable; an enum member by its class) everywhere
        owners.setdefault(id(value), name)
    return owners


def namespace_value(name: str) -> Any:
    """The kernel's variable ``name`` (what a pickle's reference to another variable loads; stored
    pickles name this function, as they name :func:`load_by_value` and :func:`rebuild_enum`).

    Raises:
        LookupError: no such variable (yet).
    """
    namespace = setup._shell().user_ns
    if name not in namespace:
        raise LookupError(f"it refers to the variable {name}, which is not restored")
    return namespace[name]


def rebuild_enum(metaclass: type, name: str, bases: tuple[type, ...], attributes: dict[str, Any], members: list[tuple[str, Any]]) -> type:
    """A cell-defined ``Enum`` class made again as its ``class`` statement made it: methods first,
    then the members with their values (an alias is a second name with the same value)."""
    namespace = metaclass.__prepare__(name, bases)
    for key, value in [*attributes.items(), *members]:
        namespace[key] = value
    return metaclass(name, bases, namespace)


def _enum_reduction(enum_class: enum.EnumMeta) -> tuple[Any, ...]:
    """What :func:`rebuild_enum` needs; dill cannot pickle an ``Enum`` class by value (its members
    refer back to the class). Only what the cell wrote is kept: its docstring, name and the methods,
    properties and class methods defined in cells (not what ``EnumMeta`` adds)."""
    attributes = {
        key: value
        for key, value in vars(enum_class).items()
        if key in ("__doc__", "__qualname__") or _is_cell_defined(getattr(value, "__func__", getattr(value, "fget", value)))
    }
    members = [(name, member._value_) for name, member in enum_class.__members__.items()]
    return rebuild_enum, (type(enum_class), enum_class.__name__, enum_class.__bases__, attributes, members)


def record_names(key: str) -> list[str]:
    """The variables a snapshot record holds: one, or several that share objects."""
    return key.split(_NAME_SEPARATOR)


class _Sharing:
    """Which variables reach one object (not through another variable): they are pickled together,
    in one record, so it stays one object after a restore."""

    def __init__(self, owners: Mapping[int, str]) -> None:
        self.owners = owners
        # id -> (the object, kept alive so that no other object gets its id; the first variable that reached it)
        self.first: dict[int, tuple[Any, str]] = {}
        self.parent: dict[str, str] = {}

    def _root(self, name: str) -> str:
        while self.parent.get(name, name) != name:
            name = self.parent[name]
        return name

    def walk(self, variable: str, value: Any) -> None:
        """Note the objects ``variable``'s value reaches through lists, tuples, sets, dicts and
        instances of cell-defined classes, joining it to the variables that reached one before.
        Values of other variables are not entered (they are pickled by reference), nor are values
        whose identity nobody relies on (numbers, strings). Level by level, with the garbage
        collector's list of each level's referents, so that a list of a million floats costs one
        call, not a million steps."""
        reached, seen = [value], set()
        while reached:
            entered = []
            for item in reached:
                if id(item) in seen or self.owners.get(id(item), variable) != variable:
                    continue
                kind = type(item)
                if kind not in _CONTAINER_TYPES and (
                    isinstance(item, _IDENTITY_KEPT_TYPES) or (isinstance(item, (types.FunctionType, type)) and not _is_cell_defined(item))
                ):
                    continue
                enters = kind in _CONTAINER_TYPES or kind.__module__ == "__main__"
                seen.add(id(item))
                if kind is not tuple and kind is not frozenset:  # immutable: their identity does not matter, their items' may
                    first = self.first.setdefault(id(item), (item, variable))[1]
                    if first != variable:
                        self.parent[self._root(variable)] = self._root(first)
                        continue  # the first variable walked it already
                if enters:
                    entered.append(item)
            reached = [item for item in gc.get_referents(*entered) if type(item) not in _ATOMIC_TYPES]

    def groups(self, names: list[str]) -> list[list[str]]:
        """The sets of two or more of ``names`` that share objects, each sorted. Only names that are
        identifiers are grouped, since a record's key joins them with ", "."""
        components: dict[str, list[str]] = {}
        for name in sorted(names):
            if name.isidentifier():
                components.setdefault(self._root(name), []).append(name)
        return [group for group in components.values() if len(group) > 1]


class _References:
    """What the picklers of one record share: which values belong to variables outside it (pickled
    as references to them, so identity survives), and which of those it refers to."""

    def __init__(self, owners: Mapping[int, str], variables: list[str]):
        self.owners = owners
        self.variables = variables
        self.used: set[str] = set()

    def persistent_id(self, value: Any) -> str | None:
        """The picklers' ``persistent_id``: called for every object they pickle, so the common
        ones (numbers, strings, plain containers) are let through first."""
        value_type = type(value)
        if value_type in _ATOMIC_TYPES:
            return None
        owner = self.owners.get(id(value))
        if owner is not None and owner not in self.variables:
            self.used.add(owner)
            return owner
        if value_type in _CONTAINER_TYPES:
            return None
        kind = _unfaithful_kind(value)
        if kind is not None:
            raise _Unfaithful(f"it holds {kind} ({value_type.__module__}.{value_type.__qualname__}), which a new kernel cannot get back")
        return None


class _DillPickler(dill.Pickler):
    """dill's pickler, which pickles cell-defined functions and classes by value; their globals are
    the kernel's namespace, not copies (``recurse=False``), so a restored function sees the restored
    variables. Set here rather than read from ``dill.settings``, which a cell may change."""

    def __init__(self, file: io.BytesIO, references: _References):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL, byref=False, recurse=False)
        self.references = references
        self.persistent_id = references.persistent_id

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, enum.EnumMeta) and obj.__module__ == "__main__":
            return _enum_reduction(obj)
        return NotImplemented


#: This module's path before issue 51 put it in ``inside/``: snapshots stored before then name its
#: functions (:func:`load_by_value`, :func:`rebuild_enum`, :func:`namespace_value`) there.
_FORMER_PATH = "toolpath.kernel.kernel_snapshot"


class _Unpickler(dill.Unpickler):
    def persistent_load(self, pid: Any) -> Any:
        return namespace_value(pid)

    def find_class(self, module: str, name: str) -> Any:
        return super().find_class(__name__ if module == _FORMER_PATH else module, name)


def load_by_value(data: bytes) -> Any:
    """A cell-defined function or class pickled by :class:`_DillPickler` inside a C pickle."""
    return _Unpickler(io.BytesIO(data)).load()


class _Pickler(pickle.Pickler):
    """The C pickler (fast on arrays and frames), with functions and classes defined in cells
    pickled by dill, by value. A value of another variable of the namespace is saved as a reference
    to that variable (``origin = Point(3)`` refers to the variable ``Point``; ``b = a`` to ``a``),
    restored on its own: after a restore ``isinstance(origin, Point)`` and ``b is a`` still hold."""

    def __init__(self, file: io.BytesIO, references: _References):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.references = references
        self.persistent_id = references.persistent_id  # the pickler's own hook, not a method calling it: one call less per object

    def reducer_override(self, obj: Any) -> Any:
        if not _is_cell_defined(obj):
            return NotImplemented
        if isinstance(obj, enum.EnumMeta):
            return _enum_reduction(obj)
        buffer = io.BytesIO()
        _DillPickler(buffer, self.references).dump(obj)
        return load_by_value, (buffer.getvalue(),)


def _pickled(value: Any, references: _References, limit: int, header: bytes = _FORMAT_HEADER) -> bytes:
    """``header`` and ``value``'s pickle; dill's own pickler (slower, pickles more) when the C
    pickler refuses it.

    Raises:
        _TooLarge: the pickle is over ``limit`` bytes.
        _Unfaithful: ``value`` holds something a restore cannot bring back as it was.
        Exception: neither can pickle it.
    """
    buffer = _BoundedBuffer(limit)
    buffer.write(header)
    try:
        _Pickler(buffer, references).dump(value)
    except (_TooLarge, _TooSlow, _Unfaithful):
        raise
    except Exception:  # a closure, a lambda held by an object ...: let dill try
        buffer = _BoundedBuffer(limit)
        buffer.write(header)
        references.used.clear()
        _DillPickler(buffer, references).dump(value)
    return buffer.getvalue()


def _loaded(key: str, data: bytes) -> dict[str, Any]:
    """``{name: value}`` of the variables a record of any format holds.

    Raises:
        ValueError: the record is of a format newer than this toolpath reads.
    """
    if not data.startswith(_FORMAT_PREFIX):  # format 1
        return {key: _Unpickler(io.BytesIO(data)).load()}
    header, _, data = data.partition(b"\n")
    if header + b"\n" not in (_FORMAT_HEADER, _GROUP_HEADER):
        version = header[len(_FORMAT_PREFIX) :].decode(errors="replace")
        raise ValueError(f"it was saved in snapshot format {version}, which this toolpath does not read; upgrade toolpath in the kernel's environment")
    value = _Unpickler(io.BytesIO(data)).load()
    return value if header + b"\n" == _GROUP_HEADER else {key: value}


def _failure(error: BaseException, limit: int, seconds: float) -> str:
    """Why a record could not be pickled, in words.

    Raises:
        KeyboardInterrupt: ``error`` is one (the cell's own interrupt, a timeout): the snapshot stops.
    """
    if isinstance(error, _TooLarge):
        return f"too large: its pickle is over max_variable_bytes ({limit:,} bytes)"
    if isinstance(error, _TooSlow):
        return f"too slow: pickling it took over {seconds:g} s"
    if isinstance(error, _Unfaithful):
        return str(error)
    if isinstance(error, KeyboardInterrupt):
        raise error
    return f"cannot be pickled ({_reason(error)})"  # anything dill cannot pickle either (a generator, a socket), or a __reduce__ that exits


def _names(keys: list[str]) -> set[str]:
    return {name for key in keys for name in record_names(key)}


def dump(path: str, max_variable_bytes: int, max_snapshot_bytes: int, known: dict[str, str]) -> None:
    """Pickle each user variable and write the records that fit, and changed, to ``path``.

    Variables that share objects make one record (its key their names joined by ", "), whose limit
    is ``max_variable_bytes`` times their number. A record is skipped when it cannot be pickled,
    when it holds what a new kernel cannot get back as it was (a lock, an open file), when its
    pickle is over its limit, when it does not fit in ``max_snapshot_bytes`` with the others, or
    when it refers to a variable that is skipped. The budget keeps the most records: smallest first,
    so one large variable never evicts many small ones. A record whose pickle has the digest
    ``known`` gives for its key (it is in the snapshot already) is not written.

    Writes ``{"saved": {key: digest}, "skipped": {key: reason}}`` to :func:`report_path`: every
    record the snapshot is to hold, written or not.
    """
    shell = setup._shell()
    pickles: dict[str, bytes] = {}
    uses: dict[str, set[str]] = {}
    skipped: dict[str, str] = {}
    names = _candidates(shell)
    owners = _owners(shell.user_ns, names)
    sharing = _Sharing(owners)
    for name in names:
        references = _References(owners, [name])
        try:
            with _time_limit(VARIABLE_SECONDS):
                pickles[name] = _pickled(shell.user_ns[name], references, max_variable_bytes)
                sharing.walk(name, shell.user_ns[name])
            uses[name] = references.used
        except BaseException as error:
            skipped[name] = _failure(error, max_variable_bytes, VARIABLE_SECONDS)
    # Variables that share objects are pickled again, together: one record, one memo.
    for group in sharing.groups(list(pickles)):
        key = _NAME_SEPARATOR.join(group)
        references = _References(owners, group)
        try:
            with _time_limit(VARIABLE_SECONDS * len(group)):
                pickles[key] = _pickled({name: shell.user_ns[name] for name in group}, references, max_variable_bytes * len(group), _GROUP_HEADER)
            uses[key] = references.used
        except BaseException as error:
            skipped[key] = (
                f"they share objects, and pickling them together failed: {_failure(error, max_variable_bytes * len(group), VARIABLE_SECONDS * len(group))}"
            )
        for name in group:
            del pickles[name], uses[name]
    total = 0
    kept: list[str] = []
    for name in sorted(pickles, key=lambda name: (len(pickles[name]), name)):
        if total + len(pickles[name]) > max_snapshot_bytes:
            skipped[name] = f"over the snapshot budget: the smaller variables fill max_snapshot_bytes ({max_snapshot_bytes:,} bytes)"
            continue
        total += len(pickles[name])
        kept.append(name)
    # A variable that refers to one left out could not be restored: leave it out too, saying why.
    while missing := {key: sorted(uses[key] - _names(kept)) for key in kept if not uses[key] <= _names(kept)}:
        for name, absent in missing.items():
            skipped[name] = f"it refers to {', '.join(absent)}, which {'is' if len(absent) == 1 else 'are'} not saved"
            kept.remove(name)
    saved: dict[str, str] = {}
    changed: dict[str, bytes] = {}
    for name in kept:
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
    """Load the records in ``path`` (written by the host from a snapshot) into the user namespace,
    each on its own: one that fails to load is named with the reason, never raised. The file is
    removed afterwards.

    Writes ``{"restored": [variable names], "failed": {record key: reason}}`` to :func:`report_path`.
    """
    shell = setup._shell()
    try:
        with open(path, "rb") as file:
            pickles = unpack(file.read())
    finally:
        os.remove(path)
    restored: list[str] = []
    failed: dict[str, str] = {}
    pending = dict(pickles)
    # Rounds, since a variable may refer to another by name (an instance to its class, an alias to
    # its object): whatever failed is tried again while a round restores something.
    while pending:
        failed = {}
        for key, data in pending.items():
            try:
                with _time_limit(VARIABLE_SECONDS * len(record_names(key))):
                    variables = _loaded(key, data)
            except _TooSlow:
                failed[key] = f"could not be restored (loading it took over {VARIABLE_SECONDS:g} s)"
                continue
            except BaseException as error:  # a class or module it needs is gone, a library changed, a __reduce__ that exits ...
                if isinstance(error, KeyboardInterrupt):
                    raise
                failed[key] = f"could not be restored ({_reason(error)})"
                continue
            shell.user_ns.update(variables)
            restored += variables
        if len(failed) == len(pending):
            break
        pending = {key: pending[key] for key in failed}
    _write_report(path, {"restored": sorted(restored), "failed": failed})
