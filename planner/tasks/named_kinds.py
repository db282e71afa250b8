"""What kind of thing a name in a request is: "the production company Blumhouse", "Tilda Swinton".

A request that names a thing ("show me pictures of Tilda Swinton") is planned by looking the name up
(joint planning avoids inventing what a name gives: :mod:`toolpath.planner.tasks.joint_planning`). A
catalog often has several lookups by name (a movie's search, a TV show's, a person's), and the goal
the words match ("pictures of") may be reached from any of them: the words of the request say
nothing of which, but the name does, to a reader who knows what kind of thing it names.

:func:`name_kinds` reads that from the request's own words and a list of given names:

- a kind noun the clause gives the name: before it, after a determiner ("the production company
  Blumhouse", "the movie Barbie": at most :data:`MAX_KIND_WORDS` words, none a function word), or
  after it, between a determiner and the clause's next boundary ("the Toy Story collection");
- else a person's name: two or more words, the first a given name of the US Census Bureau's lists
  of 1990 (the ``names`` package's ``dist.male.first`` and ``dist.female.first``: 5,163 names),
  the rest none. A title that is a person's name ("Forrest Gump") reads so too; a name of one word
  ("Zendaya") does not read as anything.

:func:`kind_lookups` turns each kind into the catalog's lookup for it: of the lookups by name
(:func:`name_lookups`: a name goes in, an id other tools take comes out), the one most similar to
"search for a <kind> by name", if it leads the next one by :data:`LOOKUP_MARGIN`; a kind no lookup
clearly serves ("series" in a catalog that searches TV shows and collections alike) gives none, and
a catalog with no lookup by name (one-step tools whose results nothing takes) reads no kind.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from importlib import resources
from typing import Any

from toolpath.planner.planning.graph import StateGraph
from toolpath.planner.planning.inputs import InputError
from toolpath.planner.planning.plans import NoPlanError, qualified_name
from toolpath.planner.search.skills import SkillHit, SkillIndex
from toolpath.planner.tasks.clauses import joined_reasons, masked_quotes, named_entities
from toolpath.planner.tasks.goals import GoalSearch, NoMatchingSkillError, choose_goal, hit_label
from toolpath.planner.tasks.parts import PartMatch
from toolpath.planner.tasks.sources import has_effects, planned_from
from toolpath.registry import ToolDefinition

#: Hits searched for the goals a name's kind leads to (the planning's own ``k`` is 10).
KIND_SEARCH_HITS = 40
#: The score a goal a name's kind leads to needs (the search's own ``MIN_SCORE`` is 0.35): the kind
#: leaves a few goals to choose from (a collection's details or images), and the words that ask for
#: one of them may name it loosely ("which films make up the Toy Story collection": 0.33 to a
#: collection's parts). Set on ``benchmarks/tmdb_dev_requests.jsonl``.
KIND_MIN_SCORE = 0.3
#: Words a kind noun before a name may have ("the production company Blumhouse": two).
MAX_KIND_WORDS = 2
#: How far the cosine similarity of "search for a <kind> by name" to the lookup it names must lead
#: the next lookup by name. Set on the drafted TMDB catalog: its searches lead by 0.1 to 0.45 for the
#: kinds they find ("person" 0.89 to the people's search, "show" 0.70 to the TV shows'); kinds it
#: cannot tell apart lead by 0.02 or less ("series": the collections' search 0.51, the movies' 0.50).
LOOKUP_MARGIN = 0.05

# Words that are no kind noun: a clause's function words ("the person who directed Whiplash").
_FUNCTION_WORDS = frozenset(
    "a an the this that these those who whom whose which what where when how of in on at by for with from to into about as and or but is are was were be been has have had do does did not its his her their my your our".split()
)
# A determiner and up to MAX_KIND_WORDS lower-case words right before a name ("the production company ").
_KIND_BEFORE = re.compile(rf"\b(?:the|a|an)\s+((?:[a-z]+(?:-[a-z]+)?\s+){{0,{MAX_KIND_WORDS}}})$")
# One lower-case word right after a name, before the clause's boundary ("the Toy Story collection.").
_KIND_AFTER = re.compile(r"\s+([a-z]+(?:-[a-z]+)?)(?=\s*(?:[.,;:!?)]|$|\s(?:and|or|is|are|was|were|has|have)\b))")
_DETERMINER_BEFORE = re.compile(r"\b(?:the|a|an)\s+$")


@dataclass(frozen=True)
class NameKind:
    """What kind of thing a request's name is, and how that was read.

    Attributes:
        name: the name as the request writes it ("Tilda Swinton").
        kind: the kind in words ("production company", "person").
        evidence: how it was read: ``"kind noun"`` (the clause says it) or ``"given name"`` (its
            first word is a given name).
    """

    name: str
    kind: str
    evidence: str

    def to_dict(self) -> dict:
        return {"name": self.name, "kind": self.kind, "evidence": self.evidence}


@dataclass(frozen=True)
class KindLookup:
    """The lookup a name's kind leads to (:func:`kind_lookups`)."""

    kind: NameKind
    tool: ToolDefinition
    produces: frozenset[str]

    def to_dict(self) -> dict:
        return {**self.kind.to_dict(), "lookup": qualified_name(self.tool)}


