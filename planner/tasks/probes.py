"""Input probes: a little of what a value the user gives holds (a table file's columns), read while
planning, so that a task's words can be matched to it (:mod:`toolpath.planner.tasks.arguments`).

A catalog declares a probe on an input state (``State.probe``, ``"package.module:function"``). A plan's
step is probed when an input feeds one of its parameters that carries such a state, or one with
``meaning: file`` (probed with the probe of its domain's input state). The function is imported only
then, and called with the file's resolved path.

**What may be read.** Only a regular file inside one directory (:class:`toolpath.planner.tasks.pipeline.TaskContext`'s
``probe_directory``): the command line and :class:`toolpath.planner.Workspace` read in the working
directory; a server that plans for many users reads nothing (``None``), since a path in a task may
name another user's file. The path is resolved (``..`` and symbolic links followed) before the check,
so a link pointing out of the directory is refused. A value refused, or a probe that fails or returns
something else than it should, is reported with its reason (:attr:`Probe.problem`), never raised.
"""

from __future__ import annotations

import importlib
import os
import stat
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolpath.planner.planning.inputs import input_for

if TYPE_CHECKING:
    from toolpath.planner.planning.graph import StateGraph
    from toolpath.planner.planning.plans import Plan
    from toolpath.registry import ToolDefinition, ToolParameter


@dataclass(frozen=True)
class Probe:
    """One value probed (or not), and what its probe found.

    Attributes:
        input: the input that gave the value (``path``, ``tabular.join_tables.other_path``).
        value: the value as given.
        state: the state whose probe applies (``tabular.file_given``).
        function: the probe, ``"package.module:function"``.
        found: what the probe returned (``{"columns": {name: kind}, ...}``); ``None`` when it did not run or failed.
        problem: why it did not run or failed; ``""`` when it ran.
        seconds: how long the probe took (0 when it did not run).
    """

    input: str
    value: Any
    state: str
    function: str
    found: Mapping[str, Any] | None = None
    problem: str = ""
    seconds: float = 0.0

    @property
    def columns(self) -> dict[str, str]:
        """``{column: kind}`` the probe found (empty when it did not run)."""
        return dict((self.found or {}).get("columns") or {})

    @property
    def values(self) -> dict[str, list[Any]]:
        """``{column: [values seen]}`` the probe found for its text columns."""
        return {str(name): list(seen) for name, seen in ((self.found or {}).get("values") or {}).items()}

    def to_dict(self) -> dict[str, Any]:
        return {
            "input": self.input,
            "value": self.value,
            "state": self.state,
            "probe": self.function,
            "columns": self.columns,
            "rows_read": (self.found or {}).get("rows_read"),
            "problem": self.problem or None,
            "milliseconds": round(self.seconds * 1000, 2),
        }


def probe_inputs(graph: StateGraph, plan: Plan, inputs: Mapping[str, Any], directory: str | os.PathLike[str] | None) -> tuple[Probe, ...]:
    """Probe each input that feeds a step of ``plan`` through a parameter carrying a state with a
    probe, or a ``meaning: file`` parameter (see the module docstring); each value once. A plan of no
    steps (its goal held) probes what would feed any tool of ``graph``: the words of its task still
    name the data.

    Args:
        graph: its states say which have probes.
        plan: the plan whose steps' inputs are probed.
        inputs: the task's inputs (the caller's and those its words give).
        directory: the directory whose files may be read; ``None``: none (every value is reported
            as not probed, with the reason).

    Returns:
        One :class:`Probe` per value probed or refused, in plan order.
    """
    probes: dict[tuple[Any, str], Probe] = {}
    for tool in [step.tool for step in plan.steps] if plan.steps else list(graph.registry):
        for parameter in tool.parameters:
            state = _probed_state(graph, tool, parameter)
            name = input_for(tool, parameter, inputs) if state is not None else None
            if state is None or name is None:
                continue
            function = graph.states[state].probe
            key = (repr(inputs[name]), function)
            if key not in probes:
                probes[key] = run_probe(name, inputs[name], state, function, directory)  # type: ignore[arg-type]
    return tuple(probes.values())


