"""Cost-optimal search for delete-free planning tasks, on integer states and tools.

No tool removes a state, so a planning problem over a tool catalog is a *delete-free* task: a plan
is a set of tools that becomes applicable in some order, and finding the cheapest one is NP-hard
(Bylander, Artificial Intelligence 69, 1994), yet easy on the instances catalogs produce. The search
here works in four stages and stops at the first that proves a plan optimal:

1. **Bounds from the held states** (cached per held states and avoided tools). A generalised Dijkstra
   (Knuth, Information Processing Letters 6(1), 1977) computes h_max of every state (Bonet &
   Geffner, Artificial Intelligence 129, 2001): h_max of the goal is a lower bound, and the plan
   extracted backward from the h_max achievers an upper bound. Goals of several states share
   steps, and that is where these fall short, so for them, in turn, until one proves a plan:

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
2. **A corridor**: a tool can be in a plan no dearer than the upper bound only if its requirements'
   h_max, its cost, and the cheapest chain of consumers from it to a goal state add up to at most
   that bound. Everything else is dropped.
3. **LM-cut** (Helmert & Domshlak, ICAPS 2009) on the corridor: a stronger admissible lower bound,
   exact on most catalog-shaped tasks. Past the deadline it stops, and the sum of its cuts so far
   is the certified bound.
4. **A\\*** over the sets of corridor states reached, with the root's LM-cut landmarks as the
   (admissible) heuristic and the upper bound pruning nodes that cannot beat it. When it runs out of
   nodes below the bound, the incumbent is optimal; when it exceeds its budget (expansions or a
   deadline), the incumbent is returned as not proven optimal, with the smallest ``f`` left open as
   a certified lower bound (some open node lies on an optimal plan, and its ``f`` underestimates
   that plan's cost).
"""

from __future__ import annotations

import heapq
import itertools
import operator
import time
from collections import OrderedDict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from toolpath.registry import ToolDefinition

if TYPE_CHECKING:
    from toolpath.planner.planning.steiner import SteinerRelaxation, SteinerTree

INFINITY = float("inf")
#: No tool index: the achiever of a held or unreachable state, the supporter of a tool that requires nothing.
NONE = -1
#: Relative tolerance when comparing float sums of costs (0.1 + 0.2 vs 0.3).
_TOLERANCE = 1e-9


def _at_most(left: float, right: float) -> bool:
    return left <= right + _TOLERANCE * max(1.0, abs(right))


@dataclass(frozen=True)
class RelaxedCosts:
    """One generalised-Dijkstra pass from a set of held states.

    Attributes:
        value: per state index, its h_max or h_add cost (``INFINITY`` when unreachable, 0 when held).
        achiever: per state index, the tool index that set its value (``NONE`` for held or unreachable).
        fired: per tool index, when the tool became applicable (a sequence number; ``NONE`` never).
    """

    value: list[float]
    achiever: list[int]
    fired: list[int]


@dataclass(frozen=True)
class SearchResult:
    """The tools of a plan in execution order (tool indices), whether its cost is proven minimal, and
    a lower bound on the cost of every plan (the plan's own cost when it is proven optimal)."""

    steps: list[int]
    optimal: bool
    lower_bound: float