@functools.cache
def _given_names() -> frozenset[str]:
    """The US Census Bureau's given names of 1990 (``names`` package), title-cased."""
    folder = resources.files("names")
    found: set[str] = set()
    for file in ("dist.male.first", "dist.female.first"):
        found |= {line.split()[0].title() for line in folder.joinpath(file).read_text().splitlines() if line.strip()}
    return frozenset(found)


def name_kinds(text: str) -> list[NameKind]:
    """The names of ``text`` (:func:`toolpath.planner.tasks.clauses.named_entities`) whose kind its
    words give (module docstring), in order; names of no readable kind are left out."""
    masked = masked_quotes(text)
    found = []
    for name in named_entities(text):
        kind = _kind_noun(masked, name) or _kind_noun(text, name)
        if kind is not None:
            found.append(NameKind(name, kind, "kind noun"))
        elif _is_persons_name(name):
            found.append(NameKind(name, "person", "given name"))
    return found


def _kind_noun(text: str, name: str) -> str | None:
    at = text.find(name)
    if at < 0:
        return None
    before = _KIND_BEFORE.search(text[:at])
    if before is not None:
        words = before.group(1).split()
        if words and not set(words) & _FUNCTION_WORDS:
            return " ".join(words)
    after = _KIND_AFTER.match(text[at + len(name) :])
    if after is not None and _DETERMINER_BEFORE.search(text[:at]) and after.group(1) not in _FUNCTION_WORDS:
        return after.group(1)
    return None


def _is_persons_name(name: str) -> bool:
    words = name.split()
    return len(words) >= 2 and words[0] in _given_names() and all(word[:1].isupper() for word in words)


def name_lookups(graph: StateGraph) -> list[ToolDefinition]:
    """The tools a name goes into to find a thing: they require nothing, take a required text that
    carries no state (a query, a title), and make a state another tool requires (the thing's id).
    A tool whose result nothing takes (a booking, in a catalog of one-step tools) finds nothing."""
    required = frozenset().union(*(tool.state_transition.requires for tool in graph.registry))
    return [
        tool
        for tool in graph.registry
        if not tool.state_transition.requires
        and tool.state_transition.produces & required
        and any(parameter.type == "str" and parameter.state is None and parameter.role == "input" for parameter in tool.required_parameters)
    ]


def kind_lookups(graph: StateGraph, index: SkillIndex, text: str) -> list[KindLookup]:
    """The lookup of each name of ``text`` whose kind its words give (module docstring); a name
    whose kind no lookup clearly serves is left out.

    Raises:
        ValueError: from the index's embedder (its output is not a finite vector).
    """
    lookups = {qualified_name(tool): tool for tool in name_lookups(graph)}
    found = []
    for kind in name_kinds(text) if lookups else ():
        hits = index.search(f"search for a {kind.kind} by name", k=KIND_SEARCH_HITS)
        ranked = sorted(((hit.similarity or 0.0, hit.qualified_name) for hit in hits if hit.kind == "tool" and hit.qualified_name in lookups), reverse=True)
        if ranked and (len(ranked) == 1 or ranked[0][0] - ranked[1][0] >= LOOKUP_MARGIN):
            tool = lookups[ranked[0][1]]
            found.append(KindLookup(kind, tool, frozenset(tool.state_transition.produces)))
    return found


