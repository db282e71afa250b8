"""Planning: the cheapest sequence of tool calls that reaches a goal from the states held now.

Semantics: states, once held, stay held (no tool removes one). A tool is applicable when every state
in its ``requires`` is held (a conjunction); a tool with empty ``requires`` is always applicable. A
plan is an ordered list of steps, each applicable when it runs, after which every goal state is held;
its cost is the sum of its tools' ``cost``; no step is redundant.

Because no tool deletes a state, the problem is a delete-free planning task: whether a plan exists is
decided by a forward fixpoint, and the cheapest plan is found by :mod:`toolpath.planner.planning.delete_free_search` (bounds,
LM-cut, then A* within ``time_budget_ms``). When that budget runs out, the best plan found is
returned marked ``optimal=False`` with a certified ``lower_bound`` on the cost of any plan: never
silently worse, and the gap is known.
"""

from __future__ import annotations

import heapq
import itertools
import math
import threading
import time
from collections.abc import Collection, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from toolpath.errors import PYTHON, GivenAdvice, Refusal, ToolpathError, Vocabulary
from toolpath.planner.planning.budgets import DEFAULT_TASK_BUDGET_S, DEFAULT_TIME_BUDGET_MS
from toolpath.planner.planning.delete_free import INFINITY, DeleteFreeTask, RelaxedCosts
from toolpath.planner.planning.delete_free_search import cheapest_plan
from toolpath.planner.planning.graph import StateGraph
from toolpath.registry import ToolDefinition


class PlanningStopped(ToolpathError):
    """Planning a task stopped before it finished (:class:`TaskBudget`); nothing was planned."""


class PlanningTimeout(PlanningStopped, Refusal, TimeoutError):
    """Planning a task outlasted its time budget; ``budget_s`` holds the budget in seconds."""

    def __init__(self, budget_s: float):
        self.budget_s = budget_s
        super().__init__(
            f"planning the task took longer than its time budget of {budget_s:g} s; split it into smaller tasks, or give it more time (time_budget_s=SECONDS)"
        )


class PlanningCancelled(PlanningStopped):
    """The caller cancelled planning a task (its client is gone)."""


@dataclass(frozen=True)
class TaskBudget:
    """When planning one task must stop: past a deadline, or once a cancellation event is set.

    Planning is cooperative: it calls :meth:`check` between parts, between candidate goals and
    before the joint plan, so it stops within one such step of the deadline or the cancellation.

    Attributes:
        seconds: the time budget in seconds (``None``: no limit).
        deadline: ``time.monotonic()`` value past which :meth:`check` raises (``None``: no limit).
        cancel: an event another thread sets to stop the planning (``None``: never cancelled).
    """

    seconds: float | None = None
    deadline: float | None = None
    cancel: threading.Event | None = None

    @classmethod
    def start(cls, seconds: float | None = DEFAULT_TASK_BUDGET_S, cancel: threading.Event | None = None) -> TaskBudget:
        """A budget of ``seconds`` from now (``None``: no limit), stopped early when ``cancel`` is set.

        Raises:
            ValueError: see :meth:`check_seconds`.
        """
        cls.check_seconds(seconds)
        return cls(seconds, None if seconds is None else time.monotonic() + seconds, cancel)

    @staticmethod
    def check_seconds(seconds: object) -> None:
        """Refuse a budget that is not a positive, finite number of seconds or ``None`` (``ValueError``)."""
        if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds) or seconds <= 0):
            raise ValueError(f"time_budget_s must be a positive, finite number of seconds or None, got {seconds!r}")

    def check(self) -> None:
        """Stop here when the caller cancelled or the time is up.

        Raises:
            PlanningCancelled: the cancellation event is set.
            PlanningTimeout: the deadline has passed.
        """
        if self.cancel is not None and self.cancel.is_set():
            raise PlanningCancelled("planning the task was cancelled by its caller")
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise PlanningTimeout(self.seconds)  # type: ignore[arg-type]  # a deadline comes with its seconds


#: A budget that never stops planning (for callers that plan without one).
NO_BUDGET = TaskBudget()


