"""Choosing goal states for a task: skill search, then a plan for each close candidate.

The search ranks states and tools; each hit stands for a goal (the state, or what the tool
produces). Among candidates, one with a plan beats one without; then, among those scoring within
``work_margin`` of the best, one whose plan has steps beats one already held (a task asks for
work: a held state is chosen only when nothing near it needs work, and then the task is already
done; a far weaker match is no better for needing work); then, among those within ``margin`` of
the best, one whose cell binds every required parameter from the given inputs beats one that
leaves some unbound (a parameter carrying a state an earlier step of its plan produces counts as
bound: that is the plan's data flow, not a value the user must give); then, among those, one whose plan makes no input state on its way (what the
user gives: of two tools of opposite direction, "text to speech" and "speech to text", the one that
starts from what the user holds rather than inventing it); then the one ranked higher by the
search. Hits below ``min_score`` never count. Each candidate passed over carries the first of these
tests that it lost to the chosen one, so its reason is true of it and not of the chosen goal.

Right after a named tool, the direction of the words counts (:mod:`toolpath.planner.tasks.direction`):
a candidate of the reverse direction ("turn the image into text" matches text_to_image best) loses to
one that serves the kinds the words name, when that one matches within
:data:`toolpath.planner.tasks.direction.DIRECTION_MARGIN` of it; the choice's ``direction`` says so.

A task that names a tool by its catalog name ("call SearchPeople to find her id") asks to run that
tool: it is a candidate even when the search ranks it low, and it beats every unnamed one. Only
names that cannot be ordinary words count (with an underscore, a digit or an inner capital:
``clock_alarm_cancel``, ``SearchPeople``; also followed by "s"), so prose never names a tool by chance.

Hits come in the search's (fused) order; thresholds use each hit's cosine similarity. ``min_score``
(0.35), ``margin`` (0.05) and ``work_margin`` (0.10) are cosine similarities of the default
all-MiniLM-L6-v2 model, set by hand on the shipped chemistry catalog: unrelated tasks ("book a
flight") score below 0.2 and related phrasings above 0.45; "validate a SMILES string" with a parsed
molecule held scores the held state 0.85 and the tool that parses 0.80. When the index is BM25 only, a hit matches when it shares a word with the
task, and is close when its BM25 score is within ``LEXICAL_MARGIN`` (10%) of the best.

A goal whose plan runs a tool with effects (:attr:`toolpath.registry.ToolDefinition.side_effect`:
it writes files or records, or sends) needs a clearer match than one that only computes: its hit
must reach :data:`EFFECT_MIN_SCORE`, and no hit of another goal may be as close as
:data:`EFFECT_MARGIN` (:func:`_unclear_effects`). Otherwise the part is not understood
(:class:`UnclearEffectError`, naming the candidates), unless the task names the tool or the person
said which candidate they meant (``GoalSearch.meant``): "sort the table" with no sorting tool in the
catalogs must never write a report.
A phrasing learned from use (a catalog overlay) counts toward that match only when it is nearly
the words (:data:`LEARNED_EFFECT_MIN_SCORE`): what a user ran for some words says nothing about
looser words near them.

The words may ask for the effect itself (:func:`_effect_evidence`): they name a file the chosen plan
writes ("into monthly.png", "called overview.html": bound to its output parameter by
:func:`toolpath.planner.tasks.arguments.bind_arguments`), or use a word of the writing tool's name
that, in the catalogs, only tools writing the same kind of file carry ("plot": every ``plot_*`` tool
writes a PNG; "report": only ``write_report``). Then the match need not reach
:data:`EFFECT_MIN_SCORE` (the words said to write), and hits of other goals are no rivals when
choosing them would not change whether such a file is written: their plans write the same kind of
file too and the task's words (BM25) favour them no more than the chosen goal, within
:data:`LEXICAL_MARGIN` (which chart is then a
question of ranking, as for tools without effects; of two the similarity and the words favour
differently, neither is clear), they need no work
(a held or given state writes nothing), or, for a named file, they write another kind of file, which
cannot be the one named. A rival that does other work and writes nothing stays a rival: "sort
sales.csv by revenue into sorted.csv" is not a plain copy.

Between two near-duplicate tools (lint TP018: one signature, texts that say the same) that only
the search's order separates, learned examples decide, or ``--json`` says it was a coin toss; a coin
toss between tools with effects is not understood
(:mod:`toolpath.planner.tasks.near_duplicate_choice`).

A catalog may declare ``vocabulary: closed``: its texts use every word its users ask for its work
with. A part whose goal is a tool of such a catalog, matched weakly (below
:data:`CLOSED_VOCABULARY_MIN_SCORE`), whose head (its action word and object, before any
preposition: :func:`toolpath.planner.tasks.clauses.head_words`) holds a word that no loaded
catalog's texts use and that is no column or value of the data it reads, asks for something the
catalogs do not offer ("draw a map of the regions", "make a pie chart"): it is not understood
(:class:`UnservedWordsError`, naming the word and the candidates). Catalogs written from an API's
names are open (the default): their users' words ("rent a car", "a poster of the episode") are
rarely their texts' words, so there no such rule holds (:func:`_unserved_words`).
"""

from __future__ import annotations

import os
import re
import weakref
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from toolpath.errors import PYTHON, Refusal, Vocabulary
from toolpath.kernel.inside.tool_search import bm25_terms, name_words
from toolpath.planner.planning.graph import StateGraph
from toolpath.planner.planning.inputs import InputError, input_for, names_a_step
from toolpath.planner.planning.plans import NO_BUDGET, NoPlanError, Plan, TaskBudget, plan, plan_to_run, qualified_name
from toolpath.planner.search.skills import MIN_SCORE, SkillHit, SkillIndex
from toolpath.planner.tasks.cell import PlannedCell, UnboundParameter
from toolpath.planner.tasks.cell_writers import CellWriter, FreshKernelCells
from toolpath.planner.tasks.clauses import head_words, without_file_names, without_names, without_quotes
from toolpath.planner.tasks.direction import DirectionReading, read_direction
from toolpath.planner.tasks.near_duplicate_choice import DuplicateChoice, choose_between_duplicates
from toolpath.planner.tasks.probes import probe_inputs
from toolpath.planner.tasks.task_spans import traced_goal_choice
from toolpath.registry import ToolDefinition

