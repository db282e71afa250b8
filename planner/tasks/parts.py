"""Tasks with several parts: split a request into parts, match each part, plan all of them at once.

"identify the functional groups of this molecule and check Lipinski's rule of five" has two parts.
Free text is read into clauses by :func:`toolpath.planner.tasks.clauses.read_request`: actions,
facts and context. A **fact** ("I have an image file 'a.jpg'") runs nothing: when it names an input
state of the catalogs, that state is held, and a single value it quotes ("'a.jpg'") is the input of
the one parameter that carries the state (:func:`read_fact`). **Context** ("after booking the
flight") runs nothing either. Each **action** is a part, searched on its own by :func:`match_parts`; an
action cut off weakly (a bare "and" or comma before words that need not start a clause) is a part of
its own only if it matches a skill by :data:`FRAGMENT_MIN_SCORE`, and is otherwise words of its
neighbour ("donors *and acceptors*", "in the city center"); neighbours that chose the same goal are
one part. An agent that already decomposed its task passes its steps instead, and they are taken as
they are. A task over :data:`MAX_TASK_CHARS` characters or :data:`MAX_TASK_PARTS` parts is refused up front.

Each part gets its goal from :func:`toolpath.planner.tasks.goals.choose_goal`: a state to reach, or a tool that
must run (a tool hit, or a tool the part names). The goals of all parts are planned **jointly** as
one cost-optimal plan (:func:`toolpath.planner.planning.plans.plan` with ``must_run``), so a state one part
produces is what the next part consumes, and shared steps run once; among plans of equal cost, the
one whose tools the parts' words are most about (``prefer``). Steps are then ordered by data flow
and, where data flow leaves the order open, by the part they serve (the first part's steps first).
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from toolpath.planner.planning.graph import StateGraph
from toolpath.planner.planning.inputs import InputError, check_input_names, input_for, plain_value
from toolpath.planner.planning.plans import NO_BUDGET, NoPlanError, Plan, TaskBudget, TieBreak, plan, qualified_name
from toolpath.planner.search.skills import QueryError, SkillIndex, check_text
from toolpath.planner.tasks.clauses import (
    Clause,
    Kind,
    action_words,
    joined_reasons,
    leading_verb,
    named_entities,
    names_destination,
    read_request,
    source_values,
    without_names,
    without_quotes,
)
from toolpath.planner.tasks.goals import MIN_SCORE, GoalChoice, NoMatchingSkillError, choose_goal
from toolpath.registry import ToolDefinition

#: Characters a task may have (a text, or all its steps together). The embedding model reads the
#: first 256 word pieces of a text (about 1,000 characters of English), so this is
#: :data:`MAX_TASK_PARTS` parts of up to 100 characters: a long task, not a document.
MAX_TASK_CHARS = 10_000
#: Parts a task text may be cut into (:func:`toolpath.planner.tasks.clauses.read_request`, before neighbours join). Each part is one
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
        parts = len(read_request(task))
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

Status = Literal["matched", "held", "unmatched", "fact", "context"]


@dataclass(frozen=True)
class PartMatch:
    """One part of a task and what it matched.

    Attributes:
        text: the part's words.
        choice: the goal chosen for it (``None`` when nothing matched, and for facts and context).
        problem: why nothing matched (no skill close enough, or none reachable).
        kind: ``"action"``, ``"fact"`` or ``"context"`` (:mod:`toolpath.planner.tasks.clauses`).
        why: why it is a fact or context, or how its words were put together.
        holds: the input states it holds: a fact's (:func:`read_fact`), or the one an action's own
            value stands for (:func:`choose_part`).
        values: the inputs its value gives, as ``((name, value), ...)``.
    """

    text: str
    choice: GoalChoice | None
    problem: str = ""
    kind: Kind = "action"
    why: str = ""
    holds: frozenset[str] = frozenset()
    values: tuple[tuple[str, str], ...] = ()

    @property
    def status(self) -> Status:
        """``"matched"``, ``"held"`` (its goal is already held: nothing to run for it), ``"unmatched"``,
        or the part's kind for a fact or context (they run nothing)."""
        if self.kind != "action":
            return self.kind
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
            "kind": self.kind,
            "status": self.status,
            "why": self.why or None,
            "matched": chosen.hit.to_dict() if chosen is not None else None,
            "goal": sorted(self.goal),
            "must_run": qualified_name(self.tool) if self.tool is not None else None,
            "holds": sorted(self.holds),
            "inputs": dict(self.values),
            "alternatives": [candidate.to_dict() for candidate in self.choice.passed_over] if self.choice is not None else [],
            "problem": self.problem or None,
        }


