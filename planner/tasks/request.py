"""A request as planning takes it: checked once, before anything loads, and read into clauses once.

:meth:`TaskRequest.read` refuses what no planning could serve (an empty or oversized task, a bad input,
an unknown held state, a text that only tells facts) before the skill index is built or the query
model loaded, and keeps the clauses it read (:func:`toolpath.planner.tasks.clauses.read_request`) for
the matching of :mod:`toolpath.planner.tasks.matching`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from toolpath.planner.planning.graph import StateGraph
from toolpath.planner.planning.inputs import InputError, check_input_names, plain_value
from toolpath.planner.search.skills import QueryError, check_text
from toolpath.planner.tasks.clauses import Clause, action_words, read_request
from toolpath.planner.tasks.language import check_english

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


@dataclass(frozen=True)
class TaskRequest:
    """A task as planning takes it (make one with :meth:`read`).

    Attributes:
        task: the task in words, or its steps (a tuple).
        text: the task as one text (steps joined: :func:`task_text`), the one its cell quotes.
        inputs: ``{name: value}`` the task gives, or ``None``.
        held: the states the caller says are held; they stay held whatever the inputs give.
        clauses: the task's clauses in order: a text's as read
            (:func:`toolpath.planner.tasks.clauses.read_request`), or one action per step.
    """

    task: str | tuple[str, ...]
    text: str
    inputs: Mapping[str, Any] | None
    held: frozenset[str]
    clauses: tuple[Clause, ...]

    @property
    def free_text(self) -> bool:
        """The task is words (read into clauses), not an agent's own steps (taken as given)."""
        return isinstance(self.task, str)

    @classmethod
    def read(cls, graph: StateGraph, task: object, inputs: Mapping[str, Any] | None = None, held: str | Collection[str] = ()) -> TaskRequest:
        """Check a task, its inputs and held states (one held state may be a plain string), and read
        a text into clauses with the verbs of ``graph``'s catalogs
        (:func:`toolpath.planner.tasks.clauses.action_words`).

        Raises:
            UnknownStateError: an unknown held state. TypeError: a held state that is not a string.
            InputError: inputs that are not a mapping, a bad input name, or a value with no literal form
                (:func:`toolpath.planner.planning.inputs.plain_value`): refused here, whatever the
                plan, so no goal is passed over for it.
            QueryError: a task that is not a non-empty text or a list of non-empty step texts; a
                text with a control character or bytes that were not UTF-8
                (:func:`toolpath.planner.search.skills.check_text`); a task over
                :data:`MAX_TASK_CHARS` characters, :data:`MAX_TASK_PARTS` parts or
                :data:`MAX_TASK_STEPS` steps (the message gives the limit and the task's size); a
                text that only tells facts and asks for nothing.
            NotEnglishError: a task written in another language than English
                (:func:`toolpath.planner.tasks.language.check_english`); no part of it is matched.
        """
        states = [held] if isinstance(held, str) else list(held) if isinstance(held, Iterable) else [held]
        if not all(isinstance(state, str) for state in states):
            raise TypeError(f"held states are state tokens (strings), one or a list of them; got {held!r}")
        held = frozenset(states)
        graph.check_states(held)
        if inputs is not None and not isinstance(inputs, Mapping):
            raise InputError(f"inputs are a mapping of input names to values, like {{'smiles': 'CCO'}}; got {type(inputs).__name__}")
        check_input_names(inputs or {})
        for name, value in (inputs or {}).items():
            plain_value(value, name)
        if isinstance(task, str):
            return cls(task, task, inputs, held, _text_clauses(task, graph))
        steps = _checked_steps(task)
        check_english(task_text(steps))
        return cls(steps, task_text(steps), inputs, held, tuple(Clause(step) for step in steps))


def _text_clauses(task: str, graph: StateGraph) -> tuple[Clause, ...]:
    if not task.strip():
        raise QueryError("the task is empty; describe what you want to achieve")
    _check_size(len(task))
    check_text(task, "task")
    check_english(task)
    clauses = tuple(read_request(task, action_words(graph)))
    if len(clauses) > MAX_TASK_PARTS:
        raise QueryError(
            f"the task has {len(clauses)} parts (cut at sentences, lines, 'and', 'then' and commas), more than the {MAX_TASK_PARTS} a task may have; {_SPLIT_IT}"
        )
    if not clauses:
        return (Clause(task.strip()),)  # no words to read: the search says what it matches
    if not any(clause.kind == "action" for clause in clauses):
        told = "; ".join(repr(clause.text) for clause in clauses)
        raise QueryError(f"the task only tells ({told}) and asks for nothing; say what to do, e.g. 'caption it'")
    return clauses


def _checked_steps(task: object) -> tuple[str, ...]:
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


def task_text(task: str | Iterable[str]) -> str:
    """The task as one line of text: itself, or the agent's steps joined by "; "."""
    return task if isinstance(task, str) else "; ".join(task)
