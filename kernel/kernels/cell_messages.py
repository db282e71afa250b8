"""One cell's messages from its kernel: waiting for the kernel to go idle after it, its shell reply,
and the reply read into the cell's result (status, tool calls, variable names).

The replies come from a kernel the cell's code could change, so what is read from them is checked
for shape and size.
"""

from __future__ import annotations

import ast
import json
import queue
import time
from dataclasses import replace

from toolpath.kernel.inside import setup
from toolpath.kernel.inside.protocol import TOOL_CALLS_PAYLOAD
from toolpath.kernel.kernels.output import CellOutput, CellResult
from toolpath.kernel.kernels.transport import KernelTransport

#: Seconds one wait for a message lasts before the kernel is checked for life.
POLL_SECONDS = 0.5


async def until_idle(kernel: KernelTransport, message_id: str, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for the kernel to finish handling request ``message_id``
    (its ``idle`` status); other messages are dropped. False when it did not, or the kernel died or
    its channels were lost."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            message = await kernel.get_iopub_msg(timeout=min(POLL_SECONDS, max(0.01, deadline - time.monotonic())))
        except queue.Empty:
            if kernel.connection_lost() or not await kernel.is_alive():
                return False
            continue
        if (
            message.get("parent_header", {}).get("msg_id") == message_id
            and message["msg_type"] == "status"
            and message["content"].get("execution_state") == "idle"
        ):
            return True
    return False


async def shell_reply(kernel: KernelTransport, message_id: str) -> dict:
    """The content of the shell reply to ``message_id`` (status, execution count), ``{}`` if none comes."""
    try:
        while True:
            reply = await kernel.get_shell_msg(timeout=5.0)
            if reply.get("parent_header", {}).get("msg_id") == message_id:
                return reply.get("content", {})
    except queue.Empty:
        return {}


def finished_result(output: CellOutput, reply: dict, interrupted: bool, timeout: float | None, report_variables: bool) -> CellResult:
    """The result of a cell that ended (see :func:`_finished_result`), with the retries, injected
    failures and failure kinds of its tool calls that its reply reports."""
    result = _finished_result(output, reply, interrupted, timeout, report_variables)
    if result.status == "aborted":
        return result
    return replace(
        result, retries=_tool_calls(reply, "retries"), injected_failures=_tool_calls(reply, "injected_failures"), failure_kinds=_failure_kinds(reply)
    )


def _finished_result(output: CellOutput, reply: dict, interrupted: bool, timeout: float | None, report_variables: bool) -> CellResult:
    """The result of a cell that ended (its kernel went idle), from its ``output`` and its shell
    ``reply``: skipped, failed (on iopub or in the reply only), timed out or ok, with the tool calls
    and, with ``report_variables``, the variable names the reply reports. ``interrupted``: the
    cell's time limit (``timeout`` seconds) was reached and the kernel interrupted."""
    execution_count = reply.get("execution_count")
    tool_calls = _tool_calls(reply)
    if reply.get("status") == "aborted":
        evalue = "the kernel skipped this cell: it arrived while an earlier cell was failing (Jupyter aborts requests queued behind an error); run it again"
        return output.build("aborted", error={"ename": "Aborted", "evalue": evalue, "traceback": ""})
    if output.error is None and reply.get("status") == "error":
        # The cell raised but no error reached iopub (it broke the streams that carry it): the
        # shell reply still says so.
        traceback = "\n".join(str(line) for line in reply.get("traceback") or [])
        return output.build(
            "error",
            execution_count,
            error={"ename": str(reply.get("ename", "")), "evalue": str(reply.get("evalue", "")), "traceback": traceback},
            tool_calls=tool_calls,
        )
    if output.error is None:
        # The cell finished as the interrupt was sent; the interrupt may also have cut it short
        # without an exception (a very short timeout can land before user code runs). Say so.
        notice = "The time limit was reached as the cell finished; if its output looks incomplete, run it again with more time." if interrupted else ""
        variables = _variables(reply) if report_variables else None
        return replace(output.build("ok", execution_count, notice=notice, tool_calls=tool_calls), variables=variables)
    # A call interrupted inside a task the cell gathered surfaces as that task's cancellation.
    if interrupted and output.error["ename"] in ("KeyboardInterrupt", "CancelledError"):
        error = {**output.error, "ename": "Timeout", "evalue": f"the cell ran over {timeout:g} s and was interrupted"}
        return output.build("timeout", execution_count, error=error, tool_calls=tool_calls)
    return output.build("error", execution_count, tool_calls=tool_calls)


#: The ``user_expressions`` of a cell that reports the kernel's variable names in its execute reply
#: (the module and function named from themselves, so that a rename cannot leave a stale string).
VARIABLES_EXPRESSION = {"toolpath_variables": f"__import__({setup.__name__!r}, fromlist=['_']).{setup.variable_names_json.__name__}()"}


def _variables(reply: dict) -> tuple[str, ...] | None:
    """The variable names an execute reply answers for :data:`VARIABLES_EXPRESSION`; ``None`` when
    it has none of the right shape (the reply comes from a kernel the cell's code could change)."""
    answer = (reply.get("user_expressions") or {}).get("toolpath_variables")
    if not isinstance(answer, dict) or answer.get("status") != "ok":
        return None
    try:
        names = json.loads(ast.literal_eval((answer.get("data") or {}).get("text/plain", "")))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        return None
    return tuple(names)


#: Distinct tool-call targets kept from one reply, and their longest name: a cell could write any
#: payload, and a result must stay small.
_MAX_CALL_TARGETS = 1_000
_MAX_TARGET_CHARS = 300


def traced_calls(reply: dict) -> dict | None:
    """What a traced cell's execute reply reports of its calls of tools bound in the kernel
    (:func:`toolpath.kernel.inside.call_traces.cell_records`), unchecked; ``None`` when it reports none."""
    for payload in reply.get("payload") or []:
        if isinstance(payload, dict) and payload.get("source") == TOOL_CALLS_PAYLOAD and isinstance(payload.get("traced_calls"), dict):
            return payload["traced_calls"]
    return None


def _tool_calls(reply: dict, key: str = "tool_calls") -> dict[str, int]:
    """The completed tool calls a cell's execute reply reports (see :mod:`toolpath.kernel.inside.handles`),
    or with ``key`` ``"retries"``/``"injected_failures"`` its calls' retries or injected failures;
    entries of any other shape are ignored, since the reply comes from code the cell could have replaced."""
    calls: dict[str, int] = {}
    for payload in reply.get("payload") or []:
        if isinstance(payload, dict) and payload.get("source") == TOOL_CALLS_PAYLOAD and isinstance(payload.get(key), dict):
            for target, count in payload[key].items():
                if (
                    isinstance(target, str)
                    and len(target) <= _MAX_TARGET_CHARS
                    and type(count) is int
                    and count > 0
                    and (target in calls or len(calls) < _MAX_CALL_TARGETS)
                ):
                    calls[target] = calls.get(target, 0) + count
    return calls


#: The failure kinds a cell's reply may name (:func:`toolpath.registry.retry_conditions.failure_kind`).
_FAILURE_KINDS = frozenset({"timeout", "connection"})


def _failure_kinds(reply: dict) -> dict[str, str]:
    """``{"handle.attribute": "timeout" or "connection"}``: the kind of each tool call of the cell
    that failed for good from a timeout or a lost connection, as its execute reply reports it (see
    :mod:`toolpath.kernel.inside.handles`); entries of any other shape are ignored."""
    kinds: dict[str, str] = {}
    for payload in reply.get("payload") or []:
        if isinstance(payload, dict) and payload.get("source") == TOOL_CALLS_PAYLOAD and isinstance(payload.get("failure_kinds"), dict):
            for target, kind in payload["failure_kinds"].items():
                if (
                    isinstance(target, str)
                    and len(target) <= _MAX_TARGET_CHARS
                    and kind in _FAILURE_KINDS
                    and (target in kinds or len(kinds) < _MAX_CALL_TARGETS)
                ):
                    kinds[target] = kind
    return kinds
