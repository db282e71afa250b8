"""The cells that continue a task in the kernel it failed in, after a replan
(:mod:`toolpath.planner.tasks.replanning`).

An agent session knows what its kernel holds (:meth:`toolpath.planner.tasks.session_runs.SessionRuns.continuation`).
A fresh kernel (:meth:`toolpath.planner.Workspace.run_task` with ``on_failure="replan"``, as
``toolpath run`` runs) is followed here: :class:`FreshKernelContinuation` adds each cell's completed
steps to the states and artifacts held, and writes the next cell to read them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Collection
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from toolpath.errors import Refusal
from toolpath.planner.tasks.cell import HeldOutput, KernelView, render_cell
from toolpath.planner.tasks.request import task_text

if TYPE_CHECKING:
    from toolpath.planner.planning.graph import StateGraph
    from toolpath.planner.tasks.replanning import Replanning
    from toolpath.planner.tasks.task import TaskPlan, TaskRun


def whole_run(cells: list[TaskRun], replanning: Replanning | None) -> TaskRun:
    """The run of a task whose cells are ``cells`` (the first, then one per replan): the last
    cell's run, with the earlier ones, the replans and why replanning stopped."""
    if replanning is None:
        return cells[-1]
    return replace(cells[-1], earlier=tuple(cells[:-1]), replans=tuple(replanning.replans), stopped=replanning.stopped)


@dataclass
class FreshKernelContinuation:
    """What a task run in a fresh kernel has made so far, and the cell that continues it.

    Args:
        graph: the state graph.
        task_plan: the task's first plan (its inputs and words are every cell's).
        output_directory: where the tools write the files no input places (as the task was planned).
        host_allowed: whether a new route may call host tools (they are bound in the CodeMode).
    """

    graph: StateGraph
    task_plan: TaskPlan
    output_directory: str | os.PathLike[str] | None = None
    host_allowed: bool = True
    held: set[str] = field(init=False)
    artifacts: dict[str, str] = field(init=False, default_factory=dict)
    outputs: dict[str, dict[str, HeldOutput]] = field(init=False, default_factory=dict)
    handles: set[str] = field(init=False, default_factory=set)

    def __post_init__(self) -> None:
        self.held = set(self.task_plan.plan.held)

    def _take(self, run: TaskRun) -> None:
        """Hold the states of ``run``'s completed steps, and note their artifacts and its cell's handles."""
        steps, names = run.task_plan.plan.steps, run.task_plan.cell.step_variables
        self.handles.update(run.task_plan.cell.handles)
        for index in run.completed_steps:
            tool, variable = steps[index].tool, names[index]
            self.held.update(tool.state_transition.produces)
            self.artifacts.pop(variable, None)
            if tool.return_spec is not None and tool.return_spec.state:
                self.artifacts[variable] = tool.return_spec.state
            if tool.outputs:
                self.outputs[variable] = {state: HeldOutput(path, tool.name) for state, path in tool.outputs.items()}

    def next(self, run: TaskRun, replanning: Replanning, variables: Collection[str]) -> TaskPlan | None:
        """The plan whose cell continues ``run`` after its failure in the same kernel (whose user
        variables are ``variables``), or ``None`` when the run stops (``replanning.stopped`` says
        why, unless it did not fail)."""
        self._take(run)
        found = replanning.next_plan(run, self.held)
        if found is None:
            return None
        remainder, failure, planning_ms = found
        started = time.perf_counter()
        host = [step.tool.name for step in remainder.steps if step.tool.binding == "host"]
        if host and not self.host_allowed:
            replanning.stopped = f"not replanned: the new route calls host tools ({', '.join(host)}), which the CodeMode given did not bind"
            return None
        # The earlier cells' handles are bound again under their own names (a domain is one handle):
        # renamed (records_2), a host tool's calls would still be reported under the kernel's host
        # handle (records.fetch), and a completed step would be missed and run again.
        kernel = KernelView(self.graph.registry, self.graph.refinements, None, dict(self.artifacts), set(variables) - self.handles, dict(self.outputs))
        try:
            cell = render_cell(remainder, self.task_plan.inputs, task_text(self.task_plan.task), kernel, output_directory=self.output_directory)
        except (Refusal, ValueError) as error:  # the inputs do not fit the new route: say so, never half run it
            replanning.stopped = f"not replanned: the new route {' -> '.join(step.tool.name for step in remainder.steps)} cannot be written as a cell ({error})"
            return None
        replanning.note(run, failure, remainder, remainder.held, planning_ms + (time.perf_counter() - started) * 1000)
        return replace(self.task_plan, plan=remainder, cell=cell)
