"""Replanning: when a step of a task's cell fails for good, plan around it from what the kernel now holds.

A planned cell is a straight line of tool calls. When one call fails after its retries
(:mod:`toolpath.kernel.inside.retries`), a run with ``on_failure="replan"``:

1. keeps every value already made: the completed steps' variables stay in the kernel and their
   states are held (:attr:`toolpath.kernel.CellResult.tool_calls` says which calls returned);
2. reads the failure (:func:`read_failure`) and decides whether another route may be taken;
3. plans again, to the *same goal*, from the states now held, avoiding the failed tool and the tools
   the failure names (:func:`tools_to_avoid`); the new cell reads the kernel's variables, so no
   completed step runs again;
4. runs the new remainder in the same kernel, up to ``max_replans`` times (default
   :data:`DEFAULT_MAX_REPLANS`).

Which failures are replanned (the rule, also in docs/kernels.md): a failure that says the *tool* could
not serve the call now, where another tool reaching the same state gives the same kind of answer:

- ``connection``: a lost or refused connection (``ConnectionError`` and its kin, the HTTP clients'
  connection errors read along their class hierarchy: requests' ``ConnectionError`` and its
  ``ProxyError``, httpx's ``ConnectError``, urllib3's ``NewConnectionError``, aiohttp's
  ``ClientConnectionError``, :func:`toolpath.registry.retry_conditions.failure_kind`; an MCP server
  that could not be reached, an HTTP API that gave no answer);
- ``timeout``: a tool's own ``TimeoutError``, or the cell interrupted by the kernel's timeout;
- ``status``: an HTTP API answered 429 or 5xx;

  each of these three except for a tool with effects: it may have done its effect before the
  failure (the message sent, then the connection reset; a POST answered 502 after it took effect),
  and trying another tool could do it twice;
- ``injected``: a failure injected on purpose (:class:`toolpath.kernel.FailureInjection`);
- ``unbound``: the tool cannot be bound (its module does not import);
- ``approval``: a person denied the call's approval (or nobody answered). That is a failure of that
  call only: the new route avoids the tool, and also every tool with effects that would not ask
  for approval itself, so the same effect is never done through another tool without asking.

Every other failure stops the run, as ``on_failure="stop"`` does: a ``ValueError`` from parsing the
user's SMILES, a ``KeyError`` in a tool's code, a 4xx answer. Such a failure is about the input or
the tool's own code; another tool might give a different answer to the same wrong input, and passing
that off as the task's result would be silently wrong.

What the failure rules out: the failed tool; when an *unreachable* MCP server or HTTP API is the
cause (``connection`` on a tool served by one), every tool of that server or API, since none of them
can be reached either. A status answer or an injected failure rules out that tool only.
"""

from __future__ import annotations

import re
import time
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from toolpath.planner.planning.budgets import DEFAULT_MAX_REPLANS
from toolpath.planner.planning.plans import NoPlanError, Plan, plan, qualified_name
from toolpath.registry.retry_conditions import CONNECTION, CONNECTION_NAMES, TIMEOUT, TIMEOUT_NAMES, crossed_name

if TYPE_CHECKING:
    from toolpath.planner.planning.graph import StateGraph
    from toolpath.planner.tasks.task import TaskRun
    from toolpath.registry import ToolDefinition

#: What a run does when a step fails for good: plan around it, or stop there (as before replanning).
OnFailure = Literal["replan", "stop"]
ON_FAILURE_CHOICES: tuple[str, ...] = ("replan", "stop")
#: Milliseconds one replan's planning may take: the plans a cell runs are found in a few ms, and a
#: replan that cannot be found quickly is not worth holding the run for.
REPLAN_BUDGET_MS = 2_000.0

#: The kinds of :class:`StepFailure`: each but ``other`` is replanned.
FAILURE_KINDS: tuple[str, ...] = ("connection", "timeout", "status", "injected", "unbound", "approval", "other")
_APPROVAL_NAMES = frozenset({"ApprovalDenied", "ApprovalTimeout"})
#: An HTTP tool's error names the status the API answered (:class:`toolpath.kernel.inside.http_results.HttpToolError`).
_HTTP_STATUS = re.compile(r" answered (\d{3})\b")


