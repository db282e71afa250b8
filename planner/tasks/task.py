"""A planned task and its run: what each part of a task matched, its plan and cell, and what running it showed."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from toolpath.errors import Refusal
from toolpath.kernel import CellResult, format_for_model
from toolpath.planner.planning.plans import Plan
from toolpath.planner.tasks.cell import PlannedCell, UnboundParameter
from toolpath.planner.tasks.parts import PartMatch


class UnboundParametersError(Refusal, ValueError):
    """The planned cell needs inputs that were not given; ``unbound`` lists them."""

    def __init__(self, unbound: Iterable[UnboundParameter]):
        self.unbound = tuple(unbound)
        names = ", ".join(f"{parameter.parameter} ({parameter.type}, for {parameter.tool})" for parameter in self.unbound)
        example = self.unbound[0].parameter if self.unbound else "NAME"
        super().__init__(
            f"the plan needs inputs that were not given: {names}. Pass them as inputs ({{{example!r}: ...}}), or --input {example}=VALUE on the command line"
        )


@dataclass(frozen=True)
class TaskPlan:
    """A task, what each of its parts matched, the joint plan and its planned cell.

    Attributes:
        task: the request in words, or the steps an agent gave (a tuple).
        inputs: the user inputs.
        parts: each part of the task and the goal it chose (one part for a one-part task).
        plan: one plan for the goals of every matched part.
        cell: the planned cell.
        session_id: the agent session that planned it (its cell uses that session's handles and
            variables); ``None`` for :meth:`toolpath.planner.Workspace.plan_task`.
    """

    task: str | tuple[str, ...]
    inputs: dict[str, Any]
    parts: tuple[PartMatch, ...]
    plan: Plan
    cell: PlannedCell
    session_id: str | None = None

    @property
    def goal(self) -> list[str]:
        return sorted(self.plan.goal)

    @property
    def unmatched(self) -> tuple[PartMatch, ...]:
        """The parts that matched nothing (named in every report, never dropped)."""
        return tuple(part for part in self.parts if part.status == "unmatched")

    def to_dict(self) -> dict:
        return {
            "task": self.task if isinstance(self.task, str) else None,
            "steps": list(self.task) if not isinstance(self.task, str) else None,
            "parts": [part.to_dict() for part in self.parts],
            "goal": self.goal,
            "must_run": sorted(self.plan.must_run),
            "plan": self.plan.to_dict(),
            "cell": self.cell.code,
            "instructions": self.cell.instructions,
            "instructions_saved_chars": self.cell.saved_chars,
            "wiring": self.cell.wiring(self.plan),
            "unbound": [parameter.to_dict() for parameter in self.cell.unbound],
            "unused_inputs": list(self.cell.unused_inputs),
            "input_advice": dict(self.cell.advice),
        }


@dataclass(frozen=True)
class TaskRun:
    """A planned task and what executing its cell showed.

    Attributes:
        task_plan: the :class:`TaskPlan` that ran (its plan is ``run.task_plan.plan``, its cell
            ``run.task_plan.cell``).
        result: the cell's :class:`toolpath.kernel.CellResult` (``status``, ``stdout``, ``stderr``,
            ``result``, ``error``, ``images``, ``notice``, ``tool_calls``).

    ``completed_steps``, ``failed_step`` and ``variables`` are derived from both.
    """

    task_plan: TaskPlan
    result: CellResult

    @property
    def completed_steps(self) -> tuple[int, ...]:
        """Indexes of the plan's steps whose tool call returned: all of them when the cell ran
        through, else those its :attr:`toolpath.kernel.CellResult.tool_calls` report."""
        targets = self.task_plan.cell.step_targets
        if self.result.status == "ok":
            return tuple(range(len(targets)))
        return tuple(index for index, target in enumerate(targets) if self.result.tool_calls.get(target))

    @property
    def failed_step(self) -> int | None:
        """Index of the first step that did not complete when the cell did not run through, else ``None``."""
        if self.result.status == "ok":
            return None
        completed = set(self.completed_steps)
        return next((index for index in range(len(self.task_plan.plan.steps)) if index not in completed), None)

    @property
    def variables(self) -> dict[str, str | None]:
        """``{variable: state it carries, or None}`` of the completed steps, in plan order: the
        kernel variables the run made (a session keeps them for later cells)."""
        steps, names = self.task_plan.plan.steps, self.task_plan.cell.step_variables
        return {names[index]: steps[index].tool.return_spec.state if steps[index].tool.return_spec else None for index in self.completed_steps}

    def variables_text(self) -> str:
        """One line naming the variables the run made and their states (``""`` when none)."""
        if not self.variables:
            return ""
        return "Variables made: " + ", ".join(f"{variable} ({state})" if state else variable for variable, state in self.variables.items())

    def text(self) -> str:
        """What the run showed, for a model: the cell's result (:func:`toolpath.kernel.format_for_model`)
        and the variables it made."""
        return "\n".join(part for part in (format_for_model(self.result).rstrip("\n"), self.variables_text()) if part)

    def to_dict(self) -> dict:
        failed = self.failed_step
        return {
            **self.task_plan.to_dict(),
            "result": self.result.to_dict(),
            "variables": self.variables,
            "completed_steps": list(self.completed_steps),
            "failed_step": None if failed is None else {"index": failed, "tool": self.task_plan.plan.steps[failed].tool.name},
        }
