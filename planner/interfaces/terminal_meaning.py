"""Asking on a terminal which goal an unclear part meant, for ``toolpath run`` and ``toolpath cell``.

A part whose goal would run a tool with effects on a weak or ambiguous match is not understood
(:class:`toolpath.planner.tasks.goals.UnclearEffectError`). On a terminal the person is shown the
candidates and picks one, or none; the task is then planned again with the answer
(``Workspace.plan_task(meant=...)``). Without a terminal nobody can be asked: the part's refusal,
naming the candidates, is the answer.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

from toolpath.planner.tasks.goals import UnclearEffectError, hit_label

if TYPE_CHECKING:
    from toolpath.planner.tasks.task import TaskPlan


def plan_asking(plan: Callable[[], TaskPlan], meant: dict[str, str], stdin: TextIO | None = None, stderr: TextIO | None = None) -> TaskPlan:
    """``plan()``, asking on the terminal about each unclear part and planning again with the answers.

    Args:
        plan: plans the task with the answers in ``meant`` (e.g. ``lambda: workspace.plan_task(task, inputs, meant=meant)``).
        meant: the answers so far, ``{part's words: label of the candidate meant, or ""}``; the
            answers given here are added to it, so later plans of the same task reuse them.
        stdin, stderr: where answers are read and questions written (default the process's).

    Returns:
        The task's plan once no part is unclear, or once every unclear part was asked about.

    Raises:
        UnclearEffectError: a part is unclear and standard input is not a terminal (or was asked
            about already and is unclear again).
        NeitherMeantError: the person answered that a one-part task means none of the candidates.
    """
    stdin, stderr = stdin or sys.stdin, stderr or sys.stderr
    while True:
        try:
            task_plan = plan()
        except UnclearEffectError as error:
            questions = [error]
        else:
            questions = [part.unclear for part in task_plan.parts if part.unclear is not None]
            if not questions:
                return task_plan
        unasked = [question for question in questions if question.task not in meant]
        if not unasked or not stdin.isatty():
            raise (unasked or questions)[0]
        for question in unasked:
            meant[question.task] = _ask(question, stdin, stderr)


def _ask(question: UnclearEffectError, stdin: TextIO, stderr: TextIO) -> str:
    """The label of the candidate the person picks, or "" for none (also for an answer that picks none)."""
    effects = ", ".join(f"{tool} ({effect})" for tool, effect in question.effects)
    lines = [f"\nThe part {question.task!r} is not clear enough to run {effects}. Which did you mean?"]
    for number, hit in enumerate(question.candidates, 1):
        runs = f", runs {effects}" if number == 1 else ""
        lines.append(f"  {number}. {hit_label(hit)}: {hit.matched!r}{runs}")
    lines.append("  0. none of these")
    stderr.write("\n".join(lines) + f"\n  Answer [0-{len(question.candidates)}]: ")
    stderr.flush()
    answer = stdin.readline().strip()
    if answer.isdigit() and 1 <= int(answer) <= len(question.candidates):
        return hit_label(question.candidates[int(answer) - 1])
    return ""
