"""Cost-optimal search for delete-free planning tasks (:mod:`~toolpath.planner.planning.delete_free`).

No tool removes a state, so a planning problem over a tool catalog is a *delete-free* task: a plan
is a set of tools that becomes applicable in some order, and finding the cheapest one is NP-hard
(Bylander, Artificial Intelligence 69, 1994), yet easy on the instances catalogs produce. The search
here works in four stages and stops at the first that proves a plan optimal:

1. **Bounds from the held states** (cached per held states and avoided tools). h_max of the goal is
   a lower bound, and the plan extracted backward from the h_max achievers an upper bound. Goals of
   several states share steps, and that is where these fall short, so for them, in turn, until one
   proves a plan (this module):

   - the **Steiner-tree bound** (:mod:`~toolpath.planner.planning.steiner`): the cheapest plan
     when each tool needs only one of its requirements that are not held, found exactly over
     subsets of the goal states (the six deepest at most). It is the optimum, and its tree an
     optimal plan, when it takes every goal state and no tool it could use waits for two states;
     otherwise the tools of its tree that can run start a plan completed goal state by goal state;
   - plans built goal state by goal state, deepest first, each extension extracted from h_max
     from the states the plan so far reaches (lowered from the held states' h_max, touching only
     states that lead to the next goal state), improved by re-attaching each goal state to the plan
     for the others (a delete-free take on Takahashi & Matsuyama's Steiner-tree heuristic, Math.
     Japonica 24, 1980, and its key-path exchange);
   - the **pair bound**: h_max of pairs of goal states in the task compiled with the conjunctions
     ``{x, g}`` (Haslum's Π^C, ICAPS 2012), a lower bound that counts what reaching two goal
     states costs beyond the dearer one; its achievers give plans for the pair that pass one goal
     state on the way to the other, completed goal state by goal state;
   - the other orders of the goal states;
   - the bound from three goal states together, in the same compilation (conjunctions of a state
     and two goal states): three goal states can each pair up at no extra cost, yet not all three.

   Then h_add's achievers give one more upper bound. On ``benchmarks/bench_plan.py``'s 10,000-tool
   catalog, goals of 2–3 states went from 3 % proven optimal at a p50 of 3.3 s to 90 % at 62 ms
   (250 ms budget) without the Steiner-tree bound, and to 100 % with it (5 states: from 5 % to 100 %).
2. **A corridor** of the tools that can be in a plan no dearer than the upper bound,
3. **LM-cut** on the corridor, a stronger admissible lower bound, and
4. **A\\*** over the sets of corridor states reached, within a budget (expansions or a deadline),
   past which the incumbent comes back as not proven optimal, with a certified lower bound
   (:mod:`~toolpath.planner.planning.corridor_search`).
"""

from __future__ import annotations

import heapq
import itertools
import operator
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from toolpath.planner.planning.corridor_search import Corridor
from toolpath.planner.planning.delete_free import INFINITY, NONE, DeleteFreeTask, RelaxedCosts, at_most

if TYPE_CHECKING:
    from toolpath.planner.planning.steiner import SteinerTree


@dataclass(frozen=True)
class SearchResult:
    """The tools of a plan in execution order (tool indices), whether its cost is proven minimal, and
    a lower bound on the cost of every plan (the plan's own cost when it is proven optimal)."""

    steps: list[int]
    optimal: bool
    lower_bound: float


