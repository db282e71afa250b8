"""``toolpath history``: the local user's record of use (:mod:`toolpath.planner.tasks.record_of_use`),
newest first; ``--clear`` deletes it."""

from __future__ import annotations

import argparse
from datetime import datetime

from toolpath.planner.interfaces.cli.shared import add_command, emit_json, positive_count

HISTORY_EXAMPLES = """examples:
  toolpath history
  toolpath history --limit 5 --json
  toolpath history --clear
  TOOLPATH_RECORD=off toolpath run "..."    (this run is not recorded)"""


def add_history_parser(commands: argparse._SubParsersAction) -> None:
    """Add ``toolpath history`` to ``commands``, run by :func:`command_history`."""
    history = add_command(
        commands,
        "history",
        "List your record of use (the tasks you planned and ran, newest first), or clear it.",
        command_history,
        HISTORY_EXAMPLES,
        catalogs=False,
    )
    history.add_argument("--limit", type=positive_count, default=20, metavar="N", help="show the N newest entries (default 20)")
    history.add_argument("--clear", action="store_true", help="delete your entries (only yours; asks nothing) and say how many there were")
    history.add_argument(
        "--store",
        metavar="LOCATION",
        help="the store to read: a SQLite file or a postgresql:// URL (default: $TOOLPATH_STORE, else toolpath.db in $TOOLPATH_HOME)",
    )


def command_history(arguments: argparse.Namespace) -> int:
    from toolpath.planner.tasks.record_of_use import clear, history, local_user

    user = local_user()
    if arguments.clear:
        deleted = clear(arguments.store, user)
        if arguments.json:
            emit_json({"user": user, "deleted": deleted})
        else:
            print(f"deleted {deleted} entr{'y' if deleted == 1 else 'ies'} of {user}'s record of use")
        return 0
    entries = history(arguments.store, user, arguments.limit)
    if arguments.json:
        emit_json({"user": user, "entries": [entry.to_dict() for entry in entries]})
        return 0
    if not entries:
        print(f"{user}'s record of use is empty")
    for entry in entries:
        when = datetime.fromtimestamp(entry.recorded_at).strftime("%Y-%m-%d %H:%M:%S")
        asked = repr(entry.request) if entry.request is not None else " / ".join(entry.steps) or ("goal " + ", ".join(entry.edits.goal))
        tools = entry.ran if entry.outcome == "ran" else entry.shown
        print(f"{when}  {entry.interface:<6} {entry.outcome:<8} {asked}")
        if tools:
            print(f"    {'ran' if entry.outcome == 'ran' else 'plan'}: {' -> '.join(tools)}")
        for words, counts in (("retried", entry.retries), ("injected failures", entry.injected_failures)):
            if counts:
                print(f"    {words}: {', '.join(f'{tool} {count}' for tool, count in counts.items())}")
        if entry.edits.avoid:
            print(f"    avoiding: {', '.join(entry.edits.avoid)}")
        if entry.detail:
            print(f"    {entry.detail}")
    return 0
