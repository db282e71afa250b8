"""Planning from the command line: ``toolpath plan`` (to goal states), ``toolpath search`` (states and
tools by affordance) and ``toolpath cell`` (a task's planned cell, not run); and how a plan and a
task's plan are printed and their inputs checked, which ``toolpath run`` shares.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from toolpath.planner.interfaces.cli.recording import CommandRecord
from toolpath.planner.interfaces.cli.shared import (
    CommandLineError,
    add_command,
    add_task_options,
    emit_json,
    indent,
    input_options_text,
    open_workspace,
    parse_inputs,
    positive_number,
    prepare_embedding_model,
    prepare_task_reading,
)
from toolpath.planner.planning.budgets import DEFAULT_TIME_BUDGET_MS

if TYPE_CHECKING:
    from toolpath.planner.planning.plans import Plan
    from toolpath.planner.search.skills import SkillHit
    from toolpath.planner.tasks.cell import PlannedCell
    from toolpath.planner.tasks.parts import PartMatch
    from toolpath.planner.tasks.task import InputOption, TaskPlan

CELL_EXAMPLES = """examples:
  toolpath cell "find molecules similar to a query compound" --input query_smiles=CCO --input smiles_list='["CCCO","CCN"]'
  toolpath cell --goal chemistry.molecules_clustered --input smiles_list='["CCO","CCCO"]'"""
PLAN_EXAMPLES = """examples:
  toolpath plan --goal chemistry.descriptors_computed
  toolpath plan --goal chemistry.similarity_computed --goal chemistry.molecules_clustered --json
  toolpath plan --goal chemistry.descriptors_computed --have chemistry.molecule_parsed"""
SEARCH_EXAMPLES = """examples:
  toolpath search "check drug-likeness"
  toolpath search "group similar molecules" --k 3 --json
  toolpath search "filter drug-like molecules" --have chemistry.molecule_parsed --reachable-only
  toolpath search "greet a person" --add-catalog my_catalog.yaml"""


def hit_count(text: str) -> int:
    """argparse type: an integer from 1 to 100."""
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= count <= 100:
        raise argparse.ArgumentTypeError(f"{count} is outside 1-100")
    return count


def print_plan(plan: Plan) -> None:
    proof = "optimal" if plan.optimal else f"not proven optimal: no plan costs less than {plan.lower_bound:g}"
    print(f"Plan ({len(plan.steps)} step{'s' if len(plan.steps) != 1 else ''}, cost {plan.cost:g}, {proof}):")
    if not plan.steps:
        print("    (the goal is already held)")
    for number, step in enumerate(plan.steps, 1):
        requires = ", ".join(sorted(step.requires)) or "-"
        produces = ", ".join(sorted(step.produces)) or "-"
        print(f"  {number}. {step.tool.server_name}.{step.tool.name}    requires: {requires}    produces: {produces}")


def print_task_plan(task_plan: TaskPlan) -> None:
    from toolpath.planner.tasks.request import task_text

    print(f"Task: {' '.join(task_text(task_plan.task).split())}")  # one line: a carriage return would hide what came before it
    if len(task_plan.parts) > 1:
        print("Parts:")
        for number, part in enumerate(task_plan.parts, 1):
            print(f"  {number}. {part.text!r}: {_part_outcome(part)}")
    print(f"Goal: {', '.join([*task_plan.goal, *(f'run {tool}' for tool in sorted(task_plan.plan.must_run))]) or '-'}")
    if len(task_plan.parts) == 1 and task_plan.parts[0].choice is not None:
        choice = task_plan.parts[0].choice
        print(f"  matched {choice.chosen.hit.kind} {choice.chosen.hit.name} ({_strength(choice.chosen.hit)}): {choice.chosen.hit.matched!r}")
        for candidate in choice.passed_over:
            target = f"tool {candidate.hit.server}.{candidate.hit.name}" if candidate.hit.kind == "tool" else ", ".join(sorted(candidate.goal))
            print(f"  passed over {target} ({_strength(candidate.hit)}): {candidate.reason()}")
    print_plan(task_plan.plan)
    print("Cell:")
    print(indent(task_plan.cell.display_code))
    if task_plan.cell.unbound:
        print("Unbound required parameters: " + ", ".join(f"{parameter.parameter} ({parameter.type})" for parameter in task_plan.cell.unbound))


def _part_outcome(part: PartMatch) -> str:
    if part.kind == "fact":
        given = "".join(f"; {name} = {value!r}" for name, value in part.values)
        return f"a fact, runs nothing; holds {', '.join(sorted(part.holds))}{given}" if part.holds else "a fact, runs nothing; holds nothing"
    if part.kind == "context":
        return "context (when or why), runs nothing"
    if part.choice is None:
        return f"matched nothing ({part.problem})"
    hit = part.choice.chosen.hit
    target = f"run {part.tool.server_name}.{part.tool.name}" if part.tool is not None else ", ".join(sorted(part.goal))
    held = "; already held, nothing to run for it" if part.status == "held" else ""
    return f"{target} ({hit.kind} {hit.name}, {_strength(hit)}){held}"


def _strength(hit: SkillHit) -> str:
    return f"similarity {hit.similarity:.2f}" if hit.similarity is not None else f"BM25 {hit.lexical:.2f}"


def check_parts(task_plan: TaskPlan, partial: bool) -> None:
    """Refuse a task with a part not understood, unless ``partial`` (``--partial``): then warn
    about each such part. Warn about every value of the words that an ``--input`` replaced.

    Raises:
        PartsNotUnderstoodError: a part was not understood and ``partial`` is false (exit status 3).
    """
    from toolpath.planner.tasks.task import PartsNotUnderstoodError

    if task_plan.unmatched and not partial:
        raise PartsNotUnderstoodError(task_plan)
    for part in task_plan.unmatched:
        print(f"warning: the part {part.text!r} of the task was not understood and is not planned: {part.problem}", file=sys.stderr)
    for part in task_plan.parts:
        for override in part.overridden:
            print(
                f"warning: the task names {override.named!r} in {part.text!r}, and --input {override.input} gives {override.given!r}: "
                "the --input is used, because a value given as an input is meant for this parameter",
                file=sys.stderr,
            )


def refuse_unused_inputs(cell: PlannedCell, plan: Plan) -> None:
    """Refuse an ``--input`` the planned cell does not use (a misspelled name, or an optional
    parameter given by its plain name), naming the inputs the plan takes.

    Raises:
        CommandLineError: for the first unused input.
    """
    for name in cell.unused_inputs:
        if name in cell.advice:
            raise CommandLineError(f"--input {name}: {cell.advice[name]}")
        required, optional = cell.input_names(plan)
        close = difflib.get_close_matches(name, [*required, *optional], n=1)
        suggestion = f" (did you mean --input {close[0]}=...?)" if close else ""
        takes = [*(f"{taken} (required)" for taken in required), *(f"{taken} (optional)" for taken in optional)]
        raise CommandLineError(
            f"--input {name}: no tool on the plan takes an input of that name{suggestion}. The plan takes: {', '.join(takes) or 'no inputs'}"
        )


def warn_about_inputs(cell: PlannedCell) -> None:
    for parameter in cell.unbound:
        print(
            f"warning: {parameter.parameter} ({parameter.type}, for {parameter.tool}) is unbound: define it before running the cell, or pass --input {parameter.parameter}=VALUE",
            file=sys.stderr,
        )


def _warn_about_input_options(cell: PlannedCell, options: Sequence[InputOption]) -> None:
    """Say which inputs give a complete plan when that is not simply the unbound parameters
    (fewer inputs may give another plan: a task's goals are chosen knowing its inputs)."""
    if len(options) > 1 or (options and set(options[0].names) != {parameter.parameter for parameter in cell.unbound}):
        print(f"warning: the task plans otherwise with inputs: {input_options_text(options)}", file=sys.stderr)


def requested_task(arguments: argparse.Namespace) -> str | list[str]:
    """The task text, or the ``--step`` list; exactly one of them."""
    if arguments.step and arguments.task:
        raise CommandLineError("give either a TASK or --step ... (one per part), not both")
    if not arguments.step and not arguments.task:
        raise CommandLineError("give a TASK in words, or its parts as --step ... --step ...")
    return arguments.step or arguments.task


def add_cell_parser(commands: argparse._SubParsersAction) -> None:
    """Add ``toolpath cell`` to ``commands``, run by :func:`command_cell`."""
    cell = add_command(commands, "cell", "Print the planned cell of a task (or of explicit goal states) without running it.", command_cell, CELL_EXAMPLES)
    cell.add_argument("task", metavar="TASK", nargs="?", help="what to achieve, in words (parts joined by 'and', 'then', ... are planned together)")
    cell.add_argument("--goal", action="append", default=[], metavar="TOKEN", help="plan to this state instead of searching; repeatable")
    cell.add_argument("--instructions", action="store_true", help="also print the instructions for a model")
    add_task_options(cell)


def command_cell(arguments: argparse.Namespace) -> int:
    if bool(arguments.goal) == bool(arguments.task or arguments.step):
        raise CommandLineError("give either a TASK (or --step ...) or --goal TOKEN ..., not both and not neither")
    if not arguments.goal:
        prepare_task_reading()
    workspace = open_workspace(arguments)
    inputs = parse_inputs(arguments.input)
    record = CommandRecord(arguments)
    if arguments.goal:
        with record.refusals(None, inputs):
            goal_plan, cell = workspace.plan_goal(arguments.goal, inputs, held=arguments.have)
            refuse_unused_inputs(cell, goal_plan)
        record.planned_goal(goal_plan)
        payload = {
            "goal": sorted(goal_plan.goal),
            "plan": goal_plan.to_dict(),
            "cell": cell.code,
            "instructions": cell.instructions,
            "instructions_saved_chars": cell.saved_chars,
            "wiring": cell.wiring(goal_plan),
            "unbound": [parameter.to_dict() for parameter in cell.unbound],
            "unused_inputs": list(cell.unused_inputs),
            "input_advice": dict(cell.advice),
        }
    else:
        from toolpath.planner.interfaces.terminal_meaning import plan_asking  # with the search code, which --goal does not load
        from toolpath.planner.tasks.task import input_options

        task = requested_task(arguments)
        meant: dict[str, str] = {}  # a person's answers about unclear parts, for every plan of this task
        with record.refusals(task, inputs):
            task_plan = record.task_plan = plan_asking(lambda: workspace.plan_task(task, inputs, held=arguments.have, meant=meant), meant)
            check_parts(task_plan, arguments.partial)
            refuse_unused_inputs(task_plan.cell, task_plan.plan)
        record.planned(task_plan)
        options = input_options(task_plan, lambda more: workspace.plan_task(task, more, held=arguments.have, meant=meant)) if task_plan.cell.unbound else ()
        payload = {**task_plan.to_dict(), "input_options": [option.to_dict() for option in options]}
        cell = task_plan.cell
        _warn_about_input_options(cell, options)
    warn_about_inputs(cell)
    code, instructions = cell.display_code, cell.instructions
    if arguments.json:
        emit_json(payload)
    else:
        print(code, end="")
        if arguments.instructions:
            print("\n# Instructions for the model:")
            print(indent(instructions, "# "))
            if cell.saved_chars is not None:
                print(f"# ({len(instructions):,} characters; describing every catalog tool instead would take {cell.catalog_instruction_chars:,})")
    return 0


def add_plan_parser(commands: argparse._SubParsersAction) -> None:
    """Add ``toolpath plan`` to ``commands``, run by :func:`command_plan`."""
    plan_parser = add_command(commands, "plan", "Plan the cheapest tool path from the held states to goal states.", command_plan, PLAN_EXAMPLES)
    plan_parser.add_argument("--goal", action="append", required=True, metavar="TOKEN", help="a goal state; repeatable (all must be reached)")
    plan_parser.add_argument("--have", action="append", default=[], metavar="TOKEN", help="a state already held; repeatable")
    plan_parser.add_argument("--avoid", action="append", default=[], metavar="TOOL", help="a tool (name or server.name) the plan must not use; repeatable")
    plan_parser.add_argument(
        "--k", type=hit_count, default=1, metavar="N", help="also show up to N-1 alternative plans with other tool sets, cheapest first (1-100, default 1)"
    )
    plan_parser.add_argument(
        "--time-budget",
        type=positive_number,
        default=DEFAULT_TIME_BUDGET_MS,
        metavar="MS",
        help=f"milliseconds each plan's search may spend proving it optimal; past them the best plan comes with a proven lower bound (default {DEFAULT_TIME_BUDGET_MS:g})",
    )


def command_plan(arguments: argparse.Namespace) -> int:
    from toolpath.planner.planning.plans import alternative_plans

    workspace = open_workspace(arguments)
    record = CommandRecord(arguments)
    with record.refusals(None, None):
        goal_plan, *others = alternative_plans(
            workspace.graph, arguments.goal, held=arguments.have, avoid=arguments.avoid, k=arguments.k, time_budget_ms=arguments.time_budget
        )
    record.planned_goal(goal_plan)
    if arguments.json:
        emit_json({**goal_plan.to_dict(), "alternatives": [other.to_dict() for other in others]} if arguments.k > 1 else goal_plan.to_dict())
    else:
        print(f"Goal: {', '.join(sorted(goal_plan.goal))}")
        print_plan(goal_plan)
        for number, other in enumerate(others, 2):
            print(f"\nAlternative {number}:")
            print_plan(other)
    return 0


def add_search_parser(commands: argparse._SubParsersAction) -> None:
    """Add ``toolpath search`` to ``commands``, run by :func:`command_search`."""
    search = add_command(commands, "search", "Search states and tools by affordance.", command_search, SEARCH_EXAMPLES)
    search.add_argument("query", metavar="QUERY", help="what you want to achieve, in words")
    search.add_argument("--k", type=hit_count, default=5, metavar="N", help="number of hits (1-100, default 5)")
    search.add_argument(
        "--have", action="append", default=[], metavar="TOKEN", help="a state already held; hits say whether they are reachable from these; repeatable"
    )
    search.add_argument("--domain", action="append", default=[], metavar="NAME", help="keep only hits of this server/domain; repeatable")
    search.add_argument("--kind", choices=["state", "tool"], help="keep only states or only tools")
    search.add_argument("--reachable-only", action="store_true", help="keep only hits a plan from the held states reaches")


def command_search(arguments: argparse.Namespace) -> int:
    if not arguments.query.strip():
        raise CommandLineError("the query is empty; describe what you want to achieve")
    prepare_embedding_model()
    from toolpath.planner.search.skills import MIN_SCORE

    workspace = open_workspace(arguments)
    hits = workspace.search(
        arguments.query, k=arguments.k, held=arguments.have, domain=arguments.domain or None, kind=arguments.kind, reachable_only=arguments.reachable_only
    )
    if not hits and not arguments.json:
        empty = not len(workspace.index)
        print("nothing to search: the catalogs declare no states or tools" if empty else "no hit passes the filters", file=sys.stderr)
    if arguments.json:
        emit_json(
            {
                "query": arguments.query,
                "have": sorted(arguments.have),
                "mode": workspace.index.mode,
                "min_score": MIN_SCORE,
                "hits": [{**hit.to_dict(), "matches": hit.matches()} for hit in hits],
            }
        )
        return 0
    if hits:
        print(f"{'similarity' if hits[0].similarity is not None else 'BM25':>10}  kind   name    (best-matching text)  [plan from the held states]")
    for hit in hits:
        how = (
            (" -> ".join(step.tool.name for step in hit.plan.steps) or "held now")
            if hit.plan is not None
            else ("reachable" if hit.reachable else "unreachable")
        )
        strength = hit.similarity if hit.similarity is not None else hit.lexical
        weak = "" if hit.matches() else f"  -- weak: below {MIN_SCORE:g}, a task would not match it"
        print(f"{strength:>10.2f}  {hit.kind:<5}  {hit.name}    ({hit.matched})  [{how}]{weak}")
    return 0