MARGIN = 0.05
WORK_MARGIN = 0.10
#: How close (in cosine similarity) to the best hit a candidate whose plan uses every column, value
#: and number the task names (:meth:`toolpath.planner.tasks.arguments.Arguments.unused_words`) must
#: score to win over better hits whose plans would drop some: "first 3 rows of sales.csv" matches
#: counting rows best, and showing them 0.1 below. Set on the hand-written requests of
#: ``benchmarks/words_cases.yaml``; it acts only where a file was probed.
WORDS_MARGIN = 0.15
LEXICAL_MARGIN = 0.10
#: The cosine similarity below ``MIN_SCORE`` down to which a hit still counts when every goal that
#: matches would drop columns, values or numbers the task names of a probed file and its plan uses
#: them all, within ``WORDS_MARGIN`` of the best hit (:func:`_rescued`): the words about the data
#: decide where the search barely does. Set on ``benchmarks/words_cases.yaml``: aggregates per group
#: worded with "by" or a ranking word ("average revenue by region", "the highest revenue in each
#: month") scored the grouping state 0.32 to 0.34, below ``MIN_SCORE``, while the goals above it
#: (the file, top rows) would drop the grouping column; unrelated tasks score below 0.2.
WORDS_MIN_SCORE = 0.30

#: The cosine similarity a goal whose plan runs a tool with effects needs (a task needs only
#: ``MIN_SCORE``). Set by hand on hand-written requests over a sales table with the shipped tabular and chemistry
#: catalogs, with and without a sorting tool (the catalog before issue 52): the wrong runs it must stop
#: scored 0.40 ("sort the table by revenue descending" -> tabular.report_written, with no sorting tool)
#: and 0.37 ("delete the file" -> tabular.table_saved); the writing requests it must let through scored
#: 0.44 ("chart revenue per region" -> a bar chart's PNG), 0.46 ("save it" -> save_table), 0.52 ("plot
#: revenue by month") and 0.55 ("write a markdown report about the sales"). 0.42 lies between them.
EFFECT_MIN_SCORE = 0.42
#: Cosine similarity a learned phrasing needs to stand for the catalog's words when a tool with
#: effects is at stake: the same request with other values ("load <file .csv> and tell me how
#: lopsided the revenue is" / "load sales.csv and ...": 0.90; "save the table to <file .csv>" /
#: "write the table to out.csv": 0.82) reaches it; a looser paraphrase ("delete the old snapshots" /
#: "remove old backups": 0.66) does not, and the tool's own texts must then carry the match. A user's
#: label says which tool they meant for those words, not that any words near them mean it too.
LEARNED_EFFECT_MIN_SCORE = 0.75

#: How close (in cosine similarity) a hit of another goal may come to the chosen one before a goal
#: with effects is ambiguous, when the BM25 scores do not tell them apart either (the other hit's is
#: within ``LEXICAL_MARGIN`` of the chosen one's, or above it). From the same requests: with no sorting
#: tool, "sort the table by revenue descending" scores report_written 0.399 and rows_filtered 0.399
#: (BM25 0.43 and 0.41: ambiguous); "summarize the table in a report file" scores report_written 0.79 and
#: table_described 0.77, but BM25 2.8 and 0.3 (the words say "report": clear); "plot revenue by month"
#: scores a line chart 0.52 and a bar chart 0.44 (clear). Equal to ``MARGIN``.
EFFECT_MARGIN = 0.05

#: How much higher (in BM25 score) the chosen hit must score than another for the task's words to
#: tell them apart in :data:`EFFECT_MARGIN`'s test. From the same requests: words that separate score
#: gaps of 2.5 ("in a report file": 2.8 against 0.3) and 2.9 ("write the result to out.csv": 3.8 against
#: 0.9); words the task barely shares score gaps below 0.1 ("order the table by date" in a catalog with
#: no sorting tool: 0.09 for writing a report, 0.05 for keeping rows). 1.0 lies between them.
EFFECT_LEXICAL_GAP = 1.0

#: The cosine similarity below which a part whose goal is a tool of a catalog with a closed vocabulary
#: must use, in its head, only words some loaded catalog's texts use (:func:`_unserved_words`). Set on
#: ``benchmarks/words_cases.yaml`` over the shipped tabular and chemistry catalogs: the wrong runs it
#: stops scored 0.38 ("publish the numbers of sales.csv on our website" -> count_rows), 0.41 ("train a
#: neural network on sales.csv" -> load_table), 0.44 ("make a pie chart ..." -> plot_bar), 0.47 ("tidy
#: up sales.csv" -> drop_missing) and 0.48 ("draw a map of the regions ..." -> plot_histogram); the
#: right plans whose head holds a word no catalog uses scored 0.58 ("the ten biggest sales"), 0.59
#: ("left join ..."), 0.79 ("give me a quick look at the top of sales.xlsx") and 0.81 ("get rid of the
#: incomplete rows"). 0.53 lies between them.
CLOSED_VOCABULARY_MIN_SCORE = 0.53


def _close(hit: SkillHit, best: SkillHit, margin: float) -> bool:
    if hit.similarity is not None and best.similarity is not None:
        return hit.similarity >= best.similarity - margin
    return hit.lexical >= (1 - LEXICAL_MARGIN) * best.lexical


def _close_in_both(hit: SkillHit, chosen: SkillHit, margin: float) -> bool:
    """Whether neither measure tells ``hit`` from ``chosen``: its cosine similarity is within
    ``margin`` of the chosen one's (or above), and the task's words do not favour the chosen one
    (its BM25 score is within ``LEXICAL_MARGIN`` of the chosen one's or above it, or less than
    :data:`EFFECT_LEXICAL_GAP` below: scores of words the task barely shares tell nothing)."""
    lexically = hit.lexical >= (1 - LEXICAL_MARGIN) * chosen.lexical or chosen.lexical - hit.lexical < EFFECT_LEXICAL_GAP
    if hit.similarity is not None and chosen.similarity is not None:
        return hit.similarity >= chosen.similarity - margin and lexically
    return hit.lexical >= (1 - LEXICAL_MARGIN) * chosen.lexical


class NoMatchingSkillError(Refusal, LookupError):
    """No state or tool matches the task well enough; ``hits`` holds the closest ones, ``reason``
    says so without advice (see :meth:`message` for it)."""

    def __init__(self, task: str, hits: list[SkillHit], min_score: float):
        self.task = task
        self.hits = hits
        closest = ""
        if hits and hits[0].similarity is not None:
            closest = f" (closest: {hits[0].kind} {hits[0].name!r} at similarity {hits[0].similarity:.2f}, below {min_score:.2f})"
        shown = task if len(task) <= 120 else task[:117] + "..."
        self.reason = f"no catalog can serve the task {shown!r}: no state or tool matches it{closest}"
        super().__init__(self.message())

    def message(self, vocabulary: Vocabulary = PYTHON) -> str:
        return f"{self.reason}. Rephrase the task, or {vocabulary.load_catalog}"


def hit_label(hit: SkillHit) -> str:
    """How a person names a hit when asked which one they meant: ``tool tabular.write_report`` or
    ``state tabular.report_written`` (the keys of ``GoalSearch.meant``)."""
    return f"{hit.kind} {hit.qualified_name}"


def _effect_similarity(hit: SkillHit) -> float:
    """The similarity that counts for running a tool with effects: a learned phrasing's only when
    it is nearly the words (:data:`LEARNED_EFFECT_MIN_SCORE`), else the catalog's own texts'."""
    learned = hit.learned
    if learned is not None and learned.phrasing_similarity < LEARNED_EFFECT_MIN_SCORE:
        return learned.catalog_similarity
    return hit.similarity if hit.similarity is not None else 0.0


