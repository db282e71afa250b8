"""How the ``toolpath`` command records its tasks in the record of use
(:mod:`toolpath.planner.tasks.record_of_use`): each command once, as the local user's, with what the
user edited (``--goal``, ``--avoid``, ``--step``) and the outcome it ends with. The command's
workspace records nothing itself (its plans for other inputs, made to say which inputs would do,
are no task of the user's).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from toolpath.errors import Refusal, ToolpathError

if TYPE_CHECKING:
    from toolpath.planner.planning.plans import Plan
    from toolpath.planner.tasks.task import TaskPlan, TaskRun


class CommandRecord:
    """The record of one command's task (nothing is written until the task is planned, run or refused).

    Attributes:
        task_plan: the task's plan once made: a refusal after it (an input not used, inputs
            missing) is recorded with it.
    """

    def __init__(self, arguments: argparse.Namespace):
        from toolpath.planner.tasks.record_of_use import Edits, Recorder

        self.recorder = Recorder("cli")
        self.edits = Edits(avoid=tuple(getattr(arguments, "avoid", ()) or ()), goal=tuple(getattr(arguments, "goal", ()) or ()))
        self.task_plan: TaskPlan | None = None

    @contextmanager
    def refusals(self, task: str | Sequence[str] | None, inputs: Mapping[str, Any] | None) -> Iterator[None]:
        """Record a refusal raised in the block (with the plan, when there is one), then raise it on."""
        try:
            yield
        except Refusal as error:
            task_plan = self.task_plan if self.task_plan is not None else getattr(error, "task_plan", None)
            self.recorder.refused(None, task, error, inputs=inputs, task_plan=task_plan, edits=self.edits)
            raise

    @contextmanager
    def failures(self, task_plan: TaskPlan) -> Iterator[None]:
        """Record that the plan's cell could not run (its kernel did not start, ...), then raise the error on."""
        try:
            yield
        except ToolpathError as error:
            self.recorder.failed(None, task_plan, error, edits=self.edits)
            raise

    def planned(self, task_plan: TaskPlan) -> None:
        self.recorder.planned(None, task_plan, edits=self.edits)

    def planned_goal(self, plan: Plan) -> None:
        self.recorder.planned_goal(None, plan, edits=self.edits)

    def ran(self, run: TaskRun) -> None:
        self.recorder.ran(None, run, edits=self.edits)
