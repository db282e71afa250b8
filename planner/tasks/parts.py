"""Tasks with several parts: split a request into parts, match each part, plan all of them at once.

"identify the functional groups of this molecule and check Lipinski's rule of five" has two parts.
:func:`split_task` cuts free text at sentence ends, semicolons, enumerations ("1.", "2)"), and at
the connectives that join clauses ("and", "then", "after that", "and finally", commas between
clauses). Fragments that are not actions join the action they belong to: a named value
("password abc123", "my account ID is 123456") the fragment before it, a lone verb ("find and
summarize the news") the next one. The cut is generous on purpose: :func:`match_parts` then searches each fragment, and a
fragment that matches no skill by :data:`FRAGMENT_MIN_SCORE` is words of its neighbour, not a part
("donors *and acceptors*", "in the city center"); neighbours that chose the same goal are one part. An
agent that already decomposed its task passes its steps instead, and they are taken as they are.
A task over :data:`MAX_TASK_CHARS` characters or :data:`MAX_TASK_PARTS` parts is refused up front.

Each part gets its goal from :func:`toolpath.planner.tasks.goals.choose_goal`: a state to reach, or a tool that
must run (a tool hit, or a tool the part names). The goals of all parts are planned **jointly** as
one cost-optimal plan (:func:`toolpath.planner.planning.plans.plan` with ``must_run``), so a state one part
produces is what the next part consumes, and shared steps run once; among plans of equal cost, the
one whose tools the parts' words are most about (``prefer``). Steps are then ordered by data flow
and, where data flow leaves the order open, by the part they serve (the first part's steps first).
"""

from __future__ import annotations

import heapq
import re
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from toolpath.planner.planning.graph import StateGraph
from toolpath.planner.planning.inputs import check_input_names, input_for, plain_value
from toolpath.planner.planning.plans import NO_BUDGET, NoPlanError, Plan, TaskBudget, TieBreak, plan, qualified_name
from toolpath.planner.search.skills import QueryError, SkillIndex, check_text
from toolpath.planner.tasks.goals import MIN_SCORE, GoalChoice, NoMatchingSkillError, choose_goal
from toolpath.registry import ToolDefinition

# Lines and semicolons end a part; so do ".", "!" or "?" followed by space ("people.csv" stays whole).
_LINE_END = re.compile(r"\s*[;\n]+\s*")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
# A bullet or a number at the start of a line ("- ", "2) ", "(3) ", "1. ").
_BULLET = re.compile(r"^\s*(?:[-*\u2022]|\(?\d{1,2}[.)])\s+")
# Numbers inside a line ("1. parse ... 2. find ..."): an enumeration only when they count 1, 2, 3...
_INLINE_NUMBER = re.compile(r"(?:^|\s)\(?(\d{1,2})[.)]\s+")
# Connectives that join clauses, longest first so "and then" is one cut, not two.
_CONNECTIVE = re.compile(r"\s*,?\s+(?:and\s+then|and\s+after\s+that|and\s+finally|and\s+also|after\s+that|afterwards|then|finally|and)\s+", flags=re.IGNORECASE)
# A bare comma: often between the arguments of one action ("for two nights, in the city center"), so a weak cut.
_COMMA = re.compile(r"\s*,\s+(?=\w)")
_LEADING_FILLER = re.compile(r"^(?:first(?:ly)?|second(?:ly)?|third(?:ly)?|next|also|please|then|finally|and)\b[,:]?\s*", flags=re.IGNORECASE)
# Quoted text, read as one literal value ("named 'Golden Profit Treasure'"); not an apostrophe ("Lipinski's").
_QUOTED = re.compile(r"(?<!\w)(?:\"[^\"]*\"|'[^']*')(?!\w)")
# Words that may open a named value, and the verbs that may join a name to its value.
_VALUE_LEAD = frozenset({"with", "using", "and", "my", "the", "your", "his", "her", "their", "our", "its", "a", "an"})
_VALUE_LINK = frozenset({"is", "are", "was", "of"})
_NAME_WORD = re.compile(r"[A-Za-z][\w'/-]*:?")
# A preposition inside the words before a value makes them an action's ("set the alarm to 7", "log in with ID 1").
_PREPOSITIONS = frozenset({"to", "for", "at", "on", "in", "into", "from", "by", "with", "until", "about", "as"})


