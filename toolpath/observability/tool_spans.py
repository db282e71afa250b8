"""Spans of tool calls, named and described as the OpenTelemetry GenAI semantic conventions'
``execute_tool`` spans (https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-spans/).

Two kinds of call, one kind of span, ``execute_tool DOMAIN.TOOL``:

- a call of a host tool (``Toolkit.acall``, :func:`traced_tool_call`), made by a cell through its
  handle and the bridge, or by a program. A bridged call's span is a child of the context the
  kernel sent with it (:func:`from_kernel`), so it joins its cell's trace even when a task of an
  earlier cell makes it; each try of a call its retry policy retries is its own span
  (``toolpath.tool.attempt``);
- a call of a tool bound in the kernel, which the kernel records and reports with its cell
  (:mod:`toolpath.kernel.inside.call_traces`); :func:`kernel_call_spans` makes its span afterwards,
  under the cell's span, with the times the kernel measured. Its retries are counted on it
  (``toolpath.tool.retries``).

Attributes: ``gen_ai.operation.name`` (``execute_tool``), ``gen_ai.tool.name`` (``chemistry.parse_molecule``),
``gen_ai.tool.type`` (``function``), ``toolpath.tool.domain``, ``toolpath.tool.binding`` (``host`` or
``kernel``), ``toolpath.tool.arguments`` (each argument's name and type, ``smiles:str``),
``toolpath.tool.result`` and ``toolpath.tool.result_size`` (its type, and length for text and
containers), ``toolpath.tool.cache_hit`` (when the toolkit caches), ``toolpath.approval.asked`` and
``toolpath.approval.answer`` (``approved``, ``denied``, ``timeout``, ``pending``) with a
``toolpath.approval`` event, and on failure the status ``ERROR`` with ``error.type`` (the
exception's class: ``ApprovalDenied``, ``InjectedFailure``, ``ValueError``) and an ``exception``
event. ``gen_ai.tool.call.arguments`` and ``gen_ai.tool.call.result`` hold the values only with
:data:`toolpath.observability.tracing.VALUES_VARIABLE` (never for calls bound in the kernel).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
from collections.abc import Callable, Coroutine, Iterator, Sequence
from typing import Any

from toolpath.observability import tracing

#: The try number a kernel sent with the bridged call being made, and the context of the cell that
#: made it (``None``: not a bridged call).
_bridged: contextvars.ContextVar[tuple[int, Any] | None] = contextvars.ContextVar("toolpath_bridged_call", default=None)
#: The answer an exception ending an approval's wait means.
_ANSWERS = {"ApprovalDenied": "denied", "ApprovalTimeout": "timeout", "ApprovalPending": "pending"}
#: Calls of one kernel record made into spans, and the characters of a name kept (a kernel's code
#: could write any payload).
MAX_KERNEL_CALLS = 1_000
MAX_NAME_CHARS = 200


def from_kernel(fields: Any, coroutine: Coroutine[Any, Any, Any]) -> Coroutine[Any, Any, Any]:
    """``coroutine`` (a bridged call of a host tool), run in the trace of the cell that made it:
    ``fields`` is what the kernel sent (:func:`toolpath.kernel.inside.call_traces.bridge_fields`);
    ``coroutine`` itself when nothing traces or the kernel sent no valid context."""
    parent = tracing.remote_context(fields)
    if parent is None:
        return coroutine
    attempt = fields.get("attempt")
    return _bridged_call(coroutine, attempt if type(attempt) is int and attempt >= 1 else 1, parent)


async def _bridged_call(coroutine: Coroutine[Any, Any, Any], attempt: int, parent: Any) -> Any:
    # The cell's context is handed to the call's span as its parent rather than made current: one
    # context switch less per call, which is most of what joining the trace cost (issue 56).
    token = _bridged.set((attempt, parent))
    try:
        return await coroutine
    finally:
        _bridged.reset(token)


def traced_tool_call(acall: Callable[..., Coroutine[Any, Any, Any]]) -> Callable[..., Coroutine[Any, Any, Any]]:
    """Decorate ``Toolkit.acall(self, name, args=(), kwargs=None, approval=None)`` to make each
    call's span (see the module docstring)."""

    @functools.wraps(acall)
    async def traced(toolkit: Any, name: str, args: Sequence[Any] = (), kwargs: dict[str, Any] | None = None, approval: Any = None) -> Any:
        made_by = tracing.tracer()
        if made_by is None:
            return await acall(toolkit, name, args, kwargs, approval)
        bridged = _bridged.get()
        span_name, static = _static_attributes(toolkit.name, name, bridged is not None)
        attributes: dict[str, Any] = dict(static)
        attributes["toolpath.tool.arguments"] = _kinds(args, kwargs or {})
        if bridged is not None:
            attributes["toolpath.tool.attempt"] = bridged[0]
        if tracing.records_values():
            attributes["gen_ai.tool.call.arguments"] = tracing.shown({"args": list(args), "kwargs": kwargs or {}} if args else kwargs or {})
        from opentelemetry import context
        from opentelemetry.trace import set_span_in_context

        # tracing.span's two nested generators cost a bridged call more than the rest of its span.
        span = made_by.start_span(span_name, context=bridged[1] if bridged is not None else None, attributes=attributes)
        token = _bridged.set(None)  # a host tool that calls another toolkit's tool calls it from the host
        attached = context.attach(set_span_in_context(span))
        try:
            result = await acall(toolkit, name, args, kwargs, approval)
            _describe_result(span, result)
            return result
        except BaseException as error:
            tracing.failed(span, error)
            raise
        finally:
            context.detach(attached)
            _bridged.reset(token)
            span.end()

    return traced