@dataclass(frozen=True)
class StepFailure:
    """How one step of a cell failed, and whether the run may take another route.

    Attributes:
        step: the step's index in its cell's plan.
        tool: the failed tool, ``server.name``.
        error: ``"ExceptionName: message"`` (the message cut to 300 characters), or ``"timeout"``.
        kind: ``connection``, ``timeout``, ``status``, ``injected``, ``unbound``, ``approval`` (all
            replannable), or ``other`` (not).
        why: in words, why the failure is or is not replanned.
        avoid: the tools (``server.name``) a replan must not use because of it; empty when not replannable.
    """

    step: int
    tool: str
    error: str
    kind: str
    why: str
    avoid: tuple[str, ...] = ()

    @property
    def replannable(self) -> bool:
        return self.kind != "other"

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "tool": self.tool,
            "error": self.error,
            "kind": self.kind,
            "replannable": self.replannable,
            "why": self.why,
            "avoid": list(self.avoid),
        }

    @classmethod
    def from_dict(cls, data: Any) -> StepFailure:
        """The inverse of :meth:`to_dict` (``replannable`` is derived from ``kind`` and not read).

        Raises:
            ValueError: a missing or mistyped field, named in the message.
        """
        fields = _checked(data, "failure", {"step": int, "tool": str, "error": str, "kind": str, "why": str, "avoid": list})
        if fields["kind"] not in FAILURE_KINDS:
            raise ValueError(f"replan failure field 'kind' is one of {', '.join(FAILURE_KINDS)}, got {fields['kind']!r}")
        return cls(fields["step"], fields["tool"], fields["error"], fields["kind"], fields["why"], _names(fields["avoid"], "failure field 'avoid'"))


@dataclass(frozen=True)
class Replan:
    """One replan of a run: the failure, the route given up and the route taken instead.

    Attributes:
        failure: the :class:`StepFailure` that caused it.
        old_route: the failed cell's tools from the failed step on (``server.name``).
        new_route: the new cell's tools (``server.name``); they start from the states held then.
        held: the states held when it was planned (the completed steps' included).
        avoided: every tool it avoided (this failure's and the earlier ones').
        planning_ms: milliseconds spent planning and writing the new cell.
    """

    failure: StepFailure
    old_route: tuple[str, ...]
    new_route: tuple[str, ...]
    held: tuple[str, ...]
    avoided: tuple[str, ...]
    planning_ms: float

    def text(self) -> str:
        return (
            f"{self.failure.tool} failed ({self.failure.error}); {self.failure.why}. "
            f"Replanned from the held states, avoiding {', '.join(self.avoided)}: {' -> '.join(self.old_route)} became {' -> '.join(self.new_route)}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "failure": self.failure.to_dict(),
            "old_route": list(self.old_route),
            "new_route": list(self.new_route),
            "held": list(self.held),
            "avoided": list(self.avoided),
            "planning_ms": round(self.planning_ms, 3),
        }

    @classmethod
    def from_dict(cls, data: Any) -> Replan:
        """The inverse of :meth:`to_dict`.

        Raises:
            ValueError: a missing or mistyped field, named in the message.
        """
        fields = _checked(
            data, "replan", {"failure": Mapping, "old_route": list, "new_route": list, "held": list, "avoided": list, "planning_ms": (int, float)}
        )
        routes = [_names(fields[name], f"replan field {name!r}") for name in ("old_route", "new_route", "held", "avoided")]
        return cls(StepFailure.from_dict(fields["failure"]), *routes, float(fields["planning_ms"]))


def _checked(data: Any, what: str, kinds: Mapping[str, type | tuple[type, ...]]) -> dict[str, Any]:
    """``data``'s fields named in ``kinds``, each checked to be of its type (``bool`` is no number here).

    Raises:
        ValueError: ``data`` is no mapping, or a field is missing or of the wrong type (named).
    """
    if not isinstance(data, Mapping):
        raise ValueError(f"a saved {what} must be a JSON object, got {type(data).__name__}")
    for name, kind in kinds.items():
        value = data.get(name)
        if isinstance(value, bool) or not isinstance(value, kind):
            raise ValueError(f"{what} field {name!r} is missing or of the wrong type")
    return {name: data[name] for name in kinds}


