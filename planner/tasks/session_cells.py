"""What an agent session writes for its kernel and its model: the handles it binds, its planned cells,
and its instructions (held states, next steps).

A session binds every tool of a domain (server) behind one handle the first time a task uses that
domain (:class:`SessionHandles`); its cells (:class:`SessionCells`, a
:class:`toolpath.planner.tasks.cell_writers.CellWriter`) call those handles, read the held artifacts
and never take a name the kernel or a running cell uses.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from toolpath.kernel.tools.bindings import Bindings, toolkit_of
from toolpath.planner.planning.plans import Plan, TaskBudget
from toolpath.planner.tasks.cell import OUTPUT_FUNCTION, OUTPUT_MODULE, KernelView, PlannedCell, render_cell
from toolpath.registry import ToolDefinition, ToolRegistry

if TYPE_CHECKING:
    from toolpath.planner.tasks.agent_session import AgentSession
    from toolpath.planner.tasks.parts import PartMatch
    from toolpath.planner.tasks.request import TaskRequest

#: Lines of "next steps" in the instructions; the rest are counted.
MAX_NEXT_STEPS = 15


class SessionHandles:
    """The domains a session has bound in its kernel, and their handles.

    Args:
        registry: every loaded tool: handle names are de-duplicated over all of them, so they never
            change within the session.
        lock: the session's lock, held while the bound handles change.

    Attributes:
        domains: the bound servers, in order of first use.
        bindings: the handles of every bound domain (``None`` before the first).
    """

    def __init__(self, registry: ToolRegistry, lock: threading.RLock):
        self.registry = registry
        self.lock = lock
        self.domains: list[str] = []
        self.bindings: Bindings | None = None

    def servers(self) -> dict[str, list[ToolDefinition]]:
        """``{server: its tools}`` of every loaded catalog."""
        servers: dict[str, list[ToolDefinition]] = {}
        for tool in self.registry:
            servers.setdefault(toolkit_of(tool), []).append(tool)
        return servers

    def names(self) -> set[str]:
        """The handles' names in the kernel (no variable of the session's may take one)."""
        if self.bindings is None:
            return set()
        return {*self.bindings.handles, *self.bindings.host_handles}

    def new_domains(self, domains: str | Iterable[str]) -> list[str]:
        """The domains of ``domains`` (one may be a plain string) not bound yet, in order.

        Raises:
            ValueError: a domain no loaded catalog has.
        """
        servers = self.servers()
        new = [domain for domain in dict.fromkeys([domains] if isinstance(domains, str) else domains) if domain not in self.domains]
        unknown = [domain for domain in new if domain not in servers]
        if unknown:
            raise ValueError(f"no loaded catalog has the domain(s) {', '.join(unknown)}; domains: {', '.join(sorted(servers))}")
        return new

    def add(self, domains: list[str], bindings: Bindings) -> None:
        """Note ``domains`` as bound, with ``bindings`` the handles of every bound domain now."""
        with self.lock:
            self.bindings = bindings
            self.domains.extend(domains)

    def prospective(self, plan: Plan) -> Bindings:
        """The handles the session would have once ``plan``'s domains are bound (nothing is bound)."""
        servers = self.servers()
        domains = dict.fromkeys([*self.domains, *(toolkit_of(step.tool) for step in plan.steps)])
        return Bindings.of([tool for domain in domains for tool in servers[domain]], universe=self.registry)

    def current(self, plan: Plan) -> Bindings:
        """The bound handles, or (before any is bound) :meth:`prospective` ones for ``plan``."""
        return self.bindings if self.bindings is not None else self.prospective(plan)

    def next_steps(self, held: set[str], newest_artifact: Callable[[str], str | None]) -> list[str]:
        """Lines naming the tools whose requirements are all ``held`` and that add a state, with the
        calls that wire the held artifacts (``newest_artifact(state)`` gives a state's variable)."""
        targets = self.bindings.targets if self.bindings is not None else {}
        steps = []
        for tool in self.registry:
            requires, produces = tool.state_transition.requires, tool.state_transition.produces
            if not requires or not requires <= held or produces <= held:
                continue
            carriers = {
                parameter.python_name: newest_artifact(parameter.state)
                for parameter in tool.required_parameters
                if parameter.state and parameter.role != "output"
            }
            arguments = ", ".join(f"{name}={variable}" for name, variable in carriers.items() if variable is not None)
            if tool.id in targets:
                steps.append(f"  {targets[tool.id]}({arguments}) -> {', '.join(sorted(produces - held))}")
            else:
                steps.append(f"  {toolkit_of(tool)}.{tool.name} -> {', '.join(sorted(produces - held))}  (not bound yet: a task that uses it binds its domain)")
        if not steps:
            return ["Next steps from the held states: none yet (tools that need no state can always run; plan a task to reach new states)."]
        shown = steps[:MAX_NEXT_STEPS]
        if len(steps) > MAX_NEXT_STEPS:
            shown.append(f"  ... and {len(steps) - MAX_NEXT_STEPS} more")
        return ["Next steps from the held states (tool -> states it adds):", *shown]


