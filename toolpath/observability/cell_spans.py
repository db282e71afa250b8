"""The span of a cell: one per cell a CodeMode session runs (``CodeMode.run``/``arun``, so every
planned cell and every cell an agent executes), and the trace context its kernel is sent.

A cell's span ``toolpath.cell`` is a child of the caller's current span (a task's, an MCP
request's) and lasts from the call to the result, a kernel start and a snapshot included. It has:

- ``toolpath.session.id``, ``toolpath.kernel.id`` (the kernel that ran it), ``toolpath.cell.code_chars``;
- how it ended: ``toolpath.cell.status`` (``ok``, ``error``, ``timeout``, ``aborted``, ``busy``,
  ``dead``), and for any but ``ok`` the status ``ERROR`` with ``error.type`` the exception's name
  (``ZeroDivisionError``, ``Timeout``, ``KernelDied``);
- what it made: ``toolpath.cell.stdout_chars``, ``stderr_chars``, ``result_chars``, ``images``,
  and its tool calls that returned, retried and had failures injected (``toolpath.cell.tool_calls``,
  ``retries``, ``injected_failures``); ``toolpath.cell.paused`` when it stopped for an approval.

The cell's code (``toolpath.cell.code``) and its exception's message are recorded only with
:data:`toolpath.observability.tracing.VALUES_VARIABLE`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import Any

from toolpath.observability import tracing

#: The name of a cell's span.
CELL_SPAN = "toolpath.cell"


def traced_cell(run: Callable[..., Coroutine[Any, Any, Any]]) -> Callable[..., Coroutine[Any, Any, Any]]:
    """Decorate ``CodeModeEngine.run(self, code, session_id, ...)`` (which returns a
    ``CellResult``) to make each call's span."""

    @functools.wraps(run)
    async def traced(engine: Any, code: str, session_id: str, *args: Any, **kwargs: Any) -> Any:
        if tracing.tracer() is None:
            return await run(engine, code, session_id, *args, **kwargs)
        attributes: dict[str, Any] = {"toolpath.session.id": session_id, "toolpath.cell.code_chars": len(code)}
        if tracing.records_values():
            attributes["toolpath.cell.code"] = tracing.shown(code)
        with tracing.span(CELL_SPAN, attributes) as span:
            result = await run(engine, code, session_id, *args, **kwargs)
            if span is not None:
                _describe(span, result)
            return result

    return traced


def _describe(span: Any, result: Any) -> None:
    """Set on ``span`` how the cell of ``result`` (a ``CellResult``) ended and what it made."""
    span.set_attributes(
        {
            "toolpath.cell.status": result.status,
            "toolpath.cell.stdout_chars": len(result.stdout),
            "toolpath.cell.stderr_chars": len(result.stderr),
            "toolpath.cell.result_chars": len(result.result or ""),
            "toolpath.cell.images": len(result.images),
            "toolpath.cell.tool_calls": sum(result.tool_calls.values()),
            "toolpath.cell.retries": sum(result.retries.values()),
            "toolpath.cell.injected_failures": sum(result.injected_failures.values()),
            "toolpath.cell.paused": result.pending_approval is not None,
        }
    )
    if result.status != "ok":
        error = result.error or {}
        tracing.failed_as(span, str(error.get("ename") or result.status), str(error.get("evalue") or ""))


def note_kernel(kernel_id: str | None) -> None:
    """Name the kernel that runs the current cell on its span (when there is one)."""
    span = tracing.current_span()
    if span is not None and kernel_id:
        span.set_attribute("toolpath.kernel.id", kernel_id)


def execute_metadata(silent: bool) -> dict[str, str] | None:
    """The metadata of a cell's ``execute_request``: the current span's W3C context, so that the
    tool calls the cell makes join its trace (:mod:`toolpath.kernel.inside.call_traces`); ``None``
    for a silent housekeeping cell, and when nothing traces."""
    return None if silent else tracing.carrier()
