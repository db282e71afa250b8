"""The record of use: every task planned or run (command line, Python, MCP), kept in toolpath's
store per user, so that toolpath can learn from what its users accepted and corrected.

One entry per task (a run updates the entry of its plan): when, whose, through which interface,
the request in words or the steps given, its parts (text, kind, goal states chosen, the part's
tools), the tools of the plan shown, the tools that ran (for a run that replanned around a failed step,
every tool that ran over all its cells: the route taken, and ``replans``: each failed tool with the
old and new route), the run's ``retries`` and ``injected_failures`` per tool (counts, over all its
cells), the user's edits (``--avoid`` tools, a goal
given instead of words) and the outcome, one of :data:`OUTCOMES`: ``planned`` (nothing ran),
``ran`` (the cell ran through), ``failed`` (with the error's type), ``denied`` (a call needing
approval was refused), ``paused`` (waiting for an approval) or ``refused`` (toolpath refused the
task, with its reason).

Settings (environment variables, read when a :class:`Recorder` is made):

* ``TOOLPATH_RECORD``: ``on`` (default: values replaced by their kinds,
  :mod:`toolpath.planner.tasks.redaction`), ``values`` (the words kept as written) or ``off``
  (nothing recorded). Any other value records nothing, with a warning.
* ``TOOLPATH_RECORD_LIMIT``: entries kept per user (default :data:`DEFAULT_LIMIT`); each write
  deletes that user's entries beyond it, oldest first.

Recording never fails a task: a store that cannot be written warns once per process and the task
goes on. The store is the shared store (:func:`toolpath.registry.database.open_database`:
``$TOOLPATH_STORE``, else ``$TOOLPATH_HOME/toolpath.db``; ``toolpath serve --store``): every read
and delete names one user, so on a server each user's record is theirs alone.
"""

from __future__ import annotations

import functools
import getpass
import json
import os
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from toolpath.planner.tasks.redaction import KnownValue, kind_marker, redacted, redacted_message
from toolpath.registry.database import Database, open_database
from toolpath.registry.storage import StoreError, first_report_of
from toolpath.registry.store_schema import RECORD_OF_USE

if TYPE_CHECKING:
    from toolpath.planner.planning.plans import Plan
    from toolpath.planner.tasks.task import TaskPlan, TaskRun
    from toolpath.registry import ToolDefinition

#: Environment variable: ``on`` (default), ``values`` or ``off``.
RECORD_VARIABLE = "TOOLPATH_RECORD"
#: Environment variable: entries kept per user.
LIMIT_VARIABLE = "TOOLPATH_RECORD_LIMIT"
MODES = ("on", "values", "off")
#: Entries kept per user when ``TOOLPATH_RECORD_LIMIT`` is not set: at a few hundred bytes an entry,
#: a few megabytes per user, and years of interactive use.
DEFAULT_LIMIT = 10_000
OUTCOMES = ("planned", "ran", "failed", "denied", "paused", "refused")
_PURPOSE = "record of use"
_COLUMNS = ("entry_id", "user_id", "recorded_at", "interface", "outcome", "entry")
# The kernel's error names of a call whose approval was refused.
_DENIED = ("ApprovalDenied",)


@dataclass(frozen=True)
class RecordSettings:
    """What is recorded: ``mode`` (one of :data:`MODES`) and ``limit`` (entries kept per user)."""

    mode: str = "on"
    limit: int = DEFAULT_LIMIT

    @classmethod
    def from_environment(cls, environment: Mapping[str, str] | None = None) -> RecordSettings:
        """The settings of ``TOOLPATH_RECORD`` and ``TOOLPATH_RECORD_LIMIT`` (default ``os.environ``).

        A mode not in :data:`MODES` warns and records nothing (what was meant is not known, and
        recording is the side that can leak); a limit that is not a whole number of at least 1 warns
        and keeps :data:`DEFAULT_LIMIT`.
        """
        environment = os.environ if environment is None else environment
        mode = environment.get(RECORD_VARIABLE, "on").strip().lower() or "on"
        if mode not in MODES:
            warnings.warn(f"{RECORD_VARIABLE}={mode!r} is not one of {', '.join(MODES)}: nothing is recorded; set it to one of them", stacklevel=2)
            mode = "off"
        written = environment.get(LIMIT_VARIABLE, "").strip()
        limit = DEFAULT_LIMIT
        if written:
            try:
                limit = int(written)
                if limit < 1:
                    raise ValueError(written)
            except ValueError:
                warnings.warn(f"{LIMIT_VARIABLE}={written!r} is not a whole number of at least 1: {DEFAULT_LIMIT} entries are kept per user", stacklevel=2)
                limit = DEFAULT_LIMIT
        return cls(mode, limit)