def read_name_kind(search: GoalSearch, whole: PartMatch, inputs: Mapping[str, Any], held: Collection[str]) -> PartMatch | None:
    """``whole`` with its goal chosen among those a name's kind leads to in one step (its own
    images, credits, details), when the part names a thing whose kind its words give
    (:func:`kind_lookups`) and the goal matched whole is not one of them; ``None`` when the part
    names no such thing, the whole match already reads the thing so, or no goal so fed matches.

    "Which films has Greta Gerwig directed" matches a film's credits whole; Greta Gerwig is read as a
    person, so the goal is chosen among what a person's id leads to in one step, and a person's
    film credits win. A plan with effects is never chosen so (a reading of a name is no reason to
    change anything).

    Raises:
        PlanningTimeout, PlanningCancelled: from ``search.budget``.
    """
    if whole.kind != "action" or whole.choice is None or whole.choice.chosen.plan is None or has_effects(whole.choice):
        return None
    graph = search.graph
    kinds = kind_lookups(graph, search.index, whole.text)
    lookups = _Lookups.of(graph)
    if not kinds or any(lookups.feeds_in_one_step(graph, whole.choice.chosen.hit, kind, held) for kind in kinds):
        return None
    # The goals a thing leads to may rank low for words that also name other things ("which films has
    # Greta Gerwig directed": a film's credits first): the search looks further among them.
    wider = replace(search, k=max(search.k, KIND_SEARCH_HITS))
    for kind in kinds:
        search.budget.check()
        # A person's name says nothing of what is asked but who: the words read with "the person" in its place.
        words = whole.text.replace(kind.kind.name, f"the {kind.kind.kind}") if kind.kind.evidence == "given name" else whole.text
        try:
            choice = choose_goal(wider, words, inputs, held, KIND_MIN_SCORE, admits=lambda hit, kind=kind: lookups.feeds_in_one_step(graph, hit, kind, held))
        except (NoMatchingSkillError, NoPlanError, InputError):
            continue
        if has_effects(choice):
            continue
        why = (
            f"{kind.kind.name!r} reads as a {kind.kind.kind} ({_EVIDENCE[kind.kind.evidence]}), looked up by {qualified_name(kind.tool)}: "
            f"of the goals that leads to, {hit_label(choice.chosen.hit)} matches the words best"
        )
        return PartMatch(whole.text, choice, why=joined_reasons(whole.why, why), holds=whole.holds, values=whole.values, name_kind=kind)
    return None


_EVIDENCE = {"kind noun": "the words say so", "given name": "its first word is a given name"}


@dataclass(frozen=True)
class _Lookups:
    """The graph's tools that require nothing (qualified names) and the states they make."""

    names: frozenset[str]
    make: frozenset[str]

    @classmethod
    def of(cls, graph: StateGraph) -> _Lookups:
        starts = [tool for tool in graph.registry if not tool.state_transition.requires]
        return cls(frozenset(qualified_name(tool) for tool in starts), frozenset().union(*(tool.state_transition.produces for tool in starts)))

    def feeds_in_one_step(self, graph: StateGraph, hit: SkillHit, kind: KindLookup, held: Collection[str]) -> bool:
        """Whether ``hit``'s goal is one step from what ``kind``'s lookup gives, that step reading
        it, and is the thing's own data: not a state a lookup makes (the id of a thing it lists)."""
        if hit.kind == "state" and hit.states <= self.make:
            return False
        fed = planned_from(graph, hit, frozenset(held) | kind.produces, kind.produces, self.names)
        return fed is not None and len(fed.steps) == 1