def _strength(hit: SkillHit) -> str:
    return f"similarity {hit.similarity:.2f}" if hit.similarity is not None else f"BM25 {hit.lexical:.2f}"


class UnclearEffectError(NoMatchingSkillError):
    """A part's best goal runs a tool with effects, but the match is too weak or too close to
    another goal's to run it (see the module docstring): the part is not understood.

    Attributes:
        task: the part's words (as searched; the key of ``GoalSearch.meant``).
        chosen: the candidate the ranking chose.
        rivals: the hits of other goals a person may have meant (at least one when there is any
            other hit), best first.
        effects: ``(tool, effect)`` for each step of the chosen plan with effects (``"writes"``, ``"sends"``).
        weak: the chosen hit scores below :data:`EFFECT_MIN_SCORE`.
        reason: all of this in words, naming the candidates.
    """

    def __init__(self, task: str, chosen: GoalCandidate, rivals: list[SkillHit], effects: list[tuple[str, str]], weak: bool):
        self.chosen, self.rivals, self.effects, self.weak = chosen, tuple(rivals), tuple(effects), weak
        super().__init__(task, [chosen.hit, *rivals], EFFECT_MIN_SCORE)
        runs = ", ".join(f"{tool} ({effect})" for tool, effect in effects)
        why = []
        if weak:
            learned = chosen.hit.learned
            loose = (
                f"; a learned phrasing ({learned.phrasing_similarity:.2f}) counts only from {LEARNED_EFFECT_MIN_SCORE:.2f}, its catalog texts reach {learned.catalog_similarity:.2f}"
                if learned is not None and learned.phrasing_similarity < LEARNED_EFFECT_MIN_SCORE
                else ""
            )
            why.append(f"its match is weak ({_strength(chosen.hit)}{loose}, below {EFFECT_MIN_SCORE:.2f} for a tool with effects)")
        close = [hit for hit in rivals if _close_in_both(hit, chosen.hit, EFFECT_MARGIN)]
        if close:
            why.append("other goals match about as well: " + ", ".join(f"{hit_label(hit)} ({_strength(hit)})" for hit in close))
        others = "" if close or not rivals else f"; the next candidate: {hit_label(rivals[0])} ({_strength(rivals[0])})"
        shown = task if len(task) <= 120 else task[:117] + "..."
        self.reason = (
            f"not understood: {shown!r} would run {runs} for {hit_label(chosen.hit)} ({_strength(chosen.hit)}), "
            f"but {' and '.join(why)}{others}; a tool with effects runs only on a clear match"
        )
        Exception.__init__(self, self.message())

    @property
    def candidates(self) -> tuple[SkillHit, ...]:
        """The chosen hit and its rivals: what a person is asked to choose from."""
        return (self.chosen.hit, *self.rivals)

    def message(self, vocabulary: Vocabulary = PYTHON) -> str:
        tools = sorted({tool for tool, _ in self.effects})
        return f"{self.reason}. Say more plainly what to do, or name the tool ({', '.join(tools)}) in the task to run it"


class DuplicateEffectError(UnclearEffectError):
    """The chosen goal's plan has effects and its tool's near-duplicate matches about as well, with
    no learned examples to tell them apart: the part is not understood (see the module docstring).
    ``candidates`` are the two tools' hits; ``duplicate`` says how they stood."""

    def __init__(self, task: str, chosen: GoalCandidate, rival: GoalCandidate, effects: list[tuple[str, str]], duplicate: DuplicateChoice):
        self.duplicate = duplicate  # before the base class words its message with it
        super().__init__(task, chosen, [rival.hit], effects, False)
        runs = ", ".join(f"{tool} ({effect})" for tool, effect in effects)
        shown = task if len(task) <= 120 else task[:117] + "..."
        self.reason = (
            f"not understood: {shown!r} would run {runs}, but {hit_label(rival.hit)} matches about as well, and {duplicate.chosen} and "
            f"{duplicate.rival} are near-duplicates (lint TP018: the same signature, texts that say the same) that no learned examples "
            "tell apart: which one runs would be a coin toss, and a tool with effects does not run on one"
        )
        Exception.__init__(self, self.message())

    def message(self, vocabulary: Vocabulary = PYTHON) -> str:
        return (
            f"{self.reason}. Name the tool meant in the task ({self.duplicate.chosen} or {self.duplicate.rival}); "
            "or, in the catalog, merge the two or make their descriptions say how they differ"
        )


class UnservedWordsError(NoMatchingSkillError):
    """A part's head asks, in words no loaded catalog's texts use, for work of a catalog with a closed
    vocabulary that matched it only weakly (see the module docstring): the part is not understood.

    Attributes:
        task: the part's words (as searched).
        chosen: the candidate the ranking chose.
        words: the head's words no catalog's texts use, as written.
        hits: the chosen hit, then the best hit of each other goal: the closest candidates.
        reason: all of this in words.
    """

    def __init__(self, task: str, chosen: GoalCandidate, words: list[str], hits: list[SkillHit]):
        self.chosen, self.words = chosen, tuple(words)
        last = chosen.plan.steps[-1].tool if chosen.plan is not None and chosen.plan.steps else None
        domain = last.server_name if last is not None else chosen.hit.server
        super().__init__(task, hits, CLOSED_VOCABULARY_MIN_SCORE)
        shown = task if len(task) <= 120 else task[:117] + "..."
        said = ", ".join(repr(word) for word in words)
        also = f"; other candidates: {', '.join(f'{hit_label(hit)} ({_strength(hit)})' for hit in hits[1:3])}" if hits[1:] else ""
        self.reason = (
            f"not understood: {shown!r} asks for {said}, which no loaded catalog's texts use; its closest match, {hit_label(chosen.hit)} "
            f"({_strength(chosen.hit)}, below {CLOSED_VOCABULARY_MIN_SCORE:.2f}), is weak, and the {domain} catalog's texts name all its tools do "
            f"(vocabulary: closed), so none of them does that{also}"
        )
        Exception.__init__(self, self.message())

    def message(self, vocabulary: Vocabulary = PYTHON) -> str:
        return f"{self.reason}. Say it in the catalog's words, or {vocabulary.load_catalog}"


class NeitherMeantError(NoMatchingSkillError):
    """The person said none of the candidates of an unclear part (:class:`UnclearEffectError`) is what they meant."""

    def __init__(self, task: str, hits: list[SkillHit]):
        super().__init__(task, hits, EFFECT_MIN_SCORE)
        shown = task if len(task) <= 120 else task[:117] + "..."
        self.reason = f"not understood: {shown!r} the person said it means none of the candidates"
        Exception.__init__(self, self.message())

    def message(self, vocabulary: Vocabulary = PYTHON) -> str:
        return f"{self.reason}. Rephrase the task, or {vocabulary.load_catalog}"