def read_fact(clause: Clause, index: SkillIndex, graph: StateGraph, inputs: Mapping[str, Any] | None = None) -> PartMatch:
    """A fact as a part: the input state it names (the best state hit by ``MIN_SCORE`` that is an
    input state, ``State.input``), held; and its value, when it quotes or names exactly one
    (``'a.jpg'``, ``https://…``, ``people.csv``), as the input of the parameters that carry that
    state (:func:`_value_inputs`), unless ``inputs`` already give one.

    A fact that names no input state holds nothing: what a tool made ("I booked the flight") is
    not held by saying so, because no artifact of it exists for a step to take.
    """
    if names_destination(clause.text):
        return PartMatch(clause.text, None, kind="fact", why=joined_reasons(clause.why, "it names where to write, not what the user holds"))
    hits = [hit for hit in index.search(without_quotes(clause.text), k=5, kind="state") if hit.matches(MIN_SCORE) and hit.states]
    held = [hit for hit in hits if all(graph.states[token].input for token in hit.states if token in graph.states)]
    if not held:
        return PartMatch(clause.text, None, kind="fact", why=joined_reasons(clause.why, "it names no input state, so it holds nothing"))
    hit = held[0]
    why = joined_reasons(clause.why, f"it holds {', '.join(sorted(hit.states))} (state {hit.name}, {_strength(hit)})")
    values = source_values(clause.text)
    given = _value_inputs(graph, hit.states, values[0]) if len(values) == 1 else ()
    if given and not any(input_for(tool, parameter, inputs or {}) for tool, parameter in _carriers(graph, hit.states)):
        return PartMatch(clause.text, None, kind="fact", why=f"{why}; its value {values[0]!r} is their input", holds=hit.states, values=given)
    return PartMatch(clause.text, None, kind="fact", why=why, holds=hit.states)


def _strength(hit: Any) -> str:
    return f"similarity {hit.similarity:.2f}" if hit.similarity is not None else f"lexical score {hit.lexical:.2f}"


def _carriers(graph: StateGraph, states: frozenset[str]) -> list[tuple[ToolDefinition, Any]]:
    """``(tool, parameter)`` for every parameter that reads one of ``states`` (``role: input``)."""
    return [(tool, parameter) for tool in graph.registry for parameter in tool.parameters if parameter.state in states and parameter.role == "input"]


def _value_inputs(graph: StateGraph, states: frozenset[str], value: str) -> tuple[tuple[str, str], ...]:
    """``value`` as the input of every parameter that reads ``states``: under the parameter's plain
    name when all of them share it and no other parameter of that name exists (a plain input also
    reaches every required parameter so named), else under ``TOOL.PARAMETER`` for each. So a value
    the user holds never lands in a destination a tool writes to (``role: output``)."""
    carriers = _carriers(graph, states)
    names = {parameter.python_name for _, parameter in carriers}
    if len(names) == 1:
        name, reading = next(iter(names)), {id(parameter) for _, parameter in carriers}
        if all(id(parameter) in reading for tool in graph.registry for parameter in tool.parameters if parameter.python_name == name):
            return ((name, value),)
    return tuple((f"{qualified_name(tool)}.{parameter.python_name}", value) for tool, parameter in carriers)


