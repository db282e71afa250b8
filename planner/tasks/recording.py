"""Where planning and running a task meet the record of use (:mod:`toolpath.planner.tasks.record_of_use`):
a plan recorded as planned (its entry id on the plan), a run as what it did, a refusal with its
reason. ``recorder`` is ``None`` when nothing is to be recorded (the command line records each
command itself, knowing what the user edited). Nothing here raises for the record.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from toolpath.errors import Refusal, ToolpathError

if TYPE_CHECKING:
    from toolpath.planner.tasks.record_of_use import Recorder
    from toolpath.planner.tasks.task import TaskPlan, TaskRun


@contextmanager
def recording_refusals(
    recorder: Recorder | None,
    user: str | None,
    task: str | Sequence[str] | None,
    inputs: Mapping[str, Any] | None,
    task_plan: TaskPlan | None,
    session: str | None = None,
) -> Iterator[None]:
    """Record a refusal raised in the block (the task, or the plan it refused to run), then raise it on."""
    try:
        yield
    except Refusal as error:
        if recorder is not None:
            refused_plan = task_plan if task_plan is not None else getattr(error, "task_plan", None)
            recorder.refused(user, task, error, inputs=inputs, task_plan=refused_plan, session=session)
        raise


@contextmanager
def recording_failures(recorder: Recorder | None, user: str | None, task_plan: TaskPlan, session: str | None = None) -> Iterator[None]:
    """Record that ``task_plan`` could not run (a kernel that did not start, ...), then raise the error on."""
    try:
        yield
    except ToolpathError as error:
        if recorder is not None:
            recorder.failed(user, task_plan, error, session=session)
        raise


def recorded_plan(recorder: Recorder | None, user: str | None, task_plan: TaskPlan, session: str | None) -> TaskPlan:
    """``task_plan``, recorded as planned, with its entry's id (``record_entry``) when it was recorded."""
    entry = recorder.planned(user, task_plan, session=session) if recorder is not None else None
    return dataclasses.replace(task_plan, record_entry=entry) if entry is not None else task_plan


def recorded_run(recorder: Recorder | None, user: str | None, run: TaskRun, session: str | None) -> TaskRun:
    """``run``, its outcome recorded (in its plan's entry when the plan was recorded)."""
    if recorder is not None:
        recorder.ran(user, run, session=session)
    return run