@dataclass(frozen=True)
class GoalCandidate:
    """A goal considered for a task, with its plan and cell, or why it has none."""

    goal: frozenset[str]
    hit: SkillHit
    plan: Plan | None
    cell: PlannedCell | None
    problem: str | None
    order: int  # position in the search ranking (0 = best)
    close: bool = False  # scores within ``margin`` of the best hit
    near: bool = False  # scores within ``work_margin`` of the best hit
    named: bool = False  # the task names its tool
    invents: tuple[str, ...] = ()  # input states its plan makes before its goal (the user would give them)
    unused_words: tuple[str, ...] = ()  # what the task names of the data that its plan would drop
    words_close: bool = False  # scores within WORDS_MARGIN of the best hit
    #: The files the task's words name as where its plan writes (bound to an output parameter).
    writes_named: tuple[str, ...] = ()
    below_min_score: bool = False  # a hit below MIN_SCORE that counts for the task's words (_rescued)
    #: Tools its plan runs before its goal because they add columns the task's words name (:func:`_through_adding`);
    #: joint planning must run them too.
    through: tuple[ToolDefinition, ...] = ()
    #: Its direction contradicts the kinds the words name, and a candidate that agrees matches near it
    #: (:mod:`toolpath.planner.tasks.direction`); with why, in words.
    reverse_direction: str = ""
    #: Why it lost to the chosen candidate (set on the candidates passed over).
    lost_because: str = ""

    @property
    def binds_all_inputs(self) -> bool:
        """Its cell leaves no required parameter for the user to give: every one is bound, or carries
        a state an earlier step of its plan produces. Such a parameter is the plan's data flow, not
        a value the user failed to give, even when the catalog does not say which part of that
        step's result carries the state (no ``return_spec.state``); counting it would favour the
        plan that stops at the step finding the input ("who composed the music for Interstellar"
        would stop at the search for the film, short of its credits)."""
        return self.cell is not None and not self.inputs_left_to_the_user

    @property
    def inputs_left_to_the_user(self) -> tuple[UnboundParameter, ...]:
        """The cell's unbound parameters, less those that carry a state an earlier step produces."""
        if self.cell is None or self.plan is None:
            return ()
        return tuple(unbound for unbound in self.cell.unbound if not _made_by_an_earlier_step(self.plan, unbound))

    @property
    def needs_work(self) -> bool:
        """Its plan has steps: its goal is not already held."""
        return self.plan is not None and bool(self.plan.steps)

    def reason(self) -> str:
        """Why this candidate lost, for messages."""
        return self.lost_because or self.problem or "ranked lower by the search"

    def lost_to(self, chosen: GoalCandidate) -> str:
        """The first ranking test this candidate loses to ``chosen``, in words (or the reason already set:
        a near-duplicate decided by learned examples or a coin toss)."""
        if self.lost_because:
            return self.lost_because
        if self.plan is None and chosen.plan is not None:
            return self.problem or "no plan reaches it from the held states"
        if chosen.named and not self.named:
            return f"the task names the tool {chosen.hit.name}"
        if self.reverse_direction and not chosen.reverse_direction:
            return self.reverse_direction
        if chosen.through and chosen.words_close and not chosen.unused_words and not self.through:
            added = ", ".join(tool.name for tool in chosen.through)
            return f"the task names a column that only {added} adds, which its plan does not run"
        if chosen.words_close and not chosen.unused_words and self.unused_words:
            return f"its plan would drop {', '.join(self.unused_words)}, which the task names"
        if chosen.near and chosen.needs_work and not (self.near and self.needs_work):
            return "it is already held, and the task asks for work" if not self.needs_work else "ranked lower by the search"
        if chosen.close and chosen.binds_all_inputs and not (self.close and self.binds_all_inputs) and self.inputs_left_to_the_user:
            return "its plan leaves " + ", ".join(parameter.parameter for parameter in self.inputs_left_to_the_user) + " unbound"
        if self.close and chosen.close and self.invents and not chosen.invents:
            return f"its plan makes {', '.join(self.invents)}, which the user gives"
        return "ranked lower by the search"

    def to_dict(self) -> dict:
        return {"goal": sorted(self.goal), "hit": self.hit.to_dict(), "reason": self.reason()}


@dataclass(frozen=True)
class GoalChoice:
    """The chosen candidate and the close ones passed over (within ``margin`` of the best score);
    ``effects_evidence`` says why a plan with effects ran on a match the effects rule alone would
    refuse (:func:`_effect_evidence`), empty otherwise; ``direction`` what kinds the words name as
    what the task starts from and asks for, and how the candidates stand to them
    (:meth:`toolpath.planner.tasks.direction.DirectionReading.explanation`), empty when they name none;
    ``near_duplicate`` how the chosen goal's tool was chosen over a near-duplicate rival
    (:mod:`toolpath.planner.tasks.near_duplicate_choice`), or ``None``."""

    chosen: GoalCandidate
    passed_over: tuple[GoalCandidate, ...]
    effects_evidence: str = ""
    direction: str = ""
    near_duplicate: DuplicateChoice | None = None


def _made_by_an_earlier_step(candidate_plan: Plan, unbound: UnboundParameter) -> bool:
    step = candidate_plan.steps[unbound.step]
    carried = next((parameter.state for parameter in step.tool.parameters if parameter.python_name == unbound.parameter), None)
    return carried is not None and step.satisfied_by.get(carried) is not None


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")


def _is_identifier_like(name: str) -> bool:
    """A name no English word has: with an underscore, a digit or a capital after the first letter."""
    return "_" in name or any(character.isdigit() for character in name) or any(character.isupper() for character in name[1:])


def _named_tools(task: str, graph: StateGraph) -> list[ToolDefinition]:
    """The tools whose catalog name (or ``server.name``) the task writes out, in order of mention."""
    by_name: dict[str, list[ToolDefinition]] = {}
    for tool in graph.registry:
        if _is_identifier_like(tool.name):
            by_name.setdefault(tool.name, []).append(tool)
            if tool.server_name:
                by_name.setdefault(f"{tool.server_name}.{tool.name}", []).append(tool)
    named: dict[int | None, ToolDefinition] = {}
    for word in _IDENTIFIER.findall(task):
        word = word.rstrip(".")
        tools = by_name.get(word) or by_name.get(word[:-1] if word.endswith("s") else "")
        if tools and len(tools) == 1:  # a bare name two servers share names neither
            named.setdefault(tools[0].id, tools[0])
    return list(named.values())


def _named_hit(tool: ToolDefinition, graph: StateGraph, held: Collection[str], best: SkillHit | None) -> SkillHit:
    """A hit for a tool the task names but the search did not return (scored like the best hit)."""
    try:
        tool_plan: Plan | None = plan_to_run(graph, tool, held)
    except NoPlanError:
        tool_plan = None
    score, similarity, lexical = (best.score, best.similarity, best.lexical) if best is not None else (0.0, None, 0.0)
    return SkillHit(
        "tool",
        tool.name,
        tool.server_name,
        score,
        similarity,
        lexical,
        f"the task names {tool.name}",
        tool.state_transition.produces,
        tool_plan is not None,
        tool_plan,
    )