@dataclass(frozen=True)
class PlanStep:
    """One tool call of a plan.

    Attributes:
        tool: the tool definition (from the registry; ``tool.id`` is set).
        satisfied_by: for each required state, the index of the most recent earlier step that
            produced it, or ``None`` when no earlier step did (it was held before the plan started).
    """

    tool: ToolDefinition
    satisfied_by: dict[str, int | None] = field(default_factory=dict)

    @property
    def requires(self) -> frozenset[str]:
        return self.tool.state_transition.requires

    @property
    def produces(self) -> frozenset[str]:
        return self.tool.state_transition.produces

    def to_dict(self) -> dict:
        return {
            "tool": self.tool.name,
            "server": self.tool.server_name,
            "requires": sorted(self.requires),
            "produces": sorted(self.produces),
            "satisfied_by": {token: self.satisfied_by[token] for token in sorted(self.satisfied_by)},
        }


@dataclass(frozen=True)
class TieBreak:
    """A step whose tool won over others that would have served the plan at the same cost.

    Attributes:
        step: index (0-based) of the step.
        chosen: the step's tool (``server.name``).
        over: the tools (``server.name``) passed over: same cost, producing everything the step
            gives the plan, runnable at that point.
        because: why the chosen tool won, in words.
    """

    step: int
    chosen: str
    over: tuple[str, ...]
    because: str

    def to_dict(self) -> dict:
        return {"step": self.step + 1, "chosen": self.chosen, "over": list(self.over), "because": self.because}


@dataclass(frozen=True)
class Plan:
    """A plan: ``steps`` in execution order, their total ``cost``, and whether it is proven ``optimal``.

    ``goal`` holds the goal states; ``must_run`` the tools (``server.name``) the plan had to run.
    ``lower_bound`` is proven: no plan for the same goal costs less (it equals ``cost`` when the plan
    is optimal; default ``cost``, for an optimal plan only). ``gap`` is ``cost - lower_bound``.
    ``tie_breaks`` says which steps won a tie and why (set by :func:`toolpath.planner.tasks.joint_planning.joint_plan`, and by :func:`plan` when it keeps to the goal's domain).

    Raises:
        ValueError: a plan not proven optimal without a ``lower_bound``, or a bound above the cost.
    """

    goal: frozenset[str]
    held: frozenset[str]
    steps: tuple[PlanStep, ...]
    cost: float
    optimal: bool
    must_run: frozenset[str] = frozenset()
    lower_bound: float | None = None
    tie_breaks: tuple[TieBreak, ...] = ()

    def __post_init__(self) -> None:
        if self.lower_bound is None:
            if not self.optimal:
                raise ValueError("a plan not proven optimal needs its lower_bound")
            object.__setattr__(self, "lower_bound", self.cost)  # frozen: set once, here
        elif self.lower_bound > self.cost * (1 + 1e-9) + 1e-9:
            raise ValueError(f"lower_bound {self.lower_bound} is above the plan's cost {self.cost}")

    @property
    def gap(self) -> float:
        """How much cheaper than this plan the best plan could be (0 when proven optimal)."""
        return 0.0 if self.optimal else max(0.0, self.cost - (self.lower_bound or 0.0))

    def reordered(self, tools: Sequence[ToolDefinition]) -> Plan:
        """This plan with its steps in the order of ``tools`` (the same tools, in an order where each
        requirement is held or produced by an earlier step).

        Raises:
            ValueError: other tools, or an order that runs a tool before its requirements.
        """
        if sorted(tool.id for tool in tools) != sorted(step.tool.id for step in self.steps):  # type: ignore[type-var]
            raise ValueError("a reordered plan must have the same tools")
        reached = set(self.held)
        for tool in tools:
            if not tool.state_transition.requires <= reached:
                raise ValueError(f"{tool.name} would run before its requirements {', '.join(sorted(tool.state_transition.requires - reached))}")
            reached |= tool.state_transition.produces
        return replace(self, steps=_annotate(list(tools)))

    @property
    def reached(self) -> frozenset[str]:
        """Every state held once the plan has run."""
        return self.held.union(*(step.produces for step in self.steps))

    def to_dict(self) -> dict:
        return {
            "goal": sorted(self.goal),
            "must_run": sorted(self.must_run),
            "have": sorted(self.held),
            "steps": [step.to_dict() for step in self.steps],
            "cost": self.cost,
            "optimal": self.optimal,
            "lower_bound": self.lower_bound,
            "tie_breaks": [tie.to_dict() for tie in self.tie_breaks],
        }


