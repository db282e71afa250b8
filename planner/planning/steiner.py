"""Goals of several states as a directed Steiner tree problem, solved over subsets of the goal states.

Relax a delete-free task so that a tool needs only *one* of its requirements that are not held:
the deepest (largest h_max from the held states; any choice would keep the bound below). A plan
of the relaxed task is then an arborescence: from a root standing for the held states, through
tools (entered from that requirement, or from the root when every requirement is held) and the
states they produce, to every goal state. Its cheapest one is a directed Steiner tree, which the
dynamic programme of Dreyfus & Wagner (Networks 1(3), 1971), in the form of Erickson, Monma &
Veinott (Mathematics of Operations Research 12(4), 1987), finds exactly, in time exponential only
in the number of goal states:

    T(S, v) = min( min over splits S = A ∪ B of T(A, v) + T(B, v),
                   min over edges v → w of cost(v → w) + T(S, w) )

where ``T(S, v)`` is the cheapest way from node ``v`` to every state of ``S``, an edge into a
tool costs the tool's cost, and an edge from a tool to a state it produces costs nothing.

Every plan of the real task gives an arborescence no dearer than itself (each tool entered from
its chosen requirement, which some earlier step produced), so ``T(goal, root)`` is an admissible
lower bound, at least the largest h_max of a goal state and counting what goal states do not
share. When no tool the tree could use has two requirements that are not held, the relaxation is
the task itself: the bound is the optimum, and the tree's tools are an optimal plan. Catalogs are
often like that (a chain of data through tools that also take held inputs); where they are not,
the tools of the tree that can run start a plan.

The nodes are ordered once per task so that every edge goes from a later node to an earlier one
(where the task has cycles, passes repeat until nothing changes); each ``T(S, ·)`` is then one
vectorised sweep over the edges, height by height, at about a millisecond for 10,000 tools. A tree
holds only tools that lead to a goal node, so a planner sweeps only their edges (a few thousand of
a 100,000-tool catalog's, issue 57).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

#: Goal states up to which the programme runs: it keeps 2^k arrays and takes 3^k vector sums.
MOST_GOAL_STATES = 6


class _Edges:
    """Edges of the relaxation sorted by their source's height, then by source (so each node's edges
    are contiguous, and a height's too): per edge its ``source`` and ``target`` node, and the
    ``sweeps``, per height the edges' slice, where each source's edges start in it, and those sources.
    ``heights`` is per edge, its source's height; ``node_heights`` per node."""

    def __init__(self, source: np.ndarray, target: np.ndarray, heights: np.ndarray, node_heights: np.ndarray):
        self.source, self.target, self._node_heights = source, target, node_heights
        # (height, source) as one sorted number, for a binary search of a node's edges.
        self._keys = heights * len(node_heights) + source
        self.sweeps: list[tuple[slice, np.ndarray, np.ndarray]] = []
        if not len(source):
            return
        first_of_source = np.flatnonzero(np.concatenate(([True], source[1:] != source[:-1])))
        bounds = np.concatenate(([0], np.flatnonzero(heights[1:] != heights[:-1]) + 1, [len(source)]))
        # A node has one height, so each height starts with a source of its own.
        sources_before = np.searchsorted(first_of_source, bounds).tolist()
        bounds = bounds.tolist()
        for level in range(len(bounds) - 1):
            starts = first_of_source[sources_before[level] : sources_before[level + 1]]
            self.sweeps.append((slice(bounds[level], bounds[level + 1]), starts - bounds[level], source[starts]))

    def out_edges(self, node: int) -> slice:
        """The positions of ``node``'s edges."""
        key = int(self._node_heights[node]) * len(self._node_heights) + node
        first, last = np.searchsorted(self._keys, [key, key + 1]).tolist()
        return slice(first, last)


@dataclass(frozen=True)
class SteinerTree:
    """The cheapest relaxed plan: ``cost``, a lower bound on every plan's cost, and the tool indices
    of its tree (a plan of the real task when each of them has at most one requirement not held)."""

    cost: float
    tools: frozenset[int]