@functools.lru_cache(maxsize=1024)
def _static_attributes(domain: str, tool: str, from_kernel: bool) -> tuple[str, tuple[tuple[str, Any], ...]]:
    """The span name and the attributes every call of a host tool has, worked out once per tool."""
    qualified = f"{domain}.{tool}"
    return f"execute_tool {qualified}", (
        ("gen_ai.operation.name", "execute_tool"),
        ("gen_ai.tool.name", qualified),
        ("gen_ai.tool.type", "function"),
        ("toolpath.tool.domain", domain),
        ("toolpath.tool.binding", "host"),
        ("toolpath.tool.called_from", "kernel" if from_kernel else "host"),
    )


def _kinds(args: Sequence[Any], kwargs: dict[str, Any]) -> list[str]:
    return [f"#{index}:{tracing.kind_of(value)}" for index, value in enumerate(args)] + [f"{name}:{tracing.kind_of(value)}" for name, value in kwargs.items()]


def _describe_result(span: Any, result: Any) -> None:
    described: dict[str, Any] = {"toolpath.tool.result": tracing.kind_of(result)}
    size = tracing.size_of(result)
    if size is not None:
        described["toolpath.tool.result_size"] = size
    if tracing.records_values():
        described["gen_ai.tool.call.result"] = tracing.shown(result)
    span.set_attributes(described)  # one call: the SDK takes its lock once


def note_cache_hit(hit: bool) -> None:
    """Say on the current tool call's span whether the toolkit's cache answered it."""
    span = tracing.current_span()
    if span is not None:
        span.set_attribute("toolpath.tool.cache_hit", hit)


@contextlib.contextmanager
def asking_approval() -> Iterator[None]:
    """Around the wait for an approver's answer: the current tool call's span says it asked, and
    the answer (an exception leaving the block is a no, no answer in time, or a pause)."""
    span = tracing.current_span()
    if span is None:
        yield
        return
    span.set_attribute("toolpath.approval.asked", True)
    answer = "approved"
    try:
        yield
    except BaseException as error:
        answer = _ANSWERS.get(type(error).__name__, "error")
        raise
    finally:
        span.set_attribute("toolpath.approval.answer", answer)
        span.add_event("toolpath.approval", {"answer": answer})


def kernel_call_spans(calls: Any) -> None:
    """Make the spans of a cell's calls of tools bound in its kernel, under the current span (the
    cell's): ``calls`` is what the kernel reported in the cell's execute reply
    (:func:`toolpath.kernel.inside.call_traces.cell_records`: ``{"calls": [...], "dropped": n}``).
    A record of any other shape is skipped: the reply comes from code the cell could have changed."""
    made_by = tracing.tracer()
    if made_by is None or not isinstance(calls, dict) or not isinstance(calls.get("calls"), list):
        return
    dropped = calls.get("dropped")
    if type(dropped) is int and dropped > 0:
        span = tracing.current_span()
        if span is not None:
            span.set_attribute("toolpath.cell.untraced_calls", dropped)
    for record in calls["calls"][:MAX_KERNEL_CALLS]:
        try:
            _kernel_call_span(made_by, record)
        except (ValueError, TypeError, KeyError, AttributeError):
            continue


def _kernel_call_span(made_by: Any, record: Any) -> None:
    """The span of one in-kernel call's record; raises ``ValueError``, ``TypeError``, ``KeyError``
    or ``AttributeError`` for a record that is not one."""
    names = {key: _name(record[key]) for key in ("target", "tool", "domain", "error", "approval")}
    start, end = record["start"], record["end"]
    if type(start) is not int or type(end) is not int or not 0 < start <= end:
        raise ValueError(f"the record's times {start!r} and {end!r} are not an interval in nanoseconds")
    qualified = f"{names['domain']}.{names['tool']}"
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": qualified,
        "gen_ai.tool.type": "function",
        "toolpath.tool.domain": names["domain"],
        "toolpath.tool.binding": "kernel",
        "toolpath.tool.called_from": "kernel",
        "toolpath.tool.arguments": [_name(kind) for kind in record["arguments"][:100]],
        "toolpath.tool.retries": _count(record.get("retries")),
        "toolpath.tool.injected_failures": _count(record.get("injected")),
    }
    if "result" in record:
        attributes["toolpath.tool.result"] = _name(record["result"])
    if type(record.get("result_size")) is int:
        attributes["toolpath.tool.result_size"] = record["result_size"]
    span = made_by.start_span(f"execute_tool {qualified}", attributes=attributes, start_time=start)
    if names["approval"]:
        span.set_attributes({"toolpath.approval.asked": True, "toolpath.approval.answer": names["approval"]})
        span.add_event("toolpath.approval", {"answer": names["approval"]}, timestamp=start)
    if names["error"]:
        tracing.failed_as(span, names["error"], timestamp=end)
    span.end(end_time=end)


def _name(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"a name in a kernel's call record must be text, not {type(value).__name__}")
    return value[:MAX_NAME_CHARS]


def _count(value: Any) -> int:
    return value if type(value) is int and value >= 0 else 0