class NoPlanError(Refusal):
    """No sequence of tools reaches the goal.

    ``str(error)`` says why in terms of the library (inputs and held states); :meth:`message`
    says it in an interface's :class:`toolpath.errors.Vocabulary`, :meth:`explanation` with any
    advice for missing input states (a command's own options).

    Attributes:
        unreachable: goal states that cannot be reached from the held states.
        missing: for each unreachable goal state, the states behind it that no usable tool produces.
        avoided: for each missing state that some avoided tool would produce, those tools' names.
        circular: for each unreachable goal state with no missing state behind it, the states it
            depends on: each is produced only by tools needing another of them (a cycle nothing starts).
        given_by: for each missing state the user gives (``input: true``), the parameters (Python
            names) that carry it: an input of one of these names holds it.
    """

    def __init__(
        self,
        unreachable: list[str],
        missing: dict[str, list[str]],
        avoided: dict[str, list[str]] | None = None,
        circular: dict[str, list[str]] | None = None,
        given_by: dict[str, list[str]] | None = None,
    ):
        self.unreachable = unreachable
        self.missing = missing
        self.avoided = avoided or {}
        self.circular = circular or {}
        self.given_by = given_by or {}
        super().__init__(self.message())

    def message(self, vocabulary: Vocabulary = PYTHON) -> str:
        return self.explanation(vocabulary.give_state)

    @property
    def reason(self) -> str:
        """Why no plan reaches the goal in the library's words, which name inputs and states but no
        interface's options (the same for every interface)."""
        return str(self)

    def explanation(self, given: GivenAdvice) -> str:
        """Why no plan exists, with ``given(state, input names)`` saying how the user gives each
        missing input state (e.g. as a command's options)."""
        reasons = []
        for goal in self.unreachable:
            causes = self.missing.get(goal) or []
            if not causes and goal in self.circular:
                loop = ", ".join(self.circular[goal])
                reasons.append(
                    f"{goal} is unreachable: every tool that leads to it needs one of {loop} first, and only tools that need one of them produce them (a cycle no tool or held state starts)"
                )
            elif not causes:
                reasons.append(f"{goal} is unreachable")
            for cause in causes:
                why = self._why(cause, given)
                reasons.append(why if cause == goal else f"to reach {goal} you need {cause}, and {why}")
        return "no plan reaches the goal: " + "; ".join(reasons)

    def _why(self, state: str, given: GivenAdvice) -> str:
        if state in self.given_by:
            return f"{state} is given by the user: {given(state, self.given_by[state])}"
        if state in self.avoided:
            return f"only avoided tools produce {state}: {', '.join(self.avoided[state])}"
        return f"no tool produces {state}"

    def to_dict(self) -> dict:
        return {
            "error": str(self),
            "unreachable": self.unreachable,
            "missing": self.missing,
            "avoided": self.avoided,
            "circular": self.circular,
            "given_by": self.given_by,
        }


class _ReachedStates:
    """The states held or reachable from them (finite h_max), asked one at a time: explaining an
    unreachable search hit looks up the few states behind it, not every state of the graph."""

    def __init__(self, held: frozenset[str], task: DeleteFreeTask, relaxed: RelaxedCosts):
        self._held, self._task, self._relaxed = held, task, relaxed

    def __contains__(self, token: object) -> bool:
        state = self._task.state_index.get(token) if isinstance(token, str) else None
        return token in self._held or (state is not None and self._relaxed.value[state] < INFINITY)


