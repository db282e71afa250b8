"""Prerequisite habits: a tool that, in the chains seen, almost always runs right before another.

A catalog declares data flow the sources describe (a search gives the id a details call needs).
Use shows more: in UltraTool's everyday-assistant chains, ``search_train`` runs before
``train_ticket_booking`` although no description says the booking needs it. Tool ``A`` is a
*prerequisite habit* of tool ``B`` when ``A`` directly precedes ``B`` in at least a share ``s`` of
the chains that use ``B``, over at least ``n`` chains that use ``B``.

``s`` and ``n`` are not fixed: :func:`learn_prerequisites` picks them from a small grid
(:data:`SHARE_GRID` × :data:`MIN_USES_GRID`) by validation on a held-back fraction of the chains,
then learns the habits of *all* chains with the pair it picked.

Choice of the pair: the largest F1 of the predicted edges "``A`` directly precedes ``B``" on the
held-back chains, where a habit ``(A, B)`` predicts its edge in every held-back chain that uses
``B`` and the true edges are each chain's consecutive pairs of distinct tools. F1 rather than
precision at a floor of recall because both errors cost a plan a tool: a habit that is wrong adds
``A`` to every plan that uses ``B`` (a wrong node and link), one that is missing leaves ``A`` to the
request's words, which often do not name it (a missed node and link); neither kind of error is
known to be cheaper in general. Ties go to the stricter pair (larger ``s``, then larger ``n``):
fewer habits for the same measured quality. On UltraTool's 3,027 requests outside the test ids
(seed 0, 648 held back) this picks ``s`` = 0.5, ``n`` = 3: F1 .441 (precision .662, recall .330)
against .387 for issue 34's hand choice (0.6, 10); with it, ``bench_taskplan.py``'s learned
variant scored node F1 .717 on the test ids against .714 (issue 53).

:meth:`PrerequisiteHabits.as_requires` turns a habit into the state(s) to add to ``B``'s
``requires``, with the rule in its docstring.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from toolpath.errors import ToolpathError
from toolpath.registry import ToolNotFoundError, ToolRegistry

#: A tool as ``(server, name)``; ``server`` is ``None`` for a tool registered without one.
ToolKey = tuple[str | None, str]

#: Shares tried for ``s``. From one half up: one tool directly precedes each use of ``B``, so at
#: most one tool can pass a share above one half and a plan is not made to call two rivals that
#: each preceded ``B`` in different chains. 0.6 with ``n`` = 10 was the hand choice of issue 34.
SHARE_GRID = (0.5, 0.6, 0.7, 0.8, 0.9)
#: Least numbers of chains using ``B`` tried for ``n``: from "seen a few times" to "seen often".
MIN_USES_GRID = (3, 5, 10, 20)
#: The pair used when nothing can be validated (no chain held back, or too few chains to hold any
#: back): issue 34's hand choice on the halves of UltraTool's training requests.
DEFAULT_SHARE = 0.6
DEFAULT_MIN_USES = 10


class PrerequisiteError(ToolpathError, ValueError):
    """Habits that cannot be learned or applied: the message says which argument or tool, and why."""


class Habit(NamedTuple):
    """``before`` directly preceded ``after`` in ``share`` of the ``uses`` chains that used ``after``
    (a tuple, so ``for before, after, share, uses in habits.habits`` reads it)."""

    before: ToolKey
    after: ToolKey
    share: float
    uses: int


@dataclass(frozen=True)
class GridPoint:
    """One pair of thresholds measured on the held-back chains.

    ``habits`` is how many the learning part gave with it; ``precision``, ``recall`` and ``f1`` are
    of the edges those habits predict in the held-back chains (micro-averaged over all chains).
    """

    share: float
    min_uses: int
    habits: int
    precision: float
    recall: float
    f1: float


@dataclass(frozen=True)
class HabitRequirement:
    """What one habit adds to a catalog: ``states`` join ``after``'s ``requires``.

    ``states`` is empty when the habit adds nothing; ``reason`` then says why (and otherwise which
    rule picked the states).
    """

    habit: Habit
    states: tuple[str, ...]
    reason: str


@dataclass(frozen=True)
class PrerequisiteHabits:
    """The habits learned from all chains, with the thresholds chosen and how they were chosen.

    Attributes:
        habits: ``(before, after, share, uses)`` for every habit, strongest share first.
        share: the ``s`` chosen; ``min_uses``: the ``n`` chosen.
        chains: how many chains the habits were learned from (all of them).
        held_back: how many chains were held back to choose ``s`` and ``n``.
        grid: every pair tried and its figures on the held-back chains (empty when none was held back).
        chosen: the grid point of the chosen pair, or ``None`` when nothing was validated.
        reason: how the pair was chosen, in words (for ``--json`` and reports).
        dropped: habits left out because with stronger ones they would close a cycle
            (``A`` before ``B`` and ``B`` before ``A``): no plan could then use either.
    """

    habits: tuple[Habit, ...]
    share: float
    min_uses: int
    chains: int
    held_back: int
    grid: tuple[GridPoint, ...] = ()
    chosen: GridPoint | None = None
    reason: str = ""
    dropped: tuple[Habit, ...] = field(default=())

    @property
    def thresholds(self) -> dict[str, float]:
        """The chosen pair, as the overlay's header records it: ``{"min_share": s, "min_uses": n}``."""
        return {"min_share": self.share, "min_uses": self.min_uses}

    @property
    def validation(self) -> dict[str, float]:
        """The chosen pair's figures on the held-back chains (``held_back_chains``, and ``precision``,
        ``recall``, ``f1`` when the pair was chosen by them)."""
        figures: dict[str, float] = {"held_back_chains": self.held_back}
        if self.chosen is not None:
            figures.update(precision=self.chosen.precision, recall=self.chosen.recall, f1=self.chosen.f1)
        return figures

    def as_requires(self, registry: ToolRegistry) -> tuple[HabitRequirement, ...]:
        """The states each habit adds to its ``after`` tool's ``requires``, one entry per habit.

        Rule, for a habit ``A`` before ``B``:

        1. if ``B`` already requires a state ``A`` produces, the catalog already says it: nothing
           is added;
        2. if ``A`` requires a state ``B`` produces, the catalog's data flow runs the other way
           and requiring ``A``'s output would leave neither runnable first: nothing is added;
        3. otherwise the candidates are the states ``A`` produces that ``B`` neither requires nor
           produces; of those, the ones the fewest tools of ``registry`` produce are added (``A``'s
           most specific output: in the taskplan catalogs, ``A``'s own result state, produced by
           ``A`` alone; a state many tools produce would let any of them stand in for ``A``);
        4. when there is no candidate (``A`` produces nothing ``B`` lacks), nothing is added.

        Raises:
            PrerequisiteError: a habit names a tool ``registry`` does not hold (the message names it).
        """
        producers: Counter[str] = Counter(token for tool in registry for token in tool.state_transition.produces)
        requirements = []
        for habit in self.habits:
            before = _lookup(registry, habit.before).state_transition
            after = _lookup(registry, habit.after).state_transition
            if declared := sorted(before.produces & after.requires):
                requirements.append(HabitRequirement(habit, (), f"already required: {_pretty(habit.after)} requires {', '.join(declared)}"))
                continue
            if reverse := sorted(before.requires & after.produces):
                reason = f"the catalog's data flow runs the other way ({_pretty(habit.before)} requires {', '.join(reverse)})"
                requirements.append(HabitRequirement(habit, (), reason))
                continue
            candidates = before.produces - after.requires - after.produces
            if not candidates:
                reason = f"{_pretty(habit.before)} produces nothing {_pretty(habit.after)} lacks"
                requirements.append(HabitRequirement(habit, (), reason))
                continue
            fewest = min(producers[token] for token in candidates)
            states = tuple(sorted(token for token in candidates if producers[token] == fewest))
            reason = f"the output{'s' if len(states) > 1 else ''} of {_pretty(habit.before)} that the fewest tools produce ({fewest})"
            requirements.append(HabitRequirement(habit, states, reason))
        return tuple(requirements)


