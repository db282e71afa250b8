"""A planned task and its run: what each part of a task matched, its plan and cell, and what running it showed."""

from __future__ import annotations

import itertools
import textwrap
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from toolpath.errors import Refusal
from toolpath.kernel import CellResult, format_for_model
from toolpath.planner.planning.plans import Plan
from toolpath.planner.planning.plans import qualified_name as _qualified
from toolpath.planner.tasks.arguments import Arguments
from toolpath.planner.tasks.cell import PlannedCell, UnboundParameter
from toolpath.planner.tasks.parts import PartMatch
from toolpath.planner.tasks.replanning import Replan


@dataclass(frozen=True)
class InputOption:
    """Inputs that, given, make a task's plan complete (no required parameter unbound).

    Attributes:
        names: the inputs' names (plain parameter names), in the order the task's plan left them unbound.
        parameters: ``{name: (type, tool)}``: what each input is, for the first tool on ``plan``
            that takes it.
        plan: the plan the task gets with these inputs.
    """

    names: tuple[str, ...]
    parameters: dict[str, tuple[str, str]]
    plan: Plan

    @property
    def tools(self) -> str:
        """The plan's tools in order: ``parse_molecule -> compute_descriptors``."""
        return " -> ".join(step.tool.name for step in self.plan.steps)

    def to_dict(self) -> dict:
        return {
            "inputs": [{"name": name, "type": self.parameters[name][0], "tool": self.parameters[name][1]} for name in self.names],
            "plan": [step.tool.name for step in self.plan.steps],
            "cost": self.plan.cost,
        }


class UnboundParametersError(Refusal, ValueError):
    """The planned cell needs inputs that were not given; ``unbound`` lists them, and ``options``
    the sets of inputs that would each give a complete plan, cheapest plan first
    (:func:`input_options`; empty when not worked out)."""

    def __init__(self, unbound: Iterable[UnboundParameter], options: Sequence[InputOption] = ()):
        self.unbound = tuple(unbound)
        self.options = tuple(options)
        assert self.unbound, "an UnboundParametersError names the parameters left unbound"
        if self.options:
            advice = describe_options(self.options, lambda option: "give the inputs {" + ", ".join(f"{name!r}: ..." for name in option.names) + "}")
        else:
            names = ", ".join(
                f"{parameter.parameter} ({parameter.type}, for {parameter.tool}{'; the words did not give it: ' + parameter.why if parameter.why else ''})"
                for parameter in self.unbound
            )
            example = self.unbound[0].parameter if self.unbound else "NAME"
            advice = f"{names}. Pass them as inputs ({{{example!r}: ...}})"
        reasons = "; ".join(f"{parameter.parameter}: {parameter.why}" for parameter in self.unbound if parameter.why) if self.options else ""
        super().__init__(f"the plan needs inputs that were not given: {advice}" + (f" (the words did not give them: {reasons})" if reasons else ""))


class PartsNotUnderstoodError(Refusal, ValueError):
    """A task some of whose action parts were not understood: it is not run, since running the rest
    would pass the task as done. ``parts`` are those parts (each with its ``problem`` and
    ``closest`` candidates), ``task_plan`` the plan of the rest; the message gives every part's fate.

    The command line exits with :attr:`exit_status` for it (``--partial`` runs the rest instead);
    ``run_task(..., partial=True)`` runs the rest in Python and over MCP.
    """

    #: The command line's exit status for it: 0 is done, 1 a failed cell, 2 a refusal before planning finished.
    exit_status = 3

    def __init__(self, task_plan: TaskPlan, run_anyway: str = "run_task(..., partial=True)"):
        self.task_plan = task_plan
        self.parts = task_plan.unmatched
        super().__init__(self.explanation(run_anyway))

    def explanation(self, run_anyway: str) -> str:
        """The message, with ``run_anyway`` saying how to run the parts understood (``--partial``)."""
        count = len(self.parts)
        fates = "; ".join(f"{number}. {part.text!r}: {part.fate_text()}" for number, part in enumerate(self.task_plan.parts, 1))
        return (
            f"{count} part{'s' if count > 1 else ''} of the task {'were' if count > 1 else 'was'} not understood, so nothing runs. The parts: {fates}. "
            f"Rephrase {'them' if count > 1 else 'it'} (or load a catalog that serves {'them' if count > 1 else 'it'}), or run the rest anyway: {run_anyway}"
        )


