"""Delete-free planning tasks on integer states and tools, and their relaxed costs.

A :class:`DeleteFreeTask` numbers the states and tools of a catalog (no tool removes a state, so a
plan is a set of tools that becomes applicable in some order). Its relaxed costs come from a
generalised Dijkstra (Knuth, Information Processing Letters 6(1), 1977): h_max of every state
(Bonet & Geffner, Artificial Intelligence 129, 2001), a lower bound on reaching it, or h_add, and
a plan extracted backward from their achievers, an upper bound. A planner asks for the costs of
the states that lead to its goal, and only the tools that lead there are searched: a goal of a
100,000-tool catalog needs a few thousand of them. Costs from a set of held states are cached
(agents plan many goals from the same held states), and lowered incrementally when the states a
partial plan reaches are held too. The task also checks plans and drops their redundant
steps. The cost-optimal search over these is :mod:`~toolpath.planner.planning.delete_free_search`.
"""

from __future__ import annotations

import heapq
import itertools
from collections import OrderedDict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from toolpath.registry import ToolDefinition, TransitionTable

if TYPE_CHECKING:
    from toolpath.planner.planning.steiner import SteinerRelaxation

INFINITY = float("inf")
#: No tool index: the achiever of a held or unreachable state, the supporter of a tool that requires nothing.
NONE = -1
#: Relative tolerance when comparing float sums of costs (0.1 + 0.2 vs 0.3).
_TOLERANCE = 1e-9


def at_most(left: float, right: float) -> bool:
    """``left <= right`` up to float rounding (sums of costs)."""
    return left <= right + _TOLERANCE * max(1.0, abs(right))


@dataclass(frozen=True)
class RelaxedCosts:
    """One generalised-Dijkstra pass from a set of held states.

    Attributes:
        value: per state index, its h_max or h_add cost (``INFINITY`` when unreachable, 0 when held).
        achiever: per state index, the tool index that set its value (``NONE`` for held or unreachable).
        fired: per tool index, when the tool became applicable (a sequence number; ``NONE`` never).

    A pass toward some states (:meth:`DeleteFreeTask.relaxed_costs`) searches only the tools that
    lead to them: every state that leads there gets the value and achiever of a pass over every
    tool, and the tools that lead there fire in the same order; other states stay ``INFINITY``
    (held ones 0) and other tools never fire.
    """

    value: list[float]
    achiever: list[int]
    fired: list[int]