def match_parts(
    parts: Sequence[Clause],
    index: SkillIndex,
    graph: StateGraph,
    inputs: Mapping[str, Any] | None = None,
    held: Collection[str] = (),
    render: Callable[[Plan], Any] | None = None,
    merge: bool = True,
    fragment_min_score: float | None = None,
    budget: TaskBudget = NO_BUDGET,
    facts: Mapping[int, PartMatch] | None = None,
) -> list[PartMatch]:
    """Choose a goal for each action; a text said again ("take a nap, take a nap") is matched once.

    Parameters:
        parts: the clauses, in order (:func:`toolpath.planner.tasks.clauses.read_request`, or an
            agent's steps as actions).
        merge: the clauses are free text: neighbouring actions that chose the same goal are one
            part, and weak ones may join their neighbour. An agent's own steps (``merge=False``)
            are kept as given.
        fragment_min_score: default :data:`FRAGMENT_MIN_SCORE`. With ``merge``, a weak action (cut
            off by a bare "and" or comma before words that need not start a clause) is a part of
            its own only when it matches a skill by this score; otherwise its words belong to the
            action before it: an argument after a comma ("book a room for two nights, in the
            city center") leaves that action's goal as it was, and the rest of a noun phrase after
            "and" ("make a black *and white image*") is matched again with it. Every other action is
            a part, and one that matches nothing is reported as unmatched, never dropped.
        facts: the facts' parts by position (:func:`read_fact`); a fact or context clause is a part
            that runs nothing, and no action joins across it.
        budget: checked before each match (:meth:`toolpath.planner.planning.plans.TaskBudget.check`).
        index, graph, inputs, held, render: as for :func:`toolpath.planner.tasks.goals.choose_goal`.

    Returns:
        One :class:`PartMatch` per (merged) part, in order.

    Raises:
        PlanningTimeout, PlanningCancelled: from ``budget``.
    """
    found: dict[tuple[str, str, float], PartMatch] = {}

    def matched(text: str, min_score: float = MIN_SCORE, why: str = "", query: str = "") -> PartMatch:
        budget.check()
        if (text, query, min_score) not in found:
            found[text, query, min_score] = _match(text, index, graph, inputs, held, render, min_score, budget, query)
        match = found[text, query, min_score]
        return replace(match, why=joined_reasons(why, match.why))

    if not merge:
        return [matched(clause.text) for clause in parts]
    threshold = FRAGMENT_MIN_SCORE if fragment_min_score is None else fragment_min_score
    matches: list[PartMatch] = []
    last: Clause | None = None  # the clause the last action part ends with
    for position, clause in enumerate(parts):
        if clause.kind != "action":
            matches.append((facts or {}).get(position) or PartMatch(clause.text, None, kind=clause.kind, why=clause.why))
            continue
        previous = matches[-1] if matches and matches[-1].kind == "action" else None
        weak = clause.weak and previous is not None
        match = matched(clause.text, threshold if weak else MIN_SCORE, clause.why, clause.query)
        if match.choice is None and weak and previous is not None:
            glued_text = f"{previous.text}{clause.joiner}{clause.text}"
            why = joined_reasons(
                previous.why, f"{clause.text!r} joined it: cut off by {clause.joiner.strip() or 'a space'!r}, it matches no skill by {threshold} on its own"
            )
            if previous.choice is not None and len(previous.text) < LONG_PART_CHARS:
                glued = matched(glued_text, why=why)
                # The rest of a noun phrase completes the action's words: its goal is the whole's.
                # An argument after a comma leaves the goal as it was (see LONG_PART_CHARS too).
                noun_phrase = clause.joiner.strip(" ,").lower() == "and"
                keep = glued.choice is not None and (noun_phrase or (glued.goal == previous.goal and glued.tool == previous.tool))
                matches[-1] = glued if keep else replace(previous, text=glued_text, why=why)
            else:
                matches[-1] = replace(previous, text=glued_text, why=why)
            last = clause
            continue
        # The same verb again with other words asks for the operation twice ("translate it into
        # German, and translate it into Spanish"): two parts, even with one goal.
        repeated = last is not None and not clause.weak and leading_verb(last.text) == leading_verb(clause.text) != "" and last.text != clause.text
        if (
            match.choice is not None
            and previous is not None
            and not repeated
            and (previous.goal, previous.tool) != (match.goal, match.tool)
            and _serves(previous, match)
        ):
            # "an audio version of this story, narrated with a deep voice": what these words ask
            # for, the action before them already does.
            why = joined_reasons(previous.why, f"{clause.text!r} joined it: its goal is on that part's plan")
            matches[-1] = replace(previous, text=f"{previous.text}{clause.joiner}{clause.text}", why=why)
            last = clause
            continue
        if match.choice is not None and previous is not None and previous.goal == match.goal and previous.tool == match.tool and not repeated:
            # The same goal said twice ("is it drug-like? check Lipinski's rule"), or two verbs
            # that share an object and do one thing ("find and summarize the news"): one part.
            why = joined_reasons(previous.why, f"{clause.text!r} chose the same goal: one part")
            together = last.together if last is not None and last.together else f"{previous.text}{clause.joiner}{clause.text}"
            if len(previous.text) >= LONG_PART_CHARS or previous.text.endswith(clause.text):
                # Long (see LONG_PART_CHARS), or the same words again ("X and X"): nothing new to match.
                matches[-1] = replace(previous, text=together, why=why)
            else:
                joined = matched(together, why=why)
                matches[-1] = joined if joined.goal == previous.goal and joined.tool == previous.tool else max(previous, match, key=_similarity)
            last = clause
            continue
        matches.append(match)
        last = clause
    return matches