def _enumerated(line: str) -> list[str]:
    """``line`` cut at inline numbers when they count up from 1 (else the line itself)."""
    markers = list(_INLINE_NUMBER.finditer(line))
    if len(markers) < 2 or [int(marker.group(1)) for marker in markers] != list(range(1, len(markers) + 1)):
        return [line]
    cuts = [marker.start() for marker in markers] + [len(line)]
    return [line[: cuts[0]], *(line[marker.end() : cuts[number + 1]] for number, marker in enumerate(markers))]


def fragments(text: str) -> list[tuple[str, bool]]:
    """The fragments of a request, each with whether it was cut off at a bare comma (a weak cut: see
    :func:`match_parts`); see the module docstring for the cuts."""
    found: list[tuple[str, bool]] = []
    for line in _LINE_END.split(text):
        for item in _enumerated(line):
            for sentence in _SENTENCE_END.split(_BULLET.sub("", item)):
                for clause in _CONNECTIVE.split(sentence):
                    for position, piece in enumerate(_COMMA.split(clause)):
                        piece = _LEADING_FILLER.sub("", piece.strip(" \t,.;:")).strip()
                        if piece:
                            found.append((piece, position > 0))
    return _joined_arguments(found)


def _is_named_value(piece: str) -> bool:
    """Whether a fragment only states a value: up to four words naming it, then the value (words
    with a digit or an "@", or quoted text): "password abc123", "my account ID is 123456",
    "verification code: 7890". That is an argument of an action, not an action."""
    words = _QUOTED.sub("0", piece).split()
    name_length = len(words)
    while name_length and any(character.isdigit() or character == "@" for character in words[name_length - 1]):
        name_length -= 1
    name = words[:name_length]
    while name and name[0].lower() in _VALUE_LEAD:
        name = name[1:]
    if name and name[-1].lower() in _VALUE_LINK:
        name = name[:-1]
    return name_length < len(words) and 1 <= len(name) <= 4 and all(_NAME_WORD.fullmatch(word) and word.lower() not in _PREPOSITIONS for word in name)


def _joined_arguments(found: list[tuple[str, bool]]) -> list[tuple[str, bool]]:
    """Fragments that are not actions joined to the action they belong to: a named value ("password
    abc123") to the fragment before it (to the next when it comes first), and a lone verb sharing
    its object with the next fragment ("find and summarize the news") to that one."""
    joined: list[tuple[str, bool]] = []
    leading = ""  # words waiting for the next fragment: leading named values, or a lone verb
    for number, (piece, weak) in enumerate(found):
        named_value, lone_verb = _is_named_value(piece), " " not in piece and piece.isalpha()
        if leading:
            piece, leading = f"{leading} {piece}", ""
        if named_value and joined:
            joined[-1] = (f"{joined[-1][0]}, {piece}", joined[-1][1])
        elif (named_value or lone_verb) and number < len(found) - 1:
            leading = f"{piece}," if named_value else f"{piece} and"
        else:
            joined.append((piece, weak))
    return joined


def split_task(text: str) -> list[str]:
    """Cut a request into candidate parts (see the module docstring); each keeps its own words.

    Returns:
        The fragments in order, stripped, without empty ones; ``[text]`` when nothing cuts it.
    """
    return [piece for piece, _ in fragments(text)] or [text.strip()]


#: Characters a task may have (a text, or all its steps together). The embedding model reads the
#: first 256 word pieces of a text (about 1,000 characters of English), so this is
#: :data:`MAX_TASK_PARTS` parts of up to 100 characters: a long task, not a document.
MAX_TASK_CHARS = 10_000
#: Parts a task text may be cut into (:func:`fragments`, before neighbours join). Each part is one
#: skill search and a plan per candidate goal; 100 plan in a few seconds with the shipped catalogs
#: (``benchmarks/bench_long_tasks.py``), well within :data:`toolpath.planner.planning.plans.DEFAULT_TASK_BUDGET_S`;
#: a task with more parts is several tasks.
MAX_TASK_PARTS = 100
#: Steps a task given as a list may have: each step is a part (see :data:`MAX_TASK_PARTS`).
MAX_TASK_STEPS = MAX_TASK_PARTS

