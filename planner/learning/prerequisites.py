"""Prerequisite habits: a tool that, in the chains people ran, directly precedes another in most of
the other's uses (issue 34's rule, ``benchmarks/taskplan_catalogs.py``: share ≥ 0.6 of at least 10
uses, chosen on UltraTool's training requests). The thresholds are checked on a held-back fraction
of the chains: the share each habit keeps there is reported beside them.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

#: A tool as ``(server, name)``.
ToolKey = tuple[str, str]

#: Issue 34's thresholds (see the module docstring).
MIN_SHARE = 0.6
MIN_USES = 10


class Habit(NamedTuple):
    """``before`` directly preceded ``after`` in ``share`` of ``after``'s ``uses`` chains."""

    before: ToolKey
    after: ToolKey
    share: float
    uses: int


@dataclass(frozen=True)
class PrerequisiteHabits:
    """The habits kept, the thresholds they passed, and how they held on the held-back chains
    (``validation``: ``held_back_chains``, and ``held_back_share``, the share of the held-back uses
    of each habit's ``after`` that ``before`` preceded, pooled; absent without held-back uses)."""

    habits: tuple[Habit, ...]
    thresholds: dict[str, float] = field(default_factory=dict)
    validation: dict[str, float] = field(default_factory=dict)


def _held_back(chain: Sequence[ToolKey], fraction: float, seed: int) -> bool:
    digest = hashlib.sha256(f"{seed}:{chain!r}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < fraction


def _counts(chains: Sequence[Sequence[ToolKey]]) -> tuple[Counter, Counter]:
    uses: Counter = Counter()
    precedes: Counter = Counter()
    for chain in chains:
        uses.update(set(chain))
        precedes.update({(before, after) for before, after in zip(chain, chain[1:]) if before != after})
    return uses, precedes


def learn_prerequisites(chains: list[list[ToolKey]], held_back: float = 0.2, seed: int = 0) -> PrerequisiteHabits:
    """Habits of ``chains`` (each the tools of one request, in the order they ran).

    ``held_back`` of the chains (chosen by a hash of the chain and ``seed``, so the same each run)
    are kept out of learning and measure the habits found on the rest.

    Raises:
        ValueError: ``held_back`` is outside [0, 1).
    """
    if not 0 <= held_back < 1:
        raise ValueError(f"held_back must be within [0, 1), got {held_back}")
    learning = [chain for chain in chains if not _held_back(chain, held_back, seed)]
    measuring = [chain for chain in chains if _held_back(chain, held_back, seed)]
    uses, precedes = _counts(learning)
    habits = tuple(
        Habit(before, after, round(count / uses[after], 4), uses[after])
        for (before, after), count in sorted(precedes.items())
        if uses[after] >= MIN_USES and count / uses[after] >= MIN_SHARE
    )
    validation: dict[str, float] = {"held_back_chains": len(measuring)}
    held_uses, held_precedes = _counts(measuring)
    total = sum(held_uses[habit.after] for habit in habits)
    if total:
        validation["held_back_share"] = round(sum(held_precedes[(habit.before, habit.after)] for habit in habits) / total, 4)
    return PrerequisiteHabits(habits, {"min_share": MIN_SHARE, "min_uses": MIN_USES}, validation)
