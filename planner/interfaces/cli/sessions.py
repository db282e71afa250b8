"""``toolpath sessions``: the sessions in the store, for an operator (:mod:`toolpath.planner.tasks.stored_sessions`).

``list`` (owner, last use, kernel alive, snapshot size, held states), ``show ID`` (its variables'
names, sizes and states, never their values; approvals pending and answered; recent runs) and
``close ID`` (stops its kernel through its holder, removes it from the store; asks first, or
``--yes``). Each takes ``--json`` (one object) and ``--store``.

It runs with the store's rights, not a user's: whoever can open the store (the SQLite file, mode
0600; the PostgreSQL role of the URL) sees and closes every user's sessions.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from datetime import datetime

from toolpath.errors import Refusal
from toolpath.planner.interfaces.cli.shared import CommandLineError, emit_json, non_negative_count

SESSIONS_EXAMPLES = """examples:
  toolpath sessions list
  toolpath sessions list --owner alice --json
  toolpath sessions show agent-7
  toolpath sessions close agent-7            (asks first, on a terminal)
  toolpath sessions close agent-7 --yes      (for scripts)
  toolpath sessions list --store postgresql://toolpath@db.internal/toolpath

It acts with the store's rights: every user's sessions are listed, shown and closed. Closing a
session that runs a kernel voids its holder's hold on it; that process stops the kernel when it
next renews the hold (within its lease, 30 s by default)."""

_STORE_HELP = "the store: a SQLite file or a postgresql:// URL (default: $TOOLPATH_STORE, else toolpath.db in $TOOLPATH_HOME); a SQLite file that does not exist is not made"


class NotConfirmedError(Refusal):
    """The operator did not confirm closing a session; nothing was changed."""


def add_sessions_parser(commands: argparse._SubParsersAction) -> None:
    """Add ``toolpath sessions list|show|close`` to ``commands``."""
    help_text = "List the sessions in the store, show one, or close one (for the operator of toolpath serve)."
    sessions = commands.add_parser(
        "sessions", help=help_text, description=help_text, epilog=SESSIONS_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    verbs = sessions.add_subparsers(dest="sessions_command", required=True, metavar="list|show|close")

    listing = _verb(verbs, "list", "Every session in the store, most recently used first: owner, last use, kernel, snapshot size, held states.", command_list)
    listing.add_argument("--owner", metavar="USER", help="only the sessions of this user id")

    showing = _verb(
        verbs,
        "show",
        "One session: its kernel, its snapshot's variables (names, sizes, the states they carry; never values), approvals pending and answered, recent runs.",
        command_show,
    )
    showing.add_argument("session_id", metavar="SESSION_ID", help="the session's id, as `toolpath sessions list` shows it")
    showing.add_argument("--runs", type=non_negative_count, default=10, metavar="N", help="show its N newest runs (default 10; 0: none)")
    showing.add_argument("--approvals", type=non_negative_count, default=20, metavar="N", help="show its N newest approval decisions (default 20; 0: none)")

    closing = _verb(
        verbs,
        "close",
        "Close a session: stop its kernel (its holder does, at its next lease renewal) and remove its owner and snapshot from the store; its approval decisions and record of use are kept.",
        command_close,
    )
    closing.add_argument("session_id", metavar="SESSION_ID", help="the session's id, as `toolpath sessions list` shows it")
    closing.add_argument("--yes", action="store_true", help="close it without asking (needed without a terminal, and with --json)")


def _verb(verbs: argparse._SubParsersAction, name: str, help_text: str, handler) -> argparse.ArgumentParser:
    verb = verbs.add_parser(name, help=help_text, description=help_text, epilog=SESSIONS_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    verb.set_defaults(handler=handler)
    verb.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    verb.add_argument("--store", metavar="LOCATION", help=_STORE_HELP)
    return verb


def command_list(arguments: argparse.Namespace) -> int:
    from toolpath.planner.tasks.stored_sessions import list_sessions, store_exists, store_name

    store = store_name(arguments.store)
    exists = store_exists(arguments.store)
    sessions = list_sessions(arguments.store, arguments.owner)
    if arguments.json:
        emit_json({"store": store, "exists": exists, "sessions": [session.to_dict() for session in sessions]})
        return 0
    if not exists:
        print(f"there is no store at {store} (nothing was made there); --store or $TOOLPATH_STORE names another")
        return 0
    if not sessions:
        whose = f" of {_plain(arguments.owner)}" if arguments.owner is not None else ""
        print(f"no sessions{whose} in the store {store}")
        return 0
    rows = [("SESSION", "OWNER", "LAST USE", "KERNEL", "SNAPSHOT", "HELD STATES")]
    for session in sessions:
        held = ", ".join(session.held[:3]) + (f" (+{len(session.held) - 3})" if len(session.held) > 3 else "")
        rows.append(
            (
                _plain(session.session_id),
                _plain(session.owner) if session.owner is not None else "(nobody)",
                _when(session.last_used),
                _kernel_word(session.kernel.alive),
                f"{_size(session.snapshot_bytes)} ({session.variables})" if session.saved else "-",
                (held or "-") + (" [paused]" if session.paused else "") + (" [unreadable]" if session.problem else ""),
            )
        )
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]) - 1)]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[-1])
    print(f"{len(sessions)} session{'' if len(sessions) == 1 else 's'} in the store {store}; `toolpath sessions show ID` shows one")
    return 0


def command_show(arguments: argparse.Namespace) -> int:
    from toolpath.planner.tasks.stored_sessions import show_session, store_name

    details = show_session(arguments.store, arguments.session_id, runs=arguments.runs, decisions=arguments.approvals)
    summary = details.summary
    if arguments.json:
        emit_json({"store": store_name(arguments.store), "session": details.to_dict()})
        return 0
    print(f"session {_plain(summary.session_id)}")
    print(f"  owner: {_plain(summary.owner) if summary.owner is not None else '(nobody: made without a user id)'}")
    print(f"  last use: {_when(summary.last_used)}")
    print(f"  kernel: {_kernel_word(summary.kernel.alive)} ({_plain(summary.kernel.why)})")
    if summary.saved:
        print(f"  snapshot: {summary.variables} variable record(s), {_size(summary.snapshot_bytes)}, written {_when(summary.saved)}")
    else:
        print("  snapshot: none")
    if summary.problem:
        print(f"  unreadable: {_plain(summary.problem)}")
    print(f"  held states: {', '.join(summary.held) or '-'}")
    if details.domains:
        print(f"  domains: {', '.join(details.domains)}")
    if details.variables:
        print("  variables (names, sizes and the states they carry; never values):")
        for variable in details.variables:
            carries = "; ".join(f"{state} at {path}" if path else state for state, path in variable.carries)
            print(f"    {_plain(', '.join(variable.names))}  {_size(variable.bytes)}" + (f"  carries {_plain(carries)}" if carries else ""))
    if details.not_saved:
        print(f"  not saved by its last snapshot: {_plain(', '.join(details.not_saved))}")
    for pending in details.pending:
        print(
            f"  approval pending: {_plain(pending['tool'])} at step {pending['step'] + 1} ({_plain(pending['reason'])}; arguments' digest {pending['digest'][:12]})"
        )
    if details.decisions_total:
        shown = f", the {len(details.decisions)} newest" if len(details.decisions) < details.decisions_total else ""
        print(f"  approvals answered ({details.decisions_total}{shown}, newest first):")
        for decision in details.decisions:
            note = f": {_plain(decision.note)}" if decision.note else ""
            who = f" for {_plain(decision.user_id)}" if decision.user_id else ""
            print(f"    {_when(decision.decided_at)}  {decision.decision:<8} {_plain(decision.tool)}{who} by {_plain(decision.decided_by)}{note}")
    if details.runs:
        print("  recent runs (newest first):")
        for run in details.runs:
            asked = repr(run.request) if run.request is not None else " / ".join(run.steps) or "-"
            tools = run.ran if run.outcome == "ran" else run.shown
            print(f"    {_when(run.recorded_at)}  {run.interface:<6} {run.outcome:<8} {_plain(run.user)}: {_plain(asked)}")
            if tools:
                print(f"      {'ran' if run.outcome == 'ran' else 'plan'}: {' -> '.join(tools)}")
    if summary.session_id.isprintable():
        print(f"close it: toolpath sessions close {shlex.quote(summary.session_id)}")
    return 0


def command_close(arguments: argparse.Namespace) -> int:
    from toolpath.planner.tasks.stored_sessions import close_session, find_session

    if not arguments.yes:
        if arguments.json:
            raise CommandLineError("--json needs --yes: nobody can answer whether to close the session; nothing was changed")
        if not sys.stdin.isatty():
            raise CommandLineError("there is no terminal to ask whether to close the session; give --yes to close it without asking. Nothing was changed")
        summary = find_session(arguments.store, arguments.session_id)
        owner = _plain(summary.owner) if summary.owner is not None else "nobody"
        snapshot = f"its snapshot ({summary.variables} variable record(s), {_size(summary.snapshot_bytes)})" if summary.saved else "its owner record"
        sys.stderr.write(
            f"Close session {_plain(summary.session_id)} of {owner}? Its kernel is {_kernel_word(summary.kernel.alive)}; {snapshot} will be deleted. [y/N] "
        )
        sys.stderr.flush()
        if sys.stdin.readline().strip().lower() not in ("y", "yes"):
            raise NotConfirmedError(f"session {_plain(summary.session_id)} was not closed: the answer was not yes")
    closed = close_session(arguments.store, arguments.session_id)
    if arguments.json:
        from toolpath.planner.tasks.stored_sessions import store_name

        emit_json({"store": store_name(arguments.store), **closed.to_dict()})
        return 0
    summary = closed.summary
    removed = f"its snapshot ({summary.variables} variable record(s), {_size(summary.snapshot_bytes)}) and owner" if summary.saved else "its owner record"
    print(f"closed session {_plain(summary.session_id)}: removed {removed}; {_plain(closed.kernel)}")
    print("kept: its approval decisions (the audit log) and the record of use")
    return 0


def _plain(text: str) -> str:
    """``text`` as the terminal shows it: as is when every character prints, else quoted with
    escapes (ids, owners and notes come from the store, and must not move the cursor or colours)."""
    return text if text.isprintable() else repr(text)


def _kernel_word(alive: bool | None) -> str:
    return {True: "running", False: "stopped"}.get(alive, "unknown")


def _when(moment: float | None) -> str:
    return datetime.fromtimestamp(moment).strftime("%Y-%m-%d %H:%M:%S") if moment else "-"


def _size(count: int) -> str:
    """Bytes in the units a person reads (decimal: kB = 1,000 bytes)."""
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} B"