_SPLIT_IT = "split it into smaller tasks and plan them one after another"


def checked_task(task: object) -> str | tuple[str, ...]:
    """``task`` as planning takes it: a non-empty text, or a tuple of non-empty step texts.

    Raises:
        QueryError: anything else (an empty text, no steps, a step that is not a non-empty string),
            a text with a control character or bytes that were not UTF-8
            (:func:`toolpath.planner.search.skills.check_text`), or a task over :data:`MAX_TASK_CHARS` characters,
            :data:`MAX_TASK_PARTS` parts or :data:`MAX_TASK_STEPS` steps (the message gives the
            limit and the task's size).
    """
    if isinstance(task, str):
        if not task.strip():
            raise QueryError("the task is empty; describe what you want to achieve")
        _check_size(len(task))
        check_text(task, "task")
        parts = len(fragments(task))
        if parts > MAX_TASK_PARTS:
            raise QueryError(
                f"the task has {parts} parts (cut at sentences, lines, 'and', 'then' and commas), more than the {MAX_TASK_PARTS} a task may have; {_SPLIT_IT}"
            )
        return task
    if isinstance(task, (bytes, Mapping)) or not isinstance(task, Iterable):
        raise QueryError(f"a task is a text or a list of step texts, not {type(task).__name__}")
    steps = tuple(task)
    if not steps or any(not isinstance(step, str) or not step.strip() for step in steps):
        raise QueryError("give at least one step, each a non-empty description")
    if len(steps) > MAX_TASK_STEPS:
        raise QueryError(f"the task has {len(steps)} steps, more than the {MAX_TASK_STEPS} a task may have; {_SPLIT_IT}")
    _check_size(sum(len(step) for step in steps))
    for number, step in enumerate(steps, 1):
        check_text(step, f"step {number}")
    return steps


def _check_size(characters: int) -> None:
    if characters > MAX_TASK_CHARS:
        raise QueryError(f"the task is {characters:,} characters long, more than the {MAX_TASK_CHARS:,} a task may have; {_SPLIT_IT}")


#: The cosine similarity a fragment of free text cut off at a bare comma needs to be a part of its
#: own; a weaker one ("in the city center") belongs to the part before it. Set on the UltraTool requests outside
#: the paper's test ids (``benchmarks/bench_taskplan.py``); a whole task needs only ``MIN_SCORE``.
FRAGMENT_MIN_SCORE = 0.6

#: Characters past which a part is not matched again as fragments join it: it keeps its goal. The
#: embedding model reads the first 256 word pieces of a text (about 1,000 characters of English), so
#: matching a longer part again would mostly repeat its first answer, while costing a full-length
#: embedding for every fragment that joins (issue 30: "check Lipinski's rule of five and " x 50).
LONG_PART_CHARS = 1_000

Status = Literal["matched", "held", "unmatched"]


@dataclass(frozen=True)
class PartMatch:
    """One part of a task and what it matched.

    Attributes:
        text: the part's words.
        choice: the goal chosen for it (``None`` when nothing matched).
        problem: why nothing matched (no skill close enough, or none reachable).
    """

    text: str
    choice: GoalChoice | None
    problem: str = ""

    @property
    def status(self) -> Status:
        """``"matched"``, ``"held"`` (its goal is already held: nothing to run for it) or ``"unmatched"``."""
        if self.choice is None:
            return "unmatched"
        return "matched" if self.choice.chosen.needs_work else "held"

    @property
    def tool(self) -> ToolDefinition | None:
        """The tool this part asks to run, when it matched a tool rather than a state."""
        if self.choice is None or self.choice.chosen.hit.kind != "tool" or self.choice.chosen.plan is None:
            return None
        return self.choice.chosen.plan.steps[-1].tool

    @property
    def goal(self) -> frozenset[str]:
        return self.choice.chosen.goal if self.choice is not None else frozenset()

    def to_dict(self) -> dict:
        chosen = self.choice.chosen if self.choice is not None else None
        return {
            "part": self.text,
            "status": self.status,
            "matched": chosen.hit.to_dict() if chosen is not None else None,
            "goal": sorted(self.goal),
            "must_run": qualified_name(self.tool) if self.tool is not None else None,
            "alternatives": [candidate.to_dict() for candidate in self.choice.passed_over] if self.choice is not None else [],
            "problem": self.problem or None,
        }