def _explain_unreachable(graph: StateGraph, goal: Iterable[str], reached: Container[str], avoided_ids: frozenset[int]) -> NoPlanError:
    unreachable = sorted(token for token in goal if token not in reached)
    missing: dict[str, list[str]] = {}
    avoided: dict[str, list[str]] = {}
    circular: dict[str, list[str]] = {}
    for target in unreachable:
        causes: list[str] = []
        seen: set[str] = set()
        stack = [target]
        while stack:
            token = stack.pop()
            if token in seen or token in reached:
                continue
            seen.add(token)
            producers = graph.tools_for(token)
            usable_producers = [tool for tool in producers if tool.id not in avoided_ids]
            if not usable_producers:
                causes.append(token)
                if producers:
                    avoided[token] = [tool.name for tool in producers]
            for tool in usable_producers:
                stack.extend(tool.state_transition.requires)
        missing[target] = sorted(causes)
        if not causes:
            circular[target] = sorted(seen)
    given_by = {
        token: graph.parameters_carrying(token) for causes in missing.values() for token in causes if token in graph.states and graph.states[token].input
    }
    return NoPlanError(unreachable, missing, avoided, circular, given_by)


def _annotate(steps: list[ToolDefinition]) -> tuple[PlanStep, ...]:
    # The most recent earlier producer, as the planned cell wires values: "expand, then simplify"
    # simplifies the expanded text, not the text held before the plan.
    latest_producer: dict[str, int] = {}
    annotated = []
    for index, tool in enumerate(steps):
        satisfied = {token: latest_producer.get(token) for token in tool.state_transition.requires}
        annotated.append(PlanStep(tool, satisfied))
        for token in tool.state_transition.produces:
            latest_producer[token] = index
    return tuple(annotated)


def plan(
    graph: StateGraph,
    goal: Iterable[str],
    held: Iterable[str] = (),
    avoid: Collection[str] = (),
    max_expansions: int | None = None,
    must_run: Collection[str | ToolDefinition] = (),
    prefer: Mapping[int, float] | None = None,
    time_budget_ms: float | None = DEFAULT_TIME_BUDGET_MS,
) -> Plan:
    """Find the cheapest plan that reaches every state of ``goal`` from the ``held`` states and runs
    every tool of ``must_run``.

    Parameters:
        graph: the state graph.
        goal: goal state tokens (all must hold at the end); at least one unless ``must_run`` names a tool.
        held: state tokens held before the plan starts.
        avoid: tool names (``name`` or ``server.name``) the plan must not use.
        max_expansions: A* node budget (``None``: no limit of its own); a node costs 0.2-2 ms
            depending on the catalog, so ``time_budget_ms`` is the budget to use; this one makes a
            test deterministic.
        time_budget_ms: milliseconds the search may spend proving optimality after the bounds
            (``None``: no limit); past it the best plan found answers with ``optimal=False`` and its
            certified ``lower_bound``. Most single-state goals are proven optimal by bounds alone,
            before any A* node (``benchmarks/bench_plan.py``).
        must_run: tools (or their ``name`` / ``server.name``) the plan must run, once each, even when
            what they produce is already held: "this tool must run" goals of a task.
        prefer: ``{tool id: score}``, higher for tools the task is more about (e.g. skill-search
            scores): among plans of equal cost, the one whose tools score higher wins. Each tool's
            cost is raised by at most :data:`PREFERENCE_EPSILON` times the cheapest positive tool
            cost for this, so no plan dearer by more than that beats a cheaper one. Without it,
            among plans of equal cost, the one that stays in the goal's domains wins (fewer tools
            of other domains, fewer states produced outside them), saying so in its ``tie_breaks``.

    Returns:
        A :class:`Plan`; an empty plan when the goal is already held and no tool must run.

    Raises:
        UnknownStateError: a goal or held token the graph does not know.
        ToolNotFoundError / AmbiguousToolNameError: an ``avoid`` or ``must_run`` name that names no single tool.
        NoPlanError: no plan exists; it lists the unreachable goal states (or the requirements of a
            tool that must run) and the missing states behind them.
        ValueError: an empty goal with no tool to run, or a tool both avoided and required.

    Examples:
        A tiny registry: a table is read, cleaned and plotted, or plotted at once from the raw table
        at a higher cost.

        >>> from toolpath.planner import NoPlanError, StateGraph, plan
        >>> from toolpath.registry import StateTransition, ToolDefinition, ToolRegistry
        >>> registry = ToolRegistry(package="table_tools")  # modules resolve as table_tools.<name>
        >>> for name, requires, produces, cost in [
        ...     ("read_table", [], ["table_loaded"], 1),
        ...     ("clean_table", ["table_loaded"], ["table_clean"], 1),
        ...     ("plot_table", ["table_clean"], ["plot_drawn"], 1),
        ...     ("quick_plot", ["table_loaded"], ["plot_drawn"], 3),
        ... ]:
        ...     tool_id = registry.register_tool(ToolDefinition(name=name, state_transition=StateTransition(requires=requires, produces=produces), cost=cost))
        >>> graph = StateGraph(registry)
        >>> found = plan(graph, ["plot_drawn"])
        >>> [step.tool.name for step in found.steps], found.cost, found.optimal
        (['read_table', 'clean_table', 'plot_table'], 3.0, True)
        >>> [step.tool.name for step in plan(graph, ["plot_drawn"], held=["table_clean"]).steps]
        ['plot_table']
        >>> [step.tool.name for step in plan(graph, ["plot_drawn"], avoid=["clean_table"]).steps]
        ['read_table', 'quick_plot']
        >>> try:
        ...     plan(graph, ["plot_drawn"], avoid=["read_table"])
        ... except NoPlanError as error:
        ...     print(error)
        no plan reaches the goal: to reach plot_drawn you need table_loaded, and only avoided tools produce table_loaded: read_table
    """
    goal, held, avoided = _problem(graph, goal, held, avoid, allow_empty_goal=bool(must_run))
    required = [graph.resolve_tool(tool) if isinstance(tool, str) else tool for tool in ([must_run] if isinstance(must_run, str) else must_run)]
    both = [tool.name for tool in required if tool.id in avoided]
    if both:
        raise ValueError(f"{', '.join(both)} must run and is avoided; drop it from one of the two")
    return _plan(graph, goal, held, avoided, max_expansions, required, prefer, time_budget_ms)