def _names(values: list[Any], what: str) -> tuple[str, ...]:
    if not all(isinstance(value, str) for value in values):
        raise ValueError(f"{what} must list tool or state names (strings)")
    return tuple(values)


def _error_names(error: Mapping[str, Any]) -> set[str]:
    """The exception's class name, and for a host tool's exception that crossed the bridge its own
    class name (:func:`toolpath.registry.retry_conditions.crossed_name`)."""
    name, value = str(error.get("ename") or ""), str(error.get("evalue") or "")
    crossed = crossed_name(name, value)
    return {name, crossed} if crossed else {name}


def _remote_of(tool: ToolDefinition) -> tuple[str, str] | None:
    """``("MCP server", name)`` or ``("HTTP API", name)`` for a tool served by one, else ``None``."""
    if tool.mcp_server is not None:
        return ("MCP server", tool.mcp_server if isinstance(tool.mcp_server, str) else tool.mcp_server.name)
    if tool.http is not None:
        return ("HTTP API", tool.http.api if isinstance(tool.http.api, str) else tool.http.api.name)
    return None


def read_failure(run: TaskRun, tools: Iterable[ToolDefinition]) -> StepFailure | None:
    """The failure of ``run``'s failed step, or ``None`` when its cell ran through or paused for approval.

    Args:
        run: a cell's run.
        tools: every loaded tool (for the tools of a server found unreachable).

    Returns:
        The :class:`StepFailure`, classified by the rule in the module docstring.
    """
    index = run.failed_step
    if index is None or run.paused is not None:
        return None
    failed = run.task_plan.plan.steps[index].tool
    name = qualified_name(failed)
    result = run.result
    error = result.error or {}
    shown = "timeout" if result.status == "timeout" else f"{error.get('ename', 'Error')}: {str(error.get('evalue', ''))[:300]}"
    names = _error_names(error)
    # What the failure's class hierarchy says, which its name alone does not (requests' ProxyError
    # is a ConnectionError): the kernel reports it for the call (CellResult.failure_kinds).
    kind_reported = result.failure_kinds.get(run.task_plan.cell.step_targets[index], "")
    value = str(error.get("evalue") or "")
    status = _HTTP_STATUS.search(value) if "HttpToolError" in names else None

    def failure(kind: str, why: str, avoid: Iterable[str] = (name,)) -> StepFailure:
        return StepFailure(index, name, shown, kind, why, tuple(dict.fromkeys(avoid)) if kind != "other" else ())

    # A timeout, a lost connection or a 5xx answer may come after the tool did its effect (the mail
    # went out, then the connection dropped): another route could do it twice, so such a tool stops.
    maybe_done = f"a tool with effects ({failed.side_effect}) may have done its effect before: another route could do it twice"
    effects = failed.side_effect != "none"
    if result.status == "timeout" or names & TIMEOUT_NAMES or kind_reported == TIMEOUT:
        if effects:
            return failure("other", f"it timed out, and {maybe_done}")
        return failure("timeout", "it timed out: another tool may answer in time")
    if "InjectedFailure" in names:
        return failure("injected", "the failure was injected on purpose: another route is tried")
    if names & _APPROVAL_NAMES:
        # Tools with effects that would not ask are avoided too: the effect denied must not happen
        # through another tool without a person's yes (issue #55).
        unasked = [qualified_name(tool) for tool in tools if tool.side_effect != "none" and tool.approval == "never"]
        return failure("approval", "its approval was denied (or not given): another route is tried, and its tools with effects still ask", [name, *unasked])
    if status is not None:
        code = int(status.group(1))
        if (code == 429 or code >= 500) and effects:
            return failure("other", f"its API answered {code}, and {maybe_done}")
        if code == 429 or code >= 500:
            return failure("status", f"its API answered {code}, a failure of the server, not of the request")
        return failure("other", f"its API answered {code}: the request itself was refused, so another route could give a different answer")
    unreachable = names & CONNECTION_NAMES or kind_reported == CONNECTION or ("HttpToolError" in names and " got no answer" in value)
    if unreachable and effects:
        return failure("other", f"it lost its connection, and {maybe_done}")
    if unreachable:
        remote = _remote_of(failed)
        if remote is None:
            return failure("connection", "it lost its connection: another tool may reach what it needs")
        kind, server = remote
        siblings = [qualified_name(tool) for tool in tools if _remote_of(tool) == remote]
        return failure("connection", f"its {kind} {server!r} could not be reached, so none of its tools is used", [name, *siblings])
    if "RuntimeError" in names and "cannot be bound" in value:
        return failure("unbound", "the tool cannot be bound in the kernel: another tool is tried")
    return failure(
        "other",
        "the tool ran and refused its input or failed in its own code; another tool could give a different answer to the same input, so the run stops here (fix the input or the tool)",
    )