def cheapest_plan(
    task: DeleteFreeTask, held: frozenset[int], goal: frozenset[int], avoided: frozenset[int], max_expansions: int | None = None, deadline: float | None = None
) -> SearchResult:
    """The cheapest plan reaching ``goal`` from ``held`` without ``avoided`` tools.

    The goal must be reachable (every goal state has a finite h_max) and not already held.
    ``max_expansions`` (nodes expanded) and ``deadline`` (a ``time.perf_counter()`` value) bound
    the A* stage, ``None`` meaning no limit; past either, the best plan found so far comes back
    with ``optimal=False`` and the best lower bound proven.
    """
    hmax = task.relaxed_costs(held, avoided, toward=goal)
    lower = max(hmax.value[state] for state in goal)
    incumbent = task.without_redundant_steps(task.extract(hmax, held, goal), held, goal)
    if at_most(task.plan_cost(incumbent), lower):
        return SearchResult(incumbent, True, task.plan_cost(incumbent))
    open_goal = goal - held
    if len(open_goal) > 1:
        # Goals of several states share steps: bound them and plan them as a Steiner tree (exact
        # on most catalogs), then build plans goal state by goal state, first deepest first, then
        # from plans for pairs of goal states, which also bound the cost from below, then in the
        # other orders; then bound the cost by triples of goal states. Past the deadline, each
        # stage stops (the first build still completes its plan).
        def out_of_time() -> bool:
            return deadline is not None and time.perf_counter() > deadline

        goal_by_goal = _GoalByGoal(task, hmax, held, goal)
        deepest_first = sorted(open_goal, key=lambda state: -hmax.value[state])
        tree = _steiner_tree(task, hmax, held, goal, deadline)
        if tree is not None:
            lower = max(lower, tree.cost)
            incumbent = min([incumbent, _plan_from_tree(task, tree.tools, goal_by_goal, deepest_first, deadline)], key=task.plan_cost)
            if at_most(task.plan_cost(incumbent), lower):
                return SearchResult(incumbent, True, task.plan_cost(incumbent))
        incumbent = min([incumbent, goal_by_goal.build([], deepest_first, deadline)], key=task.plan_cost)
        if at_most(task.plan_cost(incumbent), lower):
            return SearchResult(incumbent, True, task.plan_cost(incumbent))
        bound, pair_plans, conjunctions = _goal_pairs(task, hmax, held, open_goal, task.plan_cost(incumbent), deadline)
        lower = max(lower, bound)
        for start in pair_plans:
            if out_of_time():
                break
            incumbent = min([incumbent, goal_by_goal.build(start, deepest_first, deadline)], key=task.plan_cost)
        if at_most(task.plan_cost(incumbent), lower):
            return SearchResult(incumbent, True, task.plan_cost(incumbent))
        for order in goal_by_goal.other_orders(deepest_first):
            if out_of_time():
                break
            incumbent = min([incumbent, goal_by_goal.build([], order, deadline)], key=task.plan_cost)
            if at_most(task.plan_cost(incumbent), lower):
                return SearchResult(incumbent, True, task.plan_cost(incumbent))
        lower = max(lower, _goal_triples(task, hmax, held, open_goal, task.plan_cost(incumbent), conjunctions, deadline))
        if at_most(task.plan_cost(incumbent), lower):
            return SearchResult(incumbent, True, task.plan_cost(incumbent))
        if out_of_time():
            return SearchResult(incumbent, False, lower)
    # h_add's achievers favour cheap whole sub-plans, often cheaper than h_max's; only when needed.
    hadd = task.relaxed_costs(held, avoided, additive=True, toward=goal)
    incumbent = min([incumbent, task.without_redundant_steps(task.extract(hadd, held, goal), held, goal)], key=task.plan_cost)
    upper = task.plan_cost(incumbent)
    if at_most(upper, lower):
        return SearchResult(incumbent, True, upper)
    corridor = Corridor.within(task, hmax, held, goal - held, upper)
    root, cuts, complete = corridor.lm_cut(held, goal - held, deadline)
    lower = max(lower, root)
    if at_most(upper, lower):
        return SearchResult(incumbent, True, upper)
    if not complete:  # out of time before the bound was complete: what it has is still a bound
        return SearchResult(incumbent, False, lower)
    better, bound = corridor.astar(held, goal, upper, cuts, max_expansions, deadline)
    if better is None:
        return SearchResult(incumbent, False, max(lower, bound))
    if not better:
        return SearchResult(incumbent, True, upper)
    steps = task.without_redundant_steps(better, held, goal)
    return SearchResult(steps, True, task.plan_cost(steps))


def _steiner_tree(task: DeleteFreeTask, hmax: RelaxedCosts, held: frozenset[int], goal: frozenset[int], deadline: float | None) -> SteinerTree | None:
    """The cheapest plan of the task relaxed to a directed Steiner tree problem (see
    :mod:`~toolpath.planner.planning.steiner`), over the tools ``hmax`` reached that lead to
    ``goal``, to the ``MOST_GOAL_STATES`` deepest goal states not held (reaching some costs no
    more than reaching all, so its cost still bounds the whole goal's); ``None`` past ``deadline``."""
    # numpy loads with the first goal of several states, not with every command that plans.
    from toolpath.planner.planning.steiner import MOST_GOAL_STATES

    relaxation = task.steiner_relaxation()
    deepest = sorted(goal - held, key=lambda state: (-hmax.value[state], state))[:MOST_GOAL_STATES]
    # States past the relaxation's are marks: their node is their tool's (a KeyError otherwise, never a wrong node).
    nodes = [relaxation.tool_node(task.marked_tool[state]) if state >= relaxation.state_count else state for state in sorted(deepest)]
    # The tools leading to the goal (found with its h_max, so cached): a tree takes no other. When
    # they are most of the task, sweeping its edges as they are is quicker than picking theirs.
    leading = task.tools_leading_to(goal)
    if 2 * len(leading) > len(task.tools):
        return relaxation.solve(held, nodes, [fired != NONE for fired in hmax.fired], task.cost, hmax.value, deadline)
    among = [tool for tool in leading if hmax.fired[tool] != NONE]
    return relaxation.solve(held, nodes, dict.fromkeys(among, True), task.cost, hmax.value, deadline, among)


