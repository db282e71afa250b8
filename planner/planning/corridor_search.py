"""The costly stages of the delete-free search (:mod:`~toolpath.planner.planning.delete_free_search`),
once the bounds from the held states leave a gap between the best plan and the lower bound:

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
import time
from collections.abc import Collection

from toolpath.planner.planning.delete_free import INFINITY, NONE, DeleteFreeTask, RelaxedCosts, at_most


class Corridor:
    """A few tools of a task, with their own consumer lists, for the costly stages (LM-cut and A*)."""

    def __init__(self, task: DeleteFreeTask, tools: list[int]):
        self.task = task
        self.tools = tools
        self.cost = {tool: task.cost[tool] for tool in tools}
        self.consumers: dict[int, list[int]] = {}
        for tool in tools:
            for state in task.requires[tool]:
                self.consumers.setdefault(state, []).append(tool)

    @classmethod
    def within(cls, task: DeleteFreeTask, hmax: RelaxedCosts, held: frozenset[int], open_goal: frozenset[int], upper: float) -> Corridor:
        """The tools of ``task`` that can be in a plan costing at most ``upper``: a backward Dijkstra from the goal.

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
            for tool in task.producers[state]:
                if tool in kept or hmax.fired[tool] == NONE:  # avoided and unreachable tools never fired
                    continue
                before = max((hmax.value[required] for required in task.requires[tool]), default=0.0)
                through = after + task.cost[tool]
                if not at_most(before + through, upper):
                    continue
                kept.add(tool)
                for required in task.requires[tool]:
                    if required not in held and through < distance.get(required, INFINITY):
                        distance[required] = through
                        heapq.heappush(frontier, (through, required))
        return cls(task, sorted(kept))

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
                if at_most(upper, successor_cost + estimate):
                    continue  # cannot beat the incumbent
                best[successor] = successor_cost
                parent[successor] = (reached, [tool, *taken])
                heapq.heappush(frontier, (successor_cost + estimate, successor_cost, next(tie), successor, still_unused))
        return [], upper