def learn_prerequisites(chains: Sequence[Sequence[ToolKey]], held_back: float = 0.2, seed: int = 0) -> PrerequisiteHabits:
    """Learn prerequisite habits from tool chains, choosing ``s`` and ``n`` on a held-back fraction.

    Args:
        chains: each chain is the tools of one request as ``(server, name)``, in the order they ran;
            consecutive entries are the edges ("directly precedes"). A tool following itself is
            not an edge.
        held_back: the fraction of chains held back to choose the thresholds, in ``[0, 1)``. Which
            chains are held back depends only on ``seed`` and each chain's position (a hash), so
            the same chains in the same order give the same choice. ``0`` skips the validation and
            uses :data:`DEFAULT_SHARE` and :data:`DEFAULT_MIN_USES`, as does a split that leaves
            either part empty, or one where no pair predicts a single held-back edge rightly.
        seed: varies which chains are held back.

    Returns:
        :class:`PrerequisiteHabits`: the habits of *all* chains at the chosen thresholds, the grid's
        figures and the reason for the choice.

    Raises:
        PrerequisiteError: ``held_back`` outside ``[0, 1)``, or a chain entry that is not a
            ``(server, name)`` pair (the message gives the chain's index).
    """
    if not 0 <= held_back < 1:
        raise PrerequisiteError(f"held_back is the fraction of chains held back to choose thresholds: give a number in [0, 1), not {held_back!r}")
    tool_chains = [_checked(chain, index) for index, chain in enumerate(chains)]
    is_held_back = [_held_back_fraction(index, seed) < held_back for index in range(len(tool_chains))]
    learning = [chain for chain, held in zip(tool_chains, is_held_back) if not held]
    validation = [chain for chain, held in zip(tool_chains, is_held_back) if held]
    if not learning or not validation:
        why = "no chain was held back" if not validation else "every chain fell in the held-back part"
        return _unvalidated(tool_chains, f"{why} ({len(tool_chains)} chains, held_back={held_back})")
    counts = _Counts(learning)
    grid = tuple(_measure(counts, validation, share, min_uses) for share in SHARE_GRID for min_uses in MIN_USES_GRID)
    chosen = max(grid, key=lambda point: (point.f1, point.share, point.min_uses))
    if chosen.f1 == 0:
        # No pair predicts one held-back edge rightly: the held-back part cannot tell the pairs apart.
        found = _unvalidated(tool_chains, f"no pair of thresholds predicted a single edge of the {len(validation)} held-back chains")
        return PrerequisiteHabits(found.habits, found.share, found.min_uses, found.chains, len(validation), grid, None, found.reason, found.dropped)
    habits, dropped = _habits(tool_chains, chosen.share, chosen.min_uses)
    reason = (
        f"s={chosen.share}, n={chosen.min_uses}: the largest F1 ({chosen.f1:.3f}; precision {chosen.precision:.3f}, recall {chosen.recall:.3f}) "
        f"of predicted direct-precedence edges on {len(validation)} held-back chains, learned from the other {len(learning)}; "
        "ties go to the stricter pair"
    )
    return PrerequisiteHabits(habits, chosen.share, chosen.min_uses, len(tool_chains), len(validation), grid, chosen, reason, dropped)


