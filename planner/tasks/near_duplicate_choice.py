"""Goal choice between near-duplicate tools (lint TP018, :mod:`toolpath.registry.near_duplicates`).

When the chosen goal's tool has a near-duplicate among the close candidates (the same signature,
texts that say the same) and nothing but the search's order put it first (the rival lost only for
being "ranked lower by the search"), the search's order between them is a coin toss: texts that say
the same score alike, and a word added to either catalog entry flips them. Then:

- learned evidence decides when there is some: the tool more learned examples favour (a catalog
  overlay's per-tool example counts, ``GoalSearch.learned_examples``) is chosen
  (:func:`favoured_tool`);
- without it (no examples, or as many for each), the choice stands and ``--json`` says it was a coin
  toss, naming both tools and that lint flags the pair (:class:`DuplicateChoice`);
- a coin toss between tools with effects (they write files or records, or send) is not run: the part
  is not understood (:class:`~toolpath.planner.tasks.goals.DuplicateEffectError`, an
  :class:`~toolpath.planner.tasks.goals.UnclearEffectError` naming both), and the person is asked
  which they meant, or names the tool in the task. Running the wrong one of two tools that book,
  send or write cannot be undone, and nothing in the words or the record said which was meant.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from toolpath.planner.planning.graph import StateGraph
from toolpath.planner.planning.plans import qualified_name
from toolpath.registry import ToolDefinition
from toolpath.registry.near_duplicates import near_duplicates

if TYPE_CHECKING:
    from toolpath.planner.tasks.goals import GoalCandidate

#: Why a candidate lost when only the search's order put the chosen one first (``GoalCandidate.lost_to``).
_SEARCH_ORDER = "ranked lower by the search"

_PARTNERS: weakref.WeakKeyDictionary[StateGraph, dict[int | None, tuple[int | None, ...]]] = weakref.WeakKeyDictionary()


def favoured_tool(first: str, second: str, learned_examples: Mapping[str, int] | None = None) -> str | None:
    """Of two tools (qualified names, ``server.name``), the one more learned examples favour;
    ``None`` when they tell nothing: no examples of either, or as many of each.

    ``learned_examples``: ``{qualified tool name: number of learned examples of it}`` (a tool not
    in it has none)."""
    examples = learned_examples or {}
    first_count, second_count = examples.get(first, 0), examples.get(second, 0)
    if first_count == second_count:
        return None
    return first if first_count > second_count else second


def near_duplicate_partners(graph: StateGraph) -> dict[int | None, tuple[int | None, ...]]:
    """``{tool id: ids of its near-duplicates}`` over every tool of ``graph`` (lint TP018's pairs),
    cached per graph."""
    if graph not in _PARTNERS:
        partners: dict[int | None, tuple[int | None, ...]] = {}
        for pair in near_duplicates(list(graph.registry)):
            partners[pair.first.id] = (*partners.get(pair.first.id, ()), pair.second.id)
            partners[pair.second.id] = (*partners.get(pair.second.id, ()), pair.first.id)
        _PARTNERS[graph] = partners
    return _PARTNERS[graph]


def goal_tool(candidate: GoalCandidate) -> ToolDefinition | None:
    """The tool a candidate's plan runs for its goal (its last step), or ``None`` without steps."""
    if candidate.plan is None or not candidate.plan.steps:
        return None
    return candidate.plan.steps[-1].tool


@dataclass(frozen=True)
class DuplicateChoice:
    """How goal choice chose between two near-duplicate tools.

    Attributes:
        chosen, rival: the tools' qualified names (``server.name``): the one chosen and the other.
        learned_examples: how many learned examples favour each, ``(chosen, rival)``.
        decided_by: ``"learned examples"`` (more favour the chosen one) or ``"coin toss"`` (none
            tell them apart: the search's order between near-identical texts chose).
    """

    chosen: str
    rival: str
    learned_examples: tuple[int, int]
    decided_by: Literal["learned examples", "coin toss"]

    def reason(self) -> str:
        pair = f"{self.chosen} and {self.rival} are near-duplicates (lint TP018: the same signature, texts that say the same)"
        if self.decided_by == "coin toss":
            return f"a coin toss: {pair}, and no learned examples tell them apart, so the search's order chose {self.chosen}"
        return f"{pair}; learned examples favour {self.chosen} ({self.learned_examples[0]} to {self.learned_examples[1]})"

    def to_dict(self) -> dict:
        return {
            "tools": [self.chosen, self.rival],
            "chosen": self.chosen,
            "decided_by": self.decided_by,
            "learned_examples": {self.chosen: self.learned_examples[0], self.rival: self.learned_examples[1]},
            "lint": "TP018",
            "reason": self.reason(),
        }


def choose_between_duplicates(
    graph: StateGraph, task: str, ordered: Sequence[GoalCandidate], learned_examples: Mapping[str, int] | None = None
) -> tuple[list[GoalCandidate], DuplicateChoice | None]:
    """``ordered`` (candidates best first, the first chosen) with the chosen goal's near-duplicate
    rival moved first when learned examples favour it, the one of the two not chosen saying why it
    lost (``GoalCandidate.lost_because``), and how the two were decided; ``(ordered, None)`` when the
    chosen goal's tool has no near-duplicate among the close candidates that lost only by the
    search's order (see the module docstring). A coin toss between tools with effects is refused by
    the caller (:class:`toolpath.planner.tasks.goals.DuplicateEffectError`).
    """
    ordered = list(ordered)
    chosen = ordered[0]
    tool = goal_tool(chosen)
    if tool is None or chosen.named or not chosen.close:
        return ordered, None
    partners = near_duplicate_partners(graph).get(tool.id, ())
    for position, candidate in enumerate(ordered[1:], 1):
        rival_tool = goal_tool(candidate)
        if rival_tool is None or rival_tool.id not in partners or not candidate.close or candidate.lost_to(chosen) != _SEARCH_ORDER:
            continue
        names = qualified_name(tool), qualified_name(rival_tool)
        examples = learned_examples or {}
        favoured = favoured_tool(*names, examples)
        if favoured == names[1]:
            choice = DuplicateChoice(names[1], names[0], (examples[names[1]], examples.get(names[0], 0)), "learned examples")
            return [candidate, replace(chosen, lost_because=choice.reason()), *ordered[1:position], *ordered[position + 1 :]], choice
        counts = (examples.get(names[0], 0), examples.get(names[1], 0))
        choice = DuplicateChoice(names[0], names[1], counts, "coin toss" if favoured is None else "learned examples")
        ordered[position] = replace(candidate, lost_because=choice.reason())
        return ordered, choice
    return ordered, None
