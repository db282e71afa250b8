"""StateGraph: the state-transition graph of a tool registry, on networkx.

Nodes are ``("state", token)`` and ``("tool", tool_id)``; an edge state → tool means the tool
requires the state, an edge tool → state means the tool produces it. Node attributes: ``kind``
(``"state"``/``"tool"``), and ``label`` (token, or ``server.name``); state nodes also carry
``declared`` (``False`` for a token a tool mentions but no catalog declares).
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterable, Mapping
from functools import cached_property
from typing import TYPE_CHECKING

from toolpath.errors import Refusal
from toolpath.planner.planning.delete_free import DeleteFreeTask
from toolpath.planner.planning.inputs import input_for
from toolpath.registry import State, ToolDefinition, ToolNotFoundError, ToolRegistry, reachable_states
from toolpath.registry.tool_registry import ToolsById

if TYPE_CHECKING:
    import networkx as nx


class UnknownStateError(Refusal, ValueError):
    """A state token that no catalog declares and no tool mentions; the message suggests close ones."""


def _suggest(name: str, known: Iterable[str]) -> str:
    matches = difflib.get_close_matches(name, list(known), n=3)
    return f"; did you mean {', '.join(matches)}?" if matches else ""


def kinds_of(token: str, refinements: Mapping[str, str]) -> frozenset[str]:
    """``token`` and every state that refines it, directly or through others (``refinements``:
    ``{state: the state it refines}``, as :attr:`StateGraph.refinements`): the states whose artifacts
    a parameter carrying ``token`` takes. Lint refuses refinement cycles (TP014); one made in code
    still ends, each state being added once."""
    kinds = {token}
    while more := {special for special, general in refinements.items() if general in kinds} - kinds:
        kinds |= more
    return frozenset(kinds)


class StateGraph:
    """The tools of a registry as a bipartite state/tool ``networkx.DiGraph``.

    Args:
        registry: the tools.
        states: declared states, as a ``{token: State}`` mapping or an iterable of ``State``.
        closed_vocabulary: the domains of the catalogs that declare ``vocabulary: closed``
            (:attr:`toolpath.registry.catalog_format.CatalogFile.vocabulary`): their tools' work is
            asked for only in words some loaded catalog's texts use.

    The graph is built once (its networkx form on first use of :attr:`graph`); rebuild it after
    changing the registry.
    """

    def __init__(self, registry: ToolRegistry, states: Mapping[str, State] | Iterable[State] = (), closed_vocabulary: Collection[str] = ()):
        self.registry = registry
        self.closed_vocabulary = frozenset(closed_vocabulary)
        declared = states.values() if isinstance(states, Mapping) else states
        self.states: dict[str, State] = {state.token: state for state in declared}
        #: Every tool's transition as integers: a registry read from a catalog snapshot gives it
        #: without reading any definition (:mod:`toolpath.registry.catalog_snapshot`).
        self.transitions = registry.transitions()
        self._tokens = set(self.states) | set(self.transitions.tokens)

    @cached_property
    def graph(self) -> nx.DiGraph:
        """The bipartite graph: nodes ``("state", token)`` (attributes ``kind``, ``label``,
        ``declared``, ``description``) and ``("tool", id)`` (``kind``, ``label``, ``cost``); edges
        from each required state to its tool and from each tool to the states it produces.

        Built on first use: planning and search need only the producers of each state, and
        importing networkx costs about 0.2 s of every command.
        """
        import networkx as nx

        graph = nx.DiGraph()
        for token, state in self.states.items():
            graph.add_node(("state", token), kind="state", label=token, declared=True, description=state.description)
        for tool in self.registry:
            graph.add_node(("tool", tool.id), kind="tool", label=f"{tool.server_name}.{tool.name}", cost=tool.cost)
            for token in tool.state_transition.requires:
                if ("state", token) not in graph:
                    graph.add_node(("state", token), kind="state", label=token, declared=False, description="")
                graph.add_edge(("state", token), ("tool", tool.id))
            for token in tool.state_transition.produces:
                if ("state", token) not in graph:
                    graph.add_node(("state", token), kind="state", label=token, declared=False, description="")
                graph.add_edge(("tool", tool.id), ("state", token))
        return graph

    @property
    def tokens(self) -> list[str]:
        """Every state token in the graph, declared or only mentioned by a tool, sorted."""
        return sorted(self._tokens)

    def has_state(self, token: str) -> bool:
        return token in self._tokens

    def check_states(self, tokens: Iterable[str]) -> None:
        """Raise :class:`UnknownStateError` for the first token the graph does not know."""
        for token in tokens:
            if not self.has_state(token):
                raise UnknownStateError(f"unknown state {token!r}: no catalog declares it and no tool requires or produces it{_suggest(token, self.tokens)}")

    def resolve_tool(self, name: str) -> ToolDefinition:
        """A tool by ``name`` or ``server.name``.

        Raises:
            ToolNotFoundError: no such tool (the message suggests close names).
            AmbiguousToolNameError: the bare name is exposed by several servers.
        """
        server, _, bare = name.rpartition(".")
        try:
            if server:
                return self.registry.get_tool_by_server_and_name(server, bare)
            return self.registry.get_tool_by_name(name)
        except ToolNotFoundError:
            labels = [f"{tool.server_name}.{tool.name}" for tool in self.registry]
            raise ToolNotFoundError(f"unknown tool {name!r}{_suggest(name, labels)}") from None

    def tools_for(self, token: str) -> list[ToolDefinition]:
        """The tools that produce ``token``, in registration order."""
        return [self.registry.get_tool_by_id(tool_id) for tool_id in self._producers.get(token, ())]

    @cached_property
    def _producers(self) -> dict[str, list[int]]:
        """``{token: the ids of the tools that produce it}``, made on first use: planning reads the
        transition table, and only explanations ask for a state's producers."""
        tokens = self.transitions.tokens
        producers: dict[str, list[int]] = {}
        for tool_id, produced in zip(self.transitions.ids, self.transitions.produces):
            for number in produced:
                producers.setdefault(tokens[number], []).append(tool_id)
        return producers

    def parameters_carrying(self, token: str) -> list[str]:
        """The Python names of every tool's parameters that carry ``token`` (``state: TOKEN``),
        sorted, without repeats: an input of one of these names holds the state."""
        return list(self._parameters_carrying.get(token, ()))

    @cached_property
    def _parameters_carrying(self) -> dict[str, tuple[str, ...]]:
        # Built once, on the first explanation that needs it: an explanation per unreachable search
        # hit that scanned every tool's parameters took 99.6 % of a search at 10,000 tools (issue 57).
        names: dict[str, set[str]] = {}
        for tool in self.registry:
            for parameter in tool.parameters:
                if parameter.state:
                    names.setdefault(parameter.state, set()).add(parameter.python_name)
        return {token: tuple(sorted(found)) for token, found in names.items()}

    def next_steps(self, held: Collection[str]) -> list[ToolDefinition]:
        """Tools applicable now (every required state held) that would add at least one new state."""
        held = set(held)
        return [tool for tool in self.registry if tool.state_transition.requires <= held and not tool.state_transition.produces <= held]

    @cached_property
    def refinements(self) -> dict[str, str]:
        """``{state: the more general state it refines}`` for every declared state with ``refines``."""
        return {token: state.refines for token, state in self.states.items() if state.refines}

    def states_carried(self, inputs: Mapping[str, object]) -> frozenset[str]:
        """The states whose value ``inputs`` give: an input meant for a parameter that carries the
        state (:func:`toolpath.planner.planning.inputs.input_for`) is a new value of that state."""
        return frozenset(
            parameter.state for tool in self.registry for parameter in tool.parameters if parameter.state and input_for(tool, parameter, inputs) is not None
        )

    def input_states_given(self, inputs: Mapping[str, object]) -> frozenset[str]:
        """The input states (``State.input``) among :meth:`states_carried`: a task holds them from the start."""
        return frozenset(token for token in self.states_carried(inputs) if token in self.states and self.states[token].input)

    def reachable(self, held: Collection[str], avoid: Collection[int] = ()) -> set[str]:
        """Every state reachable from ``held`` with the tools not in ``avoid`` (ids): a forward fixpoint."""
        return reachable_states((tool for tool in self.registry if tool.id not in avoid), held)

    @cached_property
    def delete_free_task(self) -> DeleteFreeTask:
        """The tools as an integer planning task (built on first use; it caches bounds per held states)."""
        return DeleteFreeTask(ToolsById(self.registry, self.transitions.ids), self.transitions)

    def overview(self) -> dict:
        """Counts and lists for a quick look: states, tools, entry tools (no requires), undeclared states."""
        entry = [f"{tool.server_name}.{tool.name}" for tool in self.registry if not tool.state_transition.requires]
        undeclared = [token for token in self.tokens if token not in self.states]
        return {
            "states": len(self.tokens),
            "tools": len(self.registry),
            "edges": self.graph.number_of_edges(),
            "entry_tools": entry,
            "undeclared_states": undeclared,
        }

    def to_mermaid(self) -> str:
        """The graph as Mermaid flowchart text, laid out in layers (:func:`toolpath.planner.planning.picture.mermaid`)."""
        from toolpath.planner.planning.picture import mermaid  # loaded on use: most commands never draw

        return mermaid(self)

    def to_networkx(self) -> nx.DiGraph:
        """A copy of the graph for users' own analysis."""
        return self.graph.copy()