def _probed_state(graph: StateGraph, tool: ToolDefinition, parameter: ToolParameter) -> str | None:
    """The state whose probe reads ``parameter``'s value: the state it carries, or for a ``meaning:
    file`` parameter its domain's input state that has a probe (the first by token)."""
    if parameter.role != "input":
        return None
    if parameter.state is not None:
        state = graph.states.get(parameter.state)
        return parameter.state if state is not None and state.probe else None
    if parameter.meaning == "file":
        prefix = f"{tool.server_name}." if tool.server_name else ""
        return next((token for token, state in sorted(graph.states.items()) if token.startswith(prefix) and state.input and state.probe), None)
    return None


def run_probe(name: str, value: Any, state: str, function: str, directory: str | os.PathLike[str] | None) -> Probe:
    """Probe one value with ``function`` when it is a regular file inside ``directory`` (:func:`readable_file`).

    Returns:
        The :class:`Probe`; its ``problem`` says why it did not run or what went wrong.
    """
    path, refusal = readable_file(value, directory)
    if path is None:
        return Probe(name, value, state, function, problem=refusal)
    started = time.perf_counter()
    try:
        found = _cached_call(function, path)
    except Exception as error:  # a catalog's code: whatever it raises is reported, planning goes on
        return Probe(name, value, state, function, problem=f"the probe failed: {type(error).__name__}: {error}", seconds=time.perf_counter() - started)
    problem = _shape_problem(found)
    return Probe(name, value, state, function, None if problem else found, problem, time.perf_counter() - started)


def readable_file(value: Any, directory: str | os.PathLike[str] | None) -> tuple[Path | None, str]:
    """``(resolved path, "")`` when ``value`` names a regular file inside ``directory`` (a relative
    path is taken from there; ``..`` and symbolic links are resolved before the check), else
    ``(None, why not)``."""
    if directory is None:
        return None, "not probed: files are read only where the planner may read (the command line's working directory); this planner reads none"
    if not isinstance(value, str) or not value.strip():
        return None, "not probed: the value is not a file path"
    base = Path(directory).resolve()
    candidate = Path(value).expanduser()
    resolved = (candidate if candidate.is_absolute() else base / candidate).resolve()
    if not resolved.is_relative_to(base):
        return None, f"not probed: {value!r} is outside {base} (the directory the planner may read), or links out of it"
    try:
        mode = resolved.stat().st_mode
    except OSError as error:
        return None, f"not probed: cannot read {value!r}: {error.strerror or error}"
    if not stat.S_ISREG(mode):
        return None, f"not probed: {value!r} is not a regular file"
    return resolved, ""


def _shape_problem(found: Any) -> str:
    """Why ``found`` is not what a probe returns (``{"columns": {name: kind}}``), or ``""``."""
    columns = found.get("columns") if isinstance(found, Mapping) else None
    if not isinstance(columns, Mapping) or not all(isinstance(name, str) and isinstance(kind, str) for name, kind in columns.items()):
        return f"the probe returned {type(found).__name__}, not {{'columns': {{name: kind}}}}; the catalog's probe function is at fault"
    values = found.get("values", {})
    if not isinstance(values, Mapping) or not all(isinstance(seen, (list, tuple)) for seen in values.values()):
        return "the probe returned 'values' that are not {column: [values]}; the catalog's probe function is at fault"
    return ""


#: Probe results kept, by function and file (with its size and modification time, so a changed file
#: is read again): the same task is often planned several times (``input_options`` replans it with
#: each subset of its unbound inputs), and each probe reads the file.
CACHED_PROBES = 64
_cache: dict[tuple[str, str, int, int, int], Mapping[str, Any]] = {}
_cache_lock = threading.Lock()


def _cached_call(function: str, path: Path) -> Mapping[str, Any]:
    status = path.stat()
    key = (function, str(path), status.st_ino, status.st_size, status.st_mtime_ns)
    with _cache_lock:
        if key in _cache:
            return _cache[key]
    module_name, _, attribute = function.partition(":")
    found = getattr(importlib.import_module(module_name), attribute)(str(path))
    if not _shape_problem(found):
        with _cache_lock:
            if len(_cache) >= CACHED_PROBES:
                del _cache[next(iter(_cache))]
            _cache[key] = found
    return found