def _serves(previous: PartMatch, match: PartMatch) -> bool:
    """Whether ``previous``'s plan already does what ``match`` asks: runs its tool, or reaches its goal."""
    steps = previous.choice.chosen.plan.steps if previous.choice is not None and previous.choice.chosen.plan is not None else ()
    if match.tool is not None:
        return any(step.tool.id == match.tool.id for step in steps)
    return bool(match.goal) and match.goal <= frozenset().union(*(step.produces for step in steps))


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
    query: str = "",
) -> PartMatch:
    try:
        return choose_part(text, index, graph, inputs, held, render, min_score, budget, query)
    except (NoMatchingSkillError, NoPlanError) as error:
        # Its reason, in no interface's options: a part's problem is reported to every interface alike.
        return PartMatch(text, None, error.reason)


def choose_part(
    text: str,
    index: SkillIndex,
    graph: StateGraph,
    inputs: Mapping[str, Any] | None = None,
    held: Collection[str] = (),
    render: Callable[[Plan], Any] | None = None,
    min_score: float = MIN_SCORE,
    budget: TaskBudget = NO_BUDGET,
    query: str = "",
) -> PartMatch:
    """An action's goal (:func:`toolpath.planner.tasks.goals.choose_goal`), searched on ``query``
    (default ``text``; :attr:`toolpath.planner.tasks.clauses.Clause.query`) without the words it
    quotes: quoted text is data, and a long quote would otherwise be all the search reads ("Say
    '…' in a calm voice"). When nothing matches, it is searched once more without the names it
    mentions (:func:`toolpath.planner.tasks.clauses.named_entities`).

    A value the action gives (its one quoted value, URL or file name) is the user's: when the
    chosen plan would make an input state that nothing holds ("translate 'Bonjour' into English"
    would generate a text first), that state is held instead and the value is its input
    (:func:`_value_inputs`), and the goal is chosen again from there.

    Raises:
        NoMatchingSkillError, NoPlanError, InputError, PlanningTimeout, PlanningCancelled: as
            :func:`toolpath.planner.tasks.goals.choose_goal` raises them.
    """
    values = source_values(text)

    def choose(search: str, holding: str | None = None) -> tuple[GoalChoice, tuple[tuple[str, str], ...]]:
        """The goal for ``search``, with ``holding`` held and the one value as its input."""
        given = _value_inputs(graph, frozenset({holding}), values[0]) if holding is not None else ()
        held_now = {*held, holding} if holding is not None else held
        choice = choose_goal(search, index, graph, inputs={**dict(given), **(inputs or {})}, held=held_now, render=render, min_score=min_score, budget=budget)
        return choice, given

    query = without_quotes(query or text, words_too=False)
    try:
        choice, _ = choose(query)
    except NoPlanError as error:
        # "describe 'people.csv'": no tool makes the file the plan needs; the value is that file.
        if len(values) != 1 or len(error.given_by) != 1:
            raise
        state = next(iter(error.given_by))
        choice, given = choose(query, state)
        return PartMatch(text, choice, why=f"its value {values[0]!r} is the {state} its plan needs", holds=frozenset({state}), values=given)
    except NoMatchingSkillError as error:
        # Names no catalog knows can be all the search reads ("the Wikipedia article about Ada
        # Lovelace"): search once more without them. The refusal quotes the user's words.
        unnamed = without_names(query)
        try:
            if unnamed == query:
                raise
            choice, _ = choose(unnamed)
        except NoMatchingSkillError:
            raise NoMatchingSkillError(text, error.hits, min_score) from None
        query = unnamed
    steps = choice.chosen.plan.steps if choice.chosen.plan is not None else ()
    made = [token for step in steps for token in sorted(step.produces) if token in graph.states and graph.states[token].input and token not in held]
    # A single-word value (a file name, a URL, an id) is what the goal's own step reads
    # ("transcribe 'b.wav'": the audio, not the text a longer plan would make the audio from); a
    # value of several words is content, the first thing the plan would make ("say 'Doors close!'").
    names_only = not any(character.isspace() for value in values for character in value)
    if names_only:
        last_reads = steps[-1].requires if steps else frozenset()
        made.sort(key=lambda token: token not in last_reads)
    if not values or (len(values) > 1 and not names_only) or not made:
        return PartMatch(text, choice)
    if any(input_for(tool, parameter, inputs or {}) for tool, parameter in _carriers(graph, frozenset(made[:1]))):
        return PartMatch(text, choice)
    try:
        better, given = choose(query, made[0])
    except (NoMatchingSkillError, NoPlanError):
        return PartMatch(text, choice)
    # "Combine 'intro.wav' and 'outro.wav'": the first name is the state, the others the goal
    # step's further parameters, in the order the tool takes them.
    rest = _in_order(better, values[1:], inputs or {})
    if rest is None:
        return PartMatch(text, choice)
    why = f"its value {values[0]!r} is the {made[0]} the plan would otherwise make"
    if rest:
        why += "; " + ", ".join(f"{value!r} is {name}" for name, value in rest)
    return PartMatch(text, better, why=why, holds=frozenset({made[0]}), values=given + rest)


