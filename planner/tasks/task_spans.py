"""Spans of tasks: a task planned and run, its planning, its parts, each part's goal choice and the
joint plan (:mod:`toolpath.observability.tracing`; the cells and tool calls under them are
:mod:`toolpath.observability.cell_spans` and :mod:`toolpath.observability.tool_spans`).

The spans of one task, as ``toolpath run`` or an agent session's ``run_task`` makes them::

    invoke_workflow toolpath.task        the task, planned and run (GenAI invoke_workflow)
      plan                               the request read, planned and written as a cell (GenAI plan)
        toolpath.match_parts             the request's parts, one toolpath.part event each
          toolpath.choose_goal           one part's goal: the top candidates and their scores
        toolpath.joint_plan              the plan of every part: its steps, cost and proof
      toolpath.cell                      a cell run (one more per replan)
        execute_tool chemistry.parse_molecule

A task span is opened once: a ``run_task`` inside another task's span (the command line's) adds to
that span. The words of a task and of its parts are recorded only with
:data:`toolpath.observability.tracing.VALUES_VARIABLE`; their lengths, kinds, goals, tools, costs and
scores always (catalog names and numbers, no user data).

Only duck typing here: the modules whose functions are decorated import this one.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from toolpath.observability import tracing

#: The name of a task's span (GenAI ``invoke_workflow {gen_ai.workflow.name}``).
TASK_SPAN = "invoke_workflow toolpath.task"
#: Goal candidates a goal choice's span lists, best first.
TOP_CANDIDATES = 5

_task_span: contextvars.ContextVar[Any] = contextvars.ContextVar("toolpath_task_span", default=None)


def _request_attributes(task: Any, inputs: Mapping[str, Any] | None = None, held: Any = None) -> dict[str, Any]:
    """What a span says of a request (its words, its steps, or a ``TaskPlan`` of either): its kind
    and size, the names of its inputs, the states held; ``{}`` for anything else."""
    if isinstance(task, str):
        attributes: dict[str, Any] = {"toolpath.task.kind": "words", "toolpath.task.chars": len(task)}
    elif isinstance(task, Sequence):
        attributes = {"toolpath.task.kind": "steps", "toolpath.task.steps": len(task), "toolpath.task.chars": sum(len(str(step)) for step in task)}
    elif hasattr(task, "task") and hasattr(task, "plan"):  # a TaskPlan
        return _request_attributes(task.task, task.inputs, held)
    else:
        return {}
    if inputs:
        attributes["toolpath.task.inputs"] = sorted(str(name) for name in inputs)
    if held:
        attributes["toolpath.task.held"] = [held] if isinstance(held, str) else sorted(str(state) for state in held)
    if tracing.records_values():
        attributes["toolpath.task.text"] = tracing.shown(task)
    return attributes


@contextlib.contextmanager
def task_span(task: Any = None, inputs: Mapping[str, Any] | None = None, session_id: str | None = None) -> Iterator[Any]:
    """The span of a task (see the module docstring), current while the block runs; the span a
    task of the caller already opened when there is one; ``None`` when nothing traces."""
    opened = _task_span.get()
    if opened is not None or tracing.tracer() is None:
        yield opened
        return
    attributes = {"gen_ai.operation.name": "invoke_workflow", "gen_ai.workflow.name": "toolpath.task"}
    attributes.update(_request_attributes(task, inputs))
    if session_id is not None:
        attributes["toolpath.session.id"] = session_id
    with tracing.span(TASK_SPAN, attributes) as span:
        token = _task_span.set(span)
        try:
            yield span
        finally:
            _task_span.reset(token)


def traced_task(method: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a method that plans and runs a task, or runs a planned one (``run_task(self, task,
    inputs=None, ...)``, sync or async, returning a ``TaskRun``): it runs in its task's span
    (:func:`task_span`), which says how the run ended."""

    def opened(owner: Any, args: tuple, kwargs: dict) -> contextlib.AbstractContextManager[Any]:
        task = args[0] if args else kwargs.get("task", kwargs.get("task_plan"))  # resume's first is a bool: no request said
        inputs = args[1] if len(args) > 1 and isinstance(args[1], Mapping) else kwargs.get("inputs")
        return task_span(task, inputs, getattr(owner, "session_id", None))

    if inspect.iscoroutinefunction(method):

        @functools.wraps(method)
        async def traced_async(owner: Any, *args: Any, **kwargs: Any) -> Any:
            if tracing.tracer() is None:
                return await method(owner, *args, **kwargs)
            with opened(owner, args, kwargs) as span:
                run = await method(owner, *args, **kwargs)
                if span is not None:
                    _describe_run(span, run)
                return run

        return traced_async

    @functools.wraps(method)
    def traced(owner: Any, *args: Any, **kwargs: Any) -> Any:
        if tracing.tracer() is None:
            return method(owner, *args, **kwargs)
        with opened(owner, args, kwargs) as span:
            run = method(owner, *args, **kwargs)
            if span is not None:
                _describe_run(span, run)
            return run

    return traced