def describe_options(options: Sequence[InputOption], how: Callable[[InputOption], str]) -> str:
    """``options`` (at least one) in words, in their order, with ``how(option)`` saying how to give
    its inputs: ``HOW for the plan A -> B (cost 2); or, for the plan C -> A -> B (cost 3), HOW``."""
    # An option says which inputs to give: one naming none would read "pass  for the plan ...".
    assert options and all(option.names for option in options), "every input option names at least one input"
    described = [f"the plan {option.tools} (cost {option.plan.cost:g})" for option in options]
    first, *others = options
    return "; ".join([f"{how(first)} for {described[0]}", *(f"or, for {text}, {how(option)}" for option, text in zip(others, described[1:]))])


#: The most unbound parameters :func:`input_options` tries subsets of (``2**n - 1`` plans).
MAX_OPTION_PARAMETERS = 4


def input_options(task_plan: TaskPlan, replan: Callable[[dict[str, Any]], TaskPlan]) -> tuple[InputOption, ...]:
    """The sets of ``task_plan``'s unbound parameters that, given as inputs, make a complete plan:
    one per distinct plan, the smallest set for it, cheapest plan first (then fewer inputs).

    A task's goals are chosen knowing which inputs are given (a goal whose plan leaves parameters
    unbound loses to one that binds them), so fewer inputs may give another, cheaper plan: each
    non-empty subset of the unbound parameters (at most :data:`MAX_OPTION_PARAMETERS` of them;
    past that, only all of them) is tried by ``replan(inputs)`` with a placeholder value.

    Args:
        task_plan: a plan whose cell leaves required parameters unbound.
        replan: plans the same task with other inputs (e.g. ``lambda inputs: workspace.plan_task(task, inputs)``).

    Returns:
        The options, each naming at least one input; empty when no subset gives a complete plan
        through steps that take them.
    """
    names = tuple(dict.fromkeys(parameter.parameter for parameter in task_plan.cell.unbound))
    if len(names) > MAX_OPTION_PARAMETERS:
        subsets: list[tuple[str, ...]] = [names]
    else:
        subsets = [subset for size in range(1, len(names) + 1) for subset in itertools.combinations(names, size)]
    options: dict[tuple, InputOption] = {}
    for subset in subsets:
        try:
            # None has a literal form and names no file: a placeholder no check refuses.
            planned = replan({**task_plan.inputs, **dict.fromkeys(subset)})
        except Refusal:  # these inputs give no plan at all
            continue
        key = tuple(step.tool.id for step in planned.plan.steps)
        if planned.cell.unbound or key in options:
            continue
        parameters: dict[str, tuple[str, str]] = {}
        for step in planned.plan.steps:
            for parameter in step.tool.required_parameters:
                if parameter.python_name in subset:
                    parameters.setdefault(parameter.python_name, (parameter.type, step.tool.name))
        given = tuple(name for name in subset if name in parameters)
        if not given:
            # The placeholders changed the goal chosen but no step takes them: giving them is no way to that plan.
            continue
        options[key] = InputOption(given, parameters, planned.plan)
    return tuple(sorted(options.values(), key=lambda option: (option.plan.cost, len(option.names))))


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
        arguments: the values the task's words gave the plan's parameters, why, what they did not
            give and the inputs probed (:func:`toolpath.planner.tasks.arguments.bind_arguments`);
            they are among ``inputs`` as ``SERVER.TOOL.PARAMETER``.
        record_entry: the id of its entry in the record of use (:mod:`toolpath.planner.tasks.record_of_use`),
            which its run updates; ``None`` when it was not recorded.
    """

    task: str | tuple[str, ...]
    inputs: dict[str, Any]
    parts: tuple[PartMatch, ...]
    plan: Plan
    cell: PlannedCell
    session_id: str | None = None
    arguments: Arguments = Arguments()
    record_entry: str | None = field(default=None, compare=False)

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
            "arguments": [reading.to_dict() for reading in self.arguments.bound],
            "arguments_not_bound": [reading.to_dict() for reading in self.arguments.not_bound],
            "probes": [probe.to_dict() for probe in self.arguments.probes],
        }


@dataclass(frozen=True)
class TaskRun:
    """A planned task and what executing its cell showed.

    Attributes:
        task_plan: the :class:`TaskPlan` that ran (its plan is ``run.task_plan.plan``, its cell
            ``run.task_plan.cell``).
        result: the cell's :class:`toolpath.kernel.CellResult` (``status``, ``stdout``, ``stderr``,
            ``result``, ``error``, ``images``, ``notice``, ``tool_calls``).
        earlier: for a replanned run (``on_failure="replan"``), the runs of the cells before this
            one, each ended by a failure that was replanned (:mod:`toolpath.planner.tasks.replanning`);
            ``task_plan`` and ``result`` are then the last cell's (same task and goal, the new route).
        replans: each replan, in order (:class:`toolpath.planner.tasks.replanning.Replan`).
        stopped: why the run did not replan its last failure (``""`` when it did not fail, or
            was run with ``on_failure="stop"``).

    ``completed_steps``, ``failed_step`` and ``variables`` are derived from both.
    """

    task_plan: TaskPlan
    result: CellResult
    earlier: tuple[TaskRun, ...] = ()
    replans: tuple[Replan, ...] = ()
    stopped: str = ""

    @property
    def cells(self) -> tuple[TaskRun, ...]:
        """Every cell of the run in order: the earlier ones (each ended by a failure that was
        replanned) and this one."""
        return (*self.earlier, replace(self, earlier=(), replans=(), stopped=""))

    @property
    def route(self) -> list[dict[str, Any]]:
        """The steps actually taken, in order, over every cell of the run: each step's ``tool``
        (``server.name``), its ``cell`` (0: the first, n: the n-th replan's), ``variable``, the
        ``state`` its return carries and its ``status`` (``completed`` or ``failed``). Steps after
        a failure never ran and are not listed."""
        taken: list[dict[str, Any]] = []
        for number, cell in enumerate(self.cells):
            steps, names = cell.task_plan.plan.steps, cell.task_plan.cell.step_variables
            completed = set(cell.completed_steps)
            failed = cell.failed_step
            for index, step in enumerate(steps):
                if index not in completed and index != failed:
                    continue
                tool = step.tool
                taken.append(
                    {
                        "tool": _qualified(tool),
                        "cell": number,
                        "variable": names[index],
                        "state": tool.return_spec.state if tool.return_spec else None,
                        "status": "completed" if index in completed else "failed",
                    }
                )
        return taken

    @property
    def made_by(self) -> dict[str, dict[str, Any]]:
        """``{state: the route step that made it}`` (its ``tool``, ``cell`` and ``variable``) for the
        task's final values: its goal states and the states of the tools it asked for (``must_run``)
        that the run reached, each by the last completed step that produced it."""
        final: set[str] = set()
        for cell in self.cells:
            plan = cell.task_plan.plan
            final |= plan.goal
            final.update(state for step in plan.steps if _qualified(step.tool) in plan.must_run for state in step.tool.state_transition.produces)
        made: dict[str, dict[str, Any]] = {}
        for cell_number, cell in enumerate(self.cells):
            steps, names = cell.task_plan.plan.steps, cell.task_plan.cell.step_variables
            for index in cell.completed_steps:
                tool = steps[index].tool
                for state in tool.state_transition.produces & final:
                    made[state] = {"tool": _qualified(tool), "cell": cell_number, "variable": names[index]}
        return dict(sorted(made.items()))

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
    def paused(self) -> dict | None:
        """The call the run paused before, waiting for approval (``on_approval="pause"``): its
        ``step`` index and ``tool``, and the ``request`` (tool, arguments, reason, digest); ``None``
        when the run did not pause."""
        request = self.result.pending_approval
        failed = self.failed_step
        if request is None or failed is None:
            return None
        return {"step": failed, "tool": self.task_plan.plan.steps[failed].tool.name, "request": dict(request)}

    @property
    def variables(self) -> dict[str, str | None]:
        """``{variable: state it carries, or None}`` of the completed steps, in plan order (over
        every cell of a replanned run): the kernel variables the run made (a session keeps them for
        later cells)."""
        made: dict[str, str | None] = {}
        for cell in self.cells:
            steps, names = cell.task_plan.plan.steps, cell.task_plan.cell.step_variables
            made.update({names[index]: steps[index].tool.return_spec.state if steps[index].tool.return_spec else None for index in cell.completed_steps})
        return made

    def variables_text(self) -> str:
        """One line naming the variables the run made and their states (``""`` when none)."""
        if not self.variables:
            return ""
        return "Variables made: " + ", ".join(f"{variable} ({state})" if state else variable for variable, state in self.variables.items())

    def text(self) -> str:
        """What the run showed, for a model: the cell's result (:func:`toolpath.kernel.format_for_model`)
        and the variables it made; for a paused run, the call it waits at."""
        paused = self.paused
        if paused is not None:
            request = paused["request"]
            arguments = ", ".join(f"{name}={value}" for name, value in request["arguments"].items())
            waiting = f"Paused before step {paused['step'] + 1} ({request['tool']}({arguments})): it needs approval, because {request['reason']}. Resume with approved=True or False."
            return "\n".join(part for part in (waiting, self.variables_text()) if part)
        return "\n".join(part for part in (format_for_model(self.result).rstrip("\n"), self.variables_text(), self.replans_text()) if part)

    def replans_text(self) -> str:
        """Lines saying each replan (the failure, why, the old and new route), why the run stopped
        replanning, and which step made each goal state; ``""`` for a run that did not replan."""
        if not self.replans and not self.stopped:
            return ""
        lines = [f"Replan {number}: {replan.text()}" for number, replan in enumerate(self.replans, 1)]
        if self.stopped:
            lines.append(f"Stopped at the failure, {self.stopped}")
        if self.replans:
            route = " -> ".join(f"{step['tool']}{'' if step['status'] == 'completed' else ' (failed)'}" for step in self.route)
            lines.append(f"Route taken: {route}")
            made = "; ".join(f"{state} by {step['tool']} ({step['variable']}, cell {step['cell']})" for state, step in self.made_by.items())
            if made:
                lines.append(f"Final values made: {made}")
        return "\n".join(lines)

    def cell_title(self, number: int) -> str:
        """``cell 2 of 2 (replan 1)``: cell ``number`` (0: the first) of :attr:`cells`, for a person."""
        return f"cell {number + 1} of {len(self.cells)} ({'the first route' if number == 0 else f'replan {number}'})"

    def earlier_output_text(self) -> str:
        """The output of the cells before the last one of a replanned run, in order (``""`` for a
        run of one cell): each cell's title, how it ended (its failed step) and its stdout and
        stderr, where the retries of its failed step are (``retrying ... (try 2 of 3) ...``)."""
        blocks = []
        for number, cell in enumerate(self.earlier):
            failed = cell.failed_step
            ended = f"step {failed + 1} ({_qualified(cell.task_plan.plan.steps[failed].tool)}) failed" if failed is not None else "it stopped"
            lines = [f"Output of {self.cell_title(number)}, {cell.result.status}: {ended}"]
            for stream in ("stdout", "stderr"):
                text = getattr(cell.result, stream)
                lines.extend([f"  {stream}:", textwrap.indent(text.rstrip("\n"), "    ")] if text else [])
            if not cell.result.stdout and not cell.result.stderr:
                lines.append("  (no output)")
            blocks.append("\n".join(lines))
        return "\n".join(blocks)

    def cells_to_dict(self) -> list[dict[str, Any]]:
        """Every cell of the run, in order: its number (``cell``, 0 the first), ``tools``
        (``server.name``), ``status``, ``stdout``, ``stderr``, ``error``, ``retries``,
        ``injected_failures`` and ``failed_step`` (its index, or ``None``); the last one's is also
        ``result``."""
        cells = []
        for number, cell in enumerate(self.cells):
            result = cell.result
            cells.append(
                {
                    "cell": number,
                    "tools": [_qualified(step.tool) for step in cell.task_plan.plan.steps],
                    "status": result.status,
                    "stdout": result.stdout,
                    "stderr": result.stderr,
                    "error": result.error,
                    "retries": dict(result.retries),
                    "injected_failures": dict(result.injected_failures),
                    "failed_step": cell.failed_step,
                }
            )
        return cells

    def to_dict(self) -> dict:
        failed = self.failed_step
        return {
            **self.task_plan.to_dict(),
            "result": self.result.to_dict(),
            "variables": self.variables,
            "completed_steps": list(self.completed_steps),
            "failed_step": None if failed is None else {"index": failed, "tool": self.task_plan.plan.steps[failed].tool.name},
            "paused": self.paused,
            "route": self.route,
            "replans": [replan.to_dict() for replan in self.replans],
            "replan_stopped": self.stopped or None,
            "made_by": self.made_by,
            "cells": self.cells_to_dict(),
        }