class SessionCells:
    """The cells of one agent session (a :class:`toolpath.planner.tasks.cell_writers.CellWriter`):
    they call the session's handles, read its held artifacts, and name new variables apart from the
    kernel's and those of cells now running. Planning promises no variable name: running does
    (the session renders a plan again when a name was taken since)."""

    def __init__(self, session: AgentSession):
        self.session = session

    def render(self, plan: Plan, inputs: Mapping[str, Any] | None, text: str | None, bindings: Bindings, also_show: Sequence[str] = ()) -> PlannedCell:
        """The session's cell for ``plan`` (``also_show``: held artifacts the final expression shows too)."""
        holdings, graph = self.session.holdings, self.session.workspace.graph
        with holdings.lock:
            # An input that carries a state is a newer value of it than the artifact held before.
            carried = graph.states_carried(inputs or {})
            artifacts = {variable: state for variable, state in holdings.artifacts.items() if state in plan.held and state not in carried}
            outputs = {
                variable: {state: place for state, place in places.items() if state in plan.held and state not in carried}
                for variable, places in holdings.outputs.items()
            }
            outputs = {variable: places for variable, places in outputs.items() if places}
            kernel = KernelView(graph.registry, graph.refinements, bindings, artifacts, holdings.taken_names(), outputs)
            return render_cell(plan, inputs, text, kernel, also_show=also_show)

    def instructions(self, kernel_instructions: str) -> str:
        """``kernel_instructions`` (the kernel's rules, limits and bound handles) followed by the
        held states with the variables that carry them, and the next steps from them."""
        holdings = self.session.holdings
        with holdings.lock:
            held, artifact_of = sorted(holdings.held), holdings.artifact_of()
            places = {state: (variable, place) for variable, held_outputs in holdings.outputs.items() for state, place in held_outputs.items()}
        lines = [kernel_instructions.rstrip("\n"), "Held states (and the variables that carry them):"]
        if not held:
            lines.append("  none yet")
        for state in held:
            carrier = artifact_of.get(state)
            if carrier is None and state in places:
                variable, place = places[state]
                carrier = f"{variable} at {place.path} (read it with {OUTPUT_FUNCTION}({variable}, {place.path!r}, {place.tool!r}) from {OUTPUT_MODULE})"
            lines.append(f"  {state}: {carrier}" if carrier else f"  {state} (no variable carries it)")
        lines.extend(self.session.handles.next_steps(set(held), holdings.newest_artifact))
        return "\n".join(lines) + "\n"

    def candidate(self, plan: Plan, inputs: Mapping[str, Any], text: str) -> PlannedCell:
        return self.render(plan, inputs, text, self.session.handles.prospective(plan))

    def chosen(self, request: TaskRequest, parts: tuple[PartMatch, ...], joint: Plan, budget: TaskBudget) -> PlannedCell:
        """The cell of the task's joint plan, once its domains are bound; it also shows the held
        artifacts of parts whose goal was held already."""
        budget.check()  # a cancelled plan binds no domains
        self.session.bind_domains(toolkit_of(step.tool) for step in joint.steps)
        artifact_of = self.session.holdings.artifact_of()
        already = [artifact_of[state] for part in parts if part.status == "held" for state in sorted(part.goal) if state in artifact_of]
        return self.render(joint, request.inputs, request.text, self.session.handles.current(joint), also_show=already)