class DeleteFreeTask:
    """The tools of a catalog as integers: ``tools[i]`` requires ``requires[i]`` and produces ``produces[i]``.

    Args:
        tools: the tools (any order; tool index ``i`` is ``tools[i]``; ``tool_index`` maps registry ids).
        transitions: their :class:`toolpath.registry.TransitionTable`, when known (a registry read from
            a catalog snapshot has it without reading a definition: ``tools`` is then only indexed for
            the steps of a plan); else worked out from ``tools``.

    States are numbered in order of first mention; ``state_index`` maps tokens to numbers. Bounds from
    a held set are cached (the 32 most recent), since agents plan many goals from the same held states.
    """

    _CACHE_SIZE = 32

    def __init__(self, tools: Sequence[ToolDefinition], transitions: TransitionTable | None = None):
        self.tools = tools if transitions is not None else list(tools)
        #: The tools' transitions, servers and names, by tool index.
        self.transitions = transitions if transitions is not None else TransitionTable.of(self.tools)
        # Built with zip and bound methods: a fresh `toolpath plan` over 100,000 tools builds this
        # task before its first plan, and the plain loops took 0.14 s of it.
        self.tool_index: dict[int | None, int] = dict(zip(self.transitions.ids, range(len(self.transitions.ids))))
        self.state_index: dict[str, int] = dict(zip(self.transitions.tokens, range(len(self.transitions.tokens))))
        self.requires: list[Sequence[int]] = list(self.transitions.requires)
        self.produces: list[Sequence[int]] = list(self.transitions.produces)
        self.cost: list[float] = list(self.transitions.cost)
        self.requirement_counts = list(map(len, self.requires))
        self.requiring_nothing = [index for index, count in enumerate(self.requirement_counts) if not count]
        self.consumers: list[list[int]] = [[] for _ in self.state_index]
        self.producers: list[list[int]] = [[] for _ in self.state_index]
        for links, by_tool in ((self.consumers, self.requires), (self.producers, self.produces)):
            appenders = [link.append for link in links]
            for index, states in enumerate(by_tool):
                for state in states:
                    appenders[state](index)
        self._cache: OrderedDict[tuple[frozenset[int], frozenset[int], bool, frozenset[int] | None], RelaxedCosts] = OrderedDict()
        self._ancestor_cache: OrderedDict[int, bytearray] = OrderedDict()
        self._leading_cache: OrderedDict[frozenset[int], tuple[list[int], bytearray]] = OrderedDict()
        self._origin = self
        self._steiner: SteinerRelaxation | None = None
        self._feeding_cache: dict[int, tuple[int, ...]] = {}
        self.marked_tool: dict[int, int] = {}

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
        copy.tools, copy.transitions, copy.tool_index, copy.requires, copy.requiring_nothing = (
            self.tools,
            self.transitions,
            self.tool_index,
            self.requires,
            self.requiring_nothing,
        )
        copy.requirement_counts = self.requirement_counts
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
        # Without marks the tools lead where this task's do: a plan's second search (other costs) walks nothing again.
        copy._leading_cache = OrderedDict() if marks else self._leading_cache
        copy._origin, copy.marked_tool = self._origin, {**self.marked_tool, **dict(zip(marks, marked))}
        return copy, frozenset(marks)

    def states(self, tokens: Iterable[str]) -> frozenset[int]:
        """State indices of the tokens this task mentions; others are left out (no tool involves them)."""
        return frozenset(self.state_index[token] for token in tokens if token in self.state_index)

    def clear_cache(self) -> None:
        """Forget the cached bounds, ancestors and tools leading to goals (benchmarks use it to time a
        first plan from some held states)."""
        self._cache.clear()
        self._ancestor_cache.clear()
        self._leading_cache.clear()

    def relaxed_costs(self, held: frozenset[int], avoided: frozenset[int], additive: bool = False, toward: frozenset[int] | None = None) -> RelaxedCosts:
        """h_max (or, ``additive``, h_add) costs from ``held`` with every tool but ``avoided`` (tool indices); cached.

        ``toward``: the states whose costs are wanted (``None``: every state). Only the tools that
        lead to them (:meth:`tools_leading_to`) are searched, which gives those states, and every
        state that leads to them, the costs a search of every tool gives (see :class:`RelaxedCosts`).
        When more than half the tools lead there, every tool is searched, and the costs serve any
        later goal from the same held states.
        """
        everything = (held, avoided, additive, None)
        key = everything if toward is None else (held, avoided, additive, toward)
        for known in (everything, key):
            if known in self._cache:
                self._cache.move_to_end(known)
                return self._cache[known]
        leading, leads_on = self._leading(toward) if toward is not None else ([], bytearray())
        if toward is None or 2 * len(leading) > len(self.tools):
            usable, starters, sources, key = bytearray(b"\x01") * len(self.tools), self.requiring_nothing, held, everything
        else:
            usable = bytearray(len(self.tools))
            for tool in leading:
                usable[tool] = 1
            starters = [tool for tool in leading if not self.requirement_counts[tool]]
            # A held state that leads to none of them starts none of their tools: every tool needing it is left out.
            sources = [state for state in held if leads_on[state]]
        for index in avoided:
            usable[index] = 0
        result = self._cache[key] = self._dijkstra(held, sources, usable, self.cost, additive, starters)
        if len(self._cache) > self._CACHE_SIZE:
            self._cache.popitem(last=False)
        return result

    def _dijkstra(
        self, held: Collection[int], sources: Collection[int], usable: bytearray, cost: Sequence[float], additive: bool, starters: Sequence[int]
    ) -> RelaxedCosts:
        """h_max (``additive=False``) or h_add costs of every state, over the ``usable`` tools (1 per
        tool index), from the held states ``sources`` (those of ``held`` some usable tool may need);
        ``starters`` are the tools that require nothing, in index order."""
        value = [INFINITY] * len(self.state_index)
        achiever = [NONE] * len(self.state_index)
        fired = [NONE] * len(self.tools)
        missing = list(self.requirement_counts)
        done = bytearray(len(self.state_index))
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
        frontier.extend((0.0, state) for state in sources)
        heapq.heapify(frontier)
        for tool in starters:
            if usable[tool]:
                fire(tool, cost[tool])
        while frontier:
            reached_at, state = heapq.heappop(frontier)
            if done[state]:
                continue
            done[state] = 1
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
        return self.executable_order(sorted(chosen, key=costs.fired.__getitem__), held)

    def executable_order(self, tools: list[int], held: Collection[int], every_tool: bool = True) -> list[int]:
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

    def lowered(self, root: RelaxedCosts, reached: Iterable[int], target: int) -> RelaxedCosts:
        """h_max costs once the ``reached`` states are held too, from ``root`` (h_max from the held
        states), final up to ``target``'s cost.

        Holding more states only lowers costs, so a Dijkstra over the decreases, from the newly
        held states, touches only the states that get cheaper than ``target``; a search from
        scratch would touch every state cheaper than it. Firing numbers of the tools that achieve
        a lowered state are not kept up to date: :meth:`extract` orders its steps itself.
        """
        leads_to_target = self.ancestors(target)
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

    def ancestors(self, state: int) -> bytearray:
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

    def tools_leading_to(self, states: frozenset[int]) -> list[int]:
        """The tools some chain of tools leads from to one of ``states``: those producing one of them,
        or a state such a tool requires, and so on (sorted tool indices; the cached list, not to be
        changed); cached like ancestors.

        Nothing else can be in a plan for ``states``, nor change their costs.
        """
        return self._leading(states)[0]

    def _leading(self, states: frozenset[int]) -> tuple[list[int], bytearray]:
        """:meth:`tools_leading_to` ``states``, and per state index 1 for ``states`` and the states those tools require."""
        if states in self._leading_cache:
            self._leading_cache.move_to_end(states)
            return self._leading_cache[states]
        feeding = self._feeding
        reached_state = bytearray(len(self.state_index))
        reached = list(states)
        for state in reached:
            reached_state[state] = 1
        stack = list(reached)
        while stack:
            for required in feeding(stack.pop()):
                if not reached_state[required]:
                    reached_state[required] = 1
                    reached.append(required)
                    stack.append(required)
        # The tools producing a state reached: each comes once however many of them it produces.
        found = sorted(set(itertools.chain.from_iterable(map(self.producers.__getitem__, reached))))
        self._leading_cache[states] = found, reached_state
        if len(self._leading_cache) > self._CACHE_SIZE:
            self._leading_cache.popitem(last=False)
        return found, reached_state

    def _feeding(self, state: int) -> Sequence[int]:
        """The states the producers of ``state`` require (a mark's: its tool's requirements), worked
        out when a walk of :meth:`tools_leading_to` first reaches ``state`` and kept on the task its
        variants share: a goal's walk reaches a few thousand states of 100,000 tools' catalog."""
        if state in self.marked_tool:
            return self.requires[self.marked_tool[state]]
        origin = self._origin
        found = origin._feeding_cache.get(state)
        if found is None:
            producers, requires = origin.producers[state], origin.requires
            if len(producers) == 1:
                found = tuple(requires[producers[0]])
            else:
                found = tuple(set(itertools.chain.from_iterable(map(requires.__getitem__, producers))))
            origin._feeding_cache[state] = found
        return found

    def steiner_relaxation(self) -> SteinerRelaxation:
        """This task relaxed to a directed Steiner tree problem (see
        :mod:`~toolpath.planner.planning.steiner`), built on first use and shared with every variant
        of this task (a variant's marks are their tools' nodes)."""
        # numpy loads with the first goal of several states, not with every command that plans.
        from toolpath.planner.planning.steiner import SteinerRelaxation

        origin = self._origin
        if origin._steiner is None:
            origin._steiner = SteinerRelaxation(origin.requires, origin.produces, len(origin.state_index))
        return origin._steiner
