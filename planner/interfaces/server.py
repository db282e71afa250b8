"""``toolpath serve``: the planner and persistent kernels as an MCP server, for agents.

The embedding model, the indexes and the kernels load once, in this process; every tool call is
then a round trip, not a new process. Tools (named and described for a model):

- ``search_skills(query, k, session_id)``: states and tools by affordance, ranked with the
  session's held states;
- ``plan_task(task, inputs, session_id)``: a task in words, or a list of steps, becomes one planned
  cell (the parts it matched, the plan, the cell and its instructions); nothing runs;
- ``run_task(task, inputs, session_id, on_approval, partial, on_failure, max_replans)``: plan and run
  it in the session's kernel; a task with a part not understood is refused with every part's fate,
  unless ``partial``; a step that fails for good is planned around (``on_failure="replan"``);
- ``execute(code, session_id)``: a free cell; PNG images come back as MCP image content;
- ``restart(session_id)``, ``close_session(session_id)`` (ends it and frees its place among the
  user's sessions), ``list_variables(session_id)``, ``session_overview(session_id)``.

Resources: ``toolpath://graph`` (the state graph as Mermaid text) and ``toolpath://catalogs/N``
(each loaded catalog file).

Every result carries structured content (JSON) and a short text; each tool declares the JSON Schema
of its structured content as its ``outputSchema`` (:mod:`toolpath.planner.interfaces.mcp_results`).
A tool that fails on bad input (an unknown state, a task nothing matches) returns an error result
with the reason, its advice worded for an MCP client (:data:`MCP_CLIENT`); the server keeps serving.

Users: over stdio (and over HTTP with ``--no-auth``, loopback only) the local user; over HTTP, the
user a bearer token maps to in the tokens file. Sessions: each user's ``session_id`` is one
:class:`toolpath.planner.tasks.agent_session.AgentSession` of theirs (one persistent kernel, snapshotted), created on
first use; ``"main"`` when none is given. Session ids are per user: two users' ``"lab"`` are two
sessions, and no id reaches another user's session or tells whether it exists (see
:func:`kernel_session_id`). Each ``plan_task`` and ``run_task`` goes in its user's record of use
(:mod:`toolpath.planner.tasks.record_of_use`), in the sessions' store; no tool reads a record, and
every read of one names its user.

Over HTTP with ``--metrics``, the server's calls, cells, kernels and sessions are counted for
Prometheus on a listener of its own (:mod:`toolpath.planner.interfaces.serve_metrics`).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import gc
import getpass
import hashlib
import hmac
import importlib.metadata
import ipaddress
import json
import logging
import os
import re
import sys
import warnings
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import yaml
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken, TokenVerifier
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from mcp_types import CallToolResult, ImageContent, InputRequiredResult, TextContent
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toolpath.errors import Refusal, ToolpathError, Vocabulary
from toolpath.kernel import CellResult, CodeMode, KernelError, format_for_model
from toolpath.kernel.sandbox.provisioner import SandboxPolicy, sandbox_problem, weaker_limits
from toolpath.planner.interfaces.approval_rounds import ApprovalRounds
from toolpath.planner.interfaces.http_serving import AddressUnavailableError, HttpLimits, bind_address, connection_cap, host_check, serve_http
from toolpath.planner.interfaces.mcp_results import (
    CellOutput,
    CloseSessionOutput,
    RestartOutput,
    SearchSkillsOutput,
    SessionOverviewOutput,
    TaskPlanOutput,
    TaskRunOutput,
    VariablesOutput,
)
from toolpath.planner.interfaces.serve_limits import SERVE_MAX_KERNELS, SERVE_MAX_SESSIONS_PER_USER, SERVE_MAX_TASKS_PER_USER, QuotaError
from toolpath.planner.planning.budgets import DEFAULT_MAX_REPLANS
from toolpath.planner.search.embedding import default_embedder
from toolpath.planner.tasks.agent_session import AgentSession
from toolpath.planner.tasks.record_of_use import Recorder
from toolpath.planner.tasks.task import PartsNotUnderstoodError
from toolpath.planner.tasks.workspace import Workspace
from toolpath.registry.storage import StoreError

if TYPE_CHECKING:  # prometheus-client is an extra, imported only for --metrics
    from toolpath.planner.interfaces.serve_metrics import ServeMetrics

#: The session a tool uses when the caller names none.
DEFAULT_SESSION = "main"
#: What :meth:`ToolpathServer.warm_up` searches for: any words do, the search is for what it builds.
WARM_UP_QUERY = "probe"
#: Errors that mean "this request cannot be served as asked": the model gets the reason. (Other
#: toolpath errors, such as an MCP server's failure, may carry what only the operator should see.)
_REFUSALS = (Refusal, KernelError, StoreError, ValueError, TypeError)


def _give_as_tool_input(state: str, names: Sequence[str]) -> str:
    inputs = " or ".join(json.dumps({name: "..."}) for name in names)
    return f"pass it in the tool's inputs argument, e.g. {inputs}" if inputs else f"no input carries {state}"


#: An MCP client's words for an error's advice: the tools' arguments, and what only the server's
#: operator can change (a client cannot load catalogs).
MCP_CLIENT = Vocabulary(
    load_catalog="ask this server's operator to load a catalog for this domain (toolpath serve --add-catalog PATH); search_skills shows what the loaded catalogs cover",
    give_state=_give_as_tool_input,
)


def _refusals_as_tool_errors(tool: Callable[..., Awaitable[CallToolResult]]) -> Callable[..., Awaitable[CallToolResult]]:
    """``tool`` with the planner's refusals turned into MCP error results that carry the reason
    (the SDK keeps any other exception's text on the server)."""

    @functools.wraps(tool)
    async def refusing(*args: Any, **kwargs: Any) -> CallToolResult:
        try:
            return await tool(*args, **kwargs)
        except Exception as error:
            if isinstance(error, _REFUSALS):
                raise ToolError(error.message(MCP_CLIENT) if isinstance(error, ToolpathError) else str(error)) from error
            raise

    return refusing


INSTRUCTIONS = """toolpath plans tool paths over a catalog's state graph and runs them as one Python cell in a persistent kernel.
Typical loop: search_skills to see what the catalogs can do; plan_task or run_task with the task in words (or as a list of steps); then execute free cells that use the variables the task left; session_overview shows what the session holds and what can run next.
Every tool takes an optional session_id: calls with the same id share one kernel and its variables."""


def kernel_session_id(user_id: str, session_id: str, authenticated: bool) -> str:
    """The :class:`toolpath.kernel.CodeMode` session id (the key in the snapshot store) of ``user_id``'s
    ``session_id``.

    Without tokens there is one user, so it is ``session_id`` itself: sessions the local user made
    before ids were per user, or through the Python API, come back. With tokens it is the JSON text
    of ``[user_id, session_id]``: JSON quotes and escapes both strings, so no two pairs give the same
    key (user ``"a:b"`` with id ``"c"`` and user ``"a"`` with id ``"b:c"`` differ), and whatever id
    a user passes, the key names that user.
    """
    return json.dumps([user_id, session_id], ensure_ascii=False) if authenticated else session_id


class ToolpathServer:
    """The MCP server over one :class:`toolpath.planner.Workspace` (see the module docstring).

    Args:
        workspace: the loaded catalogs.
        user_id: the user every session belongs to, when requests carry no token.
        tokens: ``{bearer token: user id}``, where a token may be given hashed as
            ``"sha256:<hex digest>"`` (see :class:`StaticTokens`): requests must carry one of these
            tokens (HTTP), and act for its user. ``url`` is then the server's address (for the OAuth
            resource metadata the SDK publishes).
        max_sessions_per_user: sessions one user may have open in this server (``close_session``
            ends one); a call naming a new one beyond them is an error result.
        max_tasks_per_user: ``plan_task``, ``run_task`` and ``execute`` calls one user may have
            running at once; one more is an error result at once (not queued).
        metrics: where to count its calls, cells, kernels and sessions
            (:class:`toolpath.planner.interfaces.serve_metrics.ServeMetrics`); ``None``: nowhere.
        code_mode_options: :class:`toolpath.kernel.CodeMode` options for the shared kernels.

    Raises:
        ValueError: a malformed hashed token, or the same token twice.
    """

    def __init__(
        self,
        workspace: Workspace,
        user_id: str,
        tokens: dict[str, str] | None = None,
        url: str = "http://127.0.0.1",
        max_sessions_per_user: int = SERVE_MAX_SESSIONS_PER_USER,
        max_tasks_per_user: int = SERVE_MAX_TASKS_PER_USER,
        metrics: ServeMetrics | None = None,
        **code_mode_options: Any,
    ):
        self.workspace = workspace
        self.metrics = metrics
        self.user_id = user_id
        self.authenticated = tokens is not None
        if workspace.recorder is not None:
            # Tasks go in the record of their request's user (each session's), in the sessions' store.
            store = code_mode_options.get("snapshot_store")
            workspace.recorder = Recorder("mcp", store if isinstance(store, (str, os.PathLike)) else None)
        verifier = StaticTokens(tokens) if tokens is not None else None  # before any kernel: it may refuse the tokens
        self.max_sessions_per_user = max_sessions_per_user
        self.max_tasks_per_user = max_tasks_per_user
        # A call that asks for approval is put to the client's user as an elicitation.
        self.approvals = ApprovalRounds()
        approver = metrics.asking(self.approvals.ask) if metrics is not None else self.approvals.ask
        observing = {"observer": metrics.kernel_observer} if metrics is not None else {}
        # A cell that ignores its interrupt has its kernel stopped at once: on a shared server it
        # would otherwise hold a core until its session's next cell.
        self.code_mode: CodeMode = workspace.code_mode(**{"approver": approver, "on_busy_kernel": "restart", **observing, **code_mode_options})
        self._sessions: dict[tuple[str, str], AgentSession] = {}
        self._tasks_running: dict[str, int] = {}
        self._lock = asyncio.Lock()
        # The tokens file's tokens are this server's alone (no authorization server issues them for
        # several resources), so there is no audience to check them against.
        settings = AuthSettings(issuer_url=url, resource_server_url=f"{url}/mcp", validate_token_resource=False)
        auth = {"token_verifier": verifier, "auth": settings} if verifier is not None else {}
        middleware = [metrics.middleware] if metrics is not None else []
        self.mcp = MCPServer(
            "toolpath", version=importlib.metadata.version("toolpath"), instructions=INSTRUCTIONS, log_level="WARNING", middleware=middleware, **auth
        )
        for tool in (
            self.search_skills,
            self.plan_task,
            self.run_task,
            self.resume_task,
            self.execute,
            self.restart,
            self.close_session,
            self.list_variables,
            self.session_overview,
        ):
            # Each tool's return annotation names its output model: the SDK lists it as the outputSchema.
            refusing = _refusals_as_tool_errors(tool)
            self.mcp.add_tool(metrics.metered(refusing) if metrics is not None else refusing)
        self.mcp.resource(
            "toolpath://graph",
            name="state graph",
            description="The state-transition graph of the loaded catalogs as Mermaid flowchart text: states (rounded) and tools (boxes), requires and produces as arrows.",
            mime_type="text/plain",
        )(workspace.graph.to_mermaid)
        for number, catalog in enumerate(workspace.loaded.catalogs):
            self.mcp.resource(
                f"toolpath://catalogs/{number}",
                # Named by domain: the file's path on the server is nothing a client needs to know.
                name=f"catalog {catalog.domain}",
                description=f"The catalog of domain {catalog.domain} (tools, their states and affordances).",
                mime_type="text/yaml" if catalog.path.suffix in (".yaml", ".yml") else "application/json",
            )(_reader(catalog.path))

    def _user(self) -> str:
        """The user this request acts for: its token's, or the server's."""
        if not self.authenticated:
            return self.user_id
        token = get_access_token()
        if token is None:  # the SDK's bearer middleware admits no request without one
            raise ToolError("this request carries no bearer token")
        return token.client_id

    async def _session(self, session_id: str | None) -> AgentSession:
        """This request's user's session ``session_id`` (default ``"main"``).

        Raises:
            ValueError: a blank session id.
        """
        user = self._user()
        session_id = session_id or DEFAULT_SESSION
        if not session_id.strip():
            raise ValueError(f"session_id must name a session, or be left out for {DEFAULT_SESSION!r}; got {session_id!r}")
        async with self._lock:  # one AgentSession per user and id, even for concurrent first calls
            session = self._sessions.get((user, session_id))
            if session is None:
                if sum(owner == user for owner, _ in self._sessions) >= self.max_sessions_per_user:
                    raise QuotaError(
                        f"user {user!r} already has {self.max_sessions_per_user} sessions in this server, the most one user may have "
                        f"(toolpath serve --max-sessions-per-user {self.max_sessions_per_user}); use one of them again by its session_id, "
                        "end one with close_session, or ask the server's operator to raise --max-sessions-per-user",
                        "max_sessions_per_user",
                    )
                # SessionOwnerError only when the Python API gave that key to another user in a shared store.
                session = await asyncio.to_thread(
                    self.workspace.session, kernel_session_id(user, session_id, self.authenticated), code_mode=self.code_mode, user_id=user
                )
                self._sessions[(user, session_id)] = session
        return session

    @contextlib.contextmanager
    def _task_slot(self) -> Iterator[None]:
        """Hold one of this request's user's ``max_tasks_per_user`` places for a running task or cell.

        Raises:
            QuotaError: the user already has that many running.
        """
        user = self._user()
        running = self._tasks_running.get(user, 0)
        if running >= self.max_tasks_per_user:
            raise QuotaError(
                f"user {user!r} already has {running} tasks or cells running in this server, the most one user may run at once "
                f"(toolpath serve --max-tasks-per-user {self.max_tasks_per_user}); wait for one to finish and call again",
                "max_tasks_per_user",
            )
        self._tasks_running[user] = running + 1
        try:
            yield
        finally:
            self._tasks_running[user] -= 1
            if not self._tasks_running[user]:
                del self._tasks_running[user]

    async def search_skills(self, query: str, k: int = 5, session_id: str | None = None) -> Annotated[CallToolResult, SearchSkillsOutput]:
        """Find the states and tools of the loaded catalogs that match what you want to achieve, in words. Each hit says whether a plan from the session's held states reaches it."""
        session = await self._session(session_id)
        with self._timing("search"):
            hits = await session.asearch(query, k)
        lines = [
            f"{hit.kind} {f'{hit.server}.' if hit.kind == 'tool' and hit.server else ''}{hit.name}"
            + (f" (similarity {hit.similarity:.2f})" if hit.similarity is not None else "")
            + f": {hit.matched}"
            for hit in hits
        ]
        return _result({"hits": [hit.to_dict() for hit in hits]}, "\n".join(lines) or "no matching state or tool")

    async def plan_task(
        self, task: str | list[str], inputs: dict[str, Any] | None = None, session_id: str | None = None
    ) -> Annotated[CallToolResult, TaskPlanOutput]:
        """Plan a task, given in words or as a list of step descriptions, from what the session holds. Returns the parts it matched, the plan and the Python cell that runs it (and how to use it); nothing runs."""
        with self._task_slot():
            session = await self._session(session_id)
            with self._timing("plan"):
                task_plan = await session.aplan_task(task, inputs)
        return _result(task_plan.to_dict(), task_plan.cell.display_code)

    async def run_task(
        self,
        task: str | list[str],
        ctx: Context,
        inputs: dict[str, Any] | None = None,
        session_id: str | None = None,
        on_approval: Literal["ask", "pause"] = "ask",
        partial: bool = False,
        on_failure: Literal["replan", "stop"] = "replan",
        max_replans: int = DEFAULT_MAX_REPLANS,
    ) -> Annotated[CallToolResult, TaskRunOutput]:
        """Plan a task (in words or as a list of steps) and run its cell in the session's kernel. The variables it makes stay for later cells and tasks. A call that needs approval asks your user first (elicitation); with on_approval='pause' the run stops before it instead, and resume_task continues it. A task with a part that was not understood is refused with every part's fate (planned, fact, context or not understood, and why); partial=true runs the parts understood anyway. When a step fails for good from a lost connection, a timeout, a 5xx or 429 answer or a denied approval, on_failure='replan' (default) plans again from the values already made to the same goal without that tool and runs the rest, at most max_replans times (route, replans and made_by say what ran); a bad input value stops the run, as on_failure='stop' does for every failure."""
        with self._task_slot():
            session = await self._session(session_id)
            try:
                outcome = await self.approvals.run(
                    ctx,
                    self._user(),
                    session.session_id,
                    lambda: session.arun_task(task, inputs, on_approval=on_approval, partial=partial, on_failure=on_failure, max_replans=max_replans),
                )
            except PartsNotUnderstoodError as error:
                raise ToolError(error.explanation("call run_task again with partial=true")) from error
        return outcome if isinstance(outcome, InputRequiredResult) else _result(outcome.to_dict(), outcome.text(), outcome.result)

    async def resume_task(self, approved: bool, note: str = "", session_id: str | None = None) -> Annotated[CallToolResult, TaskRunOutput]:
        """Continue the session's task paused before a call that needs approval (run_task with on_approval='pause'): approved runs that call and the steps after it; not approved fails that call. Steps before it are not run again. A task run with on_failure='replan' goes on replanning: a later step that fails for good, or a no, is planned around (a no: never through a tool with effects that does not ask), at most max_replans times over the whole task."""
        with self._task_slot():
            session = await self._session(session_id)
            run = await session.aresume(approved, note)
        return _result(run.to_dict(), run.text(), run.result)

    async def execute(self, code: str, ctx: Context, session_id: str | None = None) -> Annotated[CallToolResult, CellOutput]:
        """Run Python code as one cell in the session's persistent kernel (top-level await works; tool handles are bound). Returns what the cell printed, its value, error and images. A call that needs approval asks your user first (elicitation)."""
        with self._task_slot():
            session = await self._session(session_id)
            result = await self.approvals.run(ctx, self._user(), session.session_id, lambda: session.aexecute(code))
        return result if isinstance(result, InputRequiredResult) else _result(result.to_dict(), format_for_model(result), result)

    async def restart(self, session_id: str | None = None) -> Annotated[CallToolResult, RestartOutput]:
        """Discard the session's kernel and all its variables (and its saved snapshot); the next cell starts fresh."""
        session = await self._session(session_id)
        await session.arestart()
        return _result({"restarted": True}, "The kernel was restarted; all variables are gone.")

    async def close_session(self, session_id: str | None = None) -> Annotated[CallToolResult, CloseSessionOutput]:
        """End the session: its kernel stops and its variables and saved snapshot are deleted. It no longer counts among your sessions; its session_id, used again, starts a new empty session."""
        user = self._user()
        session_id = session_id or DEFAULT_SESSION
        async with self._lock:
            session = self._sessions.pop((user, session_id), None)
        if session is None:  # not used since this server started: its snapshot may be in the store
            session = await asyncio.to_thread(
                self.workspace.session, kernel_session_id(user, session_id, self.authenticated), code_mode=self.code_mode, user_id=user
            )
        await session.arestart()
        await session.ashutdown()
        return _result({"closed": True}, f"Session {session_id!r} is closed; its kernel, variables and snapshot are gone.")

    async def list_variables(self, session_id: str | None = None) -> Annotated[CallToolResult, VariablesOutput]:
        """The names of the variables defined in the session's kernel."""
        session = await self._session(session_id)
        try:
            names = await self.code_mode.avariables(session.session_id, session.user_id)
        except KeyError:  # no kernel yet: nothing defined
            names = []
        return _result({"variables": names}, ", ".join(names) or "no variables yet")

    async def session_overview(self, session_id: str | None = None) -> Annotated[CallToolResult, SessionOverviewOutput]:
        """What the session holds (states and the variables that carry them), its tool handles, and which tools can run next."""
        session = await self._session(session_id)
        state = session.state()
        text = await asyncio.to_thread(session.instructions)
        decisions = await asyncio.to_thread(self.code_mode.approval_decisions, session.session_id, session.user_id)
        approvals = [{name: value for name, value in decision.to_dict().items() if name not in ("session_id", "user_id")} for decision in decisions]
        if approvals:
            text += f"\n{len(approvals)} approval decision(s); the last: {approvals[-1]['tool']} {approvals[-1]['decision']}"
        outputs = state.to_dict()["outputs"]
        overview = {
            "held": list(state.held),
            "artifacts": state.artifacts,
            "outputs": outputs,
            "domains": list(state.domains),
            "instructions": text,
            "approvals": approvals,
        }
        return _result(overview, text)

    def _timing(self, operation: str) -> contextlib.AbstractContextManager[None]:
        """Time the block in the metrics as ``operation`` (``"search"`` or ``"plan"``), when there are metrics."""
        return self.metrics.timing(operation) if self.metrics is not None else contextlib.nullcontext()

    async def refresh_metrics(self) -> None:
        """Set the metrics' gauges from what the server holds now (before each scrape): live kernels
        and their users, pooled kernels, open sessions and tasks paused for approval."""
        if self.metrics is not None:
            kernels = await self.code_mode.alive_kernels()
            paused = sum(session.paused is not None for session in self._sessions.values())
            self.metrics.set_state(kernels, self.code_mode.pool_ready(), len(self._sessions), paused)

    async def warm_up(self) -> None:
        """Build, in a worker thread, what the first search needs: one search of
        :data:`WARM_UP_QUERY` builds the skill index (loaded from its store when it holds these
        catalogs: seconds at 100,000 tools), loads the query model and the planner's bounds.
        :func:`serve` starts it as the server starts, so requests are answered meanwhile; a request
        that needs the index before it is built waits for this build
        (:attr:`toolpath.planner.tasks.workspace.Workspace.index` builds it once).

        Raises nothing: a failure keeps nothing built, so the first request that needs it builds it
        again and gets the error itself, as without warming up; the operator is told at once
        (a ``RuntimeWarning``, on standard error).
        """
        try:
            await asyncio.to_thread(self.workspace.search, WARM_UP_QUERY, k=1)
        except Exception as error:
            reason = str(error) if isinstance(error, ToolpathError) else f"{type(error).__name__}: {error}"
            warnings.warn(
                f"skill search could not be prepared at start-up ({reason}); each search_skills, plan_task and run_task tries again and reports it to its caller",
                RuntimeWarning,
                stacklevel=1,
            )

    async def aclose(self) -> None:
        """Snapshot and stop every session's kernel."""
        await self.code_mode.ashutdown()


#: How a tokens file marks a hashed token: ``"sha256:"`` and the token's SHA-256 digest in hex.
HASHED_TOKEN_PREFIX = "sha256:"
_HEX_DIGEST = re.compile(r"[0-9a-fA-F]{64}")


def hash_token(token: str) -> str:
    """``token``'s hashed form for a tokens file: ``"sha256:<64 hex digits>"``."""
    return HASHED_TOKEN_PREFIX + hashlib.sha256(token.encode()).hexdigest()


def _token_digest(key: str) -> bytes:
    """The SHA-256 digest of the token a tokens-file key stands for (the key itself, or the token
    it is the hashed form of).

    Raises:
        ValueError: a key starting with ``"sha256:"`` that 64 hex digits do not follow.
    """
    if not key.startswith(HASHED_TOKEN_PREFIX):
        return hashlib.sha256(key.encode()).digest()
    digest = key.removeprefix(HASHED_TOKEN_PREFIX)
    if not _HEX_DIGEST.fullmatch(digest):
        raise ValueError(
            f"starts with {HASHED_TOKEN_PREFIX!r} but {len(digest)} characters follow, not 64 hex digits; write {HASHED_TOKEN_PREFIX!r} and the token's SHA-256 hex digest, as `toolpath serve --hash-token` prints it"
        )
    return bytes.fromhex(digest)


class StaticTokens(TokenVerifier):
    """Bearer tokens from a tokens file: ``{token: user id}``, where a key ``"sha256:<hex digest>"``
    stands for the token with that SHA-256 digest (:func:`hash_token`), so the file need not hold
    the token itself.

    Raises:
        ValueError: a malformed hashed key (naming its user), or two keys for the same token.
    """

    def __init__(self, tokens: dict[str, str]):
        self._digests: list[tuple[bytes, str]] = []
        for key, user in tokens.items():
            try:
                self._digests.append((_token_digest(key), user))
            except ValueError as error:
                raise ValueError(f"the token of user {user!r} {error}") from None
        if len({digest for digest, _ in self._digests}) < len(self._digests):
            raise ValueError("the same token is given twice (plain and hashed, or hashed in upper and lower case); keep one entry per token")

    async def verify_token(self, token: str) -> AccessToken | None:
        offered = hashlib.sha256(token.encode()).digest()
        # Every digest is compared, in constant time, so timing tells nothing about which one is close.
        matches = [user for known, user in self._digests if hmac.compare_digest(known, offered)]
        return AccessToken(token=token, client_id=matches[0], scopes=[]) if matches else None


#: The shortest plain token a tokens file (or ``--hash-token``) takes: 16 random characters are
#: beyond guessing over a network.
MIN_TOKEN_LENGTH = 16


class ServeError(Refusal, ValueError):
    """``toolpath serve`` cannot start as asked (bad address, tokens file, or auth choice)."""


def read_tokens(path: str) -> dict[str, str]:
    """The tokens file: a JSON object ``{"token": "user id", ...}``; a key may be a token's hashed
    form, ``"sha256:<hex digest>"`` (:func:`hash_token`).

    Raises:
        ServeError: the file cannot be read, is not such an object, has an empty or short plain
            token, a malformed hashed one, or the same token twice.
    """
    try:
        tokens = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise ServeError(f"cannot read the tokens file {path}: {error.strerror or error}") from error
    except ValueError as error:
        raise ServeError(f'the tokens file {path} is not JSON ({error}); write an object like {{"a-long-random-token": "alice"}}') from error
    if not isinstance(tokens, dict) or not tokens or not all(isinstance(token, str) and isinstance(user, str) and user for token, user in tokens.items()):
        raise ServeError(f"the tokens file {path} must be a non-empty JSON object mapping each token to a user id (both strings)")
    short = [token for token in tokens if len(token) < MIN_TOKEN_LENGTH and not token.startswith(HASHED_TOKEN_PREFIX)]
    if short:
        raise ServeError(
            f"the tokens file {path} has {len(short)} token(s) shorter than {MIN_TOKEN_LENGTH} characters; use long random tokens (e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))')"
        )
    try:
        StaticTokens(tokens)
    except ValueError as error:
        raise ServeError(f"in the tokens file {path}, {error}") from error
    return tokens


def http_address(text: str, option: str = "--http") -> tuple[str, int]:
    """``HOST:PORT`` as a pair; ``option`` is the command-line option that gave it (named in the error).

    Raises:
        ServeError: not ``HOST:PORT`` with a port from 1 to 65535.
    """
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        example = "127.0.0.1:9464" if option == "--metrics" else "127.0.0.1:8765"
        raise ServeError(f"{option} takes HOST:PORT (e.g. {example}), got {text!r}")
    return host.strip("[]"), int(port)


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _reader(path: Path) -> Callable[[], str]:
    """A resource function returning the file's text (read when the resource is read).

    A catalog's MCP servers may hold secrets written in the file itself, so what could be one is
    replaced by :data:`HIDDEN`: every ``env`` and ``headers`` value, and in ``url`` and ``args``
    what :func:`_hide_in_url` and :func:`_hide_in_args` hide. Such a catalog is served re-written
    (comments dropped); the rest of it reads as written.
    """

    def read() -> str:
        text = path.read_text(encoding="utf-8")
        document = yaml.safe_load(text)
        servers = document.get("mcp_servers") if isinstance(document, dict) else None
        hidden = False
        for server in servers.values() if isinstance(servers, dict) else ():
            if not isinstance(server, dict):
                continue
            shown = dict(server)
            for key in ("env", "headers"):
                if isinstance(server.get(key), dict):
                    shown[key] = dict.fromkeys(server[key], HIDDEN)
            if isinstance(server.get("url"), str):
                shown["url"] = _hide_in_url(server["url"])
            if isinstance(server.get("args"), list) and all(isinstance(argument, str) for argument in server["args"]):
                shown["args"] = _hide_in_args(server["args"])
            if shown != server:
                server.update(shown)
                hidden = True
        if not hidden:
            return text
        return json.dumps(document, indent=2, ensure_ascii=False) if path.suffix == ".json" else yaml.safe_dump(document, sort_keys=False, allow_unicode=True)

    return read


#: What a catalog resource shows instead of a value of an MCP server's that may be a secret.
HIDDEN = "<hidden>"
#: An environment variable reference, ``${NAME}``: read when the server connects, so no secret.
_REFERENCE = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")
#: Words that make a flag or a ``NAME=value`` name one of a secret (``--api-key``, ``GITHUB_TOKEN``).
_SECRET_WORDS = frozenset({"token", "key", "apikey", "password", "passwd", "secret", "credential", "credentials", "authorization"})
#: A flag or a name with its value: ``--token=abc``, ``API_KEY=abc``, ``Authorization: Bearer abc``.
_NAMED_VALUE = re.compile(r"(-{0,2}[A-Za-z][\w.-]*)(=|:\s*)(.*)", re.DOTALL)


def _shown(value: str) -> str:
    """``value``, or :data:`HIDDEN` unless it names an environment variable (``${NAME}``)."""
    return value if _REFERENCE.search(value) else HIDDEN


def _names_secret(name: str) -> bool:
    """Whether a flag or variable name is a secret's: one of its words (split at ``-``, ``_``,
    ``.`` and camelCase) is in :data:`_SECRET_WORDS`."""
    return any(word.lower() in _SECRET_WORDS for word in re.findall(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])", name))


def _hide_in_url(url: str) -> str:
    """``url`` with its user and password (``user:pass@``) and its query's values hidden; all of it
    when it does not parse."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return HIDDEN
    host = parts.netloc
    if "@" in host:
        userinfo, _, host = host.rpartition("@")
        host = f"{_shown(userinfo)}@{host}"
    query = urlencode([(name, _shown(value)) for name, value in parse_qsl(parts.query, keep_blank_values=True)], safe="<>${}")
    return urlunsplit(parts._replace(netloc=host, query=query))


def _hide_in_args(arguments: list[str]) -> list[str]:
    """``arguments`` with what may be secrets hidden: the value after a secret's flag
    (``--token abc``), of ``--token=abc`` and ``GITHUB_TOKEN=abc``, and of URLs (:func:`_hide_in_url`)."""
    shown = []
    for index, argument in enumerate(arguments):
        named = _NAMED_VALUE.fullmatch(argument)
        previous = arguments[index - 1] if index else ""
        if "://" in argument:
            shown.append(_hide_in_url(argument))
        elif named and _names_secret(named[1]):
            shown.append(named[1] + named[2] + _shown(named[3]))
        elif previous.startswith("-") and _names_secret(previous) and "=" not in previous and not argument.startswith("-"):
            shown.append(_shown(argument))
        else:
            shown.append(argument)
    return shown


def _result(structured: dict[str, Any], text: str, cell: CellResult | None = None) -> CallToolResult:
    """A tool result: a short text (and a cell's PNG images, as image content) for the model, the
    JSON for programs (images counted there, not repeated in base64). A cell that did not end
    ``"ok"`` (it raised, timed out, was aborted, found the kernel busy or killed it) makes it an
    error result, so clients and models see the failure, unless it paused for an approval; its
    structured content is the same."""
    content: list[TextContent | ImageContent] = [TextContent(type="text", text=text)]
    if cell is not None:
        content += [ImageContent(type="image", data=base64.b64encode(image).decode("ascii"), mime_type="image/png") for image in cell.images]
        structured = _without_image_data(structured)
    # A task paused before a call that needs approval has not failed: it waits for resume_task.
    failed = cell is not None and cell.status != "ok" and cell.pending_approval is None
    return CallToolResult(content=content, structured_content=json.loads(json.dumps(structured, default=str)), is_error=failed)


def _without_image_data(structured: dict[str, Any]) -> dict[str, Any]:
    """``structured`` with each ``images`` list of base64 strings replaced by its length."""
    return {
        key: (len(value) if key == "images" and isinstance(value, list) else _without_image_data(value) if isinstance(value, dict) else value)
        for key, value in structured.items()
    }


def kernel_placement(kernels: str, multi_user: bool, code_mode_options: dict[str, Any], sandbox: SandboxPolicy | None = None) -> dict[str, Any]:
    """The :class:`toolpath.kernel.CodeMode` option that places the server's kernels: ``{"sandbox": policy}``
    for sandboxed local kernels, else ``{}``.

    ``kernels`` is ``"auto"`` (sandboxed when ``multi_user``: one user's code must not reach the
    server's files, environment or other users' sessions; plain otherwise), ``"sandboxed"`` or
    ``"plain"`` (the operator's explicit choice that users share trust). Kernels a gateway or a
    kernelspec places (``code_mode_options``) are left where those say.

    Raises:
        ServeError: ``"sandboxed"`` with a gateway or kernelspec, an unknown ``kernels``, a
            ``sandbox`` policy for kernels that are not sandboxed, or sandboxed kernels where
            bubblewrap cannot run (the message says what to do instead).
    """
    if kernels not in ("auto", "sandboxed", "plain"):
        raise ServeError(f"--kernels takes auto, sandboxed or plain, got {kernels!r}")
    elsewhere = "gateway_url" in code_mode_options or "kernel_name" in code_mode_options
    if elsewhere and kernels == "sandboxed":
        raise ServeError(
            "--kernels sandboxed is for kernels on this machine; with --gateway-url or --kernel-name the gateway or kernelspec decides how they are isolated"
        )
    sandboxed = not elsewhere and (kernels == "sandboxed" or (kernels == "auto" and multi_user))
    if sandbox is not None and not sandboxed:
        raise ServeError("--sandbox-read, --sandbox-network and --sandbox-limit apply to sandboxed kernels: give --tokens or --kernels sandboxed")
    if not sandboxed:
        return {}
    problem = sandbox_problem()
    if problem:
        why = (
            "with --tokens, users' kernels run sandboxed so that one user's code cannot read this server's files, environment or other users' sessions"
            if kernels == "auto"
            else "--kernels sandboxed"
        )
        raise ServeError(
            f"{why}, but {problem}. Run kernels on a gateway (--gateway-url), or give --kernels plain if every user may read this server's files and each other's sessions"
        )
    return {"sandbox": sandbox or SandboxPolicy()}


def kernel_memory_caps(placement: dict[str, Any], code_mode_options: dict[str, Any], memory_budget: int | None) -> dict[str, Any]:
    """The kernel caps that keep sandboxed kernels' memory limits, summed, within ``memory_budget``
    bytes (default :func:`toolpath.kernel.sandbox.memory_budget.default_budget_bytes`): ``max_kernels`` is at
    most the number that fits (default the fewer of that and :data:`SERVE_MAX_KERNELS`; a user's
    own cap never lets them past it). Kernels that are not sandboxed here, or have no memory limit, are
    bounded by nothing toolpath sets: ``max_kernels`` is then as given, default :data:`SERVE_MAX_KERNELS`.

    Raises:
        ServeError: ``max_kernels`` given above what fits, a budget too small for one kernel, or a
            budget for kernels without a memory limit.
    """
    from toolpath.kernel.sandbox.memory_budget import default_budget_bytes, kernels_within

    policy = placement.get("sandbox")
    kernel_bytes = policy.group_memory_bytes() if policy is not None else None
    asked = code_mode_options.get("max_kernels")
    if kernel_bytes is None:
        if memory_budget is not None:
            raise ServeError(
                "--memory-budget bounds the memory limits of sandboxed kernels, and these kernels have none (plain, elsewhere, or memory_bytes=none)"
            )
        return {"max_kernels": asked or SERVE_MAX_KERNELS}
    budget = memory_budget or default_budget_bytes()
    fits = kernels_within(budget, kernel_bytes, code_mode_options.get("pool_size", 0))
    where = f"each sandboxed kernel may take {_size(kernel_bytes)} (memory_bytes plus its home, /tmp and /dev/shm), and the memory budget is {_size(budget)}"
    if fits < 1:
        raise ServeError(f"not one kernel fits: {where}; lower --sandbox-limit memory_bytes or disk_bytes, or raise --memory-budget")
    if asked is not None and asked > fits:
        raise ServeError(
            f"--max-kernels {asked} promises more memory than the machine has for kernels: {where}, so {fits} fit; give --max-kernels {fits} or fewer, lower the sandbox's limits, or raise --memory-budget"
        )
    return {"max_kernels": asked if asked is not None else min(SERVE_MAX_KERNELS, fits)}


def _size(count: int) -> str:
    """A byte count in GiB, or in MiB below one GiB."""
    return f"{count / 2**30:.1f} GiB" if count >= 2**30 else f"{count / 2**20:.1f} MiB"


def serve(
    catalogs: Sequence[str | Path] = (),
    http: str | None = None,
    tokens_file: str | None = None,
    no_auth: bool = False,
    code_mode_options: dict[str, Any] | None = None,
    http_limits: HttpLimits | None = None,
    allowed_hosts: Sequence[str] = (),
    quotas: dict[str, int] | None = None,
    max_request_bytes: int | None = None,
    kernels: str = "auto",
    sandbox: SandboxPolicy | None = None,
    memory_budget: int | None = None,
    metrics: str | None = None,
) -> None:
    """Run ``toolpath serve``: over stdio until the client disconnects, or over Streamable HTTP at
    ``http`` (``HOST:PORT``) until SIGTERM/SIGINT. ``code_mode_options`` go to the shared
    :class:`toolpath.kernel.CodeMode` (where its kernels run: a gateway, a kernelspec, the bridge), and
    ``quotas`` (``max_sessions_per_user``, ``max_tasks_per_user``) to :class:`ToolpathServer`.

    Over HTTP a tokens file (:func:`read_tokens`) is required, unless ``no_auth`` on a loopback
    address (then every request acts for the local user); connections are bounded by
    ``http_limits`` (:class:`toolpath.planner.interfaces.http_serving.HttpLimits`), request bodies by
    ``max_request_bytes`` (default the MCP SDK's, 4 MiB; a larger one is answered 413 with a reason),
    and the Host and Origin headers checked against the bound address and ``allowed_hosts``
    (:func:`toolpath.planner.interfaces.http_serving.host_check`). ``kernels`` and ``sandbox`` place the kernels (see
    :func:`kernel_placement`): with a tokens file they are sandboxed unless ``kernels="plain"``, and
    sandboxed kernels are capped to fit ``memory_budget`` (:func:`kernel_memory_caps`).
    Over HTTP the address is bound before the catalogs and models load, and
    ``toolpath serve: listening on http://HOST:PORT/mcp`` is written to standard error once the
    server accepts connections. ``metrics`` (``HOST:PORT``, with ``http`` only) serves Prometheus
    metrics at ``http://HOST:PORT/metrics``, without tokens, bound as early
    (:mod:`toolpath.planner.interfaces.serve_metrics`; its line on standard error names that URL).

    Raises:
        ServeError: a bad address or tokens file, HTTP without auth on a non-loopback address, too
            few file descriptors, kernels that cannot be placed as asked, or an address that cannot
            be bound (a port in use: the message names the process holding it when it can be seen);
            all checked before anything loads.
        toolpath.errors.MissingExtraError: ``metrics`` without prometheus-client (``toolpath[metrics]``).
    """
    tokens = None
    if http is None:
        if tokens_file is not None or no_auth or allowed_hosts or http_limits is not None or max_request_bytes is not None or metrics is not None:
            raise ServeError(
                "--tokens, --no-auth, --allowed-host, --max-request-bytes, --metrics and the connection limits only apply with --http (over stdio the user is the local user)"
            )
    else:
        host, port = http_address(http)
        if tokens_file is not None and no_auth:
            raise ServeError("give either --tokens FILE or --no-auth, not both")
        if tokens_file is None and not no_auth:
            raise ServeError(
                "over HTTP, toolpath serve needs --tokens FILE (bearer tokens mapped to user ids); on a loopback address --no-auth serves the local user without tokens"
            )
        if no_auth and not _is_loopback(host):
            raise ServeError(f"--no-auth is only allowed on a loopback address (127.0.0.1, ::1, localhost), not {host}; give --tokens FILE")
        tokens = read_tokens(tokens_file) if tokens_file is not None else None
        try:
            connection_cap(http_limits or HttpLimits())
        except ValueError as error:
            raise ServeError(str(error)) from error
    serve_metrics = None
    if metrics is not None:
        metrics_host, metrics_port = http_address(metrics, "--metrics")
        if metrics_port == port:
            raise ServeError(f"--metrics needs a port of its own, not the --http port {port}: e.g. --metrics 127.0.0.1:9464")
        from toolpath.planner.interfaces import serve_metrics  # MissingExtraError without toolpath[metrics]
    placement = kernel_placement(kernels, tokens is not None, code_mode_options or {}, sandbox)
    code_mode_options = {**(code_mode_options or {}), **kernel_memory_caps(placement, code_mode_options or {}, memory_budget)}
    gaps = weaker_limits() if "sandbox" in placement else ""
    if gaps:
        print(f"toolpath serve: warning: {gaps}", file=sys.stderr)
    sockets = []
    metrics_sockets = []
    try:
        if http is not None:
            # Before seconds of loading: a taken port is refused at once.
            sockets = bind_address(host, port)
            if serve_metrics is not None:
                metrics_sockets = bind_address(metrics_host, metrics_port, "--metrics")
    except AddressUnavailableError as error:
        for listener in sockets:
            listener.close()
        raise ServeError(error.strerror) from error
    collected = None
    if serve_metrics is not None:
        collected = serve_metrics.ServeMetrics(set(tokens.values()) if tokens is not None else ())
        if collected.users_left_out:
            print(
                f"toolpath serve: note: the tokens file names {collected.users_left_out} users, more than {serve_metrics.MAX_LABELLED_USERS}: "
                "the metrics count kernels for all users together, not per user",
                file=sys.stderr,
            )
    _route_library_logs()
    try:
        default_embedder().prepare()  # the embedding model loads in a thread while the catalogs do
        workspace = Workspace.open(list(catalogs))
        url = _url(host, port) if http is not None else "http://127.0.0.1"
        server = ToolpathServer(
            workspace, user_id=getpass.getuser(), tokens=tokens, url=url, metrics=collected, **(quotas or {}), **(code_mode_options or {}), **placement
        )
    except BaseException:
        for listener in [*sockets, *metrics_sockets]:
            listener.close()
        raise
    body_limit = max_request_bytes or DEFAULT_MAX_REQUEST_BODY_SIZE
    # The catalogs and their graph live as long as the server: the collector's full passes over
    # their objects took 1.5 of the 2.6 s the skill index took to load at 100,000 tools, and would
    # pause requests later. (No collection first: it took 0.8 s there, and freed 56 objects.)
    gc.freeze()

    async def main() -> None:
        # What searches need builds while the client connects and lists the tools, not in the first
        # search. A build under way when the server stops finishes first (asyncio.run waits for its
        # thread, as for a search's): the index it stores serves the next start.
        warming = asyncio.create_task(server.warm_up())
        try:
            if http is None:
                await server.mcp.run_stdio_async()
                return
            app = server.mcp.streamable_http_app(transport_security=host_check(host, port, allowed_hosts), host=host, max_request_body_size=body_limit)
            limits = http_limits or HttpLimits()
            if collected is None:
                await serve_http(_explaining_body_limit(app, body_limit), sockets, f"{url}/mcp", limits)
                return
            # The MCP listener takes SIGTERM/SIGINT, here, as without metrics; the metrics listener
            # stops when it does, and a metrics listener that ends (fails) stops it.
            metrics_app = serve_metrics.metrics_app(collected, server.refresh_metrics, host_check(metrics_host, metrics_port, allowed_hosts))
            metrics_limits = HttpLimits(max_connections=serve_metrics.METRICS_MAX_CONNECTIONS, request_timeout=limits.request_timeout)
            mcp_stop, metrics_stop = asyncio.Event(), asyncio.Event()
            metrics_url = f"{_url(metrics_host, metrics_port)}/metrics"
            metrics_listener = asyncio.ensure_future(serve_http(metrics_app, metrics_sockets, metrics_url, metrics_limits, stop=metrics_stop, on_signals=False))
            metrics_listener.add_done_callback(lambda _: mcp_stop.set())
            try:
                await serve_http(_explaining_body_limit(app, body_limit), sockets, f"{url}/mcp", limits, collected.cap_hit, stop=mcp_stop)
            finally:
                metrics_stop.set()
                await metrics_listener
        finally:
            warming.cancel()
            await server.aclose()

    asyncio.run(main())


def _url(host: str, port: int) -> str:
    """``http://HOST:PORT``, an IPv6 address in brackets."""
    return f"http://{f'[{host}]' if ':' in host else host}:{port}"


def _route_library_logs() -> None:
    """Send libraries' warnings and errors to standard error, one plain line each, unless the root
    logger has handlers already. Done before the MCP SDK's server is made: its own set-up puts a
    Rich handler on a bare root logger, which would print every record reaching it (toolpath's
    notes a second time, wrapped) and leaves a configured root as it is."""
    handler = logging.StreamHandler()
    handler.setLevel(logging.WARNING)  # toolpath's INFO notes have their own handler
    handler.setFormatter(logging.Formatter("%(name)s: %(levelname)s: %(message)s"))
    logging.basicConfig(level=logging.WARNING, handlers=[handler])


def _explaining_body_limit(app: ASGIApp, limit: int) -> ASGIApp:
    """``app``, whose ``413`` answers (the MCP SDK's request body limit, "Request body too large")
    say instead what the limit is and how to change it."""
    reason = (
        f"the request body is over {limit} bytes, the most this server accepts (toolpath serve --max-request-bytes {limit}); "
        "send less in one call, or ask the server's operator to raise --max-request-bytes\n"
    ).encode()

    async def explaining(scope: Scope, receive: Receive, send: Send) -> None:
        refused = False

        async def sending(message: Message) -> None:
            nonlocal refused
            if message["type"] == "http.response.start" and message["status"] == 413:
                refused = True
                await send({**message, "headers": [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(reason)).encode())]})
            elif refused and message["type"] == "http.response.body":
                if not message.get("more_body", False):
                    await send({"type": "http.response.body", "body": reason})
            else:
                await send(message)

        await app(scope, receive, sending)

    return explaining
