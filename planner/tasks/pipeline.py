"""The task pipeline, written once: a request is checked and read, its parts matched, the matched
parts planned jointly, and the plan written as a planned cell.

:meth:`toolpath.planner.tasks.workspace.Workspace.plan_task` and
:meth:`toolpath.planner.tasks.agent_session.AgentSession.plan_task` both call :func:`plan_request`.
What differs between them is their :class:`TaskContext`: a workspace writes cells for a fresh
kernel; an agent session plans from the states it holds, and writes cells that read its artifacts
and call its handles.

Example::

    context = TaskContext(workspace.graph, lambda: workspace.index, FreshKernelCells(workspace.graph))
    task_plan = plan_request(context, "is aspirin drug-like?", {"smiles": "CC(=O)Oc1ccccc1C(=O)O"})
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from toolpath.planner.planning.plans import DEFAULT_TASK_BUDGET_S, TaskBudget
from toolpath.planner.tasks.arguments import bind_arguments
from toolpath.planner.tasks.cell_writers import CellWriter
from toolpath.planner.tasks.condition_steps import with_condition_steps
from toolpath.planner.tasks.goals import GoalSearch
from toolpath.planner.tasks.joint_planning import plan_jointly
from toolpath.planner.tasks.matching import PartMatcher
from toolpath.planner.tasks.parts import inputs_with_facts
from toolpath.planner.tasks.request import TaskRequest
from toolpath.planner.tasks.task import TaskPlan
from toolpath.planner.tasks.task_spans import traced_planning

if TYPE_CHECKING:
    from toolpath.planner.planning.graph import StateGraph
    from toolpath.planner.search.skills import SkillIndex


@dataclass(frozen=True)
class TaskContext:
    """Where a task is planned, and how its cells are written.

    Attributes:
        graph: the state graph to plan over.
        skill_index: gives the skill index; called only once the request is checked, so a refused
            request builds no index and loads no model.
        cells: writes the candidate goals' cells and the chosen plan's
            (:class:`toolpath.planner.tasks.cell_writers.CellWriter`).
        session_held: states held from earlier tasks (an agent session's); unlike the request's own
            held states, an input that carries one replaces it
            (:func:`toolpath.planner.tasks.matching.held_unless_replaced`).
        session_id: the agent session whose handles and variables the cell uses; ``None`` for a
            fresh kernel.
        probe_directory: the directory whose files a task's inputs may be probed in (a table's
            columns, :mod:`toolpath.planner.tasks.probes`); ``None``: no file is read while planning.
    """

    graph: StateGraph
    skill_index: Callable[[], SkillIndex]
    cells: CellWriter
    session_held: frozenset[str] = frozenset()
    session_id: str | None = None
    probe_directory: str | os.PathLike[str] | None = None


@traced_planning
def plan_request(
    context: TaskContext,
    task: str | Sequence[str],
    inputs: Mapping[str, Any] | None = None,
    held: str | Collection[str] = (),
    *,
    time_budget_s: float | None = DEFAULT_TASK_BUDGET_S,
    cancel: threading.Event | None = None,
    meant: Mapping[str, str] | None = None,
) -> TaskPlan:
    """Plan a task given in words or as a list of steps: each part is matched by skill search
    (:class:`toolpath.planner.tasks.matching.PartMatcher`), and the goals of all parts get one joint
    plan (:func:`toolpath.planner.tasks.joint_planning.plan_jointly`) and cell.

    Args:
        context: the graph, index and cell writer (:class:`TaskContext`).
        task: the task in words, or its steps.
        inputs: ``{name: value}`` the task gives.
        held: states the caller says are held (one may be a plain string).
        time_budget_s: seconds the planning may take (``None``: no limit); the clock starts once
            the request is checked and the query model loaded, so loading the model does not count.
        cancel: an event another thread sets to stop the planning (e.g. its client is gone).
        meant: a person's answers to unclear parts (:class:`toolpath.planner.tasks.goals.UnclearEffectError`):
            ``{its task: the label of the candidate meant, or ""}`` (``GoalSearch.meant``).

    Returns:
        The :class:`toolpath.planner.tasks.task.TaskPlan`, with ``context.session_id``.

    Raises:
        QueryError, InputError, UnknownStateError: the request, as
            :meth:`toolpath.planner.tasks.request.TaskRequest.read` refuses it.
        NoMatchingSkillError, NoPlanError, InputError: see
            :meth:`toolpath.planner.tasks.matching.PartMatcher.match` and
            :func:`toolpath.planner.tasks.joint_planning.plan_jointly`.
        PlanningTimeout: planning outlasted ``time_budget_s``. PlanningCancelled: ``cancel`` was set.
        ValueError: ``time_budget_s`` is not a positive number or ``None``.
    """
    TaskBudget.check_seconds(time_budget_s)
    request = TaskRequest.read(context.graph, task, inputs, held)  # before the model loads: fail fast
    index = context.skill_index()
    index.load_query_model()  # loading the model is not planning: the budget starts after it
    search = GoalSearch(
        context.graph,
        index,
        context.cells,
        TaskBudget.start(time_budget_s, cancel),
        meant=dict(meant or {}),
        probe_directory=context.probe_directory,
        learned_examples=index.learned.phrasings_per_tool() if index.learned is not None else {},
    )
    matcher = PartMatcher(search, request, context.session_held)
    # Conditions on rows that a part's goal takes no parameter for: a filtering step runs before it.
    parts = with_condition_steps(search, matcher.match(), matcher.held, matcher.inputs)
    joint = plan_jointly(search, parts, matcher.held, names=request.free_text)
    # The values the request's words give (a fact's "'photo.jpg'") are inputs like the caller's.
    original_inputs = request.inputs
    request = replace(request, inputs=inputs_with_facts(parts, request.inputs, joint))
    # What the words say of the plan's parameters ("revenue by month": x and y) are inputs too; the caller's win.
    arguments = bind_arguments(context.graph, request.text, parts, joint, request.inputs, context.probe_directory)
    unaccounted = arguments.unaccounted(parts, request.inputs)
    if unaccounted:
        # A part whose words name data its plan drops is not understood, and planned without.
        parts = tuple(replace(part, choice=None, problem=unaccounted[index]) if index in unaccounted else part for index, part in enumerate(parts))
        joint = plan_jointly(search, parts, matcher.held, names=request.free_text)
        request = replace(request, inputs=inputs_with_facts(parts, original_inputs, joint))
        arguments = bind_arguments(context.graph, request.text, parts, joint, request.inputs, context.probe_directory)
    request = replace(request, inputs=arguments.inputs(request.inputs))
    cell = arguments.explained(context.cells.chosen(request, parts, joint, search.budget))
    return TaskPlan(request.task, dict(request.inputs or {}), parts, joint, cell, session_id=context.session_id, arguments=arguments)