class SteinerRelaxation:
    """The state/tool graph of a task as arrays, built once, for :meth:`solve` from any held states.

    Args:
        requires, produces: per tool index, the state indices it requires and produces (as
            :class:`~toolpath.planner.planning.delete_free.DeleteFreeTask` numbers them).
        state_count: how many states there are.

    Node ``s`` is state ``s``, node ``state_count + t`` is tool ``t``, and the last node is the root.
    """

    def __init__(self, requires: Sequence[Sequence[int]], produces: Sequence[Sequence[int]], state_count: int):
        self.state_count = state_count
        self.tool_count = len(requires)
        self.root = state_count + self.tool_count
        source, target = [], []
        for tool, (needed, made) in enumerate(zip(requires, produces)):
            for state in needed:
                source.append(state)
                target.append(state_count + tool)
            for state in made:
                source.append(state_count + tool)
                target.append(state)
        for tool in range(self.tool_count):
            source.append(self.root)
            target.append(state_count + tool)
        self._order(np.array(source, dtype=np.int64), np.array(target, dtype=np.int64))

    def _order(self, source: np.ndarray, target: np.ndarray) -> None:
        """Heights (every edge goes down, except back edges of cycles) and the edges sorted by them."""
        node_count = self.root + 1
        successors: list[list[int]] = [[] for _ in range(node_count)]
        for origin, destination in zip(source.tolist(), target.tolist()):
            successors[origin].append(destination)
        height = [-1] * node_count
        on_path = bytearray(node_count)
        self.cyclic = False
        for start in range(node_count):
            if height[start] >= 0:
                continue
            stack = [(start, 0)]
            on_path[start] = 1
            while stack:
                node, position = stack[-1]
                if position < len(successors[node]):
                    stack[-1] = (node, position + 1)
                    following = successors[node][position]
                    if on_path[following]:
                        self.cyclic = True  # a back edge: the sweep repeats until values settle
                    elif height[following] < 0:
                        on_path[following] = 1
                        stack.append((following, 0))
                    continue
                stack.pop()
                on_path[node] = 0
                height[node] = 1 + max((height[following] for following in successors[node] if height[following] >= 0), default=-1)
        heights = np.array(height, dtype=np.int64)
        by_height = np.lexsort((source, heights[source]))
        source, target = source[by_height], target[by_height]
        self._heights, self._edge_heights = heights, heights[source]
        # Each edge enters a tool (from a state or the root) or leaves one (to a state).
        self._edge_tools = np.where(target >= self.state_count, target, source) - self.state_count
        self._edges = _Edges(source, target, self._edge_heights, heights)

    def _edges_of(self, among: Sequence[int]) -> _Edges:
        """The edges of the tools ``among`` (tool indices), in the same order and by the same heights."""
        chosen = np.zeros(self.tool_count, dtype=bool)
        chosen[np.asarray(among, dtype=np.int64)] = True
        kept = np.flatnonzero(chosen[self._edge_tools])
        return _Edges(self._edges.source[kept], self._edges.target[kept], self._edge_heights[kept], self._heights)

    def tool_node(self, tool: int) -> int:
        """The node of tool index ``tool`` (a goal node when a plan must run the tool)."""
        return self.state_count + tool

    def solve(
        self,
        held: frozenset[int],
        goal: Sequence[int],
        usable: Sequence[bool] | Mapping[int, bool],
        cost: Sequence[float],
        depth: Sequence[float],
        deadline: float | None,
        among: Sequence[int] | None = None,
    ) -> SteinerTree | None:
        """The cheapest relaxed plan from ``held`` to every node of ``goal`` (states not held, or
        :meth:`tool_node` for a tool the plan must run), with only the ``usable`` tools at their
        ``cost`` (per tool index), each entered from its requirement(s) not held of largest
        ``depth`` (per state index: h_max from ``held`` keeps the bound highest; any values keep
        it a bound). ``None`` when the goal is out of reach, past ``deadline`` (a
        ``time.perf_counter()`` value), or for more than :data:`MOST_GOAL_STATES` goal nodes.

        ``among``: the only tools to look at (tool indices; ``None``: every tool), and the only
        ones whose ``usable`` and ``cost`` entries, and whose requirements' ``depth``, are read
        (so ``usable`` may then map just these tools).
        A tree holds only tools that lead to a goal node, so any ``among`` that includes those
        (:meth:`~toolpath.planner.planning.delete_free.DeleteFreeTask.tools_leading_to`) gives
        the same tree in a fraction of the time."""
        if not goal or len(goal) > MOST_GOAL_STATES:
            return None
        edges = self._edges if among is None else self._edges_of(among)
        edge_cost = self._edge_costs(edges, held, usable, cost, depth, among)
        values: dict[int, np.ndarray] = {}
        splits: dict[int, np.ndarray] = {}
        for subset in range(1, 1 << len(goal)):
            if deadline is not None and time.perf_counter() > deadline:
                return None
            if subset & (subset - 1) == 0:
                start = np.full(self.root + 1, np.inf)
                start[goal[subset.bit_length() - 1]] = 0.0
            else:
                start = self._best_split(values, subset)
            splits[subset] = start
            value = self._sweep(edges, start, edge_cost, deadline)
            if value is None:
                return None
            values[subset] = value
        everything = (1 << len(goal)) - 1
        total = float(values[everything][self.root])
        if total == np.inf:
            return None
        return SteinerTree(total, self._tree(edges, values, splits, edge_cost, everything))

    def _edge_costs(
        self,
        edges: _Edges,
        held: frozenset[int],
        usable: Sequence[bool] | Mapping[int, bool],
        cost: Sequence[float],
        depth: Sequence[float],
        among: Sequence[int] | None,
    ) -> np.ndarray:
        """Per edge, its cost from ``held``: an unusable tool's edges and a held state's edges lead
        nowhere (a held state is the root's), the root enters exactly the tools whose every
        requirement is held, and a requirement enters its tool only when no other requirement not
        held is deeper."""
        is_held = np.zeros(self.root + 1, dtype=bool)
        is_held[[state for state in held if state < self.state_count]] = True  # a variant's marks are no nodes
        source, target = edges.source, edges.target
        if among is None:
            tool_cost = np.where(np.asarray(usable, dtype=bool), np.asarray(cost, dtype=float), np.inf)
            state_depth = np.asarray(depth, dtype=float)
        else:
            # Read only what these edges need: a list of 100,000 entries takes milliseconds to convert.
            tool_cost = np.full(self.tool_count, np.inf)
            tool_cost[np.asarray(among, dtype=np.int64)] = [cost[tool] if usable[tool] else np.inf for tool in among]
            required = np.unique(source[source < self.state_count])
            state_depth = np.full(self.state_count, np.inf)
            state_depth[required] = [depth[state] for state in required.tolist()]
        into_tool = target >= self.state_count
        tool = np.where(into_tool, target - self.state_count, 0)
        from_state = source < self.state_count
        unheld_requirement = from_state & ~is_held[source]
        requirement_depth = np.where(unheld_requirement, state_depth[np.minimum(source, self.state_count - 1)], -np.inf)
        deepest = np.full(self.tool_count, -np.inf)
        np.maximum.at(deepest, tool[unheld_requirement], requirement_depth[unheld_requirement])
        from_root = source == self.root
        enters = np.where(from_root, deepest[tool] == -np.inf, unheld_requirement & (requirement_depth >= deepest[tool]))
        return np.where(into_tool, np.where(enters, tool_cost[tool], np.inf), 0.0)

    def _best_split(self, values: dict[int, np.ndarray], subset: int) -> np.ndarray:
        """Per node, the cheapest way to reach ``subset`` (goal state bits) in two parts from it."""
        lowest = subset & -subset
        best = np.full(self.root + 1, np.inf)
        part = (subset - 1) & subset
        while part:
            if part & lowest:  # each split once: the part holding the lowest bit
                np.minimum(best, values[part] + values[subset ^ part], out=best)
            part = (part - 1) & subset
        return best

    def _sweep(self, edges: _Edges, start: np.ndarray, edge_cost: np.ndarray, deadline: float | None) -> np.ndarray | None:
        """``T(S, ·)`` from the splits ``start``: every node's value lowered along its edges, height by
        height (again while a cycle lowers any; ``None`` when that runs past ``deadline``)."""
        value = start.copy()
        while True:
            if self.cyclic and deadline is not None and time.perf_counter() > deadline:
                return None
            changed = False
            for part, starts, sources in edges.sweeps:
                through = np.minimum.reduceat(edge_cost[part] + value[edges.target[part]], starts)
                lower = through < value[sources]
                if lower.any():
                    value[sources[lower]] = through[lower]
                    changed = True
            if not (self.cyclic and changed):
                return value

    def _tree(self, edges: _Edges, values: dict[int, np.ndarray], splits: dict[int, np.ndarray], edge_cost: np.ndarray, everything: int) -> frozenset[int]:
        """The tools of the tree ``values`` price at the root, taken apart from the root down: a path
        of edges that price each node, to a node where its goal states split in two (or the goal
        state itself), then each part from there."""
        tools: set[int] = set()
        stack = [(everything, self.root)]
        while stack:
            subset, node = stack.pop()
            path = self._priced_path(edges, values[subset], splits[subset], edge_cost, node)
            tools.update(step - self.state_count for step in path if self.state_count <= step < self.root)
            if subset & (subset - 1):
                stack.extend(self._split_at(values, subset, path[-1]))
        return frozenset(tools)

    def _priced_path(self, edges: _Edges, value: np.ndarray, split: np.ndarray, edge_cost: np.ndarray, node: int) -> list[int]:
        """Nodes from ``node`` along edges whose cost plus the next node's value is the node's value,
        to the first whose value its ``split`` gives. A search, not a greedy walk: tools costing
        nothing can make such edges cycle."""
        before: dict[int, int] = {node: node}
        stack = [node]
        while stack:
            current = stack.pop()
            if split[current] == value[current]:
                path = [current]
                while path[-1] != node:
                    path.append(before[path[-1]])
                return path[::-1]
            out = edges.out_edges(current)
            priced = edges.target[out][edge_cost[out] + value[edges.target[out]] == value[current]]
            for following in priced.tolist():
                if following not in before:
                    before[following] = current
                    stack.append(following)
        raise AssertionError("no path of edges gives the value the sweep found")

    @staticmethod
    def _split_at(values: dict[int, np.ndarray], subset: int, node: int) -> list[tuple[int, int]]:
        value = values[subset][node]
        part = (subset - 1) & subset
        while part:
            if values[part][node] + values[subset ^ part][node] == value:
                return [(part, node), (subset ^ part, node)]
            part = (part - 1) & subset
        raise AssertionError("no split gives the value the split array holds")
