"""Planning: the cheapest sequence of tool calls that reaches a goal from the states held now.

Semantics: states, once held, stay held (no tool removes one). A tool is applicable when every state
in its ``requires`` is held (a conjunction); a tool with empty ``requires`` is always applicable. A
plan is an ordered list of steps, each applicable when it runs, after which every goal state is held;
its cost is the sum of its tools' ``cost``; no step is redundant.

Because no tool deletes a state, the problem is a delete-free (monotone) planning problem: whether a
plan exists is decided by a forward fixpoint, and the cheapest plan is found by A* over the sets of
goal-relevant states held, with the admissible heuristic "the dearest unmet goal state costs at least
its cheapest producer". When A* exceeds ``max_expansions`` nodes, a greedy relaxed plan (the backward
extraction of Hoffmann & Nebel's FF, J. AI Research 14, 2001) is returned instead, marked
``optimal=False``.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from planner.graph import StateGraph
from registry import ToolDefinition


@dataclass(frozen=True)
class PlanStep:
    """One tool call of a plan.

    Attributes:
        tool: the tool definition (from the registry; ``tool.id`` is set).
        satisfied_by: for each required state, the index of the earlier step that produced it, or
            ``None`` when it was held before the plan started.
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
class Plan:
    """A plan: ``steps`` in execution order, their total ``cost``, and whether it is proven ``optimal``."""

    goal: frozenset[str]
    held: frozenset[str]
    steps: tuple[PlanStep, ...]
    cost: float
    optimal: bool

    @property
    def reached(self) -> frozenset[str]:
        """Every state held once the plan has run."""
        return self.held.union(*(step.produces for step in self.steps))

    def to_dict(self) -> dict:
        return {
            "goal": sorted(self.goal),
            "have": sorted(self.held),
            "steps": [step.to_dict() for step in self.steps],
            "cost": self.cost,
            "optimal": self.optimal,
        }


class NoPlanError(Exception):
    """No sequence of tools reaches the goal.

    Attributes:
        unreachable: goal states that cannot be reached from the held states.
        missing: for each unreachable goal state, the states behind it that no usable tool produces.
        avoided: for each missing state that some avoided tool would produce, those tools' names.
    """

    def __init__(self, unreachable: list[str], missing: dict[str, list[str]], avoided: dict[str, list[str]] | None = None):
        self.unreachable = unreachable
        self.missing = missing
        self.avoided = avoided or {}
        reasons = []
        for goal in unreachable:
            causes = missing.get(goal) or []
            if not causes:
                reasons.append(f"{goal} is unreachable")
            for cause in causes:
                reasons.append(self._why(cause) if cause == goal else f"to reach {goal} you need {cause}, and {self._why(cause)}")
        super().__init__("no plan reaches the goal: " + "; ".join(reasons))

    def _why(self, state: str) -> str:
        if state in self.avoided:
            return f"only avoided tools produce {state}: {', '.join(self.avoided[state])}"
        return f"no tool produces {state}"

    def to_dict(self) -> dict:
        return {"error": str(self), "unreachable": self.unreachable, "missing": self.missing, "avoided": self.avoided}


def _explain_unreachable(graph: StateGraph, goal: Iterable[str], reached: set[str], usable: set[int]) -> NoPlanError:
    unreachable = sorted(token for token in goal if token not in reached)
    missing: dict[str, list[str]] = {}
    avoided: dict[str, list[str]] = {}
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
            usable_producers = [tool for tool in producers if tool.id in usable]
            if not usable_producers:
                causes.append(token)
                if producers:
                    avoided[token] = [tool.name for tool in producers]
            for tool in usable_producers:
                stack.extend(tool.state_transition.requires)
        missing[target] = sorted(causes)
    return NoPlanError(unreachable, missing, avoided)


def _relevant_tools(graph: StateGraph, goal: frozenset[str], held: frozenset[str], usable: set[int]) -> tuple[list[ToolDefinition], set[str]]:
    """Tools that could contribute to the goal (backward from it), and the states they involve."""
    relevant_states: set[str] = set()
    tools: dict[int, ToolDefinition] = {}
    stack = list(goal - held)
    while stack:
        token = stack.pop()
        if token in relevant_states or token in held:
            continue
        relevant_states.add(token)
        for tool in graph.tools_for(token):
            if tool.id in usable and tool.id not in tools:
                tools[tool.id] = tool
                stack.extend(tool.state_transition.requires)
    return sorted(tools.values(), key=lambda tool: tool.id), relevant_states