@dataclass(frozen=True)
class Edits:
    """What the user changed of what toolpath would choose: ``avoid``, tools the plan must not use
    (``toolpath plan --avoid``); ``goal``, goal states given instead of words (``--goal``). Steps
    given instead of a request are the entry's ``steps``."""

    avoid: tuple[str, ...] = ()
    goal: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, list[str]]:
        return {"avoid": list(self.avoid), "goal": list(self.goal)}


@dataclass(frozen=True)
class RecordedUse:
    """One entry of the record (see the module docstring); ``recorded_at`` in seconds since the
    epoch, tools as ``server/name``; ``inputs`` maps each input's name to its kind (``<number>``).
    ``parts`` are dicts of ``text``, ``kind``, ``status``, ``goal`` and ``tools``; ``retries`` and
    ``injected_failures`` count a run's retries and injected failures per tool (``server/name``)."""

    entry_id: str
    user: str
    recorded_at: float
    interface: str
    outcome: str
    request: str | None = None
    steps: tuple[str, ...] = ()
    parts: tuple[dict[str, Any], ...] = ()
    shown: tuple[str, ...] = ()
    ran: tuple[str, ...] = ()
    replans: tuple[dict[str, Any], ...] = ()
    retries: dict[str, int] = field(default_factory=dict)
    injected_failures: dict[str, int] = field(default_factory=dict)
    edits: Edits = Edits()
    inputs: dict[str, str] = field(default_factory=dict)
    detail: str | None = None
    session: str | None = None
    redaction: str = "kinds"

    def to_dict(self) -> dict[str, Any]:
        return {
            "entry_id": self.entry_id,
            "user": self.user,
            "recorded_at": self.recorded_at,
            "interface": self.interface,
            "outcome": self.outcome,
            "request": self.request,
            "steps": list(self.steps) or None,
            "parts": list(self.parts),
            "shown": list(self.shown),
            "ran": list(self.ran),
            "replans": list(self.replans),
            "retries": dict(self.retries),
            "injected_failures": dict(self.injected_failures),
            "edits": self.edits.to_dict(),
            "inputs": dict(self.inputs),
            "detail": self.detail,
            "session": self.session,
            "redaction": self.redaction,
        }


