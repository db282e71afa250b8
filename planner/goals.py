"""Choosing goal states for a task: skill search, then a plan for each close candidate.

The search ranks states and tools; each hit stands for a goal (the state, or what the tool
produces). Among candidates, one with a plan beats one without; then, among those scoring within
``margin`` of the best, one whose cell binds every required parameter from the given inputs beats
one that leaves some unbound; then the higher score wins. Scores below ``min_score`` never count.

``min_score`` (0.35) and ``margin`` (0.05) are cosine similarities of the default all-MiniLM-L6-v2
model, set by hand on the shipped chemistry catalog: unrelated tasks ("book a flight") score below
0.2 and related phrasings above 0.45.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from planner.cell import PlannedCell, render_cell
from planner.graph import StateGraph
from planner.planning import NoPlanError, Plan, plan
from planner.search import SkillHit, SkillIndex

MIN_SCORE = 0.35
MARGIN = 0.05


class NoMatchingSkillError(LookupError):
    """No state or tool matches the task well enough; ``hits`` holds the closest ones."""

    def __init__(self, task: str, hits: list[SkillHit], min_score: float):
        self.task = task
        self.hits = hits
        closest = f" (closest: {hits[0].kind} {hits[0].name!r} at {hits[0].score:.2f}, below {min_score:.2f})" if hits else ""
        shown = task if len(task) <= 120 else task[:117] + "..."
        super().__init__(f"no catalog can serve the task {shown!r}: no state or tool matches it{closest}. Rephrase the task, or load a catalog for this domain with --catalog")


@dataclass(frozen=True)
class GoalCandidate:
    """A goal considered for a task, with its plan and cell, or why it has none."""

    goal: frozenset[str]
    hit: SkillHit
    plan: Plan | None
    cell: PlannedCell | None
    problem: str | None

    @property
    def binds_all_inputs(self) -> bool:
        return self.cell is not None and not self.cell.unbound

    def reason(self) -> str:
        """Why this candidate lost, for messages."""
        if self.problem:
            return self.problem
        if self.cell is not None and self.cell.unbound:
            return "its plan leaves " + ", ".join(parameter.parameter for parameter in self.cell.unbound) + " unbound"
        return "lower score"

    def to_dict(self) -> dict:
        return {"goal": sorted(self.goal), "hit": self.hit.to_dict(), "reason": self.reason()}


@dataclass(frozen=True)
class GoalChoice:
    """The chosen candidate and the close ones passed over (within ``margin`` of the best score)."""

    chosen: GoalCandidate
    passed_over: tuple[GoalCandidate, ...]


def choose_goal(
    task: str,
    index: SkillIndex,
    graph: StateGraph,
    inputs: Mapping[str, Any] | None = None,
    held: Collection[str] = (),
    k: int = 10,
    min_score: float = MIN_SCORE,
    margin: float = MARGIN,
) -> GoalChoice:
    """Pick the goal states for ``task``.

    Raises:
        NoMatchingSkillError: no hit scores at least ``min_score``.
        NoPlanError: hits match, but no plan reaches any of them (the best one's explanation).
        QueryError: an empty task.
    """
    hits = index.search(task, k=k)
    matching = [hit for hit in hits if hit.score >= min_score and hit.states]
    if not matching:
        raise NoMatchingSkillError(task, hits, min_score)
    best_score = matching[0].score
    candidates: dict[frozenset[str], GoalCandidate] = {}
    first_error: NoPlanError | None = None
    for hit in matching:
        if hit.states in candidates:
            continue
        try:
            goal_plan = plan(graph, hit.states, held=held)
        except NoPlanError as error:
            first_error = first_error or error
            candidates[hit.states] = GoalCandidate(hit.states, hit, None, None, str(error))
            continue
        cell = render_cell(goal_plan, inputs, task, registry=graph.registry)
        candidates[hit.states] = GoalCandidate(hit.states, hit, goal_plan, cell, None)

    def rank(candidate: GoalCandidate) -> tuple:
        close = candidate.hit.score >= best_score - margin
        return (candidate.plan is not None, close and candidate.binds_all_inputs, candidate.hit.score)

    ordered = sorted(candidates.values(), key=rank, reverse=True)
    chosen = ordered[0]
    if chosen.plan is None:
        assert first_error is not None
        raise first_error
    passed_over = tuple(candidate for candidate in ordered[1:] if candidate.hit.score >= best_score - margin)
    return GoalChoice(chosen, passed_over)