def _input_states_made(graph: StateGraph, candidate_plan: Plan) -> tuple[str, ...]:
    """The input states (``State.input``) a plan makes on its way to its goal (not as its last
    step, which is what the part asks for), sorted."""
    made = {token for step in candidate_plan.steps[:-1] for token in step.produces}
    return tuple(sorted(token for token in made if token in graph.states and graph.states[token].input))


def unreachable_because(graph: StateGraph, hit: SkillHit, held: Collection[str]) -> NoPlanError | None:
    """The planner's explanation why no plan from ``held`` reaches ``hit`` (its goal states, or a run
    of its tool); ``None`` when one does."""
    try:
        if hit.kind == "tool":
            plan_to_run(graph, hit.qualified_name, held)
        else:
            plan(graph, hit.states, held=held)
    except NoPlanError as error:
        return error
    return None


def _why_unreachable(graph: StateGraph, hit: SkillHit, held: Collection[str]) -> NoPlanError:
    """The planner's explanation for a hit the search found unreachable."""
    error = unreachable_because(graph, hit, held)
    if error is None:
        raise AssertionError(f"search marked {hit.kind} {hit.name!r} unreachable, but a plan reaches it; please report this bug")
    return error


@dataclass(frozen=True)
class GoalSearch:
    """What goal choice searches with, the same for every part of one planning.

    Attributes:
        graph: the state graph to plan over.
        index: the skill index to search.
        cells: writes each candidate's cell (:meth:`toolpath.planner.tasks.cell_writers.CellWriter.candidate`);
            ``None``: :class:`toolpath.planner.tasks.cell_writers.FreshKernelCells` of ``graph``.
        budget: checked before the search and before each candidate
            (:class:`toolpath.planner.planning.plans.TaskBudget`).
        k: hits the search returns.
        margin, work_margin: how close to the best hit a candidate must score for the binding and
            work tests (cosine similarities; see the module docstring).
        meant: what a person answered to an :class:`UnclearEffectError`: ``{part's words (its
            ``task``): the label (:func:`hit_label`) of the candidate they meant, or "" for none}``.
            That candidate is chosen for those words (it runs its effects: the person asked for it);
            "" makes them not understood (:class:`NeitherMeantError`).
        probe_directory: where the files a task names may be read, so that a candidate's parameters
            the words give (:func:`toolpath.planner.tasks.arguments.bind_arguments`: "revenue over
            1000" for filter_rows' conditions) count as bound when candidates are compared;
            ``None``: no file is read.
        learned_examples: ``{qualified tool name: learned examples of it}`` (a catalog overlay's
            per-tool counts): between two near-duplicate tools, the one more examples favour is
            chosen (:mod:`toolpath.planner.tasks.near_duplicate_choice`); empty: none learned.
    """

    graph: StateGraph
    index: SkillIndex
    cells: CellWriter | None = None
    budget: TaskBudget = NO_BUDGET
    k: int = 10
    margin: float = MARGIN
    work_margin: float = WORK_MARGIN
    meant: Mapping[str, str] = field(default_factory=dict)
    probe_directory: str | os.PathLike[str] | None = None
    learned_examples: Mapping[str, int] = field(default_factory=dict)


def _with_words(
    search: GoalSearch, candidate_plan: Plan, task: str, inputs: Mapping[str, Any], held: Collection[str] = ()
) -> tuple[Plan, tuple[ToolDefinition, ...], Mapping[str, Any], list[str], tuple[str, ...]]:
    """``inputs`` with the values ``task``'s words give ``candidate_plan``'s parameters, what the
    words name of the data that the plan would drop
    (:meth:`toolpath.planner.tasks.arguments.Arguments.unused_words`), and the files the words name
    as where the plan writes (values bound to its output parameters): a candidate whose parameters
    the words fill ("keep rows with revenue over 1000": filter_rows' conditions) binds its inputs as
    much as one the caller's inputs fill, and uses the words another would drop.

    Returned first: the plan (``candidate_plan``, or one through tools that add the columns the words
    name, :func:`_through_adding`) and the tools it runs for them."""
    from toolpath.planner.tasks.arguments import bind_arguments  # arguments read parts, which read goals

    arguments = bind_arguments(search.graph, task, (), candidate_plan, inputs, search.probe_directory)
    through: tuple[ToolDefinition, ...] = ()
    widened = _through_adding(search, candidate_plan, arguments, task, held)
    if widened is not None:
        wider = bind_arguments(search.graph, task, (), widened[0], inputs, search.probe_directory)
        if len(wider.unused_words(task, inputs)) <= len(arguments.unused_words(task, inputs)):
            candidate_plan, through, arguments = widened[0], widened[1], wider
    outputs = {(position, parameter.python_name) for position, step in enumerate(candidate_plan.steps) for parameter in step.tool.output_parameters}
    written = tuple(str(reading.value) for reading in arguments.bound if (reading.step, reading.parameter) in outputs)
    return candidate_plan, through, arguments.inputs(inputs), arguments.unused_words(task, inputs), written


def _through_adding(
    search: GoalSearch, candidate_plan: Plan, arguments: Any, task: str, held: Collection[str]
) -> tuple[Plan, tuple[ToolDefinition, ...]] | None:
    """``(plan, tools)``: the cheapest plan to ``candidate_plan``'s goal that also runs the tools adding
    a column the words name and the probed table lacks
    (:func:`toolpath.planner.tasks.arguments.tools_adding_named_columns`), when one exists and every
    such tool feeds a later step of it: "a histogram of the molecular weights in molecules.csv" plots
    from the table tabulate_descriptors makes, not from the file as loaded. ``None`` otherwise."""
    from toolpath.planner.tasks.arguments import tools_adding_named_columns  # arguments read parts, which read goals

    if not candidate_plan.steps:
        return None
    tools = tools_adding_named_columns(search.graph, candidate_plan, arguments, task)
    if not tools:
        return None
    goal_tool = candidate_plan.steps[-1].tool
    try:
        wider = plan(search.graph, candidate_plan.goal, held=held, must_run=[*tools, goal_tool])
    except (NoPlanError, ValueError):
        return None
    steps = [step.tool.id for step in wider.steps]
    for tool in tools:
        position = steps.index(tool.id)
        if not any(step.requires & tool.state_transition.produces for step in wider.steps[position + 1 :]):
            return None
    return wider, tuple(tools)