def local_user() -> str:
    """The operating system's user running this process (whose record a local toolpath keeps)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container's): the uid still tells users apart
        return f"uid {os.getuid()}" if hasattr(os, "getuid") else "local"


def _never_raises(method: Callable[..., str | None]) -> Callable[..., str | None]:
    """``method``, returning ``None`` with the record's one warning instead of raising: a task never
    fails for its record (a task that is not text, a value that does not print, a broken store)."""

    @functools.wraps(method)
    def recording(*arguments: Any, **keywords: Any) -> str | None:
        try:
            return method(*arguments, **keywords)
        except Exception as error:
            _warn_unrecorded(error)
            return None

    return recording


class Recorder:
    """Writes entries of the record of use for one interface (``cli``, ``python`` or ``mcp``).

    Args:
        interface: the interface the tasks come through.
        store: where (a SQLite file, a ``postgresql://`` URL or a :class:`Database`); ``None``:
            the shared store's default, opened at the first write.
        settings: default :meth:`RecordSettings.from_environment`, read at the first write.

    No method raises for the store or waits for it: entries are written in order by one background
    thread (:func:`wait_for_writes`), and a write that fails warns once per process (naming the store
    and what to do).
    """

    def __init__(self, interface: str, store: Database | str | os.PathLike[str] | None = None, settings: RecordSettings | None = None):
        self.interface = interface
        self.store = store
        self._settings = settings

    @property
    def settings(self) -> RecordSettings:
        if self._settings is None:
            self._settings = RecordSettings.from_environment()
        return self._settings

    @_never_raises
    def planned(self, user: str | None, task_plan: TaskPlan, *, edits: Edits = Edits(), session: str | None = None) -> str | None:
        """Record ``task_plan`` as planned (shown, nothing run); its entry id, or ``None`` when nothing was recorded."""
        return self._write(user, "planned", lambda: _plan_entry(task_plan, self.settings.mode), edits, session, None, None)

    @_never_raises
    def planned_goal(self, user: str | None, plan: Plan, *, edits: Edits = Edits(), session: str | None = None) -> str | None:
        """Record a plan to goal states the user gave (``edits.goal``; no words, so no request)."""

        def entry() -> dict[str, Any]:
            return {**_task_entry(None, {}, (), self.settings.mode), "shown": [_tool_name(step.tool) for step in plan.steps]}

        return self._write(user, "planned", entry, edits, session, None, None)

    @_never_raises
    def ran(self, user: str | None, run: TaskRun, *, edits: Edits = Edits(), session: str | None = None) -> str | None:
        """Record ``run``'s outcome (``ran``, ``failed``, ``denied`` or ``paused``), in the entry of its plan when it has one."""
        outcome, detail = _run_outcome(run)

        def entry() -> dict[str, Any]:
            # A replanned run: what it planned first, and every tool that ran over all its cells (the route taken).
            cells = run.cells
            ran = [_tool_name(cell.task_plan.plan.steps[index].tool) for cell in cells for index in cell.completed_steps]
            replans = [
                {
                    "failed": _slashed(replan.failure.tool),
                    "kind": replan.failure.kind,
                    "old_route": list(map(_slashed, replan.old_route)),
                    "new_route": list(map(_slashed, replan.new_route)),
                }
                for replan in run.replans
            ]
            counts = {kind: _counts_per_tool(run, kind) for kind in ("retries", "injected_failures")}
            return {**_plan_entry(cells[0].task_plan, self.settings.mode), "ran": ran, "replans": replans, **counts}

        return self._write(user, outcome, entry, edits, session, detail, run.task_plan.record_entry)

    @_never_raises
    def refused(
        self,
        user: str | None,
        task: str | Sequence[str] | None,
        error: BaseException,
        *,
        inputs: Mapping[str, Any] | None = None,
        task_plan: TaskPlan | None = None,
        edits: Edits = Edits(),
        session: str | None = None,
    ) -> str | None:
        """Record a task toolpath refused (``error``: why), with its plan when it had one (parts not understood)."""
        if not isinstance(task, str) and not (isinstance(task, (list, tuple)) and all(isinstance(step, str) for step in task)):
            task = None  # refused for not being a task at all: there are no words to keep
        elif isinstance(task, str):
            task = _storable(task)
        elif task is not None:
            task = [_storable(step) for step in task]
        known = _known_values(_caller_inputs(task_plan) if task_plan is not None else inputs or {}, task_plan)

        def entry() -> dict[str, Any]:
            if task_plan is not None:
                return _plan_entry(task_plan, self.settings.mode)
            return _task_entry(task, inputs or {}, known, self.settings.mode)

        words = [task] if isinstance(task, str) else list(task or ())
        if task_plan is not None:
            words += [task_plan.task] if isinstance(task_plan.task, str) else list(task_plan.task)
            words += [part.text for part in task_plan.parts]
        message = str(error) if self.settings.mode == "values" else redacted_message(str(error), words, known)
        detail = f"{type(error).__name__}: {message}"
        return self._write(user, "refused", entry, edits, session, detail, task_plan.record_entry if task_plan is not None else None)

    @_never_raises
    def failed(self, user: str | None, task_plan: TaskPlan, error: BaseException, *, edits: Edits = Edits(), session: str | None = None) -> str | None:
        """Record that ``task_plan``'s cell could not run (``error``: the kernel did not start, ...)."""
        return self._write(user, "failed", lambda: _plan_entry(task_plan, self.settings.mode), edits, session, type(error).__name__, task_plan.record_entry)

    def _write(self, user, outcome, make_entry, edits: Edits, session, detail, entry_id) -> str | None:
        if self.settings.mode == "off":
            return None
        entry_id = entry_id or uuid.uuid4().hex
        user = user or local_user()
        try:
            row = [
                entry_id,
                user,
                time.time(),
                self.interface,
                outcome,
                json.dumps({**make_entry(), "edits": edits.to_dict(), "detail": detail, "session": session}, ensure_ascii=False, default=str),
            ]
        except Exception as error:  # whatever goes wrong here, the task goes on
            _warn_unrecorded(error)
            return None
        try:
            # A commit waits for the disk (about 30 ms here): the writer thread pays it, not the task.
            _writer().submit(self._insert, row)
        except RuntimeError as error:  # the interpreter is shutting down: no new work is accepted
            _warn_unrecorded(error)
            return None
        return entry_id

    def _insert(self, row: list[Any]) -> None:
        user = row[1]
        try:
            with _database(self.store).writing(_PURPOSE) as connection:
                # A run updates its plan's entry, never another user's (ids are random, but a
                # TaskPlan could be handed to another user's session).
                connection.execute(
                    f"insert into {RECORD_OF_USE} ({', '.join(_COLUMNS)}) values (?, ?, ?, ?, ?, ?) on conflict (entry_id) do update "
                    f"set outcome = excluded.outcome, entry = excluded.entry where {RECORD_OF_USE}.user_id = excluded.user_id",
                    row,
                )
                # Retention: the user's entries older than the limit-th newest go (both engines read this form).
                connection.execute(
                    f"delete from {RECORD_OF_USE} where user_id = ? and recorded_at < "
                    f"(select recorded_at from {RECORD_OF_USE} where user_id = ? order by recorded_at desc limit 1 offset ?)",
                    [user, user, self.settings.limit - 1],
                )
        except Exception as error:  # whatever goes wrong here, the task goes on
            _warn_unrecorded(error)


_writer_lock = threading.Lock()
_writer_pool: ThreadPoolExecutor | None = None
_warned = False


def _writer() -> ThreadPoolExecutor:
    """The process's one writer thread: entries are written in the order they were recorded, and
    the interpreter waits for the queue at exit (``concurrent.futures`` joins its threads)."""
    global _writer_pool
    with _writer_lock:
        if _writer_pool is None:
            _writer_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="toolpath-record")
        return _writer_pool


