"""Approvals: tools that run only after a person's yes.

A tool asks for approval by its policy (:attr:`toolpath.kernel.tools.toolkit.Tool.requires_approval`):
always, or when a check on the call's real arguments says so (a write over an existing file). A
call to it from a cell crosses the bridge like any host call; the host then asks the session's
approver (:class:`ApprovalGate`) and waits, while the kernel and every variable in it stay as they
are. A yes runs the tool; a no raises :class:`ApprovalDenied` in the cell, no answer in time
:class:`ApprovalTimeout`, and the tool's code does not run. Nothing is replayed: the cell simply
continues (or handles the exception) once the answer is in.

Every decision is written to the audit log (:class:`toolpath.kernel.tools.approval_log.ApprovalLog`)
with the session, the user, the tool, a digest of the arguments and the answer.

Which calls ask, and the errors a cell gets, are in :mod:`toolpath.kernel.inside.approval_policy`
(checked in the kernel too); this module is the host's side: the gate, its decisions and the spec an
in-kernel handle gets.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from toolpath.kernel.inside.approval_policy import ApprovalDenied, ApprovalPending, ApprovalRequest, ApprovalTimeout
from toolpath.kernel.option_checks import check_seconds

if TYPE_CHECKING:
    from toolpath.kernel.tools.approval_log import ApprovalLog
    from toolpath.registry import ToolDefinition

#: Seconds an approver has to answer by default (a person reading a prompt, not a program).
DEFAULT_APPROVAL_TIMEOUT = 300.0


@dataclass(frozen=True)
class ApprovalDecision:
    """An approver's answer: ``approved``, an optional ``note`` (a no's reason, a yes's conditions)
    and who decided (``by``; default the session's user).

    Raises:
        TypeError: ``approved`` is not a ``bool`` (a ``"no"`` must never read as a yes).
    """

    approved: bool
    note: str = ""
    by: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.approved, bool):
            raise TypeError(f"approved must be True or False, not {type(self.approved).__name__} {self.approved!r}")


#: What a call that needs approval does in a cell: ask the approver and wait, or pause the run.
OnApproval = Literal["ask", "pause"]

#: ``approver(request)`` → ``bool`` or :class:`ApprovalDecision`, sync or async. A sync one runs in a
#: daemon thread of its own, so sessions waiting for answers do not hold each other up, and one
#: still waiting after the timeout does not keep the process from exiting.
Approver = Callable[[ApprovalRequest], "bool | ApprovalDecision | Awaitable[bool | ApprovalDecision]"]


def approval_spec(tool: ToolDefinition) -> dict[str, Any] | None:
    """What an in-kernel handle needs to ask for approval of ``tool``'s calls (``None``: it never
    asks): ``{"approval": "always"}``, or ``{"approval": "on_overwrite", "outputs": {python name:
    default}}`` (see :func:`policy_of`)."""
    if tool.approval == "never":
        return None
    if tool.approval == "always":
        return {"approval": "always"}
    return {"approval": "on_overwrite", "outputs": {parameter.python_name: parameter.default for parameter in tool.output_parameters}}


@dataclass
class ApprovalGate:
    """Asks ``approver`` about calls, within ``timeout`` seconds, and records each decision.

    Args:
        approver: who decides (see :data:`Approver`); ``None``: nobody can be asked, so every call
            that needs approval is denied, saying so.
        timeout: seconds to wait for an answer (:data:`DEFAULT_APPROVAL_TIMEOUT`); keep it under
            the cell's own timeout, which would interrupt the wait first.
        log: where decisions are recorded; ``None`` records nothing.
        nobody: the sentence a denial without approver gives (what to configure to get one).
    """

    approver: Approver | None
    timeout: float = DEFAULT_APPROVAL_TIMEOUT
    log: ApprovalLog | None = None
    nobody: str = "nobody can approve calls here: give CodeMode an approver"

    def __post_init__(self) -> None:
        check_seconds("approval_timeout", self.timeout, positive=True)

    async def ask(self, request: ApprovalRequest) -> ApprovalDecision:
        """The approver's yes, recorded.

        Raises:
            ApprovalDenied: a no (with its note), an approver that raised or answered something other
                than a ``bool`` or :class:`ApprovalDecision`, or no approver.
            ApprovalTimeout: no answer within ``timeout`` seconds.
        """
        if self.approver is None:
            await self._record(request, "denied", self.nobody, "")
            raise ApprovalDenied(f"{request.tool} needs approval ({request.reason}), but {self.nobody}", self.nobody)
        deadline = asyncio.timeout(self.timeout)
        try:
            async with deadline:
                answer = await self._answer(request)
        except asyncio.CancelledError:
            raise
        except BaseException as error:  # the approver's failure is a no (SystemExit too): the tool must not run without a yes
            if deadline.expired():
                await self._record(request, "timeout", f"no answer within {self.timeout:g} s", "")
                raise ApprovalTimeout(
                    f"{request.tool} needs approval ({request.reason}); no answer came within {self.timeout:g} s, so it did not run"
                ) from None
            note = f"the approver raised {type(error).__name__}: {error}"
            await self._record(request, "failed", note, "")
            raise ApprovalDenied(f"{request.tool} was not approved: {note}", note) from error
        if isinstance(answer, bool):
            answer = ApprovalDecision(answer)
        if not isinstance(answer, ApprovalDecision):
            note = f"the approver answered {type(answer).__module__}.{type(answer).__qualname__}, not True, False or an ApprovalDecision"
            await self._record(request, "failed", note, "")
            raise ApprovalDenied(f"{request.tool} was not approved: {note}", note)
        return await self.settle(request, answer)

    async def settle(self, request: ApprovalRequest, decision: ApprovalDecision) -> ApprovalDecision:
        """Record ``decision`` on ``request`` and return it when it is a yes.

        Raises:
            ApprovalDenied: it is a no.
        """
        approved = decision.approved is True
        await self._record(request, "approved" if approved else "denied", decision.note, decision.by)
        if not approved:
            said = f": {decision.note}" if decision.note else ""
            raise ApprovalDenied(f"{request.tool} was denied by {decision.by or 'the approver'}{said}", decision.note or "denied")
        return decision

    async def _answer(self, request: ApprovalRequest) -> Any:
        approver = self.approver
        assert approver is not None
        # An async function, or an object whose __call__ is one, is awaited on this loop.
        if inspect.iscoroutinefunction(approver) or inspect.iscoroutinefunction(type(approver).__call__):
            return await approver(request)
        answer = await _in_daemon_thread(approver, request)
        return await answer if inspect.isawaitable(answer) else answer

    async def _record(self, request: ApprovalRequest, decision: str, note: str, by: str) -> None:
        if self.log is not None:
            await asyncio.to_thread(self.log.record, request, decision, note, by or (request.user_id or ""))


async def _in_daemon_thread(approver: Callable[[ApprovalRequest], Any], request: ApprovalRequest) -> Any:
    """``approver(request)`` in a thread of its own that does not keep the process alive.

    A sync approver that never returns (a terminal prompt nobody answers) outlives the gate's
    timeout; in the event loop's executor it would hold up the loop's and the interpreter's exit
    (both join their worker threads), so ``toolpath run`` would hang after its result. Its late
    answer is dropped.
    """
    loop = asyncio.get_running_loop()
    answered: asyncio.Future = loop.create_future()

    def settle(answer: Any, error: BaseException | None) -> None:
        if answered.done():  # the gate stopped waiting (timeout, cancelled cell)
            return
        if error is None:
            answered.set_result(answer)
        else:
            answered.set_exception(error)

    def ask() -> None:
        answer, error = None, None
        try:
            answer = approver(request)
        except BaseException as failure:  # handed to the gate, which records it as a failed approval
            error = failure
        try:
            loop.call_soon_threadsafe(settle, answer, error)
        except RuntimeError:  # the loop is closed: nobody waits for this answer any more
            pass

    threading.Thread(target=ask, name=f"approver for {request.tool}", daemon=True).start()
    return await answered


@dataclass(frozen=True)
class ApprovalContext:
    """The gate a call's approval is asked at, and the session it comes from (CodeMode sets one on
    each kernel's bridge for every cell).

    Attributes:
        pause: instead of asking, a call that needs approval raises :class:`ApprovalPending` and is
            kept in ``pending`` (a planned task that pauses).
        answers: decisions already given, by request digest (a paused task resumed): the first call
            whose request has one is settled by it, recorded, without asking; the answer is then
            used up.
        pending: the requests a paused cell stopped at (filled by :meth:`check`).
    """

    gate: ApprovalGate
    session_id: str | None = None
    user_id: str | None = None
    pause: bool = False
    answers: dict[str, ApprovalDecision] = field(default_factory=dict)
    pending: list[ApprovalRequest] = field(default_factory=list)

    async def ask(self, tool: str, arguments: Mapping[str, Any], reason: str) -> ApprovalDecision:
        """:meth:`check` of the request for this call."""
        return await self.check(ApprovalRequest.of(tool, arguments, reason, self.session_id, self.user_id))

    async def check(self, request: ApprovalRequest) -> ApprovalDecision:
        """The decision on ``request``: a given answer, else a pause, else the gate's (raises as
        :meth:`ApprovalGate.ask` does, or :class:`ApprovalPending`)."""
        answer = self.answers.pop(request.digest, None)
        if answer is not None:
            return await self.gate.settle(request, answer)
        if self.pause:
            self.pending.append(request)
            raise ApprovalPending(f"{request.describe()} The task is paused before this call; resume it with approved=True or False")
        return await self.gate.ask(request)
