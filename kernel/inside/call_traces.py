"""The trace a cell belongs to, and what its tool calls did, for the host's spans (this module is
imported *in the kernel process*).

When the host traces a cell it sends the cell's W3C Trace Context (``traceparent``, ``tracestate``)
in the metadata of the cell's ``execute_request`` (:mod:`toolpath.observability.cell_spans`);
:func:`cell_started` keeps it in a context variable, which the tasks a cell starts inherit. Then:

- a call of a host tool crosses the bridge with that context and its try number
  (:func:`bridge_fields`); the host opens the call's span as a child of it;
- a call of a tool bound in the kernel is recorded (:func:`traced`): when it started and ended (this
  clock's nanoseconds since the epoch), how it ended (the exception's type), its retries, injected
  failures and approval, and the kinds and sizes of its arguments and result, never their values.
  A cell's records go back in its execute reply's payload (:func:`cell_records`), and the host makes
  them spans under the cell's span.

A cell the host does not trace gets no context: then a call costs one context-variable read here,
and nothing is recorded or sent. Nothing of OpenTelemetry is needed in the kernel.
"""

from __future__ import annotations

import contextvars
import functools
import re
import time
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

#: Calls recorded for one cell; past it they are counted as ``dropped``.
MAX_RECORDS = 1_000
#: Characters of a name kept in a record.
MAX_NAME_CHARS = 200
_TRACEPARENT = re.compile(r"00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")
#: Exceptions that end a call before it runs because of its approval, and the answer each means.
_APPROVAL_ANSWERS = {"ApprovalDenied": "denied", "ApprovalTimeout": "timeout", "ApprovalPending": "pending"}

#: ``(traceparent, tracestate)`` of the cell that started the running code, or ``None``.
_cell_context: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar("toolpath_cell_trace", default=None)
#: The try number of the call being made (1 for its first try).
_attempt: contextvars.ContextVar[int] = contextvars.ContextVar("toolpath_attempt", default=1)
#: The record of the in-kernel call being made, which its retries and approval are noted in.
_recording: contextvars.ContextVar[_Record | None] = contextvars.ContextVar("toolpath_call_record", default=None)

_running: tuple[str, str] | None = None  # the context of the cell running now
_records: list[dict[str, Any]] = []
_dropped = 0


def cell_started(metadata: Any) -> None:
    """Take the trace context of the cell that starts now from its request's ``metadata`` (none:
    the cell is not traced); called by the cell tracker of :mod:`toolpath.kernel.inside.handles`."""
    global _running, _dropped
    context = None
    if isinstance(metadata, Mapping):
        traceparent, tracestate = metadata.get("traceparent"), metadata.get("tracestate", "")
        if isinstance(traceparent, str) and _TRACEPARENT.fullmatch(traceparent):
            context = (traceparent, tracestate if isinstance(tracestate, str) else "")
    _cell_context.set(context)
    _running = context
    _records.clear()
    _dropped = 0


def bridge_fields() -> dict[str, Any] | None:
    """What a bridge message of the running code carries for the host's span: the cell's
    ``traceparent`` and ``tracestate``, and the call's ``attempt``; ``None`` when its cell is not traced."""
    context = _cell_context.get()
    if context is None:
        return None
    traceparent, tracestate = context
    fields: dict[str, Any] = {"traceparent": traceparent, "attempt": _attempt.get()}
    if tracestate:
        fields["tracestate"] = tracestate
    return fields


async def numbered(call: Callable[[], Coroutine[Any, Any, Any]], attempt: int) -> Any:
    """Await ``call()`` as try number ``attempt`` of its call (a host tool's bridge message says it)."""
    __tracebackhide__ = True
    token = _attempt.set(attempt)
    try:
        return await call()
    finally:
        _attempt.reset(token)


def note(kind: str) -> None:
    """Note on the record of the in-kernel call being made a ``"retry"``, an ``"injected"``
    failure or that it ``"asked"`` for approval (nothing when it is not recorded)."""
    record = _recording.get()
    if record is not None:
        record.counts[kind] = record.counts.get(kind, 0) + 1


class _Record:
    def __init__(self, context: tuple[str, str], target: str, tool: str, domain: str, args: tuple, kwargs: dict):
        self.context = context
        self.fields: dict[str, Any] = {
            "target": target[:MAX_NAME_CHARS],
            "tool": tool[:MAX_NAME_CHARS],
            "domain": domain[:MAX_NAME_CHARS],
            "arguments": [f"#{index}:{type(value).__qualname__}" for index, value in enumerate(args)]
            + [f"{name[:MAX_NAME_CHARS]}:{type(value).__qualname__}" for name, value in kwargs.items()],
            "start": time.time_ns(),
        }
        self.counts: dict[str, int] = {}

    def finish(self, error: BaseException | None, value: Any = None) -> None:
        global _dropped
        fields = self.fields
        fields["end"] = time.time_ns()
        fields["retries"], fields["injected"] = self.counts.get("retry", 0), self.counts.get("injected", 0)
        kind = type(error).__qualname__ if error is not None else ""
        fields["approval"] = (_APPROVAL_ANSWERS.get(kind, "approved") if self.counts.get("asked") else "")[:MAX_NAME_CHARS]
        fields["error"] = kind[:MAX_NAME_CHARS]
        if error is None:
            fields["result"] = type(value).__qualname__[:MAX_NAME_CHARS]
            if isinstance(value, (str, bytes, bytearray, list, tuple, dict, set, frozenset)):
                fields["result_size"] = len(value)
        if self.context != _running:
            return  # its cell has reported already (a task that outlived it): nobody takes the record
        if len(_records) < MAX_RECORDS:
            _records.append(fields)
        else:
            _dropped += 1


def traced(call: Callable[..., Coroutine[Any, Any, Any]], target: str, tool: str, domain: str) -> Callable[..., Coroutine[Any, Any, Any]]:
    """``call`` (the awaitable function of a tool bound in the kernel, as
    :func:`toolpath.kernel.inside.handles.awaitable` makes it), recording each call it makes in a
    traced cell: ``target`` is ``handle.attribute``, ``tool`` the tool's name, ``domain`` its catalog
    server or toolkit."""

    @functools.wraps(call)
    async def recorded(*args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        context = _cell_context.get()
        if context is None:
            return await call(*args, **kwargs)
        record = _Record(context, target, tool, domain, args, kwargs)
        token = _recording.set(record)
        try:
            value = await call(*args, **kwargs)
        except BaseException as error:
            record.finish(error)
            raise
        finally:
            _recording.reset(token)
        record.finish(None, value)
        return value

    return recorded


def cell_records() -> dict[str, Any] | None:
    """The records of the running cell's in-kernel calls for its execute reply's payload:
    ``{"calls": [...], "dropped": n}``; ``None`` when the cell is not traced or called none."""
    if _running is None or not (_records or _dropped):
        return None
    return {"calls": list(_records), "dropped": _dropped}