@traced_goal_choice
def choose_goal(
    search: GoalSearch,
    task: str,
    inputs: Mapping[str, Any] | None = None,
    held: Collection[str] = (),
    min_score: float = MIN_SCORE,
    admits: Callable[[SkillHit], bool] | None = None,
) -> GoalChoice:
    """Pick the goal states for ``task`` (see the module docstring), with ``inputs`` given and
    ``held`` states held; hits below ``min_score`` never count, nor (with ``admits``) the hits it
    refuses: the goals a thing the words name by its source leads to
    (:func:`toolpath.planner.tasks.sources.read_source`).

    Raises:
        NoMatchingSkillError: no hit scores at least ``min_score``.
        NoPlanError: hits match, but no plan reaches any of them (the best one's explanation).
        InputError: the best candidates' cells would put an input where it is not meant (a
            candidate refused so is passed over when another serves).
        UnclearEffectError: the chosen goal's plan runs a tool with effects on a weak or ambiguous
            match (see the module docstring), or on a coin toss between near-duplicate tools
            (:class:`DuplicateEffectError`);
            NeitherMeantError: ``search.meant`` says none of them.
        QueryError: an empty task.
        PlanningTimeout, PlanningCancelled: from ``search.budget``.
    """
    graph, budget, margin, work_margin = search.graph, search.budget, search.margin, search.work_margin
    cells = search.cells if search.cells is not None else FreshKernelCells(graph)
    budget.check()
    hits = search.index.search(without_file_names(task), k=search.k, held=held)
    answer = search.meant.get(task)
    if answer == "":
        raise NeitherMeantError(task, hits)
    # The candidate a person said they meant counts even below min_score.
    matching = [hit for hit in hits if (hit.matches(min_score) or hit_label(hit) == answer) and hit.states and (admits is None or admits(hit))]
    named = _named_tools(task, graph) if admits is None else []
    if not matching and not named:
        raise NoMatchingSkillError(task, hits, min_score)
    found = {hit.name for hit in matching if hit.kind == "tool"}
    matching += [_named_hit(tool, graph, held, matching[0] if matching else None) for tool in named if tool.name not in found]
    best = matching[0]  # the search's own best (fused ranking); closeness is measured from it
    # A tool hit is its own goal ("run this tool"), even when a state hit names what it produces.
    candidates: dict[tuple[frozenset[str], str | None], GoalCandidate] = {}
    first_unreachable: SkillHit | None = None
    refused: dict[tuple[frozenset[str], str | None], InputError] = {}
    for order, hit in enumerate(matching):
        key = (hit.states, hit.name if hit.kind == "tool" else None)
        if key in candidates:
            continue
        budget.check()
        if hit.plan is None:
            first_unreachable = first_unreachable or hit
            candidates[key] = GoalCandidate(
                hit.states, hit, None, None, "no plan reaches it from the held states", order, _close(hit, best, margin), _close(hit, best, work_margin)
            )
            continue
        try:
            candidate_plan, through, worded_inputs, unused, written = _with_words(search, hit.plan, task, inputs or {}, held)
            cell = cells.candidate(candidate_plan, worded_inputs, task)
        except InputError as error:
            # A tool the user addressed by a step-qualified input is meant: its refusal is the
            # answer, not a reason to quietly plan another tool.
            if names_a_step(inputs or {}, [step.tool for step in hit.plan.steps]):
                raise
            refused[key] = error
            candidates[key] = GoalCandidate(hit.states, hit, None, None, str(error), order, _close(hit, best, margin), _close(hit, best, work_margin))
            continue
        candidates[key] = GoalCandidate(
            hit.states,
            hit,
            candidate_plan,
            cell,
            None,
            order,
            _close(hit, best, margin),
            _close(hit, best, work_margin),
            hit.kind == "tool" and hit.name in {tool.name for tool in named},
            _input_states_made(graph, hit.plan),
            tuple(unused),
            _close(hit, best, WORDS_MARGIN),
            written,
            through=through,
        )

    for candidate in _rescued(search, task, inputs or {}, hits, matching, list(candidates.values()), best, cells, held):
        candidates[(candidate.goal, candidate.hit.name if candidate.hit.kind == "tool" else None)] = candidate
    direction = read_direction(graph, task, hits, [candidate.hit for candidate in candidates.values() if candidate.plan is not None], LEXICAL_MARGIN)
    for key, candidate in candidates.items():
        if direction.is_demoted(candidate.hit):
            candidates[key] = replace(candidate, reverse_direction=direction.lost_because(candidate.hit))

    def rank(candidate: GoalCandidate) -> tuple:
        return (
            candidate.plan is not None,
            hit_label(candidate.hit) == answer,
            candidate.named,
            # Of a forward and a reverse tool at similar similarity, the forward one (the search is blind to direction).
            not candidate.reverse_direction,
            # Its plan runs a tool for a column the words name that only that tool adds: the surest sign of what they mean.
            bool(candidate.through) and candidate.words_close and not candidate.unused_words,
            candidate.words_close and not candidate.unused_words,
            not candidate.below_min_score,
            candidate.near and candidate.needs_work,
            candidate.close and candidate.binds_all_inputs,
            candidate.close and not candidate.invents,
            -candidate.order,
        )

    ordered = sorted(candidates.values(), key=rank, reverse=True)
    duplicate = None
    if answer is None:  # a person who said which candidate they meant chose between near-duplicates too
        ordered, duplicate = choose_between_duplicates(graph, task, ordered, search.learned_examples)
    chosen = ordered[0]
    if duplicate is not None and duplicate.decided_by == "coin toss" and chosen.plan is not None:
        effects = [(qualified_name(step.tool), step.tool.side_effect) for step in chosen.plan.steps if step.tool.side_effect != "none"]
        if effects:
            rival = next(candidate for candidate in ordered if candidate.plan and qualified_name(candidate.plan.steps[-1].tool) == duplicate.rival)
            raise DuplicateEffectError(task, chosen, rival, effects, duplicate)
    if chosen.plan is None:
        refusal = refused.get((chosen.goal, chosen.hit.name if chosen.hit.kind == "tool" else None))
        if refusal is not None or first_unreachable is None:  # the best candidates' plans were refused for their inputs
            raise refusal or next(iter(refused.values()))
        raise _why_unreachable(graph, first_unreachable, held)
    evidence = ""
    if answer is None and not chosen.named:
        unclear, evidence = _unclear_effects(task, chosen, chosen.plan, hits, graph, direction)
        if unclear is not None:
            raise unclear
    if answer is None and not chosen.named:
        unserved = _unserved_words(search, task, chosen, chosen.plan, inputs or {}, hits)
        if unserved is not None:
            raise unserved
    passed_over = tuple(replace(candidate, lost_because=candidate.lost_to(chosen)) for candidate in ordered[1:] if candidate.close)
    return GoalChoice(chosen, passed_over, evidence, direction.explanation(chosen.hit), duplicate)