def _annotate(steps: list[ToolDefinition], held: frozenset[str]) -> tuple[PlanStep, ...]:
    first_producer: dict[str, int] = {}
    annotated = []
    for index, tool in enumerate(steps):
        satisfied = {token: (None if token in held else first_producer[token]) for token in tool.state_transition.requires}
        annotated.append(PlanStep(tool, satisfied))
        for token in tool.state_transition.produces:
            first_producer.setdefault(token, index)
    return tuple(annotated)


def _is_valid(steps: list[ToolDefinition], held: frozenset[str], goal: frozenset[str]) -> bool:
    current = set(held)
    for tool in steps:
        if not tool.state_transition.requires <= current:
            return False
        current |= tool.state_transition.produces
    return goal <= current


def _without_redundant_steps(steps: list[ToolDefinition], held: frozenset[str], goal: frozenset[str]) -> list[ToolDefinition]:
    """Drop steps the plan still works without, latest first (never raises the cost)."""
    kept = list(steps)
    for index in range(len(kept) - 1, -1, -1):
        candidate = kept[:index] + kept[index + 1 :]
        if _is_valid(candidate, held, goal):
            kept = candidate
    return kept


def _astar(tools: list[ToolDefinition], relevant: set[str], held: frozenset[str], goal: frozenset[str], max_expansions: int) -> list[ToolDefinition] | None:
    """Cheapest plan by A* over sets of relevant states; ``None`` if ``max_expansions`` is exceeded."""
    cheapest_producer = {token: min((tool.cost for tool in tools if token in tool.state_transition.produces), default=0.0) for token in relevant}

    open_goal = goal - held  # held goal states need no producer (and have no entry above)

    def heuristic(reached: frozenset[str]) -> float:
        return max((cheapest_producer[token] for token in open_goal - reached), default=0.0)

    start: frozenset[str] = frozenset()  # relevant states exclude held ones by construction
    tie = itertools.count()
    frontier: list[tuple[float, float, int, frozenset[str]]] = [(heuristic(start), 0.0, next(tie), start)]
    best_cost = {start: 0.0}
    parent: dict[frozenset[str], tuple[frozenset[str], ToolDefinition] | None] = {start: None}
    expansions = 0
    while frontier:
        _, cost, _, reached = heapq.heappop(frontier)
        if cost > best_cost[reached]:
            continue
        if goal <= reached | held:
            steps = []
            node = reached
            while parent[node] is not None:
                node, tool = parent[node]
                steps.append(tool)
            return steps[::-1]
        expansions += 1
        if expansions > max_expansions:
            return None
        available = reached | held
        for tool in tools:
            transition = tool.state_transition
            if not transition.requires <= available or not (transition.produces & relevant) - reached:
                continue
            successor = reached | (transition.produces & relevant)
            successor_cost = cost + tool.cost
            if successor_cost < best_cost.get(successor, float("inf")):
                best_cost[successor] = successor_cost
                parent[successor] = (reached, tool)
                heapq.heappush(frontier, (successor_cost + heuristic(successor), successor_cost, next(tie), successor))
    return None


def _greedy_relaxed_plan(tools: list[ToolDefinition], held: frozenset[str], goal: frozenset[str]) -> list[ToolDefinition]:
    """FF-style plan: cost every state forward (additive costs), pick cheapest producers backward."""
    state_cost = {token: 0.0 for token in held}
    achiever: dict[str, ToolDefinition] = {}
    changed = True
    while changed:
        changed = False
        for tool in tools:
            requires = tool.state_transition.requires
            if not all(token in state_cost for token in requires):
                continue
            through = tool.cost + sum(state_cost[token] for token in requires)
            for token in tool.state_transition.produces:
                if through < state_cost.get(token, float("inf")):
                    state_cost[token] = through
                    achiever[token] = tool
                    changed = True
    chosen: dict[int, ToolDefinition] = {}
    stack = [token for token in goal if token not in held]
    while stack:
        tool = achiever[stack.pop()]
        if tool.id not in chosen:
            chosen[tool.id] = tool
            stack.extend(token for token in tool.state_transition.requires if token not in held)
    return _in_executable_order(list(chosen.values()), held)


