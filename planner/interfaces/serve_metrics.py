"""Prometheus metrics of ``toolpath serve --http``, served at ``/metrics`` on a listener of their own
(``--metrics HOST:PORT``), in the Prometheus text format (prometheus-client, extra ``toolpath[metrics]``).

Why a listener of its own, without tokens: the metrics are the operator's, and a tokens file names
users, not operators: any user's token would otherwise read every user's activity. A separate port
is also scraped while the MCP port is at its connection cap, which is when an operator needs the
figures most, and it is how Prometheus exporters are usually deployed (scraped on an internal
address). Whoever can reach that port reads the metrics, so it is bound to a loopback or internal
address; its Host header is checked as the MCP port's is (DNS rebinding).

What the metrics hold: counts, durations and sizes, labelled from closed sets (the server's tools,
statuses, reason codes, cell statuses, the loaded catalogs' host tools) and, for kernels per user, the
user ids of the tokens file when it names at most :data:`MAX_LABELLED_USERS`. Never a tool's
arguments, a task's words, a session id, a path or an error's text: those are one user's, and the
metrics are read by others. Each server has its own :class:`prometheus_client.CollectorRegistry`
(not the library's global one), so several servers in one process (tests) keep their own counts.

Metric names and labels are listed in ``docs/observability.md``.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Awaitable, Callable, Collection, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from toolpath.errors import MissingExtraError, Refusal

try:
    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
except ImportError as error:  # an optional part: serving without --metrics needs none of it
    raise MissingExtraError("toolpath serve --metrics needs prometheus-client: pip install 'toolpath[metrics]'") from error

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, InputRequiredResult
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from toolpath.kernel.codemode.session_pool import SessionOwnerError
from toolpath.kernel.errors import KernelCapacityError, KernelError, SessionHeldError
from toolpath.kernel.observer import CodeModeObserver
from toolpath.planner.interfaces.serve_limits import QuotaError
from toolpath.planner.planning.graph import UnknownStateError
from toolpath.planner.planning.inputs import InputError
from toolpath.planner.planning.plans import NoPlanError, PlanningTimeout
from toolpath.planner.search.skills import QueryError
from toolpath.planner.tasks.goals import NoMatchingSkillError
from toolpath.planner.tasks.session_holdings import StalePlanError
from toolpath.planner.tasks.session_runs import TaskPausedError
from toolpath.planner.tasks.task import PartsNotUnderstoodError, UnboundParametersError
from toolpath.registry.storage import StoreError

#: Per-user series are kept only when the tokens file names at most this many users: each user
#: adds a series, and Prometheus holds every series in memory (its guidance: keep a label's values
#: to a few dozen). Above it only the totals are kept.
MAX_LABELLED_USERS = 50
#: The most open connections the metrics listener admits (a Prometheus server or two scrape it).
METRICS_MAX_CONNECTIONS = 16

#: How a tool call ended: ``ok``; ``refused`` (not served as asked, before it ran: a reason in
#: ``toolpath_refusals_total``); ``error`` (it ran and failed: a cell that raised, timed out or lost
#: its kernel, or a fault of the server); ``input_required`` (a call waits for the user's approval,
#: MCP 2026-07-28); ``cancelled`` (the client went away first).
STATUSES = ("ok", "refused", "error", "input_required", "cancelled")

#: Reason codes of refusals, checked in this order against the refusal (an error's class decides,
#: never its text). Codes without a class are given by the server or the MCP SDK (see
#: :func:`refusal_reason`).
REASONS: tuple[tuple[str, type[BaseException] | None], ...] = (
    ("parts_not_understood", PartsNotUnderstoodError),
    ("no_matching_skill", NoMatchingSkillError),
    ("planning_timeout", PlanningTimeout),
    ("no_plan", NoPlanError),
    ("missing_inputs", UnboundParametersError),
    ("bad_input", InputError),
    ("bad_query", QueryError),
    ("unknown_state", UnknownStateError),
    ("stale_plan", StalePlanError),
    ("task_paused", TaskPausedError),
    ("not_session_owner", SessionOwnerError),
    ("session_held", SessionHeldError),
    ("kernel_cap", KernelCapacityError),
    ("kernel", KernelError),
    ("store", StoreError),
    ("bad_request", ValueError),
    ("bad_request", TypeError),
    ("other_refusal", Refusal),
    # Given by name: a user's quota (QuotaError.quota), and what the MCP SDK refuses before any tool runs.
    ("max_sessions_per_user", None),
    ("max_tasks_per_user", None),
    ("invalid_arguments", None),
    ("unknown_tool", None),
    ("invalid_request", None),
    ("other", None),
)
REASON_CODES = tuple(dict.fromkeys(code for code, _ in REASONS))

#: Seconds: MCP requests and cells take from milliseconds (a search) to minutes (a long cell; the
#: server's cell limit is 300 s).
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
#: Seconds: a call through the bridge costs about a millisecond before the tool's own time.
BRIDGE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
#: How a cell that ran ended (``"busy"`` ones did not run): :meth:`toolpath.kernel.observer.CodeModeObserver.cell_finished`.
CELL_STATUSES = ("ok", "error", "timeout", "aborted", "dead", "paused")
#: Where a paused or waiting approval is: ``asking`` (a cell waits while the user is asked) or
#: ``paused`` (a task stopped before the call, waiting for resume_task).
APPROVAL_KINDS = ("asking", "paused")
#: What happened to a connection that found the MCP port's connection cap reached.
CAP_OUTCOMES = ("replaced_waiting", "refused")


def refusal_reason(error: BaseException) -> str:
    """The reason code (one of :data:`REASON_CODES`) of a refused call's error: the first class of
    :data:`REASONS` it is an instance of; a :class:`QuotaError`'s own quota; ``"other"`` for anything
    else (a :class:`ToolError` the server raised without a cause)."""
    if isinstance(error, QuotaError):
        return error.quota if error.quota in REASON_CODES else "other"
    return next((code for code, kind in REASONS if kind is not None and isinstance(error, kind)), "other")


@dataclass
class _ToolCall:
    """What the middleware learns of one ``tools/call`` from the tool function it reaches."""

    reached: bool = False
    reason: str | None = None
    failed: bool = False


_current_call: ContextVar[_ToolCall | None] = ContextVar("toolpath_metered_tool_call", default=None)


class ServeMetrics:
    """The metrics of one ``toolpath serve``, in a registry of their own (:attr:`registry`).

    Args:
        users: the user ids of the tokens file; when there are at most :data:`MAX_LABELLED_USERS`,
            kernels are also counted per user (``toolpath_user_kernels_running``). Empty (one local
            user, ``--no-auth``): no per-user series.

    The server feeds it: :meth:`metered` wraps each MCP tool, :meth:`middleware` goes in the MCP
    server's middleware, :attr:`kernel_observer` is the CodeMode's observer, :meth:`asking` wraps the
    approver, :meth:`cap_hit` is the HTTP listener's, and :meth:`set_state` is called before each
    scrape with what the server holds now.
    """

    def __init__(self, users: Collection[str] = ()):
        self.registry = CollectorRegistry()
        registry = self.registry
        self.users = frozenset(users) if len(set(users)) <= MAX_LABELLED_USERS else frozenset()
        self.users_left_out = len(set(users)) if not self.users and users else 0
        self.tools: set[str] = set()
        self.requests = Counter("toolpath_requests", "MCP tool calls, by tool and how they ended.", ["tool", "status"], registry=registry)
        self.request_seconds = Histogram(
            "toolpath_request_duration_seconds", "Time an MCP tool call took in the server, by tool.", ["tool"], buckets=DURATION_BUCKETS, registry=registry
        )
        self.refusals = Counter("toolpath_refusals", "MCP tool calls refused, by reason code.", ["reason"], registry=registry)
        self.search_seconds = Histogram(
            "toolpath_search_duration_seconds", "Time a skill search took (search_skills).", buckets=DURATION_BUCKETS, registry=registry
        )
        self.plan_seconds = Histogram("toolpath_plan_duration_seconds", "Time planning a task took (plan_task).", buckets=DURATION_BUCKETS, registry=registry)
        self.cell_seconds = Histogram(
            "toolpath_cell_duration_seconds",
            "Time a cell ran in its kernel, by the status it ended with.",
            ["status"],
            buckets=DURATION_BUCKETS,
            registry=registry,
        )
        self.bridge_calls = Counter(
            "toolpath_bridge_calls", "Host tool calls from cells through the bridge, by tool and outcome.", ["tool", "outcome"], registry=registry
        )
        self.bridge_seconds = Histogram(
            "toolpath_bridge_call_duration_seconds",
            "Time a host tool call through the bridge took, by outcome.",
            ["outcome"],
            buckets=BRIDGE_BUCKETS,
            registry=registry,
        )
        self.kernels = Gauge("toolpath_kernels_running", "Sessions' kernels alive now.", registry=registry)
        self.user_kernels = (
            Gauge("toolpath_user_kernels_running", "Sessions' kernels alive now, by their user.", ["user"], registry=registry) if self.users else None
        )
        self.pooled_kernels = Gauge("toolpath_kernels_pooled", "Kernels started ahead and waiting for a session.", registry=registry)
        self.sessions = Gauge("toolpath_sessions_open", "Sessions open in this server (used since it started, not closed).", registry=registry)
        self.snapshots = Counter("toolpath_snapshots_written", "Session snapshots written to the store.", registry=registry)
        self.snapshot_bytes = Counter("toolpath_snapshots_written_bytes", "Bytes of pickles written in session snapshots.", registry=registry)
        self.snapshot_failures = Counter("toolpath_snapshot_failures", "Session snapshots that could not be written.", registry=registry)
        self.approvals = Gauge("toolpath_approvals_pending", "Calls waiting for a user's approval, by where they wait.", ["kind"], registry=registry)
        self.cap_hits = Counter(
            "toolpath_connection_cap_hits", "Connections to the MCP port that found its connection cap reached.", ["outcome"], registry=registry
        )
        # Every series of a closed label set exists from the start, at zero: a rate needs a first sample.
        for code in REASON_CODES:
            self.refusals.labels(code)
        for status in CELL_STATUSES:
            self.cell_seconds.labels(status)
        for outcome in ("ok", "error", "unknown_tool", "cancelled"):
            self.bridge_seconds.labels(outcome)
        for kind in APPROVAL_KINDS:
            self.approvals.labels(kind)
        for outcome in CAP_OUTCOMES:
            self.cap_hits.labels(outcome)
        for user in self.users:
            self.user_kernels.labels(user)  # type: ignore[union-attr]
        self._add_tool("unknown")  # calls naming no tool of this server
        self.kernel_observer: CodeModeObserver = _KernelMetrics(self)

    def _add_tool(self, name: str) -> None:
        self.tools.add(name)
        for status in STATUSES:
            self.requests.labels(name, status)
        self.request_seconds.labels(name)

    def metered(self, tool: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        """``tool`` (an MCP tool function, already turning refusals into :class:`ToolError`), which
        tells this request's :meth:`middleware` that it ran and why it was refused (the reason code
        of the error's cause)."""
        self._add_tool(tool.__name__)

        @functools.wraps(tool)
        async def metered(*args: Any, **kwargs: Any) -> Any:
            call = _current_call.get()
            if call is None:  # called without the middleware (in-process): nothing to note
                return await tool(*args, **kwargs)
            call.reached = True
            try:
                return await tool(*args, **kwargs)
            except ToolError as error:
                call.reason = refusal_reason(error.__cause__ or error)
                raise
            except Exception:
                call.failed = True
                raise

        return metered

    async def middleware(self, context: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """MCP server middleware: count each ``tools/call`` by tool and status, and time it (other
        messages pass untouched). A call the SDK refuses before the tool runs (arguments that fail
        its schema, a tool it does not have) counts as refused, ``invalid_arguments`` or ``unknown_tool``."""
        if context.method != "tools/call":
            return await call_next(context)
        name = context.params.get("name") if context.params else None
        tool = name if isinstance(name, str) and name in self.tools else "unknown"
        call = _ToolCall()
        token = _current_call.set(call)
        started = time.perf_counter()
        status, reason = "cancelled", None
        try:
            result = await call_next(context)
            status, reason = _ended(result, call, tool != "unknown")
            return result
        except ValidationError:
            status, reason = "refused", "invalid_arguments"
            raise
        except MCPError:
            status, reason = "refused", "invalid_request"
            raise
        except Exception:
            status = "error"
            raise
        finally:
            _current_call.reset(token)
            self.requests.labels(tool, status).inc()
            self.request_seconds.labels(tool).observe(time.perf_counter() - started)
            if reason is not None:
                self.refusals.labels(reason).inc()

    @contextlib.contextmanager
    def timing(self, operation: str) -> Iterator[None]:
        """Time the block as a skill search (``"search"``) or a planning (``"plan"``), whatever its end."""
        with (self.search_seconds if operation == "search" else self.plan_seconds).time():
            yield

    def asking(self, approver: Callable[[Any], Awaitable[Any]]) -> Callable[[Any], Awaitable[Any]]:
        """``approver``, counted in ``toolpath_approvals_pending{kind="asking"}`` while it decides."""

        @functools.wraps(approver)
        async def counted(request: Any) -> Any:
            with self.approvals.labels("asking").track_inprogress():
                return await approver(request)

        return counted

    def cap_hit(self, outcome: str) -> None:
        """A connection found the MCP port's connection cap reached (see :data:`CAP_OUTCOMES`)."""
        self.cap_hits.labels(outcome).inc()

    def set_state(self, kernels: Mapping[str, str | None], pooled: int, sessions: int, paused: int) -> None:
        """Set the gauges of what the server holds now: ``kernels`` (``{kernel session id: owner}``
        of the live ones), ``pooled`` kernels, open ``sessions`` and ``paused`` tasks."""
        self.kernels.set(len(kernels))
        if self.user_kernels is not None:
            counts = dict.fromkeys(self.users, 0)
            for owner in kernels.values():
                if owner in counts:
                    counts[owner] += 1
            for user, count in counts.items():
                self.user_kernels.labels(user).set(count)
        self.pooled_kernels.set(pooled)
        self.sessions.set(sessions)
        self.approvals.labels("paused").set(paused)

    def exposition(self) -> bytes:
        """The metrics now, in the Prometheus text format."""
        return generate_latest(self.registry)


def _ended(result: HandlerResult, call: _ToolCall, known: bool) -> tuple[str, str | None]:
    """The status and the refusal reason (or ``None``) of a ``tools/call`` that returned ``result``."""
    if isinstance(result, InputRequiredResult):
        return "input_required", None
    failed = result.is_error if isinstance(result, CallToolResult) else isinstance(result, dict) and result.get("isError") is True
    if not failed:
        return "ok", None
    if call.reason is not None:
        return "refused", call.reason
    if not call.reached and not call.failed:
        return "refused", "invalid_arguments" if known else "unknown_tool"
    return "error", None  # a cell that did not end "ok", or a fault of the server


class _KernelMetrics(CodeModeObserver):
    """The CodeMode observer that counts cells, bridge calls and snapshots in a :class:`ServeMetrics`."""

    def __init__(self, metrics: ServeMetrics):
        self.metrics = metrics

    def cell_finished(self, status: str, seconds: float) -> None:
        self.metrics.cell_seconds.labels(status).observe(seconds)

    def bridge_call_finished(self, tool: str, outcome: str, seconds: float) -> None:
        self.metrics.bridge_calls.labels(tool, outcome).inc()
        self.metrics.bridge_seconds.labels(outcome).observe(seconds)

    def snapshot_written(self, size_bytes: int) -> None:
        self.metrics.snapshots.inc()
        self.metrics.snapshot_bytes.inc(size_bytes)

    def snapshot_failed(self) -> None:
        self.metrics.snapshot_failures.inc()


def metrics_app(metrics: ServeMetrics, refresh: Callable[[], Awaitable[None]], security: TransportSecuritySettings) -> Starlette:
    """The metrics listener's ASGI app: ``GET /metrics`` answers :meth:`ServeMetrics.exposition`
    after ``await refresh()`` (which sets the gauges); any other path is 404, another method 405.
    A request whose Host header ``security`` does not allow is answered 421, as the MCP port does."""

    async def scrape(request: Request) -> Response:
        if security.enable_dns_rebinding_protection and request.headers.get("host") not in security.allowed_hosts:
            return PlainTextResponse("this Host is not one this server answers to (toolpath serve --allowed-host)\n", status_code=421)
        await refresh()
        return Response(metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    return Starlette(routes=[Route("/metrics", scrape, methods=["GET"])])