def _plan_from_tree(task: DeleteFreeTask, tools: frozenset[int], goal_by_goal: _GoalByGoal, order: Sequence[int], deadline: float | None) -> list[int]:
    """A plan from a relaxed plan's ``tools``: they are one when each has at most one requirement
    not held; otherwise those that can run, extended goal state by goal state in ``order``."""
    held, goal = goal_by_goal.held, goal_by_goal.goal
    steps = task.executable_order(sorted(tools, key=goal_by_goal.root.fired.__getitem__), held, every_tool=False)
    if len(steps) == len(tools) and task.is_valid(steps, held, goal):
        return task.without_redundant_steps(steps, held, goal)
    return goal_by_goal.build(steps, order, deadline)


def _goal_pairs(
    task: DeleteFreeTask, hmax: RelaxedCosts, held: frozenset[int], open_goal: frozenset[int], upper: float, deadline: float | None
) -> tuple[float, list[list[int]], dict[frozenset[int], _Conjunction]]:
    """A lower bound on the cost of reaching ``open_goal``, and plans for pairs of its states.

    The bound is the largest h_max of a pair of goal states in the task compiled with the
    conjunctions ``{x, g}`` (Haslum's Π^C, ICAPS 2012), one goal state ``g`` at a time (the
    shallower first), stopped once it reaches ``upper`` or past ``deadline``. h_max of one state misses what
    reaching two costs beyond reaching the dearer one; a pair's h_max counts it. Its
    achievers give a plan for the pair that shares steps where they can be shared: among the
    many equally cheap ways to the dearer state, one that passes the other. The searches come
    back too, for :func:`_goal_triples`.
    """
    bound = max(hmax.value[state] for state in open_goal)
    plans: list[list[int]] = []
    made: dict[frozenset[int], _Conjunction] = {}
    ordered = sorted(open_goal, key=hmax.value.__getitem__)
    for position, partner in enumerate(ordered[:-1]):
        if at_most(upper, bound) or (deadline is not None and time.perf_counter() > deadline):
            break
        pairs = made[frozenset([partner])] = _Conjunction(task, hmax, held, frozenset([partner]), made)
        targets = ordered[position + 1 :]
        bound = max(bound, pairs.run(targets, upper))
        plans.extend(pairs.plan(target) for target in targets if pairs.final[target])
    return bound, plans, made


def _goal_triples(
    task: DeleteFreeTask,
    hmax: RelaxedCosts,
    held: frozenset[int],
    open_goal: frozenset[int],
    upper: float,
    made: dict[frozenset[int], _Conjunction],
    deadline: float | None,
) -> float:
    """The largest h_max of three goal states together in Π^C (as :func:`_goal_pairs`, from
    the pairs' searches ``made``), stopped once it reaches ``upper`` or past ``deadline``.

    Three goal states may each pair up at no extra cost, yet not all three at once.
    """
    bound = 0.0
    ordered = sorted(open_goal, key=hmax.value.__getitem__)
    for first, second in itertools.combinations(range(len(ordered) - 1), 2):
        partners = frozenset([ordered[first], ordered[second]])
        if at_most(upper, bound) or (deadline is not None and time.perf_counter() > deadline) or not all(frozenset([partner]) in made for partner in partners):
            break
        triples = made[partners] = _Conjunction(task, hmax, held, partners, made)
        bound = max(bound, triples.run(ordered[second + 1 :], upper))
    return bound