def _tokens(tokens: Iterable[str]) -> frozenset[str]:
    # One token passed as a plain string means that token, not its characters.
    return frozenset([tokens] if isinstance(tokens, str) else tokens)


def _problem(
    graph: StateGraph, goal: Iterable[str], held: Iterable[str], avoid: Collection[str], allow_empty_goal: bool = False
) -> tuple[frozenset[str], frozenset[str], frozenset[int]]:
    """Check a planning problem and return ``(goal, held, avoided tool ids)``."""
    goal, held, avoid = _tokens(goal), _tokens(held), _tokens(avoid)
    if not goal and not allow_empty_goal:
        raise ValueError("the goal is empty; name at least one state to reach")
    graph.check_states(sorted(goal))
    graph.check_states(sorted(held))
    return goal, held, frozenset(graph.resolve_tool(name).id for name in avoid)


def _plan(
    graph: StateGraph,
    goal: frozenset[str],
    held: frozenset[str],
    avoided: frozenset[int],
    max_expansions: int | None,
    must_run: Sequence[ToolDefinition] = (),
    prefer: Mapping[int, float] | None = None,
    time_budget_ms: float | None = DEFAULT_TIME_BUDGET_MS,
) -> Plan:
    """The cheapest plan (see :func:`plan`); without ``prefer``, ties go to the goal's domain
    (:func:`_in_goal_domain`). Both searches share the one ``time_budget_ms``: the tie-break search
    gets what the first left (past the deadline it is not run)."""
    task = graph.delete_free_task
    deadline = None if time_budget_ms is None else time.perf_counter() + time_budget_ms / 1000
    found = _cheapest(graph, goal, held, avoided, max_expansions, must_run, _preferred_costs(task, prefer) if prefer else None, deadline)
    if prefer or (deadline is not None and time.perf_counter() >= deadline):
        return found
    return _in_goal_domain(graph, found, avoided, max_expansions, must_run, deadline)