def _rescued(
    search: GoalSearch,
    task: str,
    inputs: Mapping[str, Any],
    hits: list[SkillHit],
    matching: list[SkillHit],
    candidates: list[GoalCandidate],
    best: SkillHit,
    cells: CellWriter,
    held: Collection[str] = (),
) -> list[GoalCandidate]:
    """Candidates for the hits below ``MIN_SCORE`` (down to :data:`WORDS_MIN_SCORE`, within
    :data:`WORDS_MARGIN` of ``best``) whose plans use every column, value and number ``task`` names,
    when every candidate that matches and has a plan would drop some: "average revenue by region for
    sales.csv" matches the file best and the grouping state at 0.34, and only grouping uses 'revenue'
    and 'region'. Nothing when no file was probed (then no candidate drops words), or when the hits
    have no cosine similarity (BM25 only)."""
    planned = [candidate for candidate in candidates if candidate.plan is not None]
    if not planned or not all(candidate.unused_words for candidate in planned):
        return []
    taken = {(candidate.goal, candidate.hit.name if candidate.hit.kind == "tool" else None) for candidate in candidates}
    rescued: list[GoalCandidate] = []
    for order, hit in enumerate(hits):
        key = (hit.states, hit.name if hit.kind == "tool" else None)
        if hit in matching or key in taken or not hit.states or hit.plan is None or hit.similarity is None or hit.similarity < WORDS_MIN_SCORE:
            continue
        if not _close(hit, best, WORDS_MARGIN):
            continue
        search.budget.check()
        try:
            candidate_plan, through, worded_inputs, unused, written = _with_words(search, hit.plan, task, inputs, held)
            cell = cells.candidate(candidate_plan, worded_inputs, task)
        except InputError:
            continue
        if unused:
            continue
        taken.add(key)
        rescued.append(
            GoalCandidate(
                hit.states,
                hit,
                candidate_plan,
                cell,
                None,
                len(matching) + order,
                False,
                _close(hit, best, search.work_margin),
                invents=_input_states_made(search.graph, hit.plan),
                words_close=True,
                writes_named=written,
                below_min_score=True,
                through=through,
            )
        )
    return rescued


def _unclear_effects(
    task: str, chosen: GoalCandidate, chosen_plan: Plan, hits: list[SkillHit], graph: StateGraph, direction: DirectionReading | None = None
) -> tuple[UnclearEffectError | None, str]:
    """The refusal of ``chosen`` when its plan (``chosen_plan``) runs a tool with effects on a weak match (below
    :data:`EFFECT_MIN_SCORE`) or one another goal's hit comes as close to (:func:`_close_in_both`
    with :data:`EFFECT_MARGIN`); ``None`` when it runs none, or its match is clear. Second: the
    evidence in the words that let it run (:func:`_effect_evidence`), empty when none was needed.

    The rivals are the hits of other goals (a state hit and the tool hit making that state are one
    goal) whose plans would not run the same tools with effects anyway ("speech to text" of a text
    first speaks it: choosing between them does not decide whether speech is written), best first:
    the close ones, or else the next one, so a person is always shown another. When the words ask
    for the effect (see the module docstring), the hits :func:`_no_rival` names are none. When the
    chosen goal agrees with the kinds the words name (``direction``), a hit whose direction they
    contradict is no other reading of them ("an audio clip from the text" is not a video)."""
    effects = [(qualified_name(step.tool), step.tool.side_effect) for step in chosen_plan.steps if step.tool.side_effect != "none"]
    if not effects:
        return None, ""
    weak = chosen.hit.similarity is not None and _effect_similarity(chosen.hit) < EFFECT_MIN_SCORE
    effect_tools = {tool for tool, _ in effects}
    others: dict[frozenset[str], SkillHit] = {}
    # A plan through a tool that adds a column the words name reads the data they speak of: a goal it
    # reaches on the way, or one whose plan reads none of what that tool reads, is no other reading of them.
    reached = frozenset().union(*(step.produces for step in chosen_plan.steps)) if chosen.through else frozenset()
    read_through = frozenset().union(*(tool.state_transition.requires for tool in chosen.through))
    for hit in hits:
        runs_them_too = hit.plan is not None and effect_tools <= {qualified_name(step.tool) for step in hit.plan.steps}
        if chosen.through and (hit.states <= reached or (hit.plan is not None and not any(step.requires & read_through for step in hit.plan.steps))):
            continue
        reverse = direction is not None and direction.verdict(chosen.hit).verdict == "agrees" and direction.verdict(hit).verdict == "contradicts"
        if hit.states and hit.states != chosen.goal and not runs_them_too and not reverse:
            others.setdefault(hit.states, hit)
    close = [hit for hit in others.values() if _close_in_both(hit, chosen.hit, EFFECT_MARGIN)]
    if not weak and not close:
        return None, ""
    evidence = _effect_evidence(task, chosen, chosen_plan, graph)
    if evidence is not None:
        suffixes, named, said = evidence
        lexical: dict[frozenset[str], float] = {}
        for hit in hits:  # a goal's words score: the best of its state's and its tools' hits
            lexical[hit.states] = max(lexical.get(hit.states, 0.0), hit.lexical)
        chosen_lexical = lexical.get(chosen.goal, chosen.hit.lexical)
        # A rival the words favour by less than LEXICAL_MARGIN is no clearer a reading: BM25 scores this
        # close move with any text added to the catalogs.
        favoured = {states: score <= (1 + LEXICAL_MARGIN) * chosen_lexical for states, score in lexical.items()}
        weak, close = False, [hit for hit in close if not _no_rival(hit, suffixes, named, favoured[hit.states])]
        if not close:
            return None, said
    return UnclearEffectError(task, chosen, close or list(others.values())[:1], effects, weak), ""


def _output_suffixes(tool: ToolDefinition) -> frozenset[str]:
    """The file suffixes ``tool`` writes (those its output parameters take: lower case, with the dot)."""
    from toolpath.planner.tasks.arguments import output_suffixes  # arguments read parts, which read goals

    return frozenset(suffix for parameter in tool.output_parameters for suffix in output_suffixes(parameter))


def _effect_evidence(task: str, chosen: GoalCandidate, chosen_plan: Plan, graph: StateGraph) -> tuple[frozenset[str], bool, str] | None:
    """Whether ``task``'s words ask for the effect of ``chosen``'s plan itself: ``(suffixes, named,
    why)``, the kind of file they ask to write, whether they name the file, and that in words; ``None``
    when they do not.

    Two kinds of evidence count. A file the words name as where the plan writes (``chosen.writes_named``:
    its suffix suits the output parameter, "into monthly.png"). Or a word of a writing tool's name
    (stemmed as skill search stems: "plotted" is "plot") that every tool of the catalogs whose name
    has it carries for writing files of that tool's one kind, and no tool without effects or writing
    another kind carries: "plot" (every ``plot_*`` tool writes a PNG), "report" (``write_report``).
    A word that names tools of several kinds ("table": load_table, save_table) says nothing of an effect.
    """
    if chosen.writes_named:
        suffixes = frozenset(os.path.splitext(path)[1].lower() for path in chosen.writes_named)
        files = ", ".join(map(repr, chosen.writes_named))
        return suffixes, True, f"the words name {files} as the file it writes"
    words = set(bm25_terms([without_file_names(task)])[0])
    kinds: dict[str, set[frozenset[str]]] = {}
    for tool in graph.registry:
        kind = _output_suffixes(tool) if tool.side_effect == "writes" else frozenset()
        for term in set(bm25_terms([name_words(tool.name)])[0]):
            kinds.setdefault(term, set()).add(kind)
    for step in chosen_plan.steps:
        kind = _output_suffixes(step.tool) if step.tool.side_effect == "writes" else frozenset()
        if not kind:
            continue
        for term in sorted(set(bm25_terms([name_words(step.tool.name)])[0]) & words):
            if kinds.get(term) == {kind}:
                written = ", ".join(sorted(kind))
                return kind, False, f"the words say {term!r}, which in the catalogs names only tools writing {written} files, as {step.tool.name} does"
    return None