class _GoalByGoal:
    """Plans built one goal state at a time, each extension extracted from h_max costs from the states
    the plan so far reaches (see the module docstring); extensions are shared between orders."""

    #: Goal states up to which every order is tried; beyond, each state leads once (deepest first after it).
    ALL_ORDERS_UP_TO = 4

    def __init__(self, task: DeleteFreeTask, root: RelaxedCosts, held: frozenset[int], goal: frozenset[int]):
        self.task, self.root, self.held, self.goal = task, root, held, goal
        self.searched: dict[tuple[frozenset[int], int], list[int]] = {}

    def other_orders(self, first: Sequence[int]) -> list[tuple[int, ...]]:
        """Orders of the goal states to try after ``first``."""
        if len(first) <= self.ALL_ORDERS_UP_TO:
            orders = list(itertools.permutations(first))
        else:
            orders = [(leader, *(state for state in first if state != leader)) for leader in first]
        return [order for order in orders if order != tuple(first)]

    def build(self, steps: list[int], order: Sequence[int], deadline: float | None) -> list[int]:
        """``steps`` extended to reach every goal state in ``order``, then improved by re-attaching each
        goal state in turn to the plan for the others while that helps (the key-path exchange of
        Steiner-tree local search) and ``deadline`` (a ``time.perf_counter()`` value) is not past."""
        task, held, goal = self.task, self.held, self.goal
        for state in order:
            steps = self._attach(steps, state)
        best = task.without_redundant_steps(steps, held, goal)
        improved = True
        while improved and (deadline is None or time.perf_counter() <= deadline):
            improved = False
            for state in order:
                others = task.without_redundant_steps(list(best), held, goal - {state})
                candidate = task.without_redundant_steps(self._attach(others, state), held, goal)
                if not at_most(task.plan_cost(best), task.plan_cost(candidate)):  # cheaper by more than rounding
                    best, improved = candidate, True
        return best

    def _attach(self, steps: list[int], state: int) -> list[int]:
        reached = self.held.union(*(self.task.produces[tool] for tool in steps))
        if state in reached:
            return steps
        if reached == self.held:
            return steps + self.task.extract(self.root, self.held, frozenset([state]))
        if (reached, state) not in self.searched:
            lowered = self.task.lowered(self.root, reached - self.held, state)
            self.searched[reached, state] = self.task.extract(lowered, reached, frozenset([state]))
        return steps + self.searched[reached, state]