class DeleteFreeTask:
    """The tools of a catalog as integers: ``tools[i]`` requires ``requires[i]`` and produces ``produces[i]``.

    Args:
        tools: the tools (any order; tool index ``i`` is ``tools[i]``; ``tool_index`` maps registry ids).

    States are numbered in order of first mention; ``state_index`` maps tokens to numbers. Bounds from
    a held set are cached (the 32 most recent), since agents plan many goals from the same held states.
    """

    _CACHE_SIZE = 32

    def __init__(self, tools: Sequence[ToolDefinition]):
        self.tools = list(tools)
        self.tool_index: dict[int | None, int] = {tool.id: index for index, tool in enumerate(self.tools)}
        self.state_index: dict[str, int] = {}
        self.requires: list[tuple[int, ...]] = []
        self.produces: list[tuple[int, ...]] = []
        self.cost: list[float] = [tool.cost for tool in self.tools]
        for tool in self.tools:
            self.requires.append(tuple(self._index(token) for token in sorted(tool.state_transition.requires)))
            self.produces.append(tuple(self._index(token) for token in sorted(tool.state_transition.produces)))
        self.requiring_nothing = [index for index, requires in enumerate(self.requires) if not requires]
        self.consumers: list[list[int]] = [[] for _ in self.state_index]
        self.producers: list[list[int]] = [[] for _ in self.state_index]
        for index in range(len(self.tools)):
            for state in self.requires[index]:
                self.consumers[state].append(index)
            for state in self.produces[index]:
                self.producers[state].append(index)
        self._cache: OrderedDict[tuple[frozenset[int], frozenset[int], bool], RelaxedCosts] = OrderedDict()
        self._ancestor_cache: OrderedDict[int, bytearray] = OrderedDict()
        self._origin = self
        self._steiner: SteinerRelaxation | None = None
        self.marked_tool: dict[int, int] = {}

    def _index(self, token: str) -> int:
        return self.state_index.setdefault(token, len(self.state_index))

    def variant(self, marked: Iterable[int] = (), cost: Sequence[float] | None = None) -> tuple[DeleteFreeTask, frozenset[int]]:
        """A copy of this task for one planning problem; tool and state indices are kept, and the copy
        has its own (empty) bounds cache.

        Args:
            marked: tool indices that each also produce a new state of their own, a *mark* no other
                tool produces; a goal that includes a tool's mark makes the plan run that tool.
            cost: other costs per tool index (same length as ``tools``).

        Returns:
            The copy and the marks' state indices.
        """
        marked = sorted(set(marked))
        copy = DeleteFreeTask.__new__(DeleteFreeTask)
        copy.tools, copy.tool_index, copy.requires, copy.requiring_nothing = self.tools, self.tool_index, self.requires, self.requiring_nothing
        copy.cost = list(cost) if cost is not None else self.cost
        copy.state_index = dict(self.state_index)
        copy.produces = list(self.produces)
        copy.consumers = [*self.consumers]
        copy.producers = [*self.producers]
        marks = []
        for tool in marked:
            mark = len(copy.state_index)
            copy.state_index[f"\x00ran {tool}"] = mark  # a token no catalog can declare (control character)
            copy.produces[tool] = (*self.produces[tool], mark)
            copy.consumers.append([])
            copy.producers.append([tool])
            marks.append(mark)
        copy._cache, copy._ancestor_cache = OrderedDict(), OrderedDict()
        copy._origin, copy.marked_tool = self._origin, {**self.marked_tool, **dict(zip(marks, marked))}
        return copy, frozenset(marks)

    def states(self, tokens: Iterable[str]) -> frozenset[int]:
        """State indices of the tokens this task mentions; others are left out (no tool involves them)."""
        return frozenset(self.state_index[token] for token in tokens if token in self.state_index)

    def clear_cache(self) -> None:
        """Forget the cached bounds and ancestors (benchmarks use it to time a first plan from some held states)."""
        self._cache.clear()
        self._ancestor_cache.clear()

    def relaxed_costs(self, held: frozenset[int], avoided: frozenset[int], additive: bool = False) -> RelaxedCosts:
        """h_max (or, ``additive``, h_add) costs from ``held`` with every tool but ``avoided`` (tool indices); cached."""
        key = (held, avoided, additive)
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        usable = [True] * len(self.tools)
        for index in avoided:
            usable[index] = False
        result = self._cache[key] = self._dijkstra(held, usable, self.cost, additive)
        if len(self._cache) > self._CACHE_SIZE:
            self._cache.popitem(last=False)
        return result

    def _dijkstra(self, held: Collection[int], usable: Sequence[bool], cost: Sequence[float], additive: bool) -> RelaxedCosts:
        """h_max (``additive=False``) or h_add costs of every state, over the ``usable`` tools."""
        value = [INFINITY] * len(self.state_index)
        achiever = [NONE] * len(self.state_index)
        fired = [NONE] * len(self.tools)
        missing = [len(requires) for requires in self.requires]
        done = [False] * len(self.state_index)
        order = itertools.count()
        frontier: list[tuple[float, int]] = []

        def fire(tool: int, through: float) -> None:
            fired[tool] = next(order)
            for state in self.produces[tool]:
                if through < value[state]:
                    value[state] = through
                    achiever[state] = tool
                    heapq.heappush(frontier, (through, state))

        for state in held:
            value[state] = 0.0
            frontier.append((0.0, state))
        heapq.heapify(frontier)
        for tool in self.requiring_nothing:
            if usable[tool]:
                fire(tool, cost[tool])
        while frontier:
            reached_at, state = heapq.heappop(frontier)
            if done[state]:
                continue
            done[state] = True
            for tool in self.consumers[state]:
                if not usable[tool]:
                    continue
                missing[tool] -= 1
                if missing[tool] == 0:
                    # States pop in order of value, so the last requirement popped has the largest.
                    through = cost[tool] + (sum(map(value.__getitem__, self.requires[tool])) if additive else reached_at)
                    fire(tool, through)
        return RelaxedCosts(value, achiever, fired)

    def extract(self, costs: RelaxedCosts, held: frozenset[int], goal: frozenset[int]) -> list[int]:
        """The tools that achieve ``goal`` backward through ``costs.achiever``, in execution order."""
        chosen: set[int] = set()
        stack = [state for state in goal if state not in held]
        seen: set[int] = set()
        while stack:
            state = stack.pop()
            if state in seen:
                continue
            seen.add(state)
            tool = costs.achiever[state]
            if tool not in chosen:
                chosen.add(tool)
                stack.extend(required for required in self.requires[tool] if required not in held)
        return self._executable_order(sorted(chosen, key=costs.fired.__getitem__), held)

    def _executable_order(self, tools: list[int], held: Collection[int], every_tool: bool = True) -> list[int]:
        """``tools`` in an order where each runs after its requirements are held or produced; those
        that never can raise ``ValueError``, or are left out when not ``every_tool``.

        The order given is kept where it is executable (firing order always is: an achiever fires
        after its requirements are reached), so this costs one pass then; a tool that comes too
        early waits for a later pass.
        """
        reached = set(held)
        ordered: list[int] = []
        pending = tools
        while pending:
            waiting = []
            for tool in pending:
                if reached.issuperset(self.requires[tool]):
                    ordered.append(tool)
                    reached.update(self.produces[tool])
                else:
                    waiting.append(tool)
            if len(waiting) == len(pending):
                if not every_tool:
                    return ordered
                raise ValueError("the tools cannot all run: some requirement is never produced")
            pending = waiting
        return ordered

    def plan_cost(self, steps: Iterable[int]) -> float:
        return sum(self.cost[tool] for tool in steps)

    def is_valid(self, steps: Sequence[int], held: frozenset[int], goal: frozenset[int]) -> bool:
        """Every step applicable in turn from ``held``, and ``goal`` held at the end."""
        current = set(held)
        for tool in steps:
            if not current.issuperset(self.requires[tool]):
                return False
            current.update(self.produces[tool])
        return current >= goal

    def without_redundant_steps(self, steps: list[int], held: frozenset[int], goal: frozenset[int]) -> list[int]:
        """Drop steps the plan still works without, latest first (never raises the cost).

        A step that is the plan's only producer of a state the goal or another step needs is kept
        without a check, so only the few doubtful steps cost a replay of the plan.
        """
        # How many remaining steps need each state (the goal counts once), kept current as steps go:
        # a step needed only by a step dropped before it must be checked too.
        needers: dict[int, int] = {state: 1 for state in goal}
        producers_in_plan: dict[int, int] = {}
        for tool in steps:
            for state in self.requires[tool]:
                needers[state] = needers.get(state, 0) + 1
            for state in self.produces[tool]:
                producers_in_plan[state] = producers_in_plan.get(state, 0) + 1
        kept = list(steps)
        for position in range(len(kept) - 1, -1, -1):
            tool = kept[position]
            if any(state not in held and needers.get(state, 0) and producers_in_plan[state] == 1 for state in self.produces[tool]):
                continue
            candidate = kept[:position] + kept[position + 1 :]
            if self.is_valid(candidate, held, goal):
                kept = candidate
                for state in self.produces[tool]:
                    producers_in_plan[state] -= 1
                for state in self.requires[tool]:
                    needers[state] -= 1
        return kept

    def search(
        self, held: frozenset[int], goal: frozenset[int], avoided: frozenset[int], max_expansions: int | None = None, deadline: float | None = None
    ) -> SearchResult:
        """The cheapest plan reaching ``goal`` from ``held`` without ``avoided`` tools.

        The goal must be reachable (every goal state has a finite h_max) and not already held.
        ``max_expansions`` (nodes expanded) and ``deadline`` (a ``time.perf_counter()`` value) bound
        the A* stage, ``None`` meaning no limit; past either, the best plan found so far comes back
        with ``optimal=False`` and the best lower bound proven.
        """
        hmax = self.relaxed_costs(held, avoided)
        lower = max(hmax.value[state] for state in goal)
        incumbent = self.without_redundant_steps(self.extract(hmax, held, goal), held, goal)
        if _at_most(self.plan_cost(incumbent), lower):
            return SearchResult(incumbent, True, self.plan_cost(incumbent))
        open_goal = goal - held
        if len(open_goal) > 1:
            # Goals of several states share steps: bound them and plan them as a Steiner tree (exact
            # on most catalogs), then build plans goal state by goal state, first deepest first, then
            # from plans for pairs of goal states, which also bound the cost from below, then in the
            # other orders; then bound the cost by triples of goal states. Past the deadline, each
            # stage stops (the first build still completes its plan).
            def out_of_time() -> bool:
                return deadline is not None and time.perf_counter() > deadline

            goal_by_goal = _GoalByGoal(self, hmax, held, goal)
            deepest_first = sorted(open_goal, key=lambda state: -hmax.value[state])
            tree = self._steiner_tree(hmax, held, open_goal, deadline)
            if tree is not None:
                lower = max(lower, tree.cost)
                incumbent = min([incumbent, self._plan_from_tree(tree.tools, goal_by_goal, deepest_first, deadline)], key=self.plan_cost)
                if _at_most(self.plan_cost(incumbent), lower):
                    return SearchResult(incumbent, True, self.plan_cost(incumbent))
            incumbent = min([incumbent, goal_by_goal.build([], deepest_first, deadline)], key=self.plan_cost)
            if _at_most(self.plan_cost(incumbent), lower):
                return SearchResult(incumbent, True, self.plan_cost(incumbent))
            bound, pair_plans, conjunctions = self._goal_pairs(hmax, held, open_goal, self.plan_cost(incumbent), deadline)
            lower = max(lower, bound)
            for start in pair_plans:
                if out_of_time():
                    break
                incumbent = min([incumbent, goal_by_goal.build(start, deepest_first, deadline)], key=self.plan_cost)
            if _at_most(self.plan_cost(incumbent), lower):
                return SearchResult(incumbent, True, self.plan_cost(incumbent))
            for order in goal_by_goal.other_orders(deepest_first):
                if out_of_time():
                    break
                incumbent = min([incumbent, goal_by_goal.build([], order, deadline)], key=self.plan_cost)
                if _at_most(self.plan_cost(incumbent), lower):
                    return SearchResult(incumbent, True, self.plan_cost(incumbent))
            lower = max(lower, self._goal_triples(hmax, held, open_goal, self.plan_cost(incumbent), conjunctions, deadline))
            if _at_most(self.plan_cost(incumbent), lower):
                return SearchResult(incumbent, True, self.plan_cost(incumbent))
            if out_of_time():
                return SearchResult(incumbent, False, lower)
        # h_add's achievers favour cheap whole sub-plans, often cheaper than h_max's; only when needed.
        hadd = self.relaxed_costs(held, avoided, additive=True)
        incumbent = min([incumbent, self.without_redundant_steps(self.extract(hadd, held, goal), held, goal)], key=self.plan_cost)
        upper = self.plan_cost(incumbent)
        if _at_most(upper, lower):
            return SearchResult(incumbent, True, upper)
        corridor = _Corridor(self, self._corridor(hmax, held, goal - held, upper))
        root, cuts, complete = corridor.lm_cut(held, goal - held, deadline)
        lower = max(lower, root)
        if _at_most(upper, lower):
            return SearchResult(incumbent, True, upper)
        if not complete:  # out of time before the bound was complete: what it has is still a bound
            return SearchResult(incumbent, False, lower)
        better, bound = corridor.astar(held, goal, upper, cuts, max_expansions, deadline)
        if better is None:
            return SearchResult(incumbent, False, max(lower, bound))
        if not better:
            return SearchResult(incumbent, True, upper)
        steps = self.without_redundant_steps(better, held, goal)
        return SearchResult(steps, True, self.plan_cost(steps))

    def _steiner_tree(self, hmax: RelaxedCosts, held: frozenset[int], open_goal: frozenset[int], deadline: float | None) -> SteinerTree | None:
        """The cheapest plan of the task relaxed to a directed Steiner tree problem (see
        :mod:`~toolpath.planner.planning.steiner`), over the tools ``hmax`` reached, to the
        ``MOST_GOAL_STATES`` deepest goal states (reaching some costs no more than reaching all, so
        its cost still bounds the whole goal's); ``None`` past ``deadline``. The relaxation's graph
        is built on first use and shared with every variant of this task (a variant's marks are
        their tools' nodes)."""
        # numpy loads with the first goal of several states, not with every command that plans.
        from toolpath.planner.planning.steiner import MOST_GOAL_STATES, SteinerRelaxation

        origin = self._origin
        if origin._steiner is None:
            origin._steiner = SteinerRelaxation(origin.requires, origin.produces, len(origin.state_index))
        relaxation = origin._steiner
        deepest = sorted(open_goal, key=lambda state: (-hmax.value[state], state))[:MOST_GOAL_STATES]
        # States past the relaxation's are marks: their node is their tool's (a KeyError otherwise, never a wrong node).
        nodes = [relaxation.tool_node(self.marked_tool[state]) if state >= relaxation.state_count else state for state in sorted(deepest)]
        usable = [fired != NONE for fired in hmax.fired]
        return relaxation.solve(held, nodes, usable, self.cost, hmax.value, deadline)

    def _plan_from_tree(self, tools: frozenset[int], goal_by_goal: _GoalByGoal, order: Sequence[int], deadline: float | None) -> list[int]:
        """A plan from a relaxed plan's ``tools``: they are one when each has at most one requirement
        not held; otherwise those that can run, extended goal state by goal state in ``order``."""
        held, goal = goal_by_goal.held, goal_by_goal.goal
        steps = self._executable_order(sorted(tools, key=goal_by_goal.root.fired.__getitem__), held, every_tool=False)
        if len(steps) == len(tools) and self.is_valid(steps, held, goal):
            return self.without_redundant_steps(steps, held, goal)
        return goal_by_goal.build(steps, order, deadline)

    def _lowered(self, root: RelaxedCosts, reached: Iterable[int], target: int) -> RelaxedCosts:
        """h_max costs once the ``reached`` states are held too, from ``root`` (h_max from the held
        states), final up to ``target``'s cost.

        Holding more states only lowers costs, so a Dijkstra over the decreases, from the newly
        held states, touches only the states that get cheaper than ``target``; a search from
        scratch would touch every state cheaper than it. Firing numbers of the tools that achieve
        a lowered state are not kept up to date: :meth:`extract` orders its steps itself.
        """
        leads_to_target = self._ancestors(target)
        value, achiever = list(root.value), list(root.achiever)
        frontier = [(0.0, state) for state in reached if value[state] > 0.0 and leads_to_target[state]]
        for _, state in frontier:
            value[state], achiever[state] = 0.0, NONE
        heapq.heapify(frontier)
        requires, cost, fired = self.requires, self.cost, root.fired
        while frontier:
            reached_at, state = heapq.heappop(frontier)
            if reached_at > value[state]:
                continue  # a later, lower offer already went through
            if reached_at >= value[target]:
                break  # nothing cheaper than the target is left to lower it
            for tool in self.consumers[state]:
                if fired[tool] == NONE:  # avoided or unreachable: more held states reach no new state
                    continue
                needed = requires[tool]
                through = cost[tool] + (reached_at if len(needed) == 1 else max(map(value.__getitem__, needed)))
                for produced in self.produces[tool]:
                    if through < value[produced] and leads_to_target[produced]:
                        value[produced], achiever[produced] = through, tool
                        heapq.heappush(frontier, (through, produced))
        return RelaxedCosts(value, achiever, root.fired)

    def _goal_pairs(
        self, hmax: RelaxedCosts, held: frozenset[int], open_goal: frozenset[int], upper: float, deadline: float | None
    ) -> tuple[float, list[list[int]], dict[frozenset[int], _Conjunction]]:
        """A lower bound on the cost of reaching ``open_goal``, and plans for pairs of its states.

        The bound is the largest h_max of a pair of goal states in the task compiled with the
        conjunctions ``{x, g}`` (Haslum's Π^C, ICAPS 2012), one goal state ``g`` at a time (the
        shallower first), stopped once it reaches ``upper`` or past ``deadline``. h_max of one state misses what
        reaching two costs beyond reaching the dearer one; a pair's h_max counts it. Its
        achievers give a plan for the pair that shares steps where they can be shared: among the
        many equally cheap ways to the dearer state, one that passes the other. The searches come
        back too, for :meth:`_goal_triples`.
        """
        bound = max(hmax.value[state] for state in open_goal)
        plans: list[list[int]] = []
        made: dict[frozenset[int], _Conjunction] = {}
        ordered = sorted(open_goal, key=hmax.value.__getitem__)
        for position, partner in enumerate(ordered[:-1]):
            if _at_most(upper, bound) or (deadline is not None and time.perf_counter() > deadline):
                break
            pairs = made[frozenset([partner])] = _Conjunction(self, hmax, held, frozenset([partner]), made)
            targets = ordered[position + 1 :]
            bound = max(bound, pairs.run(targets, upper))
            plans.extend(pairs.plan(target) for target in targets if pairs.final[target])
        return bound, plans, made

    def _goal_triples(
        self,
        hmax: RelaxedCosts,
        held: frozenset[int],
        open_goal: frozenset[int],
        upper: float,
        made: dict[frozenset[int], _Conjunction],
        deadline: float | None,
    ) -> float:
        """The largest h_max of three goal states together in Π^C (as :meth:`_goal_pairs`, from
        the pairs' searches ``made``), stopped once it reaches ``upper`` or past ``deadline``.

        Three goal states may each pair up at no extra cost, yet not all three at once.
        """
        bound = 0.0
        ordered = sorted(open_goal, key=hmax.value.__getitem__)
        for first, second in itertools.combinations(range(len(ordered) - 1), 2):
            partners = frozenset([ordered[first], ordered[second]])
            if (
                _at_most(upper, bound)
                or (deadline is not None and time.perf_counter() > deadline)
                or not all(frozenset([partner]) in made for partner in partners)
            ):
                break
            triples = made[partners] = _Conjunction(self, hmax, held, partners, made)
            bound = max(bound, triples.run(ordered[second + 1 :], upper))
        return bound

    def _ancestors(self, state: int) -> bytearray:
        """Per state index, 1 when some chain of tools leads from it to ``state`` (``state`` included);
        cached for the most recent states, like bounds."""
        if state in self._ancestor_cache:
            self._ancestor_cache.move_to_end(state)
            return self._ancestor_cache[state]
        marked = bytearray(len(self.state_index))
        marked[state] = 1
        stack = [state]
        while stack:
            for tool in self.producers[stack.pop()]:
                for required in self.requires[tool]:
                    if not marked[required]:
                        marked[required] = 1
                        stack.append(required)
        self._ancestor_cache[state] = marked
        if len(self._ancestor_cache) > self._CACHE_SIZE:
            self._ancestor_cache.popitem(last=False)
        return marked

    def _corridor(self, hmax: RelaxedCosts, held: frozenset[int], open_goal: frozenset[int], upper: float) -> list[int]:
        """Tools that can be in a plan costing at most ``upper``: a backward Dijkstra from the goal.

        A step's requirements cost at least their h_max before it, and the steps after it include a
        chain of consumers to a goal state (else it would be redundant), so a tool for which these
        add up to more than ``upper`` is in no such plan.
        """
        distance = {state: 0.0 for state in open_goal}
        frontier = [(0.0, state) for state in open_goal]
        heapq.heapify(frontier)
        kept: set[int] = set()
        done: set[int] = set()
        while frontier:
            after, state = heapq.heappop(frontier)
            if state in done:
                continue
            done.add(state)
            for tool in self.producers[state]:
                if tool in kept or hmax.fired[tool] == NONE:  # avoided and unreachable tools never fired
                    continue
                before = max((hmax.value[required] for required in self.requires[tool]), default=0.0)
                through = after + self.cost[tool]
                if not _at_most(before + through, upper):
                    continue
                kept.add(tool)
                for required in self.requires[tool]:
                    if required not in held and through < distance.get(required, INFINITY):
                        distance[required] = through
                        heapq.heappush(frontier, (through, required))
        return sorted(kept)


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
                if not _at_most(task.plan_cost(best), task.plan_cost(candidate)):  # cheaper by more than rounding
                    best, improved = candidate, True
        return best

    def _attach(self, steps: list[int], state: int) -> list[int]:
        reached = self.held.union(*(self.task.produces[tool] for tool in steps))
        if state in reached:
            return steps
        if reached == self.held:
            return steps + self.task.extract(self.root, self.held, frozenset([state]))
        if (reached, state) not in self.searched:
            lowered = self.task._lowered(self.root, reached - self.held, state)
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
            self.searched = bytearray(map(operator.or_, self.searched, task._ancestors(target)))
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
        missing = [len(requires) for requires in task.requires]
        remaining = set(targets)
        reached_at = self.together
        while frontier and remaining:
            reached_at, state = heapq.heappop(frontier)
            if self.final[state]:
                continue
            self.final[state] = True
            remaining.discard(state)
            if _at_most(upper, reached_at):
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
        return task._executable_order(sorted(steps, key=lambda tool: (self.hmax.fired[tool], tool)), held)