def _no_rival(hit: SkillHit, suffixes: frozenset[str], named: bool, favoured: bool) -> bool:
    """Whether, when the words ask to write a file of ``suffixes`` (``named``: they name it), choosing
    ``hit`` instead would not change whether such a file is written: its plan needs no work, or (for
    a named file) writes only another kind, or writes that kind too while the words favour the chosen
    goal at least as much (``favoured``: its BM25 score is not above the chosen one's by more than
    :data:`LEXICAL_MARGIN`). Of two charts
    the words favour differently ("plot units against revenue for the rows": a line chart by
    similarity, a scatter plot by the words "plot y against x"), neither is clear, and the person is asked."""
    if hit.plan is None or not hit.plan.steps:
        return True
    writes = [_output_suffixes(step.tool) for step in hit.plan.steps if step.tool.side_effect == "writes"]
    if any(kind & suffixes for kind in writes):
        return favoured
    return named and bool(writes)


_CATALOG_TERMS: weakref.WeakKeyDictionary[StateGraph, frozenset[str]] = weakref.WeakKeyDictionary()


def _catalog_terms(graph: StateGraph) -> frozenset[str]:
    """Every word the graph's catalogs write, as BM25 terms (lower-case, Snowball-stemmed, stop words
    removed: ``"plots"`` and ``"plot"`` are one): states' descriptions, affordances and tokens; tools'
    names, descriptions, affordances, parameters (names, descriptions, choices and their words) and
    returns. Cached per graph."""
    if graph not in _CATALOG_TERMS:
        texts = [text for state in graph.states.values() for text in (state.description, *state.affordances, name_words(state.token))]
        for tool in graph.registry:
            texts += [name_words(tool.name), tool.description, *tool.affordances]
            for parameter in tool.parameters:
                texts += [name_words(parameter.name), parameter.description]
                for value, words in (parameter.choices or {}).items():
                    texts += [str(value), *words]
            if tool.return_spec is not None:
                texts += [name_words(tool.return_spec.name), tool.return_spec.description]
        _CATALOG_TERMS[graph] = frozenset(term for terms in bm25_terms([text for text in texts if text]) for term in terms)
    return _CATALOG_TERMS[graph]


def _data_terms(search: GoalSearch, chosen_plan: Plan, inputs: Mapping[str, Any]) -> frozenset[str] | None:
    """The words of the data ``chosen_plan`` reads (its probed columns and the values seen in them)
    and the names of the files given (a stem: "the sales" of sales.csv), as BM25 terms; ``None`` when
    nothing was probed though the plan reads a state with a probe (no file given, or not readable),
    or it reads a further file (``meaning: file``) that is not given ("add the manager of each region
    from another file"): then any word may be one of its columns, and none is known as not the data's."""
    graph = search.graph
    read = {token for step in chosen_plan.steps for token in step.requires}
    probes = [probe for probe in probe_inputs(graph, chosen_plan, inputs, search.probe_directory) if not probe.problem]
    if not probes and any(token in graph.states and graph.states[token].probe for token in read):
        return None
    files = [
        (step.tool, parameter) for step in chosen_plan.steps for parameter in step.tool.parameters if parameter.meaning == "file" and parameter.role == "input"
    ]
    if any(input_for(tool, parameter, inputs) is None for tool, parameter in files):
        return None
    texts = [name_words(column) for probe in probes for column in probe.columns]
    texts += [str(value) for probe in probes for seen in probe.values.values() for value in seen]
    texts += [name_words(os.path.splitext(os.path.basename(value))[0]) for value in inputs.values() if isinstance(value, str)]
    return frozenset(term for terms in bm25_terms(texts) for term in terms)


def _unserved_words(
    search: GoalSearch, task: str, chosen: GoalCandidate, chosen_plan: Plan, inputs: Mapping[str, Any], hits: list[SkillHit]
) -> UnservedWordsError | None:
    """The refusal of ``chosen`` when its goal's tool (its plan's last step) is of a catalog with a
    closed vocabulary (:attr:`toolpath.planner.planning.graph.StateGraph.closed_vocabulary`), its
    match is weak (below :data:`CLOSED_VOCABULARY_MIN_SCORE`) and the head of ``task``
    (:func:`toolpath.planner.tasks.clauses.head_words`, quotes, file names and names left out) holds
    words that no loaded catalog's texts use (:func:`_catalog_terms`) and that are not the words of
    the data its plan reads (:func:`_data_terms`); ``None`` otherwise.

    Only the head counts: the rest of a request says which rows or columns ("units sold per
    product"), in the data's words. The rule needs the data probed: without it a word may be a
    column. Measured on both sides (issue 52): in the RestBench TMDB and UltraTool catalogs, written
    from API names, right matches at 0.35-0.55 hold head words their catalogs never use ("rent a
    car", "a poster of the third episode", "save a memo file"), so open catalogs are never held to it."""
    similarity = chosen.hit.similarity
    if similarity is None or similarity >= CLOSED_VOCABULARY_MIN_SCORE or not chosen_plan.steps:
        return None
    if chosen_plan.steps[-1].tool.server_name not in search.graph.closed_vocabulary:
        return None
    head = head_words(without_names(without_file_names(without_quotes(task))))
    known = _catalog_terms(search.graph)
    unknown = [word for word in head if not set(bm25_terms([word])[0]) <= known]
    if not unknown:
        return None
    # The words' own values count as given: "add the manager from regions.csv" names a column of the
    # file the join reads, which the caller's inputs do not hold.
    from toolpath.planner.tasks.arguments import bind_arguments  # arguments read parts, which read goals

    worded_inputs = bind_arguments(search.graph, task, (), chosen_plan, inputs, search.probe_directory).inputs(inputs)
    data = _data_terms(search, chosen_plan, worded_inputs)
    if data is None:
        return None
    unserved = [word for word in unknown if not set(bm25_terms([word])[0]) <= known | data]
    if not unserved:
        return None
    others: dict[frozenset[str], SkillHit] = {}
    for hit in hits:
        if hit.states and hit.states != chosen.goal:
            others.setdefault(hit.states, hit)
    return UnservedWordsError(task, chosen, unserved, [chosen.hit, *others.values()])