def plan_remainder(graph: StateGraph, original: Plan, held: Collection[str], avoid: Collection[str], done: Collection[str]) -> Plan:
    """The cheapest plan from ``held`` to ``original``'s goal that avoids ``avoid`` and still runs
    the tools the task asked for (``original.must_run``) that are not ``done``.

    A tool the task asked for that is avoided now (its part matched that tool: "publish the
    summary") is asked for by what it produces instead: any tool making the same states does that
    part, as long as the failure allows it (tools with effects that would not ask are avoided after a
    denied approval, :func:`read_failure`).

    Raises:
        NoPlanError: no route avoids them (its message says which state only avoided tools produce).
    """
    avoided = set(avoid)
    goal = set(original.goal)
    must_run = []
    for name in sorted(set(original.must_run) - set(done)):
        if name in avoided:
            goal |= graph.resolve_tool(name).state_transition.produces
        else:
            must_run.append(name)
    return plan(graph, goal, held=held, avoid=sorted(avoided), must_run=must_run, time_budget_ms=REPLAN_BUDGET_MS)


@dataclass
class Replanning:
    """The replans of one run, in order, and why it stopped replanning (``""`` while it may go on).

    Args:
        graph: the state graph.
        max_replans: how many replans the run may make.
    """

    graph: StateGraph
    max_replans: int = DEFAULT_MAX_REPLANS

    def __post_init__(self) -> None:
        if isinstance(self.max_replans, bool) or not isinstance(self.max_replans, int) or self.max_replans < 0:
            raise ValueError(f"max_replans is a whole number ≥ 0, got {self.max_replans!r}")
        self.replans: list[Replan] = []
        self.avoided: list[str] = []
        self.done: list[str] = []
        self.stopped = ""

    @classmethod
    def of(cls, graph: StateGraph, on_failure: OnFailure, max_replans: int = DEFAULT_MAX_REPLANS) -> Replanning | None:
        """The replanning of a run asked to ``on_failure`` (``None`` for ``"stop"``).

        Raises:
            ValueError: ``on_failure`` is not one of :data:`ON_FAILURE_CHOICES`, or ``max_replans`` is no whole number ≥ 0.
        """
        if on_failure not in ON_FAILURE_CHOICES:
            raise ValueError(f"on_failure is one of {', '.join(map(repr, ON_FAILURE_CHOICES))}, got {on_failure!r}")
        return cls(graph, max_replans) if on_failure == "replan" else None

    def to_dict(self) -> dict[str, Any]:
        """What the run has replanned so far, JSON-ready: ``max_replans``, ``replans``
        (:meth:`Replan.to_dict`), ``avoided`` and ``done`` (the tools completed, ``server.name``).
        A task paused for approval keeps it (:class:`toolpath.planner.tasks.session_state.PausedTask`),
        so its resumed run replans under the same bound, counting the replans made before the pause."""
        return {
            "max_replans": self.max_replans,
            "replans": [replan.to_dict() for replan in self.replans],
            "avoided": list(self.avoided),
            "done": list(dict.fromkeys(self.done)),
        }

    @classmethod
    def from_dict(cls, graph: StateGraph, data: Any) -> Replanning:
        """The replanning :meth:`to_dict` gave, on ``graph``, to go on with a resumed run.

        Raises:
            ValueError: a missing or mistyped field, named in the message.
        """
        saved = checked_saved_replanning(data)
        replanning = cls(graph, saved["max_replans"])
        replanning.replans = [Replan.from_dict(replan) for replan in saved["replans"]]
        replanning.avoided, replanning.done = saved["avoided"], saved["done"]
        return replanning

    def next_plan(self, run: TaskRun, held: Collection[str]) -> tuple[Plan, StepFailure, float] | None:
        """The plan of the remainder after ``run``'s failure, the failure and the planning time
        (ms); ``None`` when the run stops (:attr:`stopped` says why; empty when it did not fail).

        ``held``: the states held now, ``run``'s completed steps' included.
        """
        self.done.extend(qualified_name(run.task_plan.plan.steps[index].tool) for index in run.completed_steps)
        failure = read_failure(run, self.graph.registry)
        if failure is None:
            return None
        if not failure.replannable:
            self.stopped = f"not replanned: {failure.why}"
            return None
        if len(self.replans) >= self.max_replans:
            self.stopped = f"not replanned: the run already replanned {len(self.replans)} time(s) (max_replans={self.max_replans})"
            return None
        started = time.perf_counter()
        self.avoided = list(dict.fromkeys([*self.avoided, *failure.avoid]))
        try:
            remainder = plan_remainder(self.graph, run.task_plan.plan, held, self.avoided, self.done)
        except NoPlanError as error:
            self.stopped = f"not replanned: no other route reaches the goal without {', '.join(self.avoided)} ({error})"
            return None
        return remainder, failure, (time.perf_counter() - started) * 1000

    def note(self, run: TaskRun, failure: StepFailure, remainder: Plan, held: Collection[str], planning_ms: float) -> Replan:
        """Record the replan from ``run``'s failure to ``remainder`` (``planning_ms`` includes writing its cell)."""
        steps = run.task_plan.plan.steps
        replan = Replan(
            failure,
            tuple(qualified_name(step.tool) for step in steps[failure.step :]),
            tuple(qualified_name(step.tool) for step in remainder.steps),
            tuple(sorted(held)),
            tuple(self.avoided),
            planning_ms,
        )
        self.replans.append(replan)
        return replan


