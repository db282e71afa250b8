"""The parts of a task, as data: what each part matched, and the inputs their words give.

A task is split into parts and each is matched in :mod:`toolpath.planner.tasks.matching`; the parts
are planned jointly in :mod:`toolpath.planner.tasks.joint_planning`. A :class:`PartMatch` is one
part's outcome: an action with its chosen goal (or why nothing matched), or a fact or context that
runs nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from toolpath.planner.planning.inputs import InputError, input_for
from toolpath.planner.planning.plans import Plan, qualified_name
from toolpath.planner.tasks.clauses import Kind
from toolpath.planner.tasks.goals import GoalChoice, UnclearEffectError, hit_label
from toolpath.registry import ToolDefinition

if TYPE_CHECKING:
    from toolpath.planner.tasks.named_kinds import KindLookup
    from toolpath.planner.tasks.sources import SourceReading

Status = Literal["matched", "held", "unmatched", "fact", "context"]
#: How a part of a task ends: planned (a tool runs for it, or its goal is held), a fact or context
#: (it runs nothing and says what it holds), or not understood (why, and the closest candidates).
Fate = Literal["planned", "fact", "context", "not understood"]


@dataclass(frozen=True)
class Overridden:
    """A value the task's words name that an input given for the same parameter replaced.

    Attributes:
        input: the input's name (``path``, ``tabular.load_table.path``).
        named: the value the words name.
        given: the value the input gives, which is the one used.
    """

    input: str
    named: str
    given: Any

    def to_dict(self) -> dict:
        return {"input": self.input, "named": self.named, "given": self.given, "used": "given", "why": OVERRIDE_REASON}


#: Why an input wins over a value the words name: it was given for this very parameter, on purpose.
OVERRIDE_REASON = "a value given as an input is meant for this parameter, so it is used rather than the one the task's words name"


@dataclass(frozen=True)
class PartMatch:
    """One part of a task and what it matched.

    Attributes:
        text: the part's words.
        choice: the goal chosen for it (``None`` when nothing matched, and for facts and context).
        problem: why nothing matched (no skill close enough, or none reachable).
        kind: ``"action"``, ``"fact"`` or ``"context"`` (:mod:`toolpath.planner.tasks.clauses`).
        why: why it is a fact or context, or how its words were put together.
        holds: the input states it holds: a fact's, or the one an action's own value stands for
            (:mod:`toolpath.planner.tasks.matching`).
        values: the inputs its value gives, as ``((name, value), ...)``.
        unclear: for an action not understood because its goal runs a tool with effects on an
            unclear match, that refusal with the candidates a person may choose from
            (:class:`toolpath.planner.tasks.goals.UnclearEffectError`); else ``None``.
        closest: for a part not understood, the closest candidates in words
            (``"state tabular.rows_counted (similarity 0.31)"``), best first.
        overridden: the values its words name that the caller's inputs replaced (:class:`Overridden`).
        source: for a part read as a head and the source of the thing it asks about ("who directed
            *the film that is most popular right now*"), that reading: the source's tools run
            before the head's goal (:mod:`toolpath.planner.tasks.sources`); else ``None``.
        name_kind: for a part whose goal was chosen by the kind of a thing it names ("pictures of
            Tilda Swinton": a person's), that thing's lookup (:mod:`toolpath.planner.tasks.named_kinds`);
            else ``None``.
    """

    text: str
    choice: GoalChoice | None
    problem: str = ""
    kind: Kind = "action"
    why: str = ""
    holds: frozenset[str] = frozenset()
    values: tuple[tuple[str, str], ...] = ()
    unclear: UnclearEffectError | None = None
    closest: tuple[str, ...] = ()
    overridden: tuple[Overridden, ...] = ()
    source: SourceReading | None = None
    name_kind: KindLookup | None = None

    @property
    def fate(self) -> Fate:
        """How the part ends: ``"planned"`` (matched, or its goal already held), ``"fact"``,
        ``"context"``, or ``"not understood"`` (an action that matched nothing: see ``problem``)."""
        if self.kind != "action":
            return self.kind
        return "not understood" if self.choice is None else "planned"

    def fate_text(self) -> str:
        """The part's fate in words: what it plans, holds or why it is not understood."""
        if self.kind == "fact":
            return f"a fact: holds {', '.join(sorted(self.holds))}" if self.holds else "a fact: holds nothing"
        if self.kind == "context":
            return "context (when or why): runs nothing"
        if self.choice is None:
            closest = f"; closest: {', '.join(self.closest)}" if self.closest else ""
            return f"not understood: {self.problem}{closest}"
        target = f"runs {qualified_name(self.tool)}" if self.tool is not None else f"reaches {', '.join(sorted(self.goal))}"
        return f"planned: {target}" + ("; already held, nothing to run for it" if self.status == "held" else "")

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

    @property
    def through(self) -> tuple[ToolDefinition, ...]:
        """The tools its plan runs because they add columns its words name (``GoalCandidate.through``),
        or because they find the thing its words name by its source (:attr:`source`) or look up a
        thing it names by its kind (:attr:`name_kind`)."""
        if self.choice is None:
            return ()
        found = (*self.source.tools, *self.choice.chosen.through) if self.source is not None else self.choice.chosen.through
        return (self.name_kind.tool, *found) if self.name_kind is not None else found

    def to_dict(self) -> dict:
        chosen = self.choice.chosen if self.choice is not None else None
        return {
            "part": self.text,
            "kind": self.kind,
            "fate": self.fate,
            "status": self.status,
            "why": self.why or None,
            "matched": chosen.hit.to_dict() if chosen is not None else None,
            "goal": sorted(self.goal),
            "must_run": qualified_name(self.tool) if self.tool is not None else None,
            "through": [qualified_name(tool) for tool in self.through],
            "holds": sorted(self.holds),
            "inputs": dict(self.values),
            "alternatives": [candidate.to_dict() for candidate in self.choice.passed_over] if self.choice is not None else [],
            "effects_evidence": self.choice.effects_evidence or None if self.choice is not None else None,
            "direction": self.choice.direction or None if self.choice is not None else None,
            "near_duplicate": self.choice.near_duplicate.to_dict() if self.choice is not None and self.choice.near_duplicate is not None else None,
            "problem": self.problem or None,
            "candidates": [hit_label(hit) for hit in self.unclear.candidates] if self.unclear is not None else [],
            "closest": list(self.closest),
            "overridden": [override.to_dict() for override in self.overridden],
            "source": self.source.to_dict() if self.source is not None else None,
            "name_kind": self.name_kind.to_dict() if self.name_kind is not None else None,
        }


def refuse_competing_values(matches: Sequence[PartMatch], inputs: Mapping[str, Any] | None) -> None:
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
    :meth:`toolpath.planner.tasks.matching.PartMatcher.choose`); the caller's own inputs win. With ``plan``, only
    the values some step of it takes: the others are no input of the user's to report unused."""
    given = {name: value for part in parts for name, value in part.values}
    if plan is not None:
        given = {
            name: value
            for name, value in given.items()
            if any(input_for(step.tool, parameter, {name: value}) for step in plan.steps for parameter in step.tool.parameters)
        }
    return {**given, **(inputs or {})}