def match_parts(
    parts: Sequence[str],
    index: SkillIndex,
    graph: StateGraph,
    inputs: Mapping[str, Any] | None = None,
    held: Collection[str] = (),
    render: Callable[[Plan], Any] | None = None,
    merge: bool = True,
    weak: Collection[int] = (),
    fragment_min_score: float | None = None,
    budget: TaskBudget = NO_BUDGET,
) -> list[PartMatch]:
    """Choose a goal for each part; a text said again ("take a nap, take a nap") is matched once.

    Parameters:
        parts: the parts, in order.
        merge: the parts are fragments of free text (:func:`fragments`): neighbours that chose the
            same goal are one part. An agent's own steps (``merge=False``) are kept as given.
        weak: with ``merge``, the positions of fragments cut off at a bare comma. Such a fragment is
            a part of its own only when it matches a skill by ``fragment_min_score``; otherwise its
            words belong to the part before it ("book a room for two nights, in the city center"). Every other
            fragment is a part, and one that matches nothing is reported as unmatched, never
            dropped.
        fragment_min_score: default :data:`FRAGMENT_MIN_SCORE`.
        budget: checked before each match (:meth:`toolpath.planner.planning.plans.TaskBudget.check`).
        index, graph, inputs, held, render: as for :func:`toolpath.planner.tasks.goals.choose_goal`.

    Returns:
        One :class:`PartMatch` per (merged) part, in order.

    Raises:
        PlanningTimeout, PlanningCancelled: from ``budget``.
    """
    found: dict[tuple[str, float], PartMatch] = {}

    def matched(text: str, min_score: float = MIN_SCORE) -> PartMatch:
        budget.check()
        if (text, min_score) not in found:
            found[text, min_score] = _match(text, index, graph, inputs, held, render, min_score, budget)
        return found[text, min_score]

    if not merge:
        return [matched(text) for text in parts]
    threshold = FRAGMENT_MIN_SCORE if fragment_min_score is None else fragment_min_score
    matches: list[PartMatch] = []
    for position, text in enumerate(parts):
        comma = position in weak and bool(matches)
        match = matched(text, threshold if comma else MIN_SCORE)
        if match.choice is None and comma:
            previous = matches[-1]
            glued_text = f"{previous.text}, {text}"
            # A glued text is kept only when it wants the previous part's goal: an unmatched part has
            # none, and a long one keeps its goal (see LONG_PART_CHARS).
            glued = matched(glued_text) if previous.choice is not None and len(previous.text) < LONG_PART_CHARS else PartMatch(glued_text, None)
            keep = glued.choice is not None and glued.goal == previous.goal and glued.tool == previous.tool
            matches[-1] = glued if keep else PartMatch(glued_text, previous.choice, previous.problem)
            continue
        if match.choice is not None and matches and matches[-1].goal == match.goal and matches[-1].tool == match.tool:
            # The same goal said twice ("is it drug-like? check Lipinski's rule"): one part.
            previous = matches[-1]
            if len(previous.text) >= LONG_PART_CHARS or previous.text.endswith(text):
                # Long (see LONG_PART_CHARS), or the same words again ("X and X"): nothing new to match.
                matches[-1] = PartMatch(f"{previous.text} {text}", previous.choice, previous.problem)
                continue
            joined = matched(f"{previous.text} {text}")
            matches[-1] = joined if joined.goal == previous.goal and joined.tool == previous.tool else max(previous, match, key=_similarity)
            continue
        matches.append(match)
    return matches


def _similarity(match: PartMatch) -> float:
    hit = match.choice.chosen.hit if match.choice is not None else None
    return (hit.similarity if hit.similarity is not None else hit.lexical) if hit is not None else float("-inf")