def _in_executable_order(tools: list[ToolDefinition], held: frozenset[str]) -> list[ToolDefinition]:
    """Order tools so each runs after its requirements are produced (layer by layer, ids within a layer)."""
    ordered: list[ToolDefinition] = []
    current = set(held)
    remaining = sorted(tools, key=lambda tool: tool.id)
    while remaining:
        layer = [tool for tool in remaining if tool.state_transition.requires <= current]
        if not layer:
            raise RuntimeError("relaxed plan has a step whose requirements nothing in the plan produces; please report this bug")
        for tool in layer:
            current |= tool.state_transition.produces
        ordered.extend(layer)
        remaining = [tool for tool in remaining if tool not in layer]
    return ordered


def plan(
    graph: StateGraph,
    goal: Iterable[str],
    held: Iterable[str] = (),
    avoid: Collection[str] = (),
    max_expansions: int = 50_000,
) -> Plan:
    """Find the cheapest plan that reaches every state of ``goal`` from the ``held`` states.

    Parameters:
        graph: the state graph.
        goal: goal state tokens (all must hold at the end); at least one.
        held: state tokens held before the plan starts.
        avoid: tool names (``name`` or ``server.name``) the plan must not use.
        max_expansions: A* node budget; past it the greedy fallback answers with ``optimal=False``.

    Returns:
        A :class:`Plan`; an empty plan when the goal is already held.

    Raises:
        UnknownStateError: a goal or held token the graph does not know.
        ToolNotFoundError / AmbiguousToolNameError: an ``avoid`` name that names no single tool.
        NoPlanError: no plan exists; it lists the unreachable goal states and the missing states behind them.
        ValueError: an empty goal.

    Examples:
        >>> plan(graph, ["chemistry.descriptors_computed"]).steps  # doctest: +SKIP
        (parse_molecule, compute_descriptors)
    """
    return _plan(graph, *_problem(graph, goal, held, avoid), max_expansions)


def _problem(graph: StateGraph, goal: Iterable[str], held: Iterable[str], avoid: Collection[str]) -> tuple[frozenset[str], frozenset[str], frozenset[int]]:
    """Check a planning problem and return ``(goal, held, avoided tool ids)``."""
    goal, held = frozenset(goal), frozenset(held)
    if not goal:
        raise ValueError("the goal is empty; name at least one state to reach")
    graph.check_states(sorted(goal))
    graph.check_states(sorted(held))
    return goal, held, frozenset(graph.resolve_tool(name).id for name in avoid)


def _plan(graph: StateGraph, goal: frozenset[str], held: frozenset[str], avoided: frozenset[int], max_expansions: int) -> Plan:
    usable = {tool.id for tool in graph.registry if tool.id not in avoided}

    reached = graph.reachable(held, avoid=avoided)
    if not goal <= reached:
        raise _explain_unreachable(graph, goal, reached, usable)
    if goal <= held:
        return Plan(goal, held, (), 0.0, True)

    tools, relevant = _relevant_tools(graph, goal, held, usable)
    steps = _astar(tools, relevant, held, goal, max_expansions)
    optimal = steps is not None
    if steps is None:
        steps = _greedy_relaxed_plan(tools, held, goal)
    steps = _without_redundant_steps(steps, held, goal)
    return Plan(goal, held, _annotate(steps, held), sum(tool.cost for tool in steps), optimal)


def alternative_plans(
    graph: StateGraph,
    goal: Iterable[str],
    held: Iterable[str] = (),
    avoid: Collection[str] = (),
    k: int = 3,
    max_expansions: int = 50_000,
) -> list[Plan]:
    """Up to ``k`` plans with pairwise distinct tool sets, cheapest first; the first is :func:`plan`'s.

    Each next plan is the cheapest plan that avoids, on top of what an earlier plan avoided, one
    tool of that earlier plan — the branching of Yen's k-shortest-paths algorithm (Management
    Science 17(11), 1971) over tool sets. Every candidate is the best plan under its own constraints,
    so costs never decrease along the list; when each plan is proven optimal, the list is the ``k``
    cheapest tool sets reachable this way.

    Parameters:
        graph, goal, held, avoid, max_expansions: as for :func:`plan`.
        k: how many plans at most (at least 1).

    Returns:
        1 to ``k`` plans; fewer when the catalog offers fewer distinct ways.

    Raises:
        ValueError: ``k`` below 1, or an empty goal.
        NoPlanError, UnknownStateError, ToolNotFoundError: as for :func:`plan`.
    """
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    goal, held, base = _problem(graph, goal, held, avoid)
    first = _plan(graph, goal, held, base, max_expansions)
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
                    candidate = _plan(graph, goal, held, avoided, max_expansions)
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
    return found
