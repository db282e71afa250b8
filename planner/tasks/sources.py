"""Where the thing a part asks about comes from: "who directed the film that is most popular right now".

A part may ask for something of a thing (its **head**: "who directed", "the logo of") and name that
thing by how it is found (its **source**: "the film that is most popular right now", "the studio
behind the top rated film"). Matched as a whole, the source's words often win the search (the list
of popular films), and the plan stops short of what was asked (the film's credits); or the head wins
and its plan finds the thing some other way (a search by title for a film the words never name).

:func:`read_source` reads such a part in two: cut before a noun phrase
(:func:`toolpath.planner.tasks.clauses.noun_phrase_cuts`), the source is matched as a part of its own,
and the head's goal is chosen among the hits its words match that a plan reaches **from what the
source's plan gives, looking nothing up anew**: no step of it may be a tool that requires nothing (a
search, a list), which would find some other thing than the one the words name. The catalogs say
what each tool requires and produces, so no word list of any domain is involved: "the top rated
film" gives a movie's id, and "the logo of" is read among the goals a movie's id leads to (a
company's logo, through the movie's details, which name its companies).

The reading is taken (:func:`read_source`) only when every one of these holds, and otherwise the
part stays as it was matched whole:

- the part names no value of its own (a quoted text, a file, a URL): a value is what the plan reads,
  not a thing found by description;
- the source names no thing by its name (:func:`toolpath.planner.tasks.clauses.named_entities`:
  "the book Dune"): a thing named is looked up by its name, as joint planning does;
- the source's plan finds the thing: its first step requires nothing (a list, a search) and no step
  reads what the user holds or gives as an input ("the minimum of every column of *the table*" works
  on the user's table, "rank these molecules by similarity to *the query compound*" on the user's
  molecules: no tool finds them);
- the source and the head match by :data:`SOURCE_MIN_SCORE`;
- the head's goal is chosen by :func:`toolpath.planner.tasks.goals.choose_goal` (with its margins,
  binding and direction tests) among the hits so fed, at most :data:`MAX_FED_STEPS` steps from
  what the source gives;
- no step of either plan has effects (writes or sends): a chain read from a description runs
  nothing that cannot be undone;
- the whole part's own plan does not already run the source's tools and reach the head's goal (then
  the two readings agree, and nothing changes).

Of several cuts that read so, the one whose weaker match (head or source) is strongest is taken;
the others are named in the reading (:attr:`SourceReading.other_cuts`), so ``--json`` shows what else
the words could have meant. A cut that reads so but too weakly (below :data:`SOURCE_MIN_SCORE`)
leaves the part whole, and its ``why`` says what it might have read.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace
from typing import Any

from toolpath.planner.planning.graph import StateGraph
from toolpath.planner.planning.inputs import InputError, input_for
from toolpath.planner.planning.plans import NoPlanError, Plan, plan, plan_to_run, qualified_name
from toolpath.planner.search.skills import SkillHit
from toolpath.planner.tasks.clauses import joined_reasons, named_entities, noun_phrase_cuts, source_values
from toolpath.planner.tasks.goals import MIN_SCORE, GoalChoice, GoalSearch, NoMatchingSkillError, choose_goal, hit_label
from toolpath.planner.tasks.parts import PartMatch
from toolpath.registry import ToolDefinition

#: Steps a plan from the source's states to the head's goal may have: the head asks about the thing
#: itself (one step: the film's credits) or about a thing it names (two: the film's details name its
#: studio, whose logo is asked). A longer chain passes through things the words do not mention
#: (the film's cast, one actor's series, that series' network), which is a guess, not a reading.
MAX_FED_STEPS = 2
#: The cosine similarity both the head's and the source's match need for the reading to be planned.
#: Set on the development requests of ``benchmarks/tmdb_dev_requests.jsonl`` (never the test ids):
#: the readings that were right scored 0.53 to 0.74 at their weaker end ("find a picture of | the most
#: popular actor", "who directed | the film that is most popular"), the wrong ones 0.37 to 0.47 (a
#: lone verb as the head: "list | the TV shows that are most popular", "fetch | the posters").
SOURCE_MIN_SCORE = 0.5
#: Cuts of one part tried at most (each is two searches and a plan per hit): a part naming a thing
#: through more noun phrases than this is several questions.
MAX_SOURCE_CUTS = 4


@dataclass(frozen=True)
class SourceReading:
    """A part read as a head asking for something of a thing its source names how to find.

    Attributes:
        head: the head's words ("who directed").
        words: the source's words ("the film that is most popular right now").
        source: what the source matched (its goal and plan: the tools that find the thing).
        gives: the states the head's plan takes from the source's plan (``tmdb.movie_id``).
        tools: the tools that must run for the head, in plan order: the source's plan, then the
            steps between it and the head's goal (a movie's details, for its company's logo).
        other_cuts: the other cuts that read so, as ``(head, source's words, head's hit label,
            source's hit label)``, for the explanation.
    """

    head: str
    words: str
    source: GoalChoice
    gives: frozenset[str]
    tools: tuple[ToolDefinition, ...]
    other_cuts: tuple[tuple[str, str, str, str], ...] = ()

    @property
    def why(self) -> str:
        """The reading in words, for the part's ``why``."""
        return (
            f"{self.words!r} names where the thing {self.head!r} asks about comes from: {hit_label(self.source.chosen.hit)} "
            f"gives {', '.join(sorted(self.gives))}, which the head's goal is planned from (nothing looked up anew)"
        )

    def to_dict(self) -> dict:
        return {
            "head": self.head,
            "words": self.words,
            "matched": self.source.chosen.hit.to_dict(),
            "gives": sorted(self.gives),
            "runs": [qualified_name(tool) for tool in self.tools],
            "other_cuts": [
                {"head": head, "words": words, "head_matched": head_hit, "matched": source_hit} for head, words, head_hit, source_hit in self.other_cuts
            ],
        }


def read_source(
    search: GoalSearch,
    whole: PartMatch,
    inputs: Mapping[str, Any],
    held: Collection[str],
    choose: Callable[[str], PartMatch],
) -> PartMatch | None:
    """``whole`` read as a head and a source (module docstring): the part with the head's goal and
    the reading (:attr:`PartMatch.source`); ``whole`` with a ``why`` saying so when a cut reads so
    too weakly to plan (below :data:`SOURCE_MIN_SCORE`); ``None`` when no cut reads so, or the whole
    part's plan already does it.

    Args:
        search: the planning's goal search.
        whole: the part as matched whole (an action of free text).
        inputs, held: the inputs and held states the part is planned with.
        choose: matches words as a part of their own
            (:meth:`toolpath.planner.tasks.matching.PartMatcher.choose`); raises as it does.

    Raises:
        PlanningTimeout, PlanningCancelled: from ``search.budget``.
    """
    if whole.kind != "action" or source_values(whole.text) or has_effects(whole.choice):
        return None
    readings: list[tuple[float, GoalChoice, PartMatch, SourceReading]] = []
    weak: list[str] = []
    for head, words in noun_phrase_cuts(whole.text)[:MAX_SOURCE_CUTS]:
        if named_entities(words):
            continue  # a thing named is looked up by its name (joint planning), not found by description
        search.budget.check()
        found = _cut_reading(search, head, words, inputs, held, choose)
        if found is None:
            continue
        head_choice, source, reading = found
        if head_choice.chosen.hit.similarity is None or reading.source.chosen.hit.similarity is None:
            continue  # a BM25-only index: nothing measures the reading against SOURCE_MIN_SCORE
        strength = min(_similarity(head_choice.chosen.hit), _similarity(reading.source.chosen.hit))
        if strength < SOURCE_MIN_SCORE:
            weak.append(
                f"{reading.words!r} as where the thing {head!r} asks about comes from ({hit_label(reading.source.chosen.hit)}, similarity {strength:.2f})"
            )
            continue
        readings.append((strength, head_choice, source, reading))
    if not readings:
        if weak and whole.choice is not None:
            return replace(whole, why=joined_reasons(whole.why, f"it might read {weak[0]}, too weak (below {SOURCE_MIN_SCORE}) to plan so"))
        return None
    readings.sort(key=lambda found: found[0], reverse=True)
    _, head_choice, source, reading = readings[0]
    if _already_does(whole, reading, head_choice):
        return None
    others = tuple((other.head, other.words, hit_label(other_head.chosen.hit), hit_label(other.source.chosen.hit)) for _, other_head, _, other in readings[1:])
    reading = replace(reading, other_cuts=others)
    return PartMatch(whole.text, head_choice, why=joined_reasons(whole.why, reading.why), holds=source.holds, values=source.values, source=reading)


def _cut_reading(
    search: GoalSearch, head: str, words: str, inputs: Mapping[str, Any], held: Collection[str], choose: Callable[[str], PartMatch]
) -> tuple[GoalChoice, PartMatch, SourceReading] | None:
    """One cut read as a head and a source (module docstring), or ``None``. Of the head's goals the
    source leads to, the thing's own (one step from what the source gives) wins over one of a thing
    it names (two steps), unless the head's words match the latter better by more than
    ``search.margin``: "images of the film" are the film's, "the logo of the film" its studio's."""
    graph = search.graph
    try:
        source = choose(words)
    except (NoMatchingSkillError, NoPlanError, InputError):
        return None
    if source.choice is None or source.status != "matched" or has_effects(source.choice) or source.choice.chosen.plan is None:
        return None
    source_steps = source.choice.chosen.plan.steps
    if (
        source_steps[0].requires
        or any(step.requires & frozenset(held) for step in source_steps)
        or any(input_for(step.tool, parameter, inputs) for step in source_steps for parameter in step.tool.parameters)
    ):
        return None  # it works on what the user holds or gives ("the rows of the table", "these molecules"): nothing is found
    given = frozenset().union(*(step.produces for step in source_steps)) - frozenset(held)
    lookups = frozenset(qualified_name(tool) for tool in graph.registry if not tool.state_transition.requires)
    fed: dict[str, Plan] = {}

    def admits(hit: SkillHit, most_steps: int) -> bool:
        if hit.kind == "tool" and any(step.tool.name == hit.name and step.tool.server_name == hit.server for step in source_steps):
            return False  # the source's own tool
        if hit.kind == "state" and hit.states <= given:
            return False  # what the source already gives
        fed_plan = planned_from(graph, hit, frozenset(held) | given, given, lookups)
        if fed_plan is not None:
            fed[hit_label(hit)] = fed_plan
        return fed_plan is not None and len(fed_plan.steps) <= most_steps

    choices = []
    for most_steps in (1, MAX_FED_STEPS):
        try:
            choices.append(choose_goal(search, head, inputs, frozenset(held) | given, MIN_SCORE, admits=lambda hit, most=most_steps: admits(hit, most)))
        except (NoMatchingSkillError, NoPlanError, InputError):
            continue
    if not choices:
        return None
    head_choice = choices[0]
    if len(choices) == 2 and _similarity(choices[1].chosen.hit) > _similarity(choices[0].chosen.hit) + search.margin:
        head_choice = choices[1]
    head_plan = fed.get(hit_label(head_choice.chosen.hit))
    if head_plan is None or has_effects(head_choice) or any(step.tool.side_effect != "none" for step in head_plan.steps):
        return None
    tools = (*(step.tool for step in source_steps), *(step.tool for step in head_plan.steps))
    taken = frozenset().union(*(step.requires for step in head_plan.steps)) & given
    return head_choice, source, SourceReading(head, words, source.choice, taken, tools)


def planned_from(graph: StateGraph, hit: SkillHit, held: frozenset[str], given: frozenset[str], lookups: Collection[str]) -> Plan | None:
    """The cheapest plan to ``hit`` from ``held`` that uses no tool of ``lookups`` (qualified names)
    and reads one of ``given`` (the states a source or a lookup gives); ``None`` when there is none,
    or it has no step or more than :data:`MAX_FED_STEPS`."""
    try:
        if hit.kind == "tool":
            fed = plan_to_run(graph, hit.qualified_name, held, avoid=lookups)
        else:
            fed = plan(graph, hit.states, held=held, avoid=lookups)
    except (NoPlanError, ValueError):
        return None
    if not fed.steps or len(fed.steps) > MAX_FED_STEPS or not any(step.requires & given for step in fed.steps):
        return None
    return fed


def has_effects(choice: GoalChoice | None) -> bool:
    """Whether ``choice``'s plan runs a tool with effects (writes or sends)."""
    steps = choice.chosen.plan.steps if choice is not None and choice.chosen.plan is not None else ()
    return any(step.tool.side_effect != "none" for step in steps)


def _similarity(hit: SkillHit) -> float:
    return hit.similarity if hit.similarity is not None else 0.0


def _already_does(whole: PartMatch, reading: SourceReading, head: GoalChoice) -> bool:
    """Whether ``whole``'s own plan runs every tool of ``reading`` and reaches ``head``'s goal."""
    steps = whole.choice.chosen.plan.steps if whole.choice is not None and whole.choice.chosen.plan is not None else ()
    ran = {step.tool.id for step in steps}
    reached = frozenset().union(*(step.produces for step in steps))
    return all(tool.id in ran for tool in reading.tools) and head.chosen.goal <= reached