def _match(
    text: str,
    index: SkillIndex,
    graph: StateGraph,
    inputs: Mapping[str, Any] | None,
    held: Collection[str],
    render: Callable[[Plan], Any] | None,
    min_score: float = MIN_SCORE,
    budget: TaskBudget = NO_BUDGET,
) -> PartMatch:
    try:
        return PartMatch(text, choose_goal(text, index, graph, inputs=inputs, held=held, render=render, min_score=min_score, budget=budget))
    except (NoMatchingSkillError, NoPlanError) as error:
        # Its reason, in no interface's options: a part's problem is reported to every interface alike.
        return PartMatch(text, None, error.reason)


def joint_plan(graph: StateGraph, matches: Sequence[PartMatch], held: Collection[str] = (), relevance: Mapping[int, float] | None = None) -> Plan:
    """One cost-optimal plan for the goals of every matched part: their states reached, their tools
    run; steps ordered by data flow, then by the first part each serves.

    Among plans of equal cost, tools of the domains the task is about (the domains of the parts'
    matched states and tools) win over tools of other domains, and then the tools ``relevance``
    scores higher (the task's words match them better). So a cross-domain bridge (chemistry's
    ``tabulate_descriptors`` also loads a table) serves only when the task asks for what it adds.
    The plan's ``tie_breaks`` say where a tie was broken and why.

    Raises:
        NoPlanError: no single plan reaches every part's goal.
        ValueError: no part matched anything that needs work.
    """
    states = frozenset().union(*(match.goal for match in matches if match.status == "matched" and match.tool is None))
    tools = list({match.tool.id: match.tool for match in matches if match.status == "matched" and match.tool is not None}.values())
    if not states and not tools:
        raise ValueError("no part of the task asks for work the held states do not already do")
    domains = frozenset(match.choice.chosen.hit.server for match in matches if match.status == "matched" and match.choice is not None) - {None}
    relevance = dict(relevance or {})
    # In-domain tools first, then by relevance: every in-domain score lies above every other one.
    span = (max(relevance.values()) - min(relevance.values()) + 1.0) if relevance else 1.0
    prefer = {tool.id: relevance.get(tool.id, 0.0) + (span if tool.server_name in domains else 0.0) for tool in graph.registry}
    joint = _ordered_by_parts(_with_repeats(plan(graph, states, held=held, must_run=tools, prefer=prefer), matches), matches)
    return replace(joint, tie_breaks=_tie_breaks(graph, joint, domains, relevance))


def _with_repeats(joint: Plan, matches: Sequence[PartMatch]) -> Plan:
    """``joint`` with one more call of a tool for each further part that asks to run it (steps
    "call clock_alarm_set for 7:00", "call clock_alarm_cancel", "call clock_alarm_set for 5:30" are
    three calls; a plan, being a set of tools, runs each once). A part whose goal is a *state*
    already reached adds nothing: the state is held."""
    asked = Counter(match.tool.id for match in matches if match.status == "matched" and match.tool is not None)
    extra = [step for step in joint.steps for _ in range(asked.get(step.tool.id, 1) - 1)]
    if not extra:
        return joint
    return replace(
        joint,
        steps=(*joint.steps, *extra),
        cost=joint.cost + sum(step.tool.cost for step in extra),
        lower_bound=(joint.lower_bound or 0.0) + sum(step.tool.cost for step in extra),
    )


def _relevance(index: SkillIndex, matches: Sequence[PartMatch], budget: TaskBudget = NO_BUDGET) -> dict[int, float]:
    """Each tool's best search score over the matched parts: what the task is about, for ties."""
    best: dict[int, float] = {}
    for match in matches:
        if match.status == "matched":
            budget.check()
            for tool_id, score in index.tool_relevance(match.text).items():
                best[tool_id] = max(score, best.get(tool_id, score))
    return best