def _describe_run(span: Any, run: Any) -> None:
    """Set on a task's span how its run (a ``TaskRun``) ended: status, steps, route, replans."""
    plan = run.task_plan.plan
    span.set_attributes(
        {
            "toolpath.task.status": run.result.status,
            "toolpath.plan.steps": [_qualified(step.tool) for step in plan.steps],
            "toolpath.task.completed_steps": len(run.completed_steps),
            "toolpath.task.cells": len(run.cells),
            "toolpath.task.replans": len(run.replans),
            "toolpath.task.paused": run.paused is not None,
        }
    )
    failed = run.failed_step
    if failed is not None:
        span.set_attribute("toolpath.task.failed_tool", _qualified(plan.steps[failed].tool))
    for replan in run.replans:
        span.add_event(
            "toolpath.replan",
            {
                "toolpath.replan.failed_tool": replan.failure.tool,
                "toolpath.replan.failure_kind": replan.failure.kind,
                "toolpath.replan.old_route": list(replan.old_route),
                "toolpath.replan.new_route": list(replan.new_route),
            },
        )
    if run.result.status != "ok" and run.paused is None:
        error = run.result.error or {}
        tracing.failed_as(span, str(error.get("ename") or run.result.status), str(error.get("evalue") or ""))


def traced_planning(plan_request: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate ``plan_request(context, task, inputs=None, held=(), ...)`` (returning a
    ``TaskPlan``): the ``plan`` span, from the request to the planned cell."""

    @functools.wraps(plan_request)
    def traced(context: Any, task: Any, inputs: Mapping[str, Any] | None = None, held: Any = (), **options: Any) -> Any:
        if tracing.tracer() is None:
            return plan_request(context, task, inputs, held, **options)
        attributes = {"gen_ai.operation.name": "plan", **_request_attributes(task, inputs, held)}
        if context.session_id is not None:
            attributes["toolpath.session.id"] = context.session_id
        with tracing.span("plan", attributes) as span:
            task_plan = plan_request(context, task, inputs, held, **options)
            if span is not None:
                _describe_plan(span, task_plan.plan)
                cell = task_plan.cell
                span.set_attributes(
                    {
                        "toolpath.parts": len(task_plan.parts),
                        "toolpath.parts.unmatched": len(task_plan.unmatched),
                        "toolpath.cell.code_chars": len(cell.code),
                        "toolpath.cell.unbound": [f"{parameter.tool}.{parameter.parameter}" for parameter in cell.unbound],
                    }
                )
            return task_plan

    return traced


def traced_parts(match: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate ``PartMatcher.match(self)`` (returning the ``PartMatch`` of each part): the
    ``toolpath.match_parts`` span, one ``toolpath.part`` event per part."""

    @functools.wraps(match)
    def traced(matcher: Any) -> Any:
        if tracing.tracer() is None:
            return match(matcher)
        with tracing.span("toolpath.match_parts") as span:
            parts = match(matcher)
            if span is not None:
                span.set_attributes({"toolpath.parts": len(parts), "toolpath.parts.statuses": [part.status for part in parts]})
                values = tracing.records_values()
                for index, part in enumerate(parts):
                    event: dict[str, Any] = {
                        "toolpath.part.index": index,
                        "toolpath.part.kind": part.kind,
                        "toolpath.part.status": part.status,
                        "toolpath.part.chars": len(part.text),
                        "toolpath.part.goal": sorted(part.goal),
                    }
                    if part.tool is not None:
                        event["toolpath.part.tool"] = _qualified(part.tool)
                    if values:
                        event["toolpath.part.text"] = tracing.shown(part.text)
                    span.add_event("toolpath.part", event)
            return parts

    return traced


def traced_goal_choice(choose_goal: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate ``choose_goal(search, task, ...)`` (returning a ``GoalChoice``): the
    ``toolpath.choose_goal`` span, with the chosen goal and the top candidates and their scores
    (and when none matches, the closest search hits)."""

    @functools.wraps(choose_goal)
    def traced(search: Any, task: str, *args: Any, **kwargs: Any) -> Any:
        if tracing.tracer() is None:
            return choose_goal(search, task, *args, **kwargs)
        attributes: dict[str, Any] = {"toolpath.part.chars": len(task)}
        if tracing.records_values():
            attributes["toolpath.part.text"] = tracing.shown(task)
        with tracing.span("toolpath.choose_goal", attributes) as span:
            try:
                choice = choose_goal(search, task, *args, **kwargs)
            except Exception as error:
                if span is not None and isinstance(getattr(error, "hits", None), list):
                    _candidates(span, error.hits[:TOP_CANDIDATES])  # what came closest, for the refusal
                raise
            if span is not None:
                chosen = choice.chosen
                candidates = [chosen, *choice.passed_over][:TOP_CANDIDATES]
                span.set_attributes(
                    {"toolpath.goal.chosen": _label(chosen.hit), "toolpath.goal.states": sorted(chosen.goal), "toolpath.goal.chosen_order": chosen.order}
                )
                if chosen.plan is not None:
                    span.set_attribute("toolpath.goal.plan_cost", float(chosen.plan.cost))
                _candidates(span, [candidate.hit for candidate in candidates])
            return choice

    return traced


def _candidates(span: Any, hits: Sequence[Any]) -> None:
    """The labels and scores of ``hits`` (search hits, best first) on ``span``."""
    span.set_attributes({"toolpath.goal.candidates": [_label(hit) for hit in hits], "toolpath.goal.candidate_scores": [float(hit.score) for hit in hits]})
    if all(hit.similarity is not None for hit in hits):
        span.set_attribute("toolpath.goal.candidate_similarities", [float(hit.similarity) for hit in hits])


def traced_joint_plan(plan_jointly: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate ``plan_jointly(search, parts, held, ...)`` (returning a ``Plan``): the
    ``toolpath.joint_plan`` span, with the plan's steps, cost and proof."""

    @functools.wraps(plan_jointly)
    def traced(*args: Any, **kwargs: Any) -> Any:
        if tracing.tracer() is None:
            return plan_jointly(*args, **kwargs)
        with tracing.span("toolpath.joint_plan") as span:
            plan = plan_jointly(*args, **kwargs)
            if span is not None:
                _describe_plan(span, plan)
            return plan

    return traced


def _describe_plan(span: Any, plan: Any) -> None:
    """A plan's goal, steps, cost and proof on ``span``: ``toolpath.plan.optimal`` when its cost is
    proven least, else the proven ``lower_bound`` and the ``gap`` between them."""
    span.set_attributes(
        {
            "toolpath.plan.goal": sorted(plan.goal),
            "toolpath.plan.steps": [_qualified(step.tool) for step in plan.steps],
            "toolpath.plan.cost": float(plan.cost),
            "toolpath.plan.optimal": bool(plan.optimal),
            "toolpath.plan.lower_bound": float(plan.lower_bound),
            "toolpath.plan.gap": float(plan.gap),
        }
    )


def _qualified(tool: Any) -> str:
    """``server.name`` of a tool definition, as plans name it (imported here, where a span is made:
    a workspace that only plans need not load the planner's modules for this one)."""
    from toolpath.planner.planning.plans import qualified_name

    return qualified_name(tool)


def _label(hit: Any) -> str:
    """``tool chemistry.parse_molecule`` or ``state chemistry.molecule_parsed``: a search hit as
    :func:`toolpath.planner.tasks.goals.hit_label` names it."""
    return f"tool {hit.server}.{hit.name}" if hit.kind == "tool" and hit.server else f"{hit.kind} {hit.name}"