def _cheapest(
    graph: StateGraph,
    goal: frozenset[str],
    held: frozenset[str],
    avoided: frozenset[int],
    max_expansions: int | None,
    must_run: Sequence[ToolDefinition],
    raised_costs: list[float] | None,
    deadline: float | None,
) -> Plan:
    """The cheapest plan under ``raised_costs`` (the tools' costs, each raised by at most
    ``PREFERENCE_EPSILON`` of the cheapest positive cost, to break ties; ``None``: their own),
    proven optimal unless ``time.perf_counter()`` passes ``deadline`` first."""
    task = graph.delete_free_task
    marks: frozenset[int] = frozenset()
    if must_run or raised_costs:
        task, marks = task.variant((task.tool_index[tool.id] for tool in must_run), raised_costs)
    held_states = task.states(held)
    avoided_tools = frozenset(task.tool_index[tool_id] for tool_id in avoided)
    goal_states = task.states(goal) | marks
    hmax = task.relaxed_costs(held_states, avoided_tools, toward=goal_states)
    unreached = [token for token in goal - held if token not in task.state_index or hmax.value[task.state_index[token]] == INFINITY]
    stuck = [tool for tool in must_run if any(hmax.value[mark] == INFINITY for mark in task.produces[task.tool_index[tool.id]] if mark in marks)]
    if unreached or stuck:
        reached = _ReachedStates(held, task, hmax)
        raise _explain_unreachable(graph, goal | {token for tool in stuck for token in tool.state_transition.requires}, reached, avoided)
    names = frozenset(qualified_name(tool) for tool in must_run)
    if goal <= held and not must_run:
        return Plan(goal, held, (), 0.0, True)
    result = cheapest_plan(task, held_states, goal_states, avoided_tools, max_expansions, deadline)
    steps = [task.tools[index] for index in result.steps]
    cost = sum(tool.cost for tool in steps)
    lower_bound = result.lower_bound
    if raised_costs and not result.optimal:
        # The search ran on raised costs, each by at most PREFERENCE_EPSILON of the cheapest
        # positive cost: no plan's raised cost exceeds its own by more than all of them.
        unit = min((tool_cost for tool_cost in graph.delete_free_task.cost if tool_cost > 0), default=1.0)
        lower_bound = max(0.0, lower_bound - PREFERENCE_EPSILON * unit * len(task.tools))
    lower_bound = cost if result.optimal else min(cost, lower_bound)
    return Plan(goal, held, _annotate(steps), cost, result.optimal, names, lower_bound)


def _domain(token: str) -> str | None:
    """The domain a state token names (``tabular`` of ``tabular.table_loaded``); ``None`` for a token without one."""
    return token.split(".", 1)[0] if "." in token else None


def _foreign_states(tool: ToolDefinition, domains: Collection[str | None]) -> list[str]:
    """The states ``tool`` produces outside ``domains``, sorted."""
    return sorted(token for token in tool.state_transition.produces if _domain(token) not in domains)


def _foreignness(tool: ToolDefinition, domains: Collection[str | None]) -> float:
    """0 for a tool of ``domains`` (or of no server) that produces only their states; up to 1: half
    for a tool of another domain, half for the share of its states outside them (what it does besides)."""
    return _foreignness_of(tool.server_name, tool.state_transition.produces, domains)


def _foreignness_of(server: str | None, produces: Collection[str], domains: Collection[str | None]) -> float:
    """:func:`_foreignness` of a tool of ``server`` that produces ``produces``."""
    outside = 0.5 if server is not None and server not in domains else 0.0
    return outside + (0.5 * sum(_domain(token) not in domains for token in produces) / len(produces) if produces else 0.0)