def _unvalidated(chains: Sequence[tuple[ToolKey, ...]], why: str) -> PrerequisiteHabits:
    habits, dropped = _habits(chains, DEFAULT_SHARE, DEFAULT_MIN_USES)
    reason = f"{why}: issue 34's thresholds s={DEFAULT_SHARE}, n={DEFAULT_MIN_USES}"
    return PrerequisiteHabits(habits, DEFAULT_SHARE, DEFAULT_MIN_USES, len(chains), 0, reason=reason, dropped=dropped)


class _Counts:
    """Chains using each tool, and chains in which each ordered pair is an edge (each once per chain)."""

    def __init__(self, chains: Sequence[tuple[ToolKey, ...]]):
        self.uses: Counter[ToolKey] = Counter(tool for chain in chains for tool in set(chain))
        self.precedes: Counter[tuple[ToolKey, ToolKey]] = Counter(edge for chain in chains for edge in _edges(chain))

    def habits(self, share: float, min_uses: int) -> list[Habit]:
        found = []
        for (before, after), count in self.precedes.items():
            uses = self.uses[after]
            if uses >= min_uses and count / uses >= share:
                found.append(Habit(before, after, round(count / uses, 4), uses))
        return sorted(found, key=lambda habit: (-habit.share, -habit.uses, _pretty(habit.after), _pretty(habit.before)))


