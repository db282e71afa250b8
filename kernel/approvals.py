"""Approvals: tools that run only after a person's yes.

A tool asks for approval by its policy (:attr:`toolpath.kernel.toolkit.Tool.requires_approval`):
always, or when a check on the call's real arguments says so (a write over an existing file). A
call to it from a cell crosses the bridge like any host call; the host then asks the session's
approver (:class:`ApprovalGate`) and waits, while the kernel and every variable in it stay as they
are. A yes runs the tool; a no raises :class:`ApprovalDenied` in the cell, no answer in time
:class:`ApprovalTimeout`, and the tool's code does not run. Nothing is replayed: the cell simply
continues (or handles the exception) once the answer is in.

Every decision is written to the audit log (:class:`toolpath.kernel.approval_log.ApprovalLog`)
with the session, the user, the tool, a digest of the arguments and the answer.

This module is imported inside kernels too (the exception types), so it imports nothing heavy.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import os
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from toolpath.errors import ToolpathError

if TYPE_CHECKING:
    from toolpath.kernel.approval_log import ApprovalLog
    from toolpath.registry import ToolDefinition

#: Characters of one argument's ``repr`` an approver is shown; the digest covers the whole value.
MAX_SHOWN_ARGUMENT_CHARS = 500
#: Seconds an approver has to answer by default (a person reading a prompt, not a program).
DEFAULT_APPROVAL_TIMEOUT = 300.0


class ApprovalDenied(ToolpathError, PermissionError):
    """The call needed approval and did not get it: the approver said no, failed, or nobody can be
    asked here. The tool's code did not run. ``reason`` says why, with the approver's note."""

    def __init__(self, message: str, reason: str = ""):
        super().__init__(message)
        self.reason = reason or message


class ApprovalTimeout(ToolpathError, TimeoutError):
    """The approver did not answer in time; the tool's code did not run."""


class ApprovalPending(ToolpathError, RuntimeError):
    """The call needs approval and the run pauses before it instead of asking (a planned task run
    with ``on_approval="pause"``): the tool's code did not run; the session's ``resume`` continues
    from this call with the answer."""


@dataclass(frozen=True)
class ApprovalRequest:
    """One call waiting for a decision, as the approver sees it.

    Attributes:
        tool: ``"toolkit.tool"``.
        arguments: each argument's ``repr``, cut at :data:`MAX_SHOWN_ARGUMENT_CHARS` characters.
        reason: why this call asks ("it always asks", "it would write over /home/ana/report.md").
        digest: SHA-256 of the tool and its arguments (JSON, with ``repr`` for other values, so a
            large table counts by its shortened ``repr``), hex: what the audit log keeps instead of
            the values, and what a given answer is matched by.
        session_id / user_id: the session the call came from and its owner (``None`` outside a
            session, or for nobody's).
    """

    tool: str
    arguments: dict[str, str]
    reason: str
    digest: str
    session_id: str | None = None
    user_id: str | None = None

    @classmethod
    def of(cls, tool: str, arguments: Mapping[str, Any], reason: str, session_id: str | None = None, user_id: str | None = None) -> ApprovalRequest:
        """The request for a call of ``tool`` with these (bound) arguments."""
        shown = {name: _shown(value) for name, value in arguments.items()}
        # The tool is part of what is digested: an answer given on one tool's call is no other's.
        canonical = json.dumps([tool, dict(arguments)], sort_keys=True, default=repr, ensure_ascii=False)
        return cls(tool, shown, reason, hashlib.sha256(canonical.encode()).hexdigest(), session_id, user_id)

    def describe(self) -> str:
        """One paragraph for a person: the call, its arguments and why it asks."""
        arguments = ", ".join(f"{name}={value}" for name, value in self.arguments.items())
        return f"{self.tool}({arguments}) asks for approval: {self.reason}."

    def to_dict(self) -> dict[str, Any]:
        return {"tool": self.tool, "arguments": dict(self.arguments), "reason": self.reason, "digest": self.digest}


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


class ApprovalPolicy(Protocol):
    """``policy(arguments)`` → why this call needs approval (a sentence), or ``""``/``None``/``False``
    when it does not; ``True`` means "its policy asks"."""

    def __call__(self, arguments: Mapping[str, Any]) -> str | bool | None: ...


def approval_reason(policy: bool | ApprovalPolicy, arguments: Mapping[str, Any]) -> str:
    """Why a call with ``arguments`` needs approval under ``policy`` ("" when it does not).

    Raises:
        Exception: whatever the policy raised (the call is then not made: a policy that cannot
            decide does not let the call through).
    """
    if policy is True:
        return "it always asks"
    if not policy:
        return ""
    answer = policy(arguments)
    if answer is None or answer is False or (isinstance(answer, str) and not answer):
        return ""
    if answer is True:
        return "its approval policy asks"
    # Anything else asks too: a policy that answers oddly must not let the call through.
    return answer if isinstance(answer, str) else f"its approval policy answered {type(answer).__name__} {answer!r}"


@dataclass(frozen=True)
class OverwritePolicy:
    """Asks when an output parameter, as passed or by its default, names something that exists
    (a file, a directory, or a link, which writing would follow): writing would replace it.

    Attributes:
        outputs: ``{parameter: default}`` of the tool's output parameters (``role: output``).
    """

    outputs: Mapping[str, Any]

    def __call__(self, arguments: Mapping[str, Any]) -> str:
        for name, default in self.outputs.items():
            target = arguments.get(name, default)
            if target is None or (isinstance(target, (str, bytes)) and not target):
                continue
            if not isinstance(target, (str, bytes, os.PathLike)):
                # A file descriptor, or anything else a write may take: nothing here can tell what it replaces.
                return f"its output {name} is {type(target).__name__} {target!r}, not a path, so what it replaces cannot be checked"
            if os.path.lexists(target):
                written = os.fsdecode(os.path.realpath(target))
                shown = os.fsdecode(os.path.abspath(target))
                link = f", through the link {shown}" if written != shown else ""
                return f"it would write over {written} (argument {name}{link})"
        return ""


def approval_spec(tool: ToolDefinition) -> dict[str, Any] | None:
    """What an in-kernel handle needs to ask for approval of ``tool``'s calls (``None``: it never
    asks): ``{"approval": "always"}``, or ``{"approval": "on_overwrite", "outputs": {python name:
    default}}`` (see :func:`policy_of`)."""
    if tool.approval == "never":
        return None
    if tool.approval == "always":
        return {"approval": "always"}
    return {"approval": "on_overwrite", "outputs": {parameter.python_name: parameter.default for parameter in tool.output_parameters}}


def policy_of(spec: Mapping[str, Any] | None) -> bool | ApprovalPolicy:
    """The policy a catalog tool's approval spec (:func:`approval_spec`)
    stands for: ``False``, ``True`` or an :class:`OverwritePolicy`.

    Raises:
        ValueError: an unknown ``approval`` in the spec.
    """
    kind = (spec or {}).get("approval", "never")
    if kind == "never":
        return False
    if kind == "always":
        return True
    if kind == "on_overwrite":
        return OverwritePolicy(dict(spec["outputs"]))  # type: ignore[index]
    raise ValueError(f"unknown approval {kind!r}: use never, always or on_overwrite")


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


def _shown(value: Any) -> str:
    try:
        text = repr(value)
    except Exception as error:  # a value whose repr fails is still shown as something
        text = f"<{type(value).__name__}: repr failed ({type(error).__name__})>"
    return text if len(text) <= MAX_SHOWN_ARGUMENT_CHARS else f"{text[:MAX_SHOWN_ARGUMENT_CHARS]}… ({len(text):,} characters)"