def _in_goal_domain(
    graph: StateGraph, found: Plan, avoided: frozenset[int], max_expansions: int | None, must_run: Sequence[ToolDefinition], deadline: float | None
) -> Plan:
    """``found``, or a plan of the same cost whose tools stay more in the goal's domains.

    The goal's domains are those of its states (and of the tools that must run). Of two plans of
    equal cost, the one with fewer tools of other domains, and fewer states produced outside the
    goal's domains, wins: a table plotted from a plain CSV file is loaded by ``tabular.load_table``,
    not by ``chemistry.tabulate_descriptors``, which also loads a table but computes descriptors from
    a ``smiles`` column a plain table does not have (issue 52). Tools' costs are raised by at most
    ``PREFERENCE_EPSILON`` of the cheapest positive cost in proportion to :func:`_foreignness`, so
    no dearer plan ever wins. The search runs again only when ``found`` has a foreign step; the
    plan that wins says so in its ``tie_breaks``.
    """
    domains = {_domain(token) for token in found.goal} | {tool.server_name for tool in must_run}
    if not any(_foreignness(step.tool, domains) for step in found.steps):
        return found
    task = graph.delete_free_task
    unit = PREFERENCE_EPSILON * min((cost for cost in task.cost if cost > 0), default=1.0)
    # Only the tools that lead to the goal, or to what a tool that must run requires, can be in a plan
    # or move a bound (DeleteFreeTask.tools_leading_to): the others keep their cost, and a plan at
    # 100,000 tools does not weigh every tool's domain. Weighed from the transition table: no
    # definition is read for it.
    toward = task.states(found.goal) | task.states(token for tool in must_run for token in tool.state_transition.requires)
    table = task.transitions
    raised = list(task.cost)
    for index in [*task.tools_leading_to(toward), *(task.tool_index[tool.id] for tool in must_run)]:
        produced = [table.tokens[number] for number in table.produces[index]]
        raised[index] = task.cost[index] + unit * _foreignness_of(table.servers[index], produced, domains)
    kept = _cheapest(graph, found.goal, found.held, avoided, max_expansions, must_run, raised, deadline)

    def weight(candidate: Plan) -> float:
        return sum(_foreignness(step.tool, domains) for step in candidate.steps)

    if kept.cost > found.cost * (1 + 1e-9) + 1e-9 or weight(kept) >= weight(found):
        return found
    return replace(kept, tie_breaks=_domain_tie_breaks(found, kept, domains))


def _domain_tie_breaks(found: Plan, kept: Plan, domains: Collection[str | None]) -> tuple[TieBreak, ...]:
    """A tie break for each step of ``kept`` that took the place of a foreign tool of ``found``
    (one producing a state it produces)."""
    kept_ids = {step.tool.id for step in kept.steps}
    ties = []
    for position, step in enumerate(kept.steps):
        over = [
            other.tool
            for other in found.steps
            if other.tool.id not in kept_ids and other.produces & step.produces and _foreignness(other.tool, domains) > _foreignness(step.tool, domains)
        ]
        if over:
            named = ", ".join(sorted(str(domain) for domain in domains))
            reasons = []
            for tool in over:
                extra = _foreign_states(tool, domains)
                reasons.append(f"{qualified_name(tool)} is a {tool.server_name} tool" + (f" that also makes {', '.join(extra)}" if extra else ""))
            because = f"the same cost, and {qualified_name(step.tool)} stays in the goal's domain ({named}): {'; '.join(reasons)}"
            ties.append(TieBreak(position, qualified_name(step.tool), tuple(qualified_name(tool) for tool in over), because))
    return tuple(ties)


#: How much of the cheapest positive tool cost a preference may add to a tool's cost (see :func:`plan`).
PREFERENCE_EPSILON = 1e-4


def _preferred_costs(task: DeleteFreeTask, prefer: Mapping[int, float]) -> list[float]:
    """Tool costs raised by up to ``PREFERENCE_EPSILON`` of the cheapest positive cost, least for
    the tools ``prefer`` scores highest (by rank, so the scores' scale does not matter)."""
    unit = PREFERENCE_EPSILON * min((cost for cost in task.cost if cost > 0), default=1.0)
    ranked = sorted(prefer, key=prefer.__getitem__, reverse=True)
    position = {tool_id: rank for rank, tool_id in enumerate(ranked)}
    count = max(len(ranked), 1)
    return [cost + unit * (position[tool_id] / count if tool_id in position else 1.0) for tool_id, cost in zip(task.transitions.ids, task.cost)]


def qualified_name(tool: ToolDefinition) -> str:
    """``server.name`` (or ``name`` for a tool of no server), as ``must_run`` lists tools."""
    return f"{tool.server_name}.{tool.name}" if tool.server_name else tool.name


