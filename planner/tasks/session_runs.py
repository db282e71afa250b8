"""The runs of an agent session's tasks: the plan each runs, a run's outcome, and a task paused
before a call that needs approval (``run_task(..., on_approval="pause")``) until it is resumed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from toolpath.errors import Refusal
from toolpath.kernel import CellResult, KernelError
from toolpath.kernel.tools.approvals import ApprovalDecision
from toolpath.kernel.tools.bindings import toolkit_of
from toolpath.planner.planning.plans import DEFAULT_TASK_BUDGET_S, PlanningCancelled
from toolpath.planner.tasks.replanning import Replanning
from toolpath.planner.tasks.request import task_text
from toolpath.planner.tasks.session_state import PausedTask
from toolpath.planner.tasks.task import PartsNotUnderstoodError, TaskPlan, TaskRun, UnboundParametersError, input_options

if TYPE_CHECKING:
    from toolpath.planner.tasks.agent_session import AgentSession


class TaskPausedError(Refusal, RuntimeError):
    """The session has a task paused before a call that needs approval: resume it (approved or
    not) before running another task."""


class SessionRuns:
    """The task runs of one :class:`toolpath.planner.tasks.agent_session.AgentSession` (its
    ``run_task`` and ``resume`` call these).

    Attributes:
        paused: the task paused before a call that needs approval, or ``None``.
    """

    def __init__(self, session: AgentSession):
        self.session = session
        self.paused: PausedTask | None = None

    def runnable(
        self,
        task: str | Sequence[str] | TaskPlan,
        inputs: Mapping[str, Any] | None,
        time_budget_s: float | None = DEFAULT_TASK_BUDGET_S,
        cancel: threading.Event | None = None,
        reserved: list[TaskPlan] | None = None,
        partial: bool = False,
    ) -> TaskPlan:
        """The task plan to run: planned now for a task text; refused when a part of it was not
        understood, unless ``partial`` (:class:`toolpath.planner.tasks.task.PartsNotUnderstoodError`);
        checked against what the session holds; its variables reserved until :meth:`finish`
        (rendered again with new names when the kernel, or a task running meanwhile, has taken one
        since it was planned).

        ``reserved`` receives the plan once its variables are reserved, and ``cancel`` set before
        that reserves nothing (raising PlanningCancelled): both under the session's lock, so a
        cancelled caller knows exactly what to give back."""
        task_plan = task if isinstance(task, TaskPlan) else self.session._plan_task(task, inputs, time_budget_s=time_budget_s, cancel=cancel)
        if task_plan.session_id != self.session.session_id:
            made_by = f"session {task_plan.session_id!r}" if task_plan.session_id else "Workspace.plan_task"
            raise ValueError(
                f"this task plan was made by {made_by}; plan it with this session's plan_task, so its cell uses this session's handles and variables"
            )
        if task_plan.unmatched and not partial:
            raise PartsNotUnderstoodError(task_plan)
        if task_plan.cell.unbound:
            options = input_options(task_plan, lambda more: self.session._plan_task(task_plan.task, more, time_budget_s=time_budget_s, cancel=cancel))
            raise UnboundParametersError(task_plan.cell.unbound, options)
        self.session.kernel.check()
        with self.session.holdings.lock:
            # Input states the task's own inputs give are held for that task only, never by the session.
            self.session.holdings.check_current(task_plan, self.session.workspace.graph.input_states_given(task_plan.inputs))
            if set(task_plan.cell.step_variables) & self.session.holdings.taken_names():
                shown = [variable for variable in task_plan.cell.result_variables if variable not in task_plan.cell.step_variables]
                cell = self.session.cells.render(
                    task_plan.plan, task_plan.inputs, task_text(task_plan.task), self.session.handles.current(task_plan.plan), also_show=shown
                )
                task_plan = replace(task_plan, cell=cell)
            if cancel is not None and cancel.is_set():
                raise PlanningCancelled("running the task was cancelled by its caller")
            self.session.holdings.reserve(task_plan)
            if reserved is not None:
                reserved.append(task_plan)
        return task_plan

    def resumption(self, approved: bool, note: str) -> tuple[PausedTask, TaskPlan, str, dict[str, ApprovalDecision], Replanning | None]:
        """The paused task (now taken), its plan, the cell that continues it, the answer it carries
        and the replanning it goes on with (as its run had replanned before the pause; ``None`` for
        a run with ``on_failure="stop"``).

        A task restored from a snapshot plans its remaining tools again (:attr:`PausedTask.remaining`,
        as steps naming them), reading what the steps that ran made from the states the session
        holds: the answer applies to the same call with the same arguments only; any other call
        that needs approval pauses again.
        """
        if not isinstance(approved, bool):
            raise TypeError(f"approved must be True or False, not {type(approved).__name__} {approved!r}")
        with self.session.holdings.lock:
            paused, self.paused = self.paused, None
        if paused is None:
            raise ValueError(f"session {self.session.session_id!r} has no paused task to resume; run_task(..., on_approval='pause') pauses one")
        decision = ApprovalDecision(approved, note=note, by=self.session.user_id or "")
        answers = {paused.request["digest"]: decision}
        replanning = Replanning.from_dict(self.session.workspace.graph, paused.replanning) if paused.replanning is not None else None
        if paused.task_plan is not None:
            self.session.holdings.reserve(paused.task_plan)  # released when the run ends
            return paused, paused.task_plan, paused.task_plan.cell.from_step(paused.step), answers, replanning
        try:
            task_plan = self.runnable(list(paused.remaining), paused.inputs, DEFAULT_TASK_BUDGET_S)
        except (PlanningCancelled, KernelError):
            with self.session.holdings.lock:
                self.paused = paused  # nothing ran, and it may yet: it stays paused
            raise
        except Exception as error:
            # What the rest needs is gone (a deleted variable, a changed catalog): it can never
            # continue, so it is dropped rather than left to block the session's next task.
            raise RuntimeError(f"the task paused before {paused.request['tool']} cannot continue, so it is dropped: {error}") from error
        return replace(paused, tool_calls={}), task_plan, task_plan.cell.code, answers, replanning

    def check_not_paused(self) -> None:
        if self.paused is not None:
            raise TaskPausedError(
                f"session {self.session.session_id!r} has a task paused before {self.paused.request['tool']} (it needs approval); resume it with resume(approved=True or False) first"
            )

    def finish(
        self,
        task_plan: TaskPlan,
        result: CellResult,
        variables: list[str] | None,
        earlier_calls: Mapping[str, int] | None = None,
        replanning: Replanning | None = None,
        earlier: tuple[TaskRun, ...] = (),
    ) -> TaskRun:
        """The run of ``task_plan``'s cell: its completed steps' states held, and the task paused
        when it stopped before a call that needs approval (``earlier_calls``: the calls a resumed
        task made before it paused), keeping the run's ``replanning`` and its ``earlier`` cells'
        runs for its resumed run."""
        if earlier_calls:
            result = replace(result, tool_calls={**earlier_calls, **result.tool_calls})
        run = TaskRun(task_plan, result)
        if self.session.kernel.kernel_id is not None:  # the kernel that ran the cell still holds its variables
            self.session.holdings.record(run)
        paused = PausedTask.of_run(run, replanning, earlier)
        if paused is not None:
            with self.session.holdings.lock:
                self.paused = paused
        self.session.holdings.after_cell(variables)
        return replace(run, result=self.session.holdings.take_notice(result))

    def continuation(self, run: TaskRun, replanning: Replanning) -> TaskPlan | None:
        """The task plan that continues ``run`` after its failure, in the same kernel: planned from
        the states the session holds now (``run``'s completed steps' included, ``finish`` recorded
        them) to the same goal, avoiding what the failure rules out; its cell reads the kernel's
        variables, so no completed step runs again. Its variables are reserved, as :meth:`runnable`
        does. ``None`` when the run stops (``replanning.stopped`` says why, unless it did not fail).
        """
        session = self.session
        given = session.workspace.graph.input_states_given(run.task_plan.inputs)
        found = replanning.next_plan(run, session.held | given)
        if found is None:
            return None
        remainder, failure, planning_ms = found
        started = time.perf_counter()
        task_plan = run.task_plan
        try:
            session.bind_domains(toolkit_of(step.tool) for step in remainder.steps)
            cell = session.cells.render(remainder, task_plan.inputs, task_text(task_plan.task), session.handles.current(remainder))
        except (Refusal, ValueError) as error:  # the inputs do not fit the new route: say so, never half run it
            replanning.stopped = f"not replanned: the new route {' -> '.join(step.tool.name for step in remainder.steps)} cannot be written as a cell ({error})"
            return None
        continued = replace(task_plan, plan=remainder, cell=cell)
        replanning.note(run, failure, remainder, remainder.held, planning_ms + (time.perf_counter() - started) * 1000)
        with session.holdings.lock:
            session.holdings.reserve(continued)
        return continued