def _in_order(choice: GoalChoice, values: Sequence[str], inputs: Mapping[str, Any]) -> tuple[tuple[str, str], ...] | None:
    """``values`` as the inputs (``TOOL.PARAMETER``) of the goal step's required parameters that
    read no state and have no input yet, in the tool's order; ``None`` when there are more values
    than such parameters (then nothing tells where they go)."""
    steps = choice.chosen.plan.steps if choice.chosen.plan is not None else ()
    if not values:
        return ()
    if not steps:
        return None
    tool = steps[-1].tool
    free = [
        parameter for parameter in tool.required_parameters if parameter.state is None and parameter.role == "input" and not input_for(tool, parameter, inputs)
    ]
    if len(values) > len(free):
        return None
    return tuple((f"{qualified_name(tool)}.{parameter.python_name}", value) for parameter, value in zip(free, values))


def joint_plan(
    graph: StateGraph, matches: Sequence[PartMatch], held: Collection[str] = (), relevance: Mapping[int, float] | None = None, names: bool = True
) -> Plan:
    """One cost-optimal plan for the goals of every matched part: their states reached, their tools
    run; steps ordered by data flow, then by the first part each serves.

    With ``names``, a part that names a thing ("the Wikipedia article about Ada Lovelace") does not
    have what it needs invented: the tools its own plan would make an input state with (a text
    generated) are avoided, so the thing is looked up (searched, fetched) instead, at a higher cost
    if need be (:func:`_invented_for_names`). Without a plan that avoids them, they are used.

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
    avoid = _invented_for_names(matches) - {qualified_name(tool) for tool in tools} if names else set()
    try:
        cheapest = plan(graph, states, held=held, must_run=tools, prefer=prefer, avoid=avoid)
    except NoPlanError:
        if not avoid:
            raise
        avoid = set()
        cheapest = plan(graph, states, held=held, must_run=tools, prefer=prefer)
    joint = _ordered_by_parts(_with_repeats(cheapest, matches), matches)
    return replace(joint, tie_breaks=_tie_breaks(graph, joint, domains, relevance, avoid))


def _invented_for_names(matches: Sequence[PartMatch]) -> set[str]:
    """The tools by which a part that names something would invent what it needs: the steps of its
    chosen plan, before its goal, that make an input state (``GoalCandidate.invents``)."""
    avoid = set()
    for match in matches:
        chosen = match.choice.chosen if match.status == "matched" and match.choice is not None else None
        if chosen is not None and chosen.invents and chosen.plan is not None and named_entities(match.text):
            avoid |= {qualified_name(step.tool) for step in chosen.plan.steps[:-1] if step.produces & set(chosen.invents)}
    return avoid


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


def _relevance(index: SkillIndex, graph: StateGraph, matches: Sequence[PartMatch], budget: TaskBudget = NO_BUDGET, names: bool = True) -> dict[int, float]:
    """Each tool's best search score over the matched parts: what the task is about, for ties.

    With ``names``, a tool that starts from nothing (it requires no state: where a name goes in)
    also scores for looking up each thing the parts name ("find Sofia Coppola by name"). So of two
    tools that make a movie id at equal cost, a request naming "the movie Titanic" takes the one
    that searches by title, not the one that lists the latest movies. An agent's own steps
    (``names=False``) say themselves how each thing is found."""
    matched = [match for match in matches if match.status == "matched"]
    # One query for all the names the task mentions: each query is an embedding (about 10 ms).
    mentioned = list(dict.fromkeys(name for match in matched for name in named_entities(match.text))) if names else []
    lookups = [f"find {', '.join(mentioned)} by name"] if mentioned else []
    starts = {tool.id for tool in graph.registry if not tool.state_transition.requires}
    best: dict[int, float] = {}
    for query in dict.fromkeys([match.text for match in matched] + lookups):
        budget.check()
        lookup = query in lookups
        for tool_id, score in index.tool_relevance(query).items():
            if not lookup or tool_id in starts:
                best[tool_id] = max(score, best.get(tool_id, score))
    return best


def _tie_breaks(graph: StateGraph, joint: Plan, domains: frozenset[str], relevance: Mapping[int, float], avoided: Collection[str] = ()) -> tuple[TieBreak, ...]:
    """Each step (not one the task asked to run) that other tools (not ``avoided``) could have
    taken at the same cost: producing everything the step gives later steps and the goal, and
    runnable at that point."""
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
                and qualified_name(tool) not in avoided
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


def _refuse_competing_values(matches: Sequence[PartMatch], inputs: Mapping[str, Any] | None) -> None:
    """Refuse two parts' values for one input ("caption 'a.png'. Caption 'b.png'"): a cell takes
    one value per input, and keeping either would drop the other without a word.

    Raises:
        InputError: naming the input, both values and their parts.
    """
    given: dict[str, tuple[str, str]] = {}
    for match in matches:
        for name, value in match.values:
            if name in (inputs or {}):
                continue
            if name in given and given[name][0] != value:
                first, part = given[name]
                raise InputError(
                    f"the task gives two values for the input {name}: {first!r} (in {part!r}) and {value!r} (in {match.text!r}); "
                    "a cell takes one value per input: plan them as two tasks, or give the one meant as an input"
                )
            given.setdefault(name, (value, match.text))


def inputs_with_facts(parts: Iterable[PartMatch], inputs: Mapping[str, Any] | None, plan: Plan | None = None) -> dict[str, Any]:
    """``inputs`` with the values the parts give (a fact's, or an action's own value: see
    :func:`read_fact` and :func:`choose_part`); the caller's own inputs win. With ``plan``, only
    the values some step of it takes: the others are no input of the user's to report unused."""
    given = {name: value for part in parts for name, value in part.values}
    if plan is not None:
        given = {
            name: value
            for name, value in given.items()
            if any(input_for(step.tool, parameter, {name: value}) for step in plan.steps for parameter in step.tool.parameters)
        }
    return {**given, **(inputs or {})}


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
    """Read ``task`` (free text: :func:`toolpath.planner.tasks.clauses.read_request`) or take its
    steps (a list), match each action and plan them jointly. Facts are read first: the input states
    they name are held, and their values are inputs (the caller's own inputs win).

    ``held`` states (the caller's word) stay held. ``session_held`` states (what an agent session
    holds from earlier tasks) stay held unless the inputs replace them (:func:`held_unless_replaced`).
    Input states the inputs give (:meth:`toolpath.planner.planning.graph.StateGraph.input_states_given`) are held.
    ``budget`` is checked between parts, candidate goals and before the joint plan.

    Returns:
        The parts with what each matched, and the joint plan.

    Raises:
        QueryError: an empty task or step, or a task that only tells facts and asks for nothing.
        InputError: two parts give different values for one input (:func:`_refuse_competing_values`).
        NoMatchingSkillError: no part matches any skill (the whole text was tried as one part too).
        NoPlanError: no single plan reaches the goals of all matched parts.
        PlanningTimeout, PlanningCancelled: from ``budget`` (:class:`toolpath.planner.planning.plans.TaskBudget`).
    """
    task = checked_task(task)
    if isinstance(task, str):
        clauses = read_request(task, action_words(graph))
        if not clauses:
            clauses = [Clause(task.strip())]  # no words to read: the search says what it matches
        if not any(clause.kind == "action" for clause in clauses):
            told = "; ".join(repr(clause.text) for clause in clauses)
            raise QueryError(f"the task only tells ({told}) and asks for nothing; say what to do, e.g. 'caption it'")
    else:
        clauses = [Clause(step) for step in task]
    facts = {position: read_fact(clause, index, graph, inputs) for position, clause in enumerate(clauses) if clause.kind == "fact"}
    caller_inputs = inputs
    _refuse_competing_values(list(facts.values()), caller_inputs)
    inputs = inputs_with_facts(facts.values(), inputs)
    held = frozenset(held).union(*(fact.holds for fact in facts.values()))
    held |= held_unless_replaced(graph, session_held, inputs) | graph.input_states_given(inputs)
    if len(clauses) == 1:
        matches = [choose_part(clauses[0].text, index, graph, inputs, held, render, budget=budget)]
    else:
        matches = match_parts(clauses, index, graph, inputs, held, render, merge=isinstance(task, str), budget=budget, facts=facts)
    if all(match.choice is None for match in matches if match.kind == "action"):
        whole = task_text(task)
        matches = [choose_part(whole, index, graph, inputs, held, render, budget=budget)]  # raises when nothing serves it
    _refuse_competing_values(matches, caller_inputs)
    held = held.union(*(match.holds for match in matches))  # what facts and values hold
    if not any(match.status == "matched" for match in matches):
        goal = frozenset().union(*(match.goal for match in matches))
        return tuple(matches), Plan(goal, frozenset(held), (), 0.0, True)
    relevance = _relevance(index, graph, matches, budget, names=isinstance(task, str))
    budget.check()
    return tuple(matches), joint_plan(graph, matches, held, relevance, names=isinstance(task, str))