def plan_to_run(
    graph: StateGraph,
    tool: ToolDefinition | str,
    held: Iterable[str] = (),
    avoid: Collection[str] = (),
    max_expansions: int | None = None,
    time_budget_ms: float | None = DEFAULT_TIME_BUDGET_MS,
) -> Plan:
    """The cheapest plan that ends by running ``tool``: a plan to its requirements, then the tool.

    Parameters:
        tool: the tool, or its ``name`` / ``server.name``.
        held, avoid, max_expansions, time_budget_ms: as for :func:`plan`.

    Returns:
        A :class:`Plan` whose goal is what the tool produces; ``optimal`` when the plan to the
        requirements is (any plan running the tool must first reach them).

    Raises:
        NoPlanError: the tool's requirements cannot be reached.
        ToolNotFoundError / AmbiguousToolNameError, UnknownStateError: as for :func:`plan`.
    """
    tool = graph.resolve_tool(tool) if isinstance(tool, str) else tool
    held = _tokens(held)
    before = (
        plan(graph, tool.state_transition.requires, held, avoid, max_expansions, time_budget_ms=time_budget_ms)
        if tool.state_transition.requires - held
        else Plan(frozenset(), held, (), 0.0, True)
    )
    steps = [step.tool for step in before.steps] + [tool]
    return Plan(
        tool.state_transition.produces, held, _annotate(steps), before.cost + tool.cost, before.optimal, lower_bound=(before.lower_bound or 0.0) + tool.cost
    )


def alternative_plans(
    graph: StateGraph,
    goal: Iterable[str],
    held: Iterable[str] = (),
    avoid: Collection[str] = (),
    k: int = 3,
    max_expansions: int | None = None,
    time_budget_ms: float | None = DEFAULT_TIME_BUDGET_MS,
) -> list[Plan]:
    """Up to ``k`` plans with pairwise distinct tool sets, cheapest first (the first is :func:`plan`'s
    unless that one was not proven optimal and a cheaper one turned up).

    Each next plan is the cheapest plan that avoids, on top of what an earlier plan avoided, one
    tool of that earlier plan — the branching of Yen's k-shortest-paths algorithm (Management
    Science 17(11), 1971) over tool sets. Every candidate is the best plan under its own constraints,
    so costs never decrease along the list; when each plan is proven optimal, the list is the ``k``
    cheapest tool sets reachable this way.

    Parameters:
        graph, goal, held, avoid, max_expansions: as for :func:`plan`.
        time_budget_ms: as for :func:`plan`, for each plan searched (a list of ``k`` plans may
            search many more than ``k``).
        k: how many plans at most (at least 1).

    Returns:
        1 to ``k`` plans; fewer when the catalog offers fewer distinct ways.

    Raises:
        ValueError: ``k`` below 1, or an empty goal.
        NoPlanError, UnknownStateError, ToolNotFoundError: as for :func:`plan`.
    """
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a whole number of at least 1, got {k!r}")
    goal, held, base = _problem(graph, goal, held, avoid)
    first = _plan(graph, goal, held, base, max_expansions, time_budget_ms=time_budget_ms)
    found = [first]
    seen_tool_sets = {frozenset(step.tool.id for step in first.steps)}
    tried = {base}
    tie = itertools.count()
    candidates: list[tuple[float, int, Plan, frozenset[int]]] = []
    expand = [(first, base)]
    while len(found) < k:
        for parent, parent_avoided in expand:
            for step in parent.steps:
                avoided = parent_avoided | {step.tool.id}
                if avoided in tried:
                    continue
                tried.add(avoided)
                try:
                    candidate = _plan(graph, goal, held, avoided, max_expansions, time_budget_ms=time_budget_ms)
                except NoPlanError:
                    continue
                heapq.heappush(candidates, (candidate.cost, next(tie), candidate, avoided))
        expand = []
        while candidates and not expand:
            _, _, candidate, avoided = heapq.heappop(candidates)
            tools = frozenset(step.tool.id for step in candidate.steps)
            expand = [(candidate, avoided)]
            if tools not in seen_tool_sets:
                seen_tool_sets.add(tools)
                found.append(candidate)
        if not expand:
            break
    # Unproven plans (past the A* budget) can be dearer than a later candidate: keep cheapest first.
    return sorted(found, key=lambda found_plan: found_plan.cost)