def wait_for_writes() -> None:
    """Return when every entry recorded so far in this process is in the store (or failed to be,
    with the warning given): reading the record calls it first, so a process reads what it wrote."""
    _writer().submit(lambda: None).result()


def _warn_unrecorded(error: BaseException) -> None:
    global _warned
    if isinstance(error, StoreError) and not first_report_of(error):
        return  # this file's problem was said already (by the embedding cache): one file, one warning
    with _writer_lock:
        first, _warned = not _warned, True
    if first:
        warnings.warn(
            f"toolpath could not record this task in its record of use ({type(error).__name__}: {error}); tasks go on unrecorded. "
            f"{RECORD_VARIABLE}=off stops recording",
            stacklevel=2,
        )


def _storable(text: str) -> str:
    """``text`` with what is not UTF-8 (bytes a terminal passed undecoded) written as escapes."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _slashed(name: str) -> str:
    """``server/name`` of a tool named ``server.name`` (a route's names), as the record names tools."""
    return name.replace(".", "/", 1)


def _tool_name(tool: ToolDefinition) -> str:
    return f"{tool.server_name}/{tool.name}" if tool.server_name else tool.name


def _counts_per_tool(run: TaskRun, kind: str) -> dict[str, int]:
    """``{server/name: count}`` of ``run``'s :attr:`toolpath.kernel.CellResult` ``kind`` (``retries``
    or ``injected_failures``), added up over its cells. The kernel counts by the handle called
    (``handle.attribute``): the cell's step target, or for a host tool its server's host handle
    (a replanned cell calls ``records_2.fetch_mirror``, counted as ``records.fetch_mirror``); each is
    named here as the record names tools. A call of no planned step (none in a planned cell) keeps
    the kernel's name."""
    from toolpath.registry.names import handle_name

    counts: dict[str, int] = {}
    for cell in run.cells:
        tools: dict[str, str] = {}
        for target, step in zip(cell.task_plan.cell.step_targets, cell.task_plan.plan.steps, strict=False):
            tools[target] = _tool_name(step.tool)
        for target, step in zip(cell.task_plan.cell.step_targets, cell.task_plan.plan.steps, strict=False):
            if step.tool.server_name:
                tools.setdefault(f"{handle_name(step.tool.server_name)}.{target.rpartition('.')[2]}", _tool_name(step.tool))
        for target, count in getattr(cell.result, kind).items():
            name = tools.get(target, target)
            counts[name] = counts.get(name, 0) + count
    return counts


def _run_outcome(run: TaskRun) -> tuple[str, str | None]:
    result = run.result
    if result.status == "ok":
        return "ran", None
    if run.paused is not None:
        return "paused", run.paused["tool"]
    error_name = (result.error or {}).get("ename")
    if error_name in _DENIED:
        return "denied", error_name
    return "failed", error_name or result.status


def _known_values(inputs: Mapping[str, Any], task_plan: TaskPlan | None) -> list[KnownValue]:
    """The values the task was given and bound from its words, each with its parameter's meaning;
    the catalog's own words (a parameter's ``choices``, condition operators) are not values."""
    from toolpath.planner.tasks.arguments import OPERATORS

    bound_inputs = set()
    known: list[KnownValue] = []
    if task_plan is not None:
        for reading in task_plan.arguments.bound:
            bound_inputs.add(reading.input)
            tool = task_plan.plan.steps[reading.step].tool if reading.step < len(task_plan.plan.steps) else None
            parameter = next((item for item in tool.parameters if item.python_name == reading.parameter), None) if tool is not None else None
            catalog_words = set(OPERATORS) | set(parameter.choices or {} if parameter is not None else {})
            value = _without(reading.value, catalog_words)
            known.append(KnownValue(value, parameter.meaning if parameter is not None else None))
    known += [KnownValue(value) for name, value in inputs.items() if name not in bound_inputs]
    return known


def _without(value: Any, words: set[str]) -> Any:
    if isinstance(value, dict):
        return {key: _without(item, words) for key, item in value.items() if not (key in ("operator", "op") and isinstance(item, str))}
    if isinstance(value, (list, tuple)):
        return [_without(item, words) for item in value]
    return None if isinstance(value, str) and value in words else value


def _task_entry(task: str | Sequence[str] | None, inputs: Mapping[str, Any], known: Sequence[KnownValue], mode: str) -> dict[str, Any]:
    def text(words: str) -> str:
        return words if mode == "values" else redacted(words, known)

    request = text(task) if isinstance(task, str) else None
    steps = [text(step) for step in task] if task is not None and not isinstance(task, str) else None
    return {
        "request": request,
        "steps": steps,
        "parts": [],
        "shown": [],
        "ran": [],
        "inputs": {name: kind_marker(value) for name, value in inputs.items()},
        "redaction": "none" if mode == "values" else "kinds",
    }


def _caller_inputs(task_plan: TaskPlan) -> dict[str, Any]:
    """The plan's inputs the caller gave (not those bound from the words)."""
    bound = {reading.input for reading in task_plan.arguments.bound}
    return {name: value for name, value in task_plan.inputs.items() if name not in bound}


def _plan_entry(task_plan: TaskPlan, mode: str) -> dict[str, Any]:
    caller_inputs = _caller_inputs(task_plan)
    known = _known_values(caller_inputs, task_plan)
    entry = _task_entry(task_plan.task, caller_inputs, known, mode)
    steps = task_plan.plan.steps
    parts = []
    for part in task_plan.parts:
        if part.tool is not None:
            tools = [_tool_name(part.tool)]
        else:
            # The last producer of each goal state of the part: the tools that achieved it.
            producers = {state: _tool_name(step.tool) for step in steps for state in step.produces if state in part.goal}
            tools = list(dict.fromkeys(producers.values()))
        part_text = part.text if mode == "values" else redacted(part.text, known)
        parts.append({"text": part_text, "kind": part.kind, "status": part.status, "goal": sorted(part.goal), "tools": tools})
    return {**entry, "parts": parts, "shown": [_tool_name(step.tool) for step in steps]}


def _database(store: Database | str | os.PathLike[str] | None) -> Database:
    return store if isinstance(store, Database) else open_database(store, purpose=_PURPOSE)


def history(store: Database | str | os.PathLike[str] | None, user: str, limit: int | None = None) -> list[RecordedUse]:
    """``user``'s entries, newest first, at most ``limit`` (``None``: all).

    Raises:
        registry.storage.StoreError: the store cannot be read.
    """
    page = "" if limit is None else f" limit {int(limit)}"
    wait_for_writes()
    with _database(store).reading(_PURPOSE) as connection:
        rows = connection.execute(
            f"select {', '.join(_COLUMNS)} from {RECORD_OF_USE} where user_id = ? order by recorded_at desc, entry_id{page}", [user]
        ).fetchall()
    return [_entry_of(row) for row in rows]


def session_history(store: Database | str | os.PathLike[str] | None, session_id: str, limit: int) -> list[RecordedUse]:
    """The entries of tasks planned or run in the session ``session_id``, every user's (for an
    operator: ``toolpath sessions show``), newest first, at most ``limit``.

    The session is a field of each entry's JSON, not a column: the rows are narrowed with ``like``
    on its JSON text (``"session": "<id>"``, never found inside another string, where quotes are
    escaped), with ``%``, ``_`` and ``\\`` of the id escaped, then each entry's field is compared
    exactly.

    Raises:
        registry.storage.StoreError: the store cannot be read.
    """
    if limit < 1:
        return []
    written = json.dumps({"session": session_id}, ensure_ascii=False)[1:-1]  # as entries are written
    pattern = "%" + written.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    wait_for_writes()
    entries: list[RecordedUse] = []
    with _database(store).reading(_PURPOSE) as connection:
        cursor = connection.execute(
            f"select {', '.join(_COLUMNS)} from {RECORD_OF_USE} where entry like ? escape '\\' order by recorded_at desc, entry_id", [pattern]
        )
        for row in cursor:
            entry = _entry_of(row)
            if entry.session == session_id:
                entries.append(entry)
                if len(entries) >= limit:
                    break
    return entries


def clear(store: Database | str | os.PathLike[str] | None, user: str) -> int:
    """Delete ``user``'s entries (no one else's); how many there were.

    Raises:
        registry.storage.StoreError: the store cannot be written.
    """
    wait_for_writes()
    with _database(store).writing(_PURPOSE) as connection:
        return connection.execute(f"delete from {RECORD_OF_USE} where user_id = ?", [user]).rowcount


def _entry_of(row: Sequence[Any]) -> RecordedUse:
    entry_id, user, recorded_at, interface, outcome, text = row
    entry = json.loads(text)
    edits = entry.get("edits") or {}
    return RecordedUse(
        entry_id=entry_id,
        user=user,
        recorded_at=float(recorded_at),
        interface=interface,
        outcome=outcome,
        request=entry.get("request"),
        steps=tuple(entry.get("steps") or ()),
        parts=tuple(entry.get("parts") or ()),
        shown=tuple(entry.get("shown") or ()),
        ran=tuple(entry.get("ran") or ()),
        replans=tuple(entry.get("replans") or ()),
        retries=dict(entry.get("retries") or {}),
        injected_failures=dict(entry.get("injected_failures") or {}),
        edits=Edits(tuple(edits.get("avoid") or ()), tuple(edits.get("goal") or ())),
        inputs=dict(entry.get("inputs") or {}),
        detail=entry.get("detail"),
        session=entry.get("session"),
        redaction=entry.get("redaction", "kinds"),
    )
