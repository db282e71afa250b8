"""What an agent session's kernel holds, as the session knows it.

Held states, the kernel variables that carry their artifacts, the kernel's variable names after the
last cell, the names planned cells now running will make, and the notice the next result carries
(see the contract in :mod:`toolpath.planner.tasks.agent_session`). One re-entrant lock guards all
of it: a session is used from several threads (planning runs in a worker thread).
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Mapping
from dataclasses import replace

from toolpath.errors import Refusal
from toolpath.kernel import CellResult
from toolpath.planner.planning.graph import kinds_of
from toolpath.planner.tasks.cell import HeldOutput, is_variable_name
from toolpath.planner.tasks.task import TaskPlan, TaskRun


class StalePlanError(Refusal, RuntimeError):
    """A task plan relies on held states or artifacts the session no longer has; plan it again."""


class SessionHoldings:
    """One session's held states and artifacts, its kernel's variable names, and its next notice.

    Args:
        refinements: ``{state: the state it refines}`` of the graph
            (:attr:`toolpath.planner.planning.graph.StateGraph.refinements`): a state's artifact
            may be carried by a refinement of it.

    Attributes:
        lock: guards everything here; hold it to read several of them at one moment.
        held: the held states.
        artifacts: ``{variable: state}``, oldest first: the kernel variables carrying held states' artifacts.
        outputs: ``{variable: {state: HeldOutput}}``, oldest first: kernel variables holding a step's
            return whose ``outputs`` place held states inside it (an HTTP search's ``person_id`` at
            ``results[0].id``); a later task reads the state there.
        variables: the kernel's variable names after the last cell.
        running: the variables of planned cells now running: a task started meanwhile never picks one.
    """

    def __init__(self, refinements: Mapping[str, str]):
        self.refinements = refinements
        self.lock = threading.RLock()
        self.held: set[str] = set()
        self.artifacts: dict[str, str] = {}
        self.outputs: dict[str, dict[str, HeldOutput]] = {}
        self.variables: set[str] = set()
        self.running: set[str] = set()
        self._notice = ""

    def newest_artifact(self, state: str) -> str | None:
        """The newest variable carrying ``state`` or a refinement of it (as a planned cell reads it)."""
        kinds = kinds_of(state, self.refinements)
        with self.lock:
            return next((variable for variable, carried in reversed(self.artifacts.items()) if carried in kinds), None)

    def artifact_of(self) -> dict[str, str]:
        """``{state: variable}``, the newest variable for each state."""
        with self.lock:
            return {state: variable for variable, state in self.artifacts.items()}

    def taken_names(self) -> set[str]:
        """Names a new cell's variables must not take: the kernel's, and those of cells now running."""
        with self.lock:
            return self.variables | self.running

    def tell(self, text: str) -> None:
        """Add ``text`` to the notice of the next result."""
        with self.lock:
            self._notice = f"{self._notice} {text}".strip()

    def take_notice(self, result: CellResult) -> CellResult:
        """``result`` with the pending notice added to its own (the notice is then cleared)."""
        with self.lock:
            notice, self._notice = self._notice, ""
        return replace(result, notice=f"{result.notice} {notice}".strip()) if notice else result

    def forget_everything(self, why: str | None) -> None:
        """Drop held states, artifacts and known variables; ``why`` (if given) is told in the next notice."""
        with self.lock:
            if self.held and why is not None:
                self._notice = f"{why}, so the states it held are gone: {', '.join(sorted(self.held))}."
            self.held.clear()
            self.artifacts.clear()
            self.outputs.clear()
            self.variables.clear()

    def after_cell(self, variables: list[str] | None) -> None:
        """Note the kernel's variables after a cell (``None``: unknown, nothing changes). An artifact
        whose variable is gone is dropped, and its state is no longer held when no other variable
        carries it."""
        if variables is None:
            return
        with self.lock:
            self.variables = {variable for variable in variables if is_variable_name(variable)}
            gone = [(variable, state) for variable, state in self.artifacts.items() if variable not in self.variables]
            gone += [(variable, state) for variable, places in self.outputs.items() if variable not in self.variables for state in places]
            for variable, _ in gone:
                self.artifacts.pop(variable, None)
                self.outputs.pop(variable, None)
            lost = {state for _, state in gone} - self._carried()
            self.held -= lost
            if lost:
                names = ", ".join(f"{variable} ({state})" for variable, state in gone)
                self.tell(f"Variables that carried held states are gone: {names}; those states are no longer held.")

    def _carried(self) -> set[str]:
        """The states some variable carries, as an artifact or at an output path."""
        return set(self.artifacts.values()).union(*self.outputs.values())

    def hold(self, state: str, variable: str | None = None) -> None:
        """Hold ``state``, carried by ``variable`` when given (then its newest artifact)."""
        with self.lock:
            self.held.add(state)
            if variable is not None:
                self.artifacts.pop(variable, None)
                self.artifacts[variable] = state

    def forget(self, state: str) -> None:
        """Stop holding ``state`` and drop its artifacts."""
        with self.lock:
            self.held.discard(state)
            for variable in [variable for variable, carried in self.artifacts.items() if carried == state]:
                del self.artifacts[variable]
            for variable, places in list(self.outputs.items()):
                places.pop(state, None)
                if not places:
                    del self.outputs[variable]

    def record(self, run: TaskRun) -> None:
        """Hold the states of the steps of ``run`` that completed, and note their artifacts and
        the states their returns hold at output paths."""
        task_plan = run.task_plan
        steps = task_plan.plan.steps
        with self.lock:
            for index in run.completed_steps:
                tool = steps[index].tool
                variable = task_plan.cell.step_variables[index]
                self.held.update(tool.state_transition.produces)
                self.artifacts.pop(variable, None)
                self.outputs.pop(variable, None)
                if tool.return_spec is not None and tool.return_spec.state:
                    self.artifacts[variable] = tool.return_spec.state
                if tool.outputs:
                    self.outputs[variable] = {state: HeldOutput(path, tool.name) for state, path in tool.outputs.items()}

    def check_current(self, task_plan: TaskPlan, given: Collection[str]) -> None:
        """Refuse ``task_plan`` when it starts from states or reads artifacts no longer held; input
        states its own inputs give (``given``) are held for that task only.

        Raises:
            StalePlanError: naming the states (or else the artifacts) that are gone.
        """
        with self.lock:
            gone = sorted(task_plan.plan.held - self.held - set(given))
            lost = sorted(
                variable
                for variable, state in task_plan.cell.used_artifacts.items()
                if self.artifacts.get(variable) != state and state not in self.outputs.get(variable, {})
            )
        if gone or lost:
            missing = ", ".join(gone) if gone else ", ".join(lost)
            raise StalePlanError(f"the task was planned with {'held states' if gone else 'artifacts'} the session no longer has ({missing}); plan it again")

    def reserve(self, task_plan: TaskPlan) -> None:
        """Keep ``task_plan``'s step variables from every other cell until :meth:`release`."""
        with self.lock:
            self.running.update(task_plan.cell.step_variables)

    def release(self, task_plan: TaskPlan) -> None:
        """Give back the names :meth:`reserve` kept."""
        with self.lock:
            self.running.difference_update(task_plan.cell.step_variables)