def _tie_breaks(graph: StateGraph, joint: Plan, domains: frozenset[str], relevance: Mapping[int, float]) -> tuple[TieBreak, ...]:
    """Each step (not one the task asked to run) that other tools could have taken at the same
    cost: producing everything the step gives later steps and the goal, and runnable at that point."""
    ties = []
    reached = set(joint.held)
    for position, step in enumerate(joint.steps):
        later = set(joint.goal).union(*(other.requires for other in joint.steps[position + 1 :]))
        supplies = step.produces & later
        if supplies and qualified_name(step.tool) not in joint.must_run:
            token = next(iter(supplies))
            rivals = [
                tool
                for tool in graph.tools_for(token)
                if tool.id != step.tool.id
                and tool.cost == step.tool.cost
                and supplies <= tool.state_transition.produces
                and tool.state_transition.requires <= reached
            ]
            if rivals:
                ties.append(
                    TieBreak(
                        position, qualified_name(step.tool), tuple(qualified_name(tool) for tool in rivals), _why_chosen(step.tool, rivals, domains, relevance)
                    )
                )
        reached |= step.produces
    return tuple(ties)


def _why_chosen(chosen: ToolDefinition, rivals: Sequence[ToolDefinition], domains: frozenset[str], relevance: Mapping[int, float]) -> str:
    outside = sorted({tool.server_name or "" for tool in rivals if tool.server_name not in domains})
    if chosen.server_name in domains and outside:
        return f"the task is about {', '.join(sorted(domains))}, not {', '.join(outside)}"
    if all(relevance.get(chosen.id, 0.0) > relevance.get(tool.id, 0.0) for tool in rivals):
        return f"the task's words match {chosen.name} best"
    return "no preference between them (the same cost, domain and match to the task's words)"


def _ordered_by_parts(joint: Plan, matches: Sequence[PartMatch]) -> Plan:
    """``joint`` with its steps in a data-flow order that runs the first part's steps first."""
    steps = list(joint.steps)
    # A state held before the plan needs no producer first, so its producers set no order: the
    # parts do ("simplify the text, then expand it" simplifies the held text first).
    needs = [{source for token, source in step.satisfied_by.items() if source is not None and token not in joint.held} for step in steps]
    # The first part each step serves: the part whose goal it produces or whose tool it is (the k-th
    # call of a tool serves the k-th part asking for it), then (backwards) the earliest part of any
    # step it feeds.
    asking: dict[int, list[int]] = {}
    for number, match in enumerate(matches):
        if match.status == "matched" and match.tool is not None:
            asking.setdefault(match.tool.id, []).append(number)
    serves = [len(matches)] * len(steps)
    for position, step in enumerate(steps):
        parts = asking.get(step.tool.id)  # type: ignore[arg-type]
        served = [parts.pop(0)] if parts else []
        served += [number for number, match in enumerate(matches) if match.status == "matched" and match.tool is None and step.produces & match.goal][:1]
        serves[position] = min(served, default=len(matches))
    for position in range(len(steps) - 1, -1, -1):
        for required_from in needs[position]:
            serves[required_from] = min(serves[required_from], serves[position])
    waiting = [len(sources) for sources in needs]
    feeds: list[list[int]] = [[] for _ in steps]
    for position, sources in enumerate(needs):
        for source in sources:
            feeds[source].append(position)
    ready = [(serves[position], position) for position in range(len(steps)) if not waiting[position]]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        _, position = heapq.heappop(ready)
        order.append(position)
        for consumer in feeds[position]:
            waiting[consumer] -= 1
            if not waiting[consumer]:
                heapq.heappush(ready, (serves[consumer], consumer))
    return joint.reordered([steps[position].tool for position in order])


def task_text(task: str | Sequence[str]) -> str:
    """The task as one line of text: itself, or the agent's steps joined by "; " (check it with
    :func:`checked_task` first)."""
    return task if isinstance(task, str) else "; ".join(task)