class _Corridor:
    """A few tools of a task, with their own consumer lists, for the costly stages (LM-cut and A*)."""

    def __init__(self, task: DeleteFreeTask, tools: list[int]):
        self.task = task
        self.tools = tools
        self.cost = {tool: task.cost[tool] for tool in tools}
        self.consumers: dict[int, list[int]] = {}
        for tool in tools:
            for state in task.requires[tool]:
                self.consumers.setdefault(state, []).append(tool)

    def hmax(self, held: Collection[int], cost: dict[int, float]) -> tuple[dict[int, float], dict[int, int]]:
        """h_max of the states the tools touch, from ``held``, under ``cost``; and each fired tool's
        supporter (a requirement of largest h_max, or ``NONE`` when that is 0: the start supports it)."""
        requires, produces = self.task.requires, self.task.produces
        missing = {tool: len(requires[tool]) for tool in self.tools}
        value: dict[int, float] = dict.fromkeys(held, 0.0)
        supporter: dict[int, int] = {}
        frontier = [(0.0, state) for state in held]
        heapq.heapify(frontier)

        def fire(tool: int, supported_by: int, through: float) -> None:
            supporter[tool] = supported_by
            for state in produces[tool]:
                if through < value.get(state, INFINITY):
                    value[state] = through
                    heapq.heappush(frontier, (through, state))

        for tool in self.tools:
            if not requires[tool]:
                fire(tool, NONE, cost[tool])
        done: set[int] = set()
        while frontier:
            reached_at, state = heapq.heappop(frontier)
            if state in done:
                continue
            done.add(state)
            for tool in self.consumers.get(state, ()):
                missing[tool] -= 1
                if missing[tool] == 0:
                    # Popped last, so its value is the largest; any requirement of largest value may
                    # support the tool, and the start (value 0) may too (Helmert & Domshlak's pre-init).
                    fire(tool, NONE if reached_at == 0.0 else state, reached_at + cost[tool])
        return value, supporter

    def lm_cut(self, held: frozenset[int], open_goal: frozenset[int], deadline: float | None = None) -> tuple[float, list[tuple[set[int], float]], bool]:
        """The LM-cut lower bound on the cost of reaching ``open_goal`` from ``held``, its cuts, and
        whether it is complete.

        Every plan uses a tool of each cut; the cuts' values (cost partitioning) sum to the bound.
        The bound is ``INFINITY`` (and the cuts empty) when the goal is out of reach. Past
        ``deadline`` (a ``time.perf_counter()`` value) it stops after the current cut: the sum so far
        is still a lower bound, only a weaker one.
        """
        remaining = dict(self.cost)
        producers = self.task.producers
        total = 0.0
        cuts: list[tuple[set[int], float]] = []
        value, supporter = self.hmax(held, remaining)
        while True:
            if deadline is not None and cuts and time.perf_counter() > deadline:
                return total, cuts, False
            deepest = max(open_goal, key=lambda state: value.get(state, INFINITY))
            height = value.get(deepest, INFINITY)
            if height == INFINITY:
                return INFINITY, [], True
            if height <= 0.0:
                return total, cuts, True
            # Goal zone: states that reach the goal through zero-cost justification edges.
            zone: set[int] = set()
            stack = [deepest]
            while stack:
                state = stack.pop()
                if state in zone:
                    continue
                zone.add(state)
                for tool in producers[state]:
                    if remaining.get(tool) == 0.0 and supporter.get(tool, NONE) != NONE:
                        stack.append(supporter[tool])
            # The cut: the tools that enter the goal zone from outside it. Every plan has one (its
            # first step producing a zone state). Helmert & Domshlak keep only those whose supporter
            # the start reaches without the zone; taking them all spares a walk over the corridor
            # per cut and gave the same bounds on every benchmark goal.
            cut = {tool for state in zone for tool in producers[state] if tool in supporter and supporter[tool] not in zone}
            step = min(remaining[tool] for tool in cut)
            total += step
            cuts.append((cut, step))
            for tool in cut:
                remaining[tool] -= step
            self._lower(value, supporter, remaining, cut)

    def _lower(self, value: dict[int, float], supporter: dict[int, int], cost: dict[int, float], cheaper: set[int]) -> None:
        """Bring ``value`` and ``supporter`` (from :meth:`hmax`) up to date after the ``cheaper`` tools'
        costs fell (incremental LM-cut, after Pommerening & Helmert, ICAPS 2012).

        Costs only fall, so h_max values only fall: a Dijkstra over the decreases, starting at what
        the cheaper tools produce, touches only the states whose value changes and the tools that
        require them, where recomputing from scratch would touch the whole corridor for every cut.
        """
        requires, produces = self.task.requires, self.task.produces
        frontier: list[tuple[float, int]] = []

        def offer(tool: int, through: float) -> None:
            for state in produces[tool]:
                if through < value.get(state, INFINITY):
                    value[state] = through
                    heapq.heappush(frontier, (through, state))

        for tool in cheaper:
            if tool in supporter:  # it fired: its requirements are reached
                support = supporter[tool]
                offer(tool, (0.0 if support == NONE else value[support]) + cost[tool])
        while frontier:
            reached_at, state = heapq.heappop(frontier)
            if reached_at > value[state]:
                continue  # a later, lower offer already went through
            for tool in self.consumers.get(state, ()):
                if supporter.get(tool, NONE) != state:
                    continue  # a requirement of larger value, unchanged, still supports it (or it never fired)
                # The supporter is a requirement of largest value; the start (value 0) when that is 0.
                top = max(requires[tool], key=value.__getitem__)
                height = value[top]
                supporter[tool] = NONE if height == 0.0 else top
                offer(tool, height + cost[tool])

    def astar(
        self, held: frozenset[int], goal: frozenset[int], upper: float, cuts: list[tuple[set[int], float]], max_expansions: int | None, deadline: float | None
    ) -> tuple[list[int] | None, float]:
        """A plan cheaper than ``upper``, by A* over sets of reached states.

        The heuristic is the landmark heuristic of the root's LM-cut: the values of the cuts the
        path so far has not used a tool of (admissible by cost partitioning, Karpas & Domshlak,
        IJCAI 2009; path-dependent, so cheaper paths reopen nodes).

        Returns ``(plan, bound)``: the plan's tools in order, or ``[]`` when no plan beats
        ``upper``, or ``None`` when ``max_expansions`` or ``deadline`` ran out first; ``bound`` is
        then the smallest ``f`` still open, a lower bound on every plan's cost (``upper`` otherwise).
        """
        # Reached sets as bitmasks over the states the corridor produces: held states are always
        # there, and a frozenset per node would cost kilobytes where an int costs bytes.
        bit: dict[int, int] = {}
        for tool in self.tools:
            for state in self.task.produces[tool]:
                if state not in held:
                    bit.setdefault(state, 1 << len(bit))
        needs: dict[int, int] = {}
        gives: dict[int, int] = {}
        for tool in self.tools:
            requires = [state for state in self.task.requires[tool] if state not in held]
            if all(state in bit for state in requires):  # else it can never run
                needs[tool] = sum(bit[state] for state in requires)
                gives[tool] = sum(bit[state] for state in self.task.produces[tool] if state in bit)
        goal_mask = sum(bit[state] for state in goal if state not in held)
        # A free tool never hurts in a delete-free task, so every node takes all it can run: no
        # plateau of orderings of zero-cost steps (the redundant ones are dropped afterwards).
        free = [tool for tool in needs if self.cost[tool] == 0.0]

        def with_free_tools(reached: int) -> tuple[int, list[int]]:
            taken: list[int] = []
            progress = True
            while progress:
                progress = False
                for tool in free:
                    if not needs[tool] & ~reached and gives[tool] & ~reached:
                        reached |= gives[tool]
                        taken.append(tool)
                        progress = True
            return reached, taken

        cuts_of: dict[int, list[int]] = {}
        for number, (cut, _) in enumerate(cuts):
            for tool in cut:
                cuts_of.setdefault(tool, []).append(number)
        values = [value for _, value in cuts]
        tie = itertools.count()
        everything = (1 << len(cuts)) - 1
        start, taken = with_free_tools(0)
        frontier = [(sum(values), 0.0, next(tie), start, everything)]
        best = {start: 0.0}
        parent: dict[int, tuple[int, list[int]]] = {start: (0, taken)} if taken else {}
        expansions = 0
        while frontier:
            estimate_here, spent, _, reached, unused = heapq.heappop(frontier)
            if spent > best[reached]:
                continue
            if reached & goal_mask == goal_mask:
                steps: list[int] = []
                while reached in parent:
                    reached, tools = parent[reached]
                    steps[:0] = tools
                return steps, estimate_here
            expansions += 1
            # The clock is read at the first node and every 32nd after: a node costs 0.2-2 ms.
            if (max_expansions is not None and expansions > max_expansions) or (
                deadline is not None and expansions % 32 == 1 and time.perf_counter() > deadline
            ):
                return None, min(upper, estimate_here)
            remaining_bound = estimate_here - spent
            for tool, need in needs.items():
                if need & ~reached or not gives[tool] & ~reached or self.cost[tool] == 0.0:
                    continue
                successor, taken = with_free_tools(reached | gives[tool])
                successor_cost = spent + self.cost[tool]
                if successor_cost >= best.get(successor, INFINITY):
                    continue
                still_unused, estimate = unused, remaining_bound
                for number in cuts_of.get(tool, ()):
                    if still_unused >> number & 1:
                        still_unused &= ~(1 << number)
                        estimate -= values[number]
                if _at_most(upper, successor_cost + estimate):
                    continue  # cannot beat the incumbent
                best[successor] = successor_cost
                parent[successor] = (reached, [tool, *taken])
                heapq.heappush(frontier, (successor_cost + estimate, successor_cost, next(tie), successor, still_unused))
        return [], upper