class _Conjunction:
    """h_max of holding each state together with every state of ``partners``: the conjunctions
    ``{x} ∪ partners`` of Haslum's Π^C compilation (ICAPS 2012), by a generalised Dijkstra over ``x``.

    The last step to a conjunction is a tool that produces ``x`` or a partner; what it leaves out
    of the conjunction (``rest``) must be held before it, with its requirements. So its cost is the
    tool's plus the largest cost of holding ``rest`` with each requirement (and with ``x`` when the
    tool does not produce ``x``). Those costs come from ``smaller``, the conjunctions with fewer
    partners (h_max itself when ``rest`` is empty), except when the tool produces ``x`` and no
    partner: then they are this search's own (its step). Conjunctions of states outside these
    count as their dearest known part, which only lowers the bound.
    """

    HELD, PRODUCES, LAST = range(3)

    def __init__(
        self, task: DeleteFreeTask, hmax: RelaxedCosts, held: frozenset[int], partners: frozenset[int], smaller: Mapping[frozenset[int], _Conjunction]
    ):
        self.task, self.hmax, self.held, self.partners, self.smaller = task, hmax, held, partners, smaller
        self.cost = [INFINITY] * len(hmax.value)
        self.how: list[tuple[int, int]] = [(self.HELD, NONE)] * len(hmax.value)
        self.final = [False] * len(hmax.value)
        self.searched = bytearray(len(hmax.value))  # states this search offered costs to
        self.floor = 0.0  # a searched state not final costs at least this much
        self.together = self._alone(partners)

    def _alone(self, states: frozenset[int]) -> float:
        """A lower bound on the cost of holding ``states`` (a subset of the partners)."""
        if len(states) <= 1:
            return max((self.hmax.value[state] for state in states), default=0.0)
        return max(self.smaller[states - {state}].at_least(state) for state in states)

    def at_least(self, state: int) -> float:
        """A lower bound on the cost of holding ``state`` with the partners (exact once final)."""
        if self.final[state]:
            return self.cost[state]
        if self.searched[state]:
            return max(self.floor, self.hmax.value[state])
        return max(self.hmax.value[state], max(self.hmax.value[partner] for partner in self.partners))

    def _with(self, rest: frozenset[int], state: int) -> float:
        """A lower bound on the cost of holding ``state`` with ``rest`` (fewer states than the partners)."""
        if not rest:
            return self.hmax.value[state]
        return self._alone(rest) if state in self.held else self.smaller[rest].at_least(state)

    def run(self, targets: Sequence[int], upper: float) -> float:
        """Search until every target's cost is final, or every open one costs ``upper`` or more;
        returns the largest target's cost (a lower bound on holding the targets and the partners)."""
        task, value, fired = self.task, self.hmax.value, self.hmax.fired
        frontier: list[tuple[float, int]] = []

        def offer(state: int, through: float, how: tuple[int, int]) -> None:
            if through < self.cost[state]:
                self.cost[state], self.how[state] = through, how
                frontier.append((through, state))

        # Only states that lead to a target need their cost.
        for target in targets:
            self.searched = bytearray(map(operator.or_, self.searched, task.ancestors(target)))
        searched = self.searched
        producing_partners = sorted({tool for partner in self.partners for tool in task.producers[partner] if fired[tool] != NONE})
        # Per part of the partners a tool leaves out: (its cost with its requirements', its cost, the tool) for each such tool.
        last: dict[frozenset[int], list[tuple[float, float, int]]] = {}
        for tool in producing_partners:
            rest = self.partners.difference(task.produces[tool])
            before = task.cost[tool] + max([self._alone(rest), *(self._with(rest, required) for required in task.requires[tool])])
            last.setdefault(rest, []).append((before, task.cost[tool], tool))
            for state in task.produces[tool]:
                if searched[state]:
                    offer(state, before, (self.PRODUCES, tool))
        for state in itertools.compress(range(len(value)), searched):
            if state in self.held:
                offer(state, self.together, (self.HELD, NONE))
            elif value[state] < INFINITY:
                for rest, tools in last.items():
                    with_rest = self._with(rest, state)
                    through, tool = min((max(before, tool_cost + with_rest), tool) for before, tool_cost, tool in tools)
                    # A tool that produces the state too was offered above, and no dearer than this.
                    offer(state, through, (self.LAST, tool))
        for tool in task.requiring_nothing:
            if fired[tool] != NONE:
                for state in task.produces[tool]:
                    if searched[state]:
                        offer(state, task.cost[tool] + self.together, (self.PRODUCES, tool))
        heapq.heapify(frontier)
        missing = list(task.requirement_counts)
        remaining = set(targets)
        reached_at = self.together
        while frontier and remaining:
            reached_at, state = heapq.heappop(frontier)
            if self.final[state]:
                continue
            self.final[state] = True
            remaining.discard(state)
            if at_most(upper, reached_at):
                break  # every conjunction still open costs at least this much: enough to prove ``upper``
            for tool in task.consumers[state]:
                if fired[tool] == NONE:
                    continue
                missing[tool] -= 1
                if missing[tool] == 0:
                    through = task.cost[tool] + reached_at  # popped last: the dearest requirement's conjunction
                    for produced in task.produces[tool]:
                        if through < self.cost[produced] and searched[produced]:
                            self.cost[produced], self.how[produced] = through, (self.PRODUCES, tool)
                            heapq.heappush(frontier, (through, produced))
        self.floor = reached_at if frontier else INFINITY
        return max([self.cost[target] for target in targets if target not in remaining] + ([reached_at] if remaining else []))

    def plan(self, target: int) -> list[int]:
        """A plan holding ``target`` and the (one) partner, from the achievers (``target``'s cost must be final)."""
        task, held = self.task, self.held
        chosen: set[int] = set()
        alone: set[int] = set()  # states to reach by themselves, through h_max's achievers
        stack, seen = [target], set()
        while stack:
            state = stack.pop()
            if state in seen:
                continue
            seen.add(state)
            kind, tool = self.how[state]
            if kind == self.HELD:
                alone.update(self.partners)
                continue
            chosen.add(tool)
            if kind == self.PRODUCES and self.partners.isdisjoint(task.produces[tool]):
                stack.extend(task.requires[tool])  # each requirement held together with the partner
                if not task.requires[tool]:
                    alone.update(self.partners)
            else:
                alone.update(task.requires[tool])
                if kind == self.LAST:
                    alone.add(state)
        steps = chosen.union(task.extract(self.hmax, held, frozenset(alone - held)))
        return task.executable_order(sorted(steps, key=lambda tool: (self.hmax.fired[tool], tool)), held)