def _habits(chains: Sequence[tuple[ToolKey, ...]], share: float, min_uses: int) -> tuple[tuple[Habit, ...], tuple[Habit, ...]]:
    """The habits of ``chains`` at ``(share, min_uses)``, strongest first, without cycles: a habit
    that would close one with stronger habits is dropped (returned second)."""
    kept: list[Habit] = []
    dropped: list[Habit] = []
    for habit in _Counts(chains).habits(share, min_uses):
        if _reaches(kept, habit.after, habit.before):
            dropped.append(habit)
        else:
            kept.append(habit)
    return tuple(kept), tuple(dropped)


def _reaches(habits: Sequence[Habit], start: ToolKey, goal: ToolKey) -> bool:
    """Whether ``goal`` must run after ``start`` by ``habits`` (``start`` before ... before ``goal``)."""
    following: dict[ToolKey, list[ToolKey]] = {}
    for habit in habits:
        following.setdefault(habit.before, []).append(habit.after)
    seen, frontier = {start}, [start]
    while frontier:
        for tool in following.get(frontier.pop(), []):
            if tool == goal:
                return True
            if tool not in seen:
                seen.add(tool)
                frontier.append(tool)
    return False


def _measure(counts: _Counts, validation: Sequence[tuple[ToolKey, ...]], share: float, min_uses: int) -> GridPoint:
    habits = counts.habits(share, min_uses)
    by_after: dict[ToolKey, list[ToolKey]] = {}
    for habit in habits:
        by_after.setdefault(habit.after, []).append(habit.before)
    predicted = right = true = 0
    for chain in validation:
        edges = _edges(chain)
        guessed = {(before, after) for after in set(chain) for before in by_after.get(after, [])}
        predicted += len(guessed)
        right += len(guessed & edges)
        true += len(edges)
    precision = right / predicted if predicted else 0.0
    recall = right / true if true else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return GridPoint(share, min_uses, len(habits), round(precision, 4), round(recall, 4), round(f1, 4))


def _edges(chain: Sequence[ToolKey]) -> set[tuple[ToolKey, ToolKey]]:
    return {(before, after) for before, after in zip(chain, chain[1:]) if before != after}


def _held_back_fraction(index: int, seed: int) -> float:
    """A number in [0, 1) fixed by ``seed`` and the chain's position: the chain is held back when it
    is below the fraction asked for. By position, not by the chain's tools: chains with the same
    tools (a frequent pattern) must fall on both sides, or the held-back part would hold only
    patterns the learning part never saw."""
    text = f"{seed}|{index}"
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") / 2**64


def _checked(chain: Sequence[ToolKey], index: int) -> tuple[ToolKey, ...]:
    if isinstance(chain, (str, bytes)) or not isinstance(chain, Sequence):
        raise PrerequisiteError(f"chain {index} is {type(chain).__name__}; a chain is a list of (server, name) pairs")
    for position, entry in enumerate(chain):
        if not (isinstance(entry, tuple) and len(entry) == 2 and (entry[0] is None or isinstance(entry[0], str)) and isinstance(entry[1], str) and entry[1]):
            raise PrerequisiteError(f"chain {index}, tool {position}: {entry!r} is not a (server, name) pair; server may be None, name is non-empty text")
    return tuple(chain)


def _lookup(registry: ToolRegistry, key: ToolKey):
    try:
        return registry.get_tool_by_server_and_name(*key)
    except ToolNotFoundError:
        raise PrerequisiteError(f"a habit names tool {_pretty(key)}, which the registry does not hold; load its catalog") from None


def _pretty(key: ToolKey) -> str:
    server, name = key
    return f"{server}/{name}" if server else name
