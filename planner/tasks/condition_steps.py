"""Conditions on rows for a goal that takes none: a filtering step planned before it.

"how many rows of sales.csv are for the product Gadget?" matches counting rows, and counting takes
no conditions; "save the North rows of sales.csv to north.csv" matches saving a table. Their words
say which rows: planned as they matched, the conditions would be dropped (and the part refused:
:meth:`toolpath.planner.tasks.arguments.Arguments.unaccounted`). Instead, a **filtering step** runs
first: a tool of the goal's domain with a parameter of ``meaning: conditions`` whose result feeds the
goal's step (it produces the state the goal's tool reads, or a refinement of it: filtered rows are a
table), found in the catalogs, never named here. The part becomes two: the filter's part (its
conditions read from the part's words) and the goal's part, which reads the filtered rows.

Only when it is certain:

- exactly one such tool serves the goal's step, and a plan runs it from what is held;
- the part's words give that tool its conditions, each fully read (column checked against the
  probe, operator from the fixed set: :func:`toolpath.planner.tasks.arguments.bind_arguments`), and
  with the filter every column, value and number the words name is used;
- the goal's own plan takes no conditions (words it drops are then another matter).

Otherwise the part stays as it matched, and is refused as before.

**A part after others** whose matched goal is no such case (its tool reads no table: "compute
descriptors for molecules.csv, then keep the molecules with a molecular weight under 200" matches
parsing a molecule for its second part) is read the same way against what the parts before it
produce: when its own plan would drop words of the data, and the one tool that takes conditions and
reads a state those parts' plans produce (the carried table, with the columns their steps add:
``return_spec.adds_columns``) takes every word of the data it names as fully read conditions, the
filter is that part's goal, and its ``why`` says so. With no such tool, several, or words left over,
the part is refused as before.

When the words without the conditions ask for nothing beyond the filtered rows ("the rows of
sales.csv with revenue over 1000": "the rows of a file" matches counting rows as well as the file
itself), the filter is the part's goal and nothing runs after it. The goal runs after the filter when
the filter alone would drop words of the data the part names ("… to south.csv": where to save), or
when the rest of the words match the goal at least ``work_margin`` (cosine similarity,
:data:`toolpath.planner.tasks.goals.WORK_MARGIN`) better than any state the filter's plan already
reaches (the file, the table, the filtered rows).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from typing import Any

from toolpath.planner.planning.graph import kinds_of
from toolpath.planner.planning.plans import NoPlanError, Plan, plan_to_run, qualified_name
from toolpath.planner.search.skills import SkillHit
from toolpath.planner.tasks.arguments import ArgumentReading, bind_arguments
from toolpath.planner.tasks.clauses import joined_reasons, without_file_names
from toolpath.planner.tasks.goals import LEXICAL_MARGIN, GoalCandidate, GoalChoice, GoalSearch
from toolpath.planner.tasks.joint_planning import joint_plan
from toolpath.planner.tasks.parts import PartMatch, inputs_with_facts
from toolpath.registry import ToolDefinition


def with_condition_steps(search: GoalSearch, parts: Sequence[PartMatch], held: Collection[str], inputs: Mapping[str, Any] | None) -> tuple[PartMatch, ...]:
    """``parts`` with a filtering part before each part whose words state conditions on rows that its
    goal takes no parameter for, or that part replaced by the filter alone (see the module docstring).

    Args:
        search: the planning's graph, index and probe directory.
        parts: the matched parts, in order.
        held: the states every part is planned from.
        inputs: the request's inputs (the caller's and its facts').

    Returns:
        The parts, each either as it was, or preceded (or replaced) by a filtering part whose ``why``
        says which words it was added for.
    """
    result: list[PartMatch] = []
    for part in parts:
        part_held = frozenset(held) | part.holds
        changed = _with_filter(search, part, part_held, inputs or {})
        if changed is None:
            on_earlier = _filter_of_earlier(search, result, part, part_held, inputs or {})
            changed = [on_earlier] if on_earlier is not None else None
        result += changed or [part]
    return tuple(result)


def filtering_tools(tools: Collection[ToolDefinition], goal_tool: ToolDefinition, refinements: Mapping[str, str]) -> list[ToolDefinition]:
    """The tools of ``goal_tool``'s domain that take conditions (a parameter of ``meaning:
    conditions``) and whose result ``goal_tool`` reads (a required parameter's state, or a refinement
    of it, is what they produce)."""
    read = [kinds_of(parameter.state, refinements) for parameter in goal_tool.required_parameters if parameter.state is not None]
    return [
        tool
        for tool in tools
        if tool.server_name == goal_tool.server_name
        and tool.id != goal_tool.id
        and any(parameter.meaning == "conditions" and parameter.state is None for parameter in tool.parameters)
        and any(tool.state_transition.produces & kinds for kinds in read)
    ]


def filtering_tools_reading(tools: Collection[ToolDefinition], produced: Collection[str], refinements: Mapping[str, str]) -> list[ToolDefinition]:
    """The tools that take conditions (a parameter of ``meaning: conditions``) and read a state in
    ``produced`` (a required parameter's state, or a refinement of it, is one of them): the filters
    that can keep rows of what earlier steps made."""
    return [
        tool
        for tool in tools
        if any(parameter.meaning == "conditions" and parameter.state is None for parameter in tool.parameters)
        and _states_read(tool, refinements) & frozenset(produced)
    ]


def _states_read(tool: ToolDefinition, refinements: Mapping[str, str]) -> frozenset[str]:
    """The states ``tool``'s required parameters read, each with the states it refines."""
    return frozenset().union(*(kinds_of(parameter.state, refinements) for parameter in tool.required_parameters if parameter.state is not None))


def _filter_of_earlier(search: GoalSearch, earlier: Sequence[PartMatch], part: PartMatch, held: frozenset[str], inputs: Mapping[str, Any]) -> PartMatch | None:
    """``part`` as the filtering part that keeps rows of what ``earlier`` parts' plans produce, or
    ``None`` when that is not certain (module docstring: a part after others)."""
    chosen = part.choice.chosen if part.status == "matched" and part.choice is not None else None
    matched = [match for match in earlier if match.status == "matched" and match.choice is not None and match.choice.chosen.plan is not None]
    if chosen is None or chosen.plan is None or not chosen.plan.steps or not matched:
        return None
    graph = search.graph
    # As joint planning does: the states every part holds (an earlier part's file) are held for all.
    held = held.union(*(match.holds for match in earlier))
    produced = frozenset().union(*(step.produces for match in matched for step in match.choice.chosen.plan.steps))  # type: ignore[union-attr]
    filters = filtering_tools_reading(list(graph.registry), produced, graph.refinements)
    if len(filters) != 1 or any(step.tool.id == filters[0].id for step in chosen.plan.steps):
        return None
    tool = filters[0]
    dropped = _dropped(search, [*earlier, part], part, held, inputs)
    if not dropped:
        return None
    filter_part = _filter_part(search, tool, part, chosen, held | produced)
    if filter_part is None:
        return None
    try:
        joint = joint_plan(graph, [*earlier, filter_part], held)
    except (NoPlanError, ValueError):
        return None
    given = inputs_with_facts([*earlier, filter_part], inputs, joint)
    arguments = bind_arguments(graph, part.text, [*earlier, filter_part], joint, given, search.probe_directory)
    conditions = [reading for reading in arguments.bound if reading.tool == tool.name and _takes_conditions(tool, reading.parameter)]
    if not conditions or arguments.unused_words(part.text, given):
        return None
    goal = f"{qualified_name(chosen.plan.steps[-1].tool)} ({', '.join(sorted(chosen.goal))})"
    read = ", ".join(sorted(produced & _states_read(tool, graph.refinements)))
    why = (
        f"its words read in full as conditions on rows ({_said(part.text, conditions)}) of what the parts before it produce ({read}), "
        f"and {qualified_name(tool)} is the one tool that keeps such rows; {goal}, which it matched, would drop {', '.join(dropped)}: "
        "the filter is its goal"
    )
    return replace(filter_part, why=joined_reasons(part.why, why))


def _filter_part(search: GoalSearch, tool: ToolDefinition, part: PartMatch, chosen: GoalCandidate, held: frozenset[str]) -> PartMatch | None:
    """A part of ``part``'s words whose goal is running the filtering ``tool`` (planned from ``held``,
    scored as ``chosen`` was); ``None`` when no plan runs it."""
    try:
        filter_plan = plan_to_run(search.graph, tool, held)
    except NoPlanError:
        return None
    hit = SkillHit(
        "tool", tool.name, tool.server_name, chosen.hit.score, chosen.hit.similarity, chosen.hit.lexical, "", tool.state_transition.produces, True, filter_plan
    )
    goal = GoalCandidate(tool.state_transition.produces, hit, filter_plan, None, None, 0)
    return PartMatch(part.text, GoalChoice(goal, ()), holds=part.holds, values=part.values)


def _dropped(search: GoalSearch, parts: Sequence[PartMatch], part: PartMatch, held: frozenset[str], inputs: Mapping[str, Any]) -> list[str]:
    """What ``part``'s words name of the data that the joint plan of ``parts`` (ending with ``part``) drops."""
    try:
        joint = joint_plan(search.graph, parts, held)
    except (NoPlanError, ValueError):
        return []
    given = inputs_with_facts(parts, inputs, joint)
    return bind_arguments(search.graph, part.text, parts, joint, given, search.probe_directory).unused_words(part.text, given)


def _with_filter(search: GoalSearch, part: PartMatch, held: frozenset[str], inputs: Mapping[str, Any]) -> list[PartMatch] | None:
    """The filtering part and ``part`` (or the filtering part alone), or ``None`` when no filter is certain."""
    chosen = part.choice.chosen if part.status == "matched" and part.choice is not None else None
    if chosen is None or chosen.plan is None or not chosen.plan.steps or not chosen.unused_words:
        return None
    if any(parameter.meaning == "conditions" for step in chosen.plan.steps for parameter in step.tool.parameters):
        return None
    graph = search.graph
    goal_tool = chosen.plan.steps[-1].tool
    filters = filtering_tools(list(graph.registry), goal_tool, graph.refinements)
    if len(filters) != 1:
        return None
    tool = filters[0]
    filter_part = _filter_part(search, tool, part, chosen, held)
    if filter_part is None:
        return None
    filter_plan = filter_part.choice.chosen.plan  # type: ignore[union-attr]
    pair = [filter_part, part]
    joint = joint_plan(graph, pair, held)
    given = inputs_with_facts(pair, inputs, joint)
    arguments = bind_arguments(graph, part.text, pair, joint, given, search.probe_directory)
    conditions = [reading for reading in arguments.bound if reading.tool == tool.name and _takes_conditions(tool, reading.parameter)]
    if not conditions or arguments.unused_words(part.text, given):
        return None
    said = _said(part.text, conditions)
    rest = _rest(part.text, conditions)
    goal = f"{qualified_name(goal_tool)} ({', '.join(sorted(chosen.goal))})"
    alone = joint_plan(graph, [filter_part], held)
    alone_given = inputs_with_facts([filter_part], inputs, alone)
    dropped = bind_arguments(graph, part.text, [filter_part], alone, alone_given, search.probe_directory).unused_words(part.text, alone_given)
    if dropped:
        beyond, measured = True, f"the filter alone would drop {', '.join(dropped)}"
    else:
        beyond, measured = _asks_beyond(search, rest, chosen, filter_plan, held)
    if not beyond:
        why = (
            f"its words state conditions on rows ({said}), and without them ({rest!r}) ask for nothing beyond the rows "
            f"{qualified_name(tool)} keeps ({measured}): the filter is its goal, not {goal}"
        )
        return [replace(filter_part, why=joined_reasons(part.why, why))]
    why = f"a {qualified_name(tool)} step was added before {goal} for the words {said}: {goal_tool.name} takes no conditions, and reads the rows kept ({measured})"
    filter_why = f"added for the conditions {said} of the part {part.text!r}: {goal_tool.name} reads the rows it keeps"
    return [replace(filter_part, why=joined_reasons(part.why, filter_why)), replace(part, why=joined_reasons(part.why, why))]


def _takes_conditions(tool: ToolDefinition, name: str) -> bool:
    return any(parameter.python_name == name and parameter.meaning == "conditions" for parameter in tool.parameters)


def _said(text: str, readings: Sequence[ArgumentReading]) -> str:
    """The words each condition was read from, quoted: ``'revenue over 1000'``."""
    plain = without_file_names(text)
    return ", ".join(f"'{plain[start:end].strip()}'" for reading in readings for start, end in reading.spans)


def _rest(text: str, readings: Sequence[ArgumentReading]) -> str:
    """``text`` (its file names read as "a file") without the words the conditions were read from."""
    plain = without_file_names(text)
    for start, end in sorted((span for reading in readings for span in reading.spans), reverse=True):
        plain = plain[:start] + " " + plain[end:]
    return re.sub(r"\s+", " ", plain).strip()


def _asks_beyond(search: GoalSearch, rest: str, chosen: GoalCandidate, filter_plan: Plan, held: frozenset[str]) -> tuple[bool, str]:
    """Whether ``rest`` asks for ``chosen``'s goal more than for what the filter's plan reaches
    (the module docstring), and the scores that say so."""
    reached = held.union(*(step.produces for step in filter_plan.steps))
    hits = search.index.search(rest, k=search.k, held=held) if rest else []
    asked = [hit for hit in hits if hit.states == chosen.goal]
    given = [hit for hit in hits if hit.states and hit.states <= reached]
    if not asked:
        return False, f"{', '.join(sorted(chosen.goal))} is not among the search's hits for them"
    if not given:
        return True, f"nothing the filter reaches is among the search's hits for {rest!r}"
    goal_hit, given_hit = asked[0], given[0]
    if goal_hit.similarity is not None and given_hit.similarity is not None:
        beyond = goal_hit.similarity >= given_hit.similarity + search.work_margin
        return beyond, (
            f"{rest!r} matches {goal_hit.name} at similarity {goal_hit.similarity:.2f} and {given_hit.name} at "
            f"{given_hit.similarity:.2f}, {'at least' if beyond else 'less than'} {search.work_margin:.2f} apart"
        )
    beyond = goal_hit.lexical > (1 + LEXICAL_MARGIN) * given_hit.lexical
    return beyond, f"{rest!r} matches {goal_hit.name} at BM25 {goal_hit.lexical:.2f} and {given_hit.name} at {given_hit.lexical:.2f}"