def checked_request(
    graph: StateGraph, task: object, inputs: Mapping[str, Any] | None, held: str | Collection[str]
) -> tuple[str | tuple[str, ...], frozenset[str]]:
    """Check a task, its inputs and held states before anything loads: ``(task, held)`` as planning
    takes them (one held state may be a plain string).

    Raises:
        QueryError: see :func:`checked_task`. InputError: a bad input name, or a value with no
            literal form (:func:`toolpath.planner.planning.inputs.plain_value`): refused here, whatever the plan, so
            no goal is passed over for it. UnknownStateError: an unknown held state.
    """
    held = frozenset([held] if isinstance(held, str) else held)
    graph.check_states(held)
    check_input_names(inputs or {})
    for name, value in (inputs or {}).items():
        plain_value(value, name)
    return checked_task(task), held


def held_unless_replaced(graph: StateGraph, held: Collection[str], inputs: Mapping[str, Any]) -> frozenset[str]:
    """The states a session holds that a task's inputs do not replace. An input meant for a
    parameter of a tool (:func:`toolpath.planner.planning.inputs.input_for`) means "use this value", so the states
    that tool produces, and everything produced from them, are planned again rather than taken as
    held (a new ``smiles`` re-parses the molecule instead of analysing the one parsed before). A
    state an input itself carries stays held: the input is its value."""
    held = frozenset(held)
    if not inputs or not held:
        return held
    carried = graph.states_carried(inputs)
    replaced = {
        state
        for tool in graph.registry
        if any(input_for(tool, parameter, inputs) is not None for parameter in tool.parameters)
        for state in tool.state_transition.produces
    }
    grown = True
    while grown:  # downstream: what tools make from a replaced state is replaced too
        grown = False
        for tool in graph.registry:
            if tool.state_transition.requires & replaced and not tool.state_transition.produces <= replaced:
                replaced |= tool.state_transition.produces
                grown = True
    return held - (replaced - carried)


def plan_parts(
    task: str | Sequence[str],
    index: SkillIndex,
    graph: StateGraph,
    inputs: Mapping[str, Any] | None = None,
    held: Collection[str] = (),
    render: Callable[[Plan], Any] | None = None,
    session_held: Collection[str] = (),
    budget: TaskBudget = NO_BUDGET,
) -> tuple[tuple[PartMatch, ...], Plan]:
    """Split ``task`` (free text) or take its steps (a list), match each part and plan them jointly.

    ``held`` states (the caller's word) stay held. ``session_held`` states (what an agent session
    holds from earlier tasks) stay held unless the inputs replace them (:func:`held_unless_replaced`).
    Input states the inputs give (:meth:`toolpath.planner.planning.graph.StateGraph.input_states_given`) are held.
    ``budget`` is checked between parts, candidate goals and before the joint plan.

    Returns:
        The parts with what each matched, and the joint plan.

    Raises:
        QueryError: an empty task or step.
        NoMatchingSkillError: no part matches any skill (the whole text was tried as one part too).
        NoPlanError: no single plan reaches the goals of all matched parts.
        PlanningTimeout, PlanningCancelled: from ``budget`` (:class:`toolpath.planner.planning.plans.TaskBudget`).
    """
    task = checked_task(task)
    held = frozenset(held) | held_unless_replaced(graph, session_held, inputs or {}) | graph.input_states_given(inputs or {})
    if isinstance(task, str):
        cut = fragments(task) or [(task.strip(), False)]
        texts, weak = [text for text, _ in cut], {position for position, (_, comma) in enumerate(cut) if comma}
    else:
        texts, weak = list(task), set()
    if len(texts) == 1:
        matches = [PartMatch(texts[0], choose_goal(texts[0], index, graph, inputs=inputs, held=held, render=render, budget=budget))]
    else:
        matches = match_parts(texts, index, graph, inputs, held, render, merge=isinstance(task, str), weak=weak, budget=budget)
    if all(match.choice is None for match in matches):
        whole = task_text(task)
        choice = choose_goal(whole, index, graph, inputs=inputs, held=held, render=render, budget=budget)  # raises when nothing serves it
        matches = [PartMatch(whole, choice)]
    if not any(match.status == "matched" for match in matches):
        goal = frozenset().union(*(match.goal for match in matches))
        return tuple(matches), Plan(goal, frozenset(held), (), 0.0, True)
    relevance = _relevance(index, matches, budget)
    budget.check()
    return tuple(matches), joint_plan(graph, matches, held, relevance)
