"""Approvals over MCP: a call that asks for approval (:mod:`toolpath.kernel.tools.approvals`) is put to the
client's user as an elicitation, while the cell waits in its kernel.

Two protocol eras, one behaviour:

- On a connection that can carry server-initiated requests (protocol 2025-11-25 and before), the
  running ``execute``/``run_task`` request sends ``elicitation/create`` itself (``ctx.elicit``).
- On the 2026-07-28 protocol, which has no such requests, the tool call *returns* an
  ``InputRequiredResult`` holding the elicitation and a ``request_state`` token; the cell goes on
  waiting in the kernel. The client (the SDK's ``Client`` does this by itself) answers and calls
  the tool again with the token; the answer reaches the waiting call and the same cell continues:
  nothing is run twice. Only the user whose call started the run can continue it with its token:
  the SDK seals ``request_state`` and binds it to the caller and the call's arguments (over HTTP,
  another user's echo is refused before it reaches toolpath), and :meth:`ApprovalRounds.run`
  checks the user again.

A client that declares no elicitation capability gets a no that says so. No answer within the
approval timeout is the gate's ``ApprovalTimeout``; a run nobody comes back for is forgotten
:data:`FORGET_AFTER_SECONDS` after its cell ends.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from mcp.server.elicitation import render_elicitation_schema
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ClientCapabilities, ElicitationCapability, ElicitRequest, ElicitRequestFormParams, ElicitResult, InputRequiredResult
from pydantic import BaseModel, Field, ValidationError

from toolpath.kernel.inside.approval_policy import ApprovalRequest
from toolpath.kernel.tools.approvals import ApprovalDecision

#: Seconds a finished run's result waits for the client to come back for it with its token.
FORGET_AFTER_SECONDS = 600.0
#: The key of the one elicitation an ``InputRequiredResult`` carries.
_ASK = "approval"


class ApprovalAnswer(BaseModel):
    """The form an approval elicitation asks the user to fill."""

    approve: bool = Field(description="let this call run")
    note: str = Field(default="", description="why, or on what condition (kept in the session's audit log)")


@dataclass
class _Run:
    """One ``execute``/``run_task`` whose cell runs in the background of its requests."""

    user: str
    context: Context
    task: asyncio.Task
    token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    asking: tuple[ApprovalRequest, asyncio.Future] | None = None
    asked: asyncio.Event = field(default_factory=asyncio.Event)


class ApprovalRounds:
    """The runs of one server's kernel sessions, and the approver (:meth:`ask`) that asks their
    clients."""

    def __init__(self) -> None:
        self._by_session: dict[str, _Run] = {}  # kernel session id → its running request
        self._by_token: dict[str, _Run] = {}

    async def run(self, context: Context, user: str, session_id: str, work: Callable[[], Awaitable[Any]]) -> Any:
        """``await work()`` for this request, or an ``InputRequiredResult`` while one of its calls
        waits for the user's answer; a request that carries a ``request_state`` continues that run
        instead (``work`` is then not called).

        Raises:
            ToolError: a ``request_state`` this server does not know for this user (expired, or
                another user's).
        """
        token = context.request_state
        if token is None:
            run = _Run(user, context, asyncio.ensure_future(work()))
            self._by_token[run.token] = run
            loop = asyncio.get_running_loop()
            run.task.add_done_callback(lambda _: loop.call_later(FORGET_AFTER_SECONDS, self._forget, run))
        else:
            run = self._by_token.get(token)
            if run is None or run.user != user:
                raise ToolError("this request_state belongs to no run waiting here (it ended long ago, or is not yours); call the tool again without it")
            run.context = context
            self._answer(run, context)
        self._by_session[session_id] = run
        asked = asyncio.ensure_future(run.asked.wait())
        try:
            await asyncio.wait({run.task, asked}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            # The client gave up on this request: its cell is stopped, as without approvals.
            run.task.cancel()
            self._forget(run)
            raise
        finally:
            asked.cancel()
            if self._by_session.get(session_id) is run:
                del self._by_session[session_id]
        if run.task.done():
            self._forget(run)
            return run.task.result()
        request, _ = run.asking  # type: ignore[misc]
        schema = render_elicitation_schema(ApprovalAnswer)
        ask = ElicitRequest(params=ElicitRequestFormParams(message=request.describe(), requested_schema=schema))
        return InputRequiredResult(input_requests={_ASK: ask}, request_state=run.token)

    async def ask(self, request: ApprovalRequest) -> ApprovalDecision:
        """The approver: ask the user of the request now running ``request``'s session."""
        run = self._by_session.get(request.session_id or "")
        if run is None:
            return ApprovalDecision(False, note="no request of this session's client is running to ask its user through", by="toolpath serve")
        context = run.context
        if not _can_elicit(context):
            note = "this MCP client does not support elicitation, so its user cannot be asked; use a client that does to run calls that need approval"
            return ApprovalDecision(False, note=note, by="toolpath serve")
        if context.request_context.session.can_send_request:  # the handshake era: ask within the request
            answer = await context.elicit(request.describe(), ApprovalAnswer)
            return _decision(answer.action, answer.data if answer.action == "accept" else None, request.user_id or "")
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        run.asking = (request, future)
        run.asked.set()
        return await future

    def _answer(self, run: _Run, context: Context) -> None:
        """Give the waiting call of ``run`` the answer this retry carries."""
        if run.asking is None:
            return
        request, future = run.asking
        run.asking = None
        run.asked.clear()
        response = (context.input_responses or {}).get(_ASK)
        if not isinstance(response, ElicitResult):
            future.set_result(ApprovalDecision(False, note="the client came back without an answer to the approval request", by=request.user_id or ""))
            return
        data = None
        if response.action == "accept":
            try:
                data = ApprovalAnswer.model_validate(response.content or {})
            except ValidationError:
                future.set_result(ApprovalDecision(False, note="the client's answer did not fill the approval form", by=request.user_id or ""))
                return
        future.set_result(_decision(response.action, data, request.user_id or ""))

    def _forget(self, run: _Run) -> None:
        if self._by_token.get(run.token) is run:
            del self._by_token[run.token]


def _can_elicit(context: Context) -> bool:
    wanted = ClientCapabilities(elicitation=ElicitationCapability())
    declared = context.client_capabilities
    if declared is not None:
        return declared.elicitation is not None
    return context.request_context.session.check_client_capability(wanted)


def _decision(action: str, data: ApprovalAnswer | None, user: str) -> ApprovalDecision:
    if action == "accept" and data is not None:
        return ApprovalDecision(data.approve, note=data.note, by=user)
    return ApprovalDecision(False, note=f"the user {'declined' if action == 'decline' else 'cancelled'} the approval request", by=user)
