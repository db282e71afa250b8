"""The task pipeline, written once: a request is checked, split into parts, each part's goal is
chosen by skill search, the goals get one joint plan, and the plan becomes a planned cell.

:meth:`toolpath.planner.tasks.workspace.Workspace.plan_task` and
:meth:`toolpath.planner.tasks.agent_session.AgentSession.plan_task` both call :func:`plan_request`.
What differs between them is their :class:`TaskContext`: a workspace writes cells for a fresh
kernel; an agent session plans from the states it holds, and writes cells that read its artifacts
and call its handles.

Example::

    context = TaskContext(workspace.graph, lambda: workspace.index)
    task_plan = plan_request(context, "is aspirin drug-like?", {"smiles": "CC(=O)Oc1ccccc1C(=O)O"})
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from toolpath.planner.planning.plans import DEFAULT_TASK_BUDGET_S, Plan, TaskBudget
from toolpath.planner.tasks.cell import PlannedCell, render_cell
from toolpath.planner.tasks.parts import PartMatch, checked_request, inputs_with_facts, plan_parts, task_text
from toolpath.planner.tasks.task import TaskPlan

if TYPE_CHECKING:
    from toolpath.planner.planning.graph import StateGraph
    from toolpath.planner.search.skills import SkillIndex


@dataclass(frozen=True)
class TaskRequest:
    """A task as planning takes it, checked before anything loads (see :meth:`checked`).

    Attributes:
        task: the task in words, or its steps (a tuple).
        text: the task as one text (steps joined), the one its cell quotes.
        inputs: ``{name: value}`` the task gives, or ``None``.
        held: the states the caller says are held; they stay held whatever the inputs give.
    """

    task: str | tuple[str, ...]
    text: str
    inputs: Mapping[str, Any] | None
    held: frozenset[str]

    @classmethod
    def checked(cls, graph: StateGraph, task: object, inputs: Mapping[str, Any] | None, held: str | Collection[str]) -> TaskRequest:
        """The request, once its task, inputs and held states pass
        :func:`toolpath.planner.tasks.parts.checked_request` (one held state may be a plain string).

        Raises:
            QueryError, InputError, UnknownStateError: see :func:`toolpath.planner.tasks.parts.checked_request`.
        """
        task, held = checked_request(graph, task, inputs, held)
        return cls(task, task_text(task), inputs, held)


#: ``(request, plan) -> cell``: the cell of a candidate goal's plan, which goal choice reads to pass
#: over a goal whose plan leaves parameters unbound.
CandidateRenderer = Callable[[TaskRequest, Plan], PlannedCell]
#: ``(request, parts, joint plan, budget) -> cell``: the cell of the plan chosen for the whole task.
ChosenRenderer = Callable[[TaskRequest, tuple[PartMatch, ...], Plan, TaskBudget], PlannedCell]


@dataclass(frozen=True)
class TaskContext:
    """Where a task is planned, and how its cells are written.

    Attributes:
        graph: the state graph to plan over.
        skill_index: gives the skill index; called only once the request is checked, so a refused
            request builds no index and loads no model.
        session_held: states held from earlier tasks (an agent session's); unlike the request's own
            held states, an input that carries one replaces it
            (:func:`toolpath.planner.tasks.parts.held_unless_replaced`).
        render_candidate: the cells of candidate goals; ``None``: goal choice's own, for a fresh
            kernel (:func:`toolpath.planner.tasks.goals.choose_goal`).
        render_chosen: the cell of the joint plan; ``None``: :func:`toolpath.planner.tasks.cell.render_cell`
            for a fresh kernel.
        session_id: the agent session whose handles and variables the cell uses; ``None`` for a
            fresh kernel.
    """

    graph: StateGraph
    skill_index: Callable[[], SkillIndex]
    session_held: frozenset[str] = frozenset()
    render_candidate: CandidateRenderer | None = None
    render_chosen: ChosenRenderer | None = None
    session_id: str | None = None


def plan_request(
    context: TaskContext,
    task: str | Sequence[str],
    inputs: Mapping[str, Any] | None = None,
    held: str | Collection[str] = (),
    *,
    time_budget_s: float | None = DEFAULT_TASK_BUDGET_S,
    cancel: threading.Event | None = None,
    output_directory: str | os.PathLike[str] | None = None,
) -> TaskPlan:
    """Plan a task given in words or as a list of steps (see :mod:`toolpath.planner.tasks.parts`): each
    part is matched by skill search, and the goals of all parts get one joint plan and cell.

    Args:
        context: the graph, index and cell writers (:class:`TaskContext`).
        task: the task in words, or its steps.
        inputs: ``{name: value}`` the task gives.
        held: states the caller says are held (one may be a plain string).
        time_budget_s: seconds the planning may take (``None``: no limit); the clock starts once
            the request is checked and the query model loaded, so loading the model does not count.
        cancel: an event another thread sets to stop the planning (e.g. its client is gone).
        output_directory: where the chosen cell's tools write the files no input places
            (:func:`toolpath.planner.tasks.cell.render_cell`); only for the default cell writer
            (``context.render_chosen`` is ``None``).

    Returns:
        The :class:`toolpath.planner.tasks.task.TaskPlan`, with ``context.session_id``.

    Raises:
        NoMatchingSkillError, NoPlanError, QueryError, InputError, UnknownStateError: see
        :func:`toolpath.planner.tasks.parts.plan_parts` and :func:`toolpath.planner.tasks.goals.choose_goal`;
        QueryError also for a task over the size limits (:data:`toolpath.planner.tasks.parts.MAX_TASK_CHARS`,
        :data:`toolpath.planner.tasks.parts.MAX_TASK_PARTS`, :data:`toolpath.planner.tasks.parts.MAX_TASK_STEPS`).
        PlanningTimeout: planning outlasted ``time_budget_s``. PlanningCancelled: ``cancel`` was set.
        ValueError: ``time_budget_s`` is not a positive number or ``None``, or an
            ``output_directory`` with a ``context.render_chosen``.
    """
    TaskBudget.check_seconds(time_budget_s)
    if output_directory is not None and context.render_chosen is not None:
        raise ValueError("output_directory is for cells of a fresh kernel; this context writes its own cells")
    request = TaskRequest.checked(context.graph, task, inputs, held)  # before the model loads: fail fast
    index = context.skill_index()
    index.load_query_model()  # loading the model is not planning: the budget starts after it
    budget = TaskBudget.start(time_budget_s, cancel)
    render_candidate = context.render_candidate
    parts, joint = plan_parts(
        request.task,
        index,
        context.graph,
        inputs=inputs,
        held=request.held,
        session_held=context.session_held,
        render=None if render_candidate is None else lambda plan: render_candidate(request, plan),
        budget=budget,
    )
    # The values the request's words give (a fact's "'photo.jpg'") are inputs like the caller's.
    request = replace(request, inputs=inputs_with_facts(parts, inputs, joint))
    if context.render_chosen is None:
        cell = render_cell(
            joint,
            request.inputs,
            request.text,
            registry=context.graph.registry,
            refinements=context.graph.refinements,
            output_directory=output_directory,
        )
    else:
        cell = context.render_chosen(request, parts, joint, budget)
    return TaskPlan(request.task, dict(request.inputs or {}), parts, joint, cell, session_id=context.session_id)
