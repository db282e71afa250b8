"""What the record of use teaches (:mod:`toolpath.planner.tasks.record_of_use`): the runs a user
accepted or corrected, as labelled examples for ``toolpath learn``."""

from __future__ import annotations

import os
from collections.abc import Sequence

from toolpath.planner.learning.examples import LabelledExample
from toolpath.planner.tasks.record_of_use import RecordedUse, history
from toolpath.registry.database import Database

#: Seconds within which a run given as steps or goals, after a request that was not run, is taken
#: as the user's correction of that request (:func:`labelled_examples`): long enough to read a plan
#: and write steps instead, short enough that an unrelated later task is not taken for one.
CORRECTION_WINDOW_SECONDS = 600.0


def labelled_examples(store: Database | str | os.PathLike[str] | None, user: str) -> list[LabelledExample]:
    """What ``user``'s record teaches, as labelled examples for ``toolpath learn``, oldest first.

    Which outcomes label what:

    * an entry that **ran** (the cell ran through) with a request: the request, labelled with the
      tools that ran, in order (the user accepted the plan shown, or their ``--avoid`` edit of it);
    * an entry that **ran** with steps given: the steps with their tools, when each step's part has
      exactly one tool; otherwise nothing from the steps themselves;
    * a **correction**: a request that did not run (``planned``, ``refused``, ``failed``, ``denied``,
      ``paused``) followed, through the same interface and session, within
      :data:`CORRECTION_WINDOW_SECONDS` and with no other request between, by an entry given as
      steps or goal states that **ran**: the request, labelled with what that entry ran;
    * ``planned``, ``failed``, ``denied``, ``paused`` and ``refused`` entries label nothing
      themselves, and nothing is labelled from silence: a tool is only ever a label when it ran
      in a plan shown to the user (a tool never shown, or shown and not run, is never one).

    Texts are as recorded (values replaced by their kinds unless ``TOOLPATH_RECORD=values``).

    Raises:
        registry.storage.StoreError: the store cannot be read.
    """
    entries = list(reversed(history(store, user)))
    examples: list[LabelledExample] = []
    pending: dict[tuple[str, str | None], RecordedUse] = {}  # per interface and session: the request not run
    for entry in entries:
        chain = (entry.interface, entry.session)
        ran = tuple(tool for tool in entry.ran if tool in entry.shown) if entry.outcome == "ran" else ()
        source = f"record entry {entry.entry_id}"
        if entry.request is not None:
            pending.pop(chain, None)
            if ran:
                examples.append(LabelledExample(tools=ran, request=entry.request, links=_straight_line(ran), source=source))
            elif entry.outcome != "ran":
                pending[chain] = entry
            continue
        if not ran:
            continue
        if entry.steps:
            step_tools = [part.get("tools") or [] for part in entry.parts]
            if len(step_tools) == len(entry.steps) and all(len(tools) == 1 for tools in step_tools):
                examples.append(LabelledExample(tools=tuple(tools[0] for tools in step_tools), steps=entry.steps, source=source))
        corrected = pending.pop(chain, None)
        if corrected is not None and entry.recorded_at - corrected.recorded_at <= CORRECTION_WINDOW_SECONDS:
            source = f"record entry {corrected.entry_id}, corrected by {entry.entry_id}"
            examples.append(LabelledExample(tools=ran, request=corrected.request, links=_straight_line(ran), source=source))
    return examples


def _straight_line(tools: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """The edges of a chain run in order, as a labelled examples file's line without ``links`` has
    them: without them, every tool of the chain would count as one it ends with, and the request
    would teach the states of its first tools too."""
    return tuple(zip(tools, tools[1:]))