def checked_saved_replanning(data: Any) -> dict[str, Any]:
    """``data``, a :meth:`Replanning.to_dict` read back (from a session's snapshot), as it would be
    saved again.

    Raises:
        ValueError: a missing or mistyped field, named in the message.
    """
    fields = _checked(data, "replanning", {"max_replans": int, "replans": list, "avoided": list, "done": list})
    if fields["max_replans"] < 0:
        raise ValueError(f"replanning field 'max_replans' is a whole number ≥ 0, got {fields['max_replans']!r}")
    return {
        "max_replans": fields["max_replans"],
        "replans": [Replan.from_dict(replan).to_dict() for replan in fields["replans"]],
        "avoided": list(_names(fields["avoided"], "replanning field 'avoided'")),
        "done": list(_names(fields["done"], "replanning field 'done'")),
    }


def route_host_tools(graph: StateGraph, goal: Iterable[str]) -> list[ToolDefinition]:
    """The host-bound tools on any route to ``goal``: a fresh CodeMode binds host tools when it is
    made, so a run that may replan binds those a new route could call."""
    seen: set[str] = set()
    tools: dict[int, ToolDefinition] = {}
    frontier = list(goal)
    while frontier:
        state = frontier.pop()
        if state in seen:
            continue
        seen.add(state)
        for tool in graph.tools_for(state):
            if tool.id not in tools:
                tools[tool.id] = tool
                frontier.extend(tool.state_transition.requires)
    return [tool for tool in tools.values() if tool.binding == "host"]
