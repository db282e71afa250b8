"""``toolpath sessions list|show|close``: what an operator sees of the sessions in a store and how
one is closed, on both engines (a SQLite file and a real PostgreSQL server), and a real session's
kernel stopped by ``close`` from another process."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time

import psutil
import pytest
from test_shared_store import ended_process_holder

from toolpath.kernel.codemode.snapshot_store import SessionHolder, SnapshotStore
from toolpath.kernel.errors import SessionHeldError
from toolpath.kernel.inside.approval_policy import ApprovalRequest
from toolpath.kernel.tools.approval_log import ApprovalLog
from toolpath.planner.interfaces.cli.main import main
from toolpath.planner.tasks.record_of_use import Recorder, RecordSettings, history, wait_for_writes
from toolpath.registry.database import open_database

MOLECULE = "chemistry.molecule_parsed"


def toolpath(capsys, *arguments):
    """Run ``toolpath ARGUMENTS`` in this process: its exit status, standard output and standard error."""
    status = main(list(arguments))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def agent_state(session_id, held=(MOLECULE,), artifacts=None, paused=None):
    """The data an AgentSession saves with its snapshot (SessionState.to_dict's shape)."""
    return {
        "session_id": session_id,
        "held": list(held),
        "artifacts": {"molecule": MOLECULE} if artifacts is None else artifacts,
        "domains": ["chemistry"],
        "kernel_id": "kernel-1",
        "paused": paused,
        "outputs": {},
    }


def record_refusals(location, session_ids):
    """One entry in the record of use for each of ``session_ids``, refused, as alice's over MCP."""
    recorder = Recorder("mcp", store=location, settings=RecordSettings("on"))
    for session_id in session_ids:
        recorder.refused("alice", f"parse the molecule of {session_id}", ValueError("no such tool"), session=session_id)
    wait_for_writes()


def test_list_gives_owner_last_use_kernel_snapshot_size_and_held_states(location, capsys):
    store = SnapshotStore(location)
    store.claim("agent-7", "alice")
    store.save("agent-7", "alice", {"molecule": "d1", "left, right": "d2"}, {"molecule": b"x" * 1500, "left, right": b"yy"}, {}, agent_state("agent-7"))
    store.take("agent-7", SessionHolder.this_process())  # this process runs its kernel
    store.claim("old-run", "bob")
    store.save("old-run", "bob", {"table": "d3"}, {"table": b"z" * 40}, {}, agent_state("old-run", held=(), artifacts={}))
    store.take("old-run", ended_process_holder())  # its process died without letting go
    store.claim("scratch", None)

    status, out, _ = toolpath(capsys, "sessions", "list", "--store", location, "--json")
    assert status == 0
    listing = json.loads(out)
    sessions = {session["session_id"]: session for session in listing["sessions"]}
    assert set(sessions) == {"agent-7", "old-run", "scratch"}
    assert [session["session_id"] for session in listing["sessions"]][-1] == "scratch"  # never used: last
    alice = sessions["agent-7"]
    assert (alice["owner"], alice["kernel_alive"], alice["held"], alice["snapshot_bytes"], alice["snapshot_records"]) == (
        "alice",
        True,
        [MOLECULE],
        1502,
        2,
    )
    assert alice["holder"]["pid"] == os.getpid() and alice["last_used"] >= alice["saved"]
    bob = sessions["old-run"]
    assert bob["kernel_alive"] is False and "has ended without letting go" in bob["kernel"]
    assert sessions["scratch"]["owner"] is None and sessions["scratch"]["saved"] is None and sessions["scratch"]["kernel_alive"] is False

    status, out, _ = toolpath(capsys, "sessions", "list", "--store", location, "--owner", "alice", "--json")
    assert [session["session_id"] for session in json.loads(out)["sessions"]] == ["agent-7"]

    status, out, _ = toolpath(capsys, "sessions", "list", "--store", location)
    lines = {line.split()[0]: line for line in out.splitlines()}
    assert "running" in lines["agent-7"] and "1.5 kB" in lines["agent-7"] and MOLECULE in lines["agent-7"]
    assert "stopped" in lines["old-run"] and "(nobody)" in lines["scratch"]
    assert "3 sessions in the store" in out


def test_show_gives_variables_kinds_approvals_and_runs_never_values(location, capsys):
    session_id = "a_b%"  # like's wildcards: runs of "aXbY" or "A_B%" are not this session's
    store = SnapshotStore(location)
    store.claim(session_id, "alice")
    pickle = b"\x80\x05SECRET-PICKLE" * 10
    paused = {
        "task": "mail SECRET-WORDS to the lab",
        "inputs": {"body": "SECRET-INPUT"},
        "step": 1,
        "tool": "send_mail",
        "remaining": ["mail/send_mail"],
        "request": {"tool": "mail.send_mail", "arguments": {"body": "'SECRET-ARGUMENT'"}, "reason": "it sends mail", "digest": "ab" * 32},
        "tool_calls": {},
    }
    store.save(
        session_id,
        "alice",
        {"molecule": "d1", "notes": "d2"},
        {"molecule": pickle, "notes": b"SECRET-NOTES"},
        {"handle": "it holds an open file SECRET-REASON"},
        agent_state(session_id, paused=paused),
    )
    log = ApprovalLog(open_database(location))
    for user, decision in (("alice", "approved"), ("bob", "denied")):
        log.record(
            ApprovalRequest.of("mail.send_mail", {"body": "SECRET-LOGGED"}, "it sends mail", session_id=session_id, user_id=user), decision, "ok", "desk"
        )
    record_refusals(location, [session_id, "aXbY", "A_B%", "a_b%x"])

    status, out, _ = toolpath(capsys, "sessions", "show", session_id, "--store", location, "--json")
    assert status == 0 and "SECRET" not in out
    shown = json.loads(out)["session"]
    assert [(variable["names"], variable["bytes"]) for variable in shown["variables"]] == [(["molecule"], len(pickle)), (["notes"], 12)]
    assert shown["variables"][0]["carries"] == [{"state": MOLECULE, "path": None}] and shown["variables"][1]["carries"] == []
    assert shown["not_saved"] == ["handle"] and shown["paused"] is True
    assert shown["approvals"]["pending"] == [{"tool": "mail.send_mail", "reason": "it sends mail", "digest": "ab" * 32, "step": 1}]
    assert [(row["user_id"], row["decision"]) for row in shown["approvals"]["answered"]] == [("bob", "denied"), ("alice", "approved")]
    assert shown["approvals"]["answered_total"] == 2
    assert [(run["user"], run["outcome"], run["interface"]) for run in shown["recent_runs"]] == [("alice", "refused", "mcp")]

    status, out, _ = toolpath(capsys, "sessions", "show", session_id, "--store", location, "--approvals", "1", "--runs", "0")
    assert status == 0 and "SECRET" not in out
    assert f"molecule  {len(pickle)} B  carries chemistry.molecule_parsed" in out
    assert "approval pending: mail.send_mail at step 2 (it sends mail" in out
    assert "approvals answered (2, the 1 newest, newest first)" in out and "denied   mail.send_mail for bob by desk: ok" in out
    assert "recent runs" not in out
    assert "close it: toolpath sessions close a_b%" in out


def test_close_removes_the_session_fences_its_holder_and_keeps_the_audit_log_and_record(location, capsys):
    store = SnapshotStore(location)
    store.claim("agent-7", "alice")
    store.save("agent-7", "alice", {"molecule": "d1"}, {"molecule": b"x" * 100}, {}, agent_state("agent-7"))
    taken = store.take("agent-7", SessionHolder.this_process())
    ApprovalLog(open_database(location)).record(
        ApprovalRequest.of("mail.send_mail", {}, "it sends mail", session_id="agent-7", user_id="alice"), "approved", "", "desk"
    )
    record_refusals(location, ["agent-7"])

    status, out, _ = toolpath(capsys, "sessions", "close", "agent-7", "--yes", "--store", location, "--json")
    assert status == 0
    closed = json.loads(out)
    assert (closed["closed"], closed["owner"], closed["removed"], closed["kernel_alive"]) == (
        "agent-7",
        "alice",
        {"snapshot_records": 1, "snapshot_bytes": 100},
        True,
    )
    assert f"process {os.getpid()}" in closed["kernel"] and "stops its kernel when it next renews its hold, within" in closed["kernel"]

    assert json.loads(toolpath(capsys, "sessions", "list", "--store", location, "--json")[1])["sessions"] == []
    status, _, err = toolpath(capsys, "sessions", "show", "agent-7", "--store", location)
    assert status == 2 and "has no session 'agent-7'; nothing was changed" in err
    status, _, err = toolpath(capsys, "sessions", "close", "agent-7", "--yes", "--store", location)
    assert status == 2 and "has no session 'agent-7'" in err

    # The process that held it is refused its next renewal and snapshot, so it lets go of the kernel,
    # even after another process has taken the session anew.
    assert store.renew({"agent-7": taken.generation}) == ["agent-7"]
    later = SnapshotStore(location).take("agent-7", ended_process_holder())
    assert later.generation > taken.generation
    with pytest.raises(SessionHeldError):
        store.save("agent-7", "alice", {"molecule": "d9"}, {"molecule": b"stale"}, {}, None, generation=taken.generation)
    assert store.load("agent-7") is None
    # Kept: the audit log and alice's record of use.
    assert [row.decision for row in ApprovalLog(open_database(location)).decisions("agent-7", "alice")] == ["approved"]
    assert [entry.session for entry in history(location, "alice")] == ["agent-7"]


def test_a_kernel_on_a_gateway_is_said_to_run_on_there_after_its_holder_lets_go(tmp_path, capsys):
    location = str(tmp_path / "toolpath.db")
    store = SnapshotStore(location)
    gateway_kernel = {"gateway": "http://gateway.invalid:8888/", "kernel_id": "k-1"}
    for session_id, holder in (("orphan", ended_process_holder()), ("live", SessionHolder.this_process())):
        store.claim(session_id, "alice")
        store.record_kernel(session_id, store.take(session_id, holder).generation, gateway_kernel)

    sessions = {row["session_id"]: row for row in json.loads(toolpath(capsys, "sessions", "list", "--store", location, "--json")[1])["sessions"]}
    assert sessions["orphan"]["kernel_alive"] is None and "k-1 may still run on the gateway http://gateway.invalid:8888/" in sessions["orphan"]["kernel"]
    assert sessions["live"]["kernel_alive"] is True and sessions["live"]["holder"]["gateway_kernel"] == gateway_kernel

    closed = json.loads(toolpath(capsys, "sessions", "close", "orphan", "--yes", "--store", location, "--json")[1])
    assert "its kernel may still run" in closed["kernel"] and "nothing here can stop it" in closed["kernel"]
    closed = json.loads(toolpath(capsys, "sessions", "close", "live", "--yes", "--store", location, "--json")[1])
    assert "lets go of its kernel when it next renews its hold" in closed["kernel"] and "runs on there until the gateway culls it" in closed["kernel"]


class Terminal(io.StringIO):
    """Standard input on a terminal, with the operator's answer typed in."""

    def isatty(self):
        return True


def test_close_asks_on_a_terminal_and_refuses_to_guess_without_one(tmp_path, capsys, monkeypatch):
    location = str(tmp_path / "toolpath.db")
    SnapshotStore(location).claim("agent-7", "alice")

    status, out, err = toolpath(capsys, "sessions", "close", "agent-7", "--store", location)  # pytest's stdin is no terminal
    assert status == 2 and "no terminal to ask" in err and "--yes" in err
    status, out, _ = toolpath(capsys, "sessions", "close", "agent-7", "--store", location, "--json")
    assert status == 2 and "--json needs --yes" in json.loads(out)["error"]

    monkeypatch.setattr(sys, "stdin", Terminal("n\n"))
    status, _, err = toolpath(capsys, "sessions", "close", "agent-7", "--store", location)
    assert status == 2 and "Close session agent-7 of alice?" in err and "was not closed" in err
    assert SnapshotStore(location).owner("agent-7") == (True, "alice")

    monkeypatch.setattr(sys, "stdin", Terminal("yes\n"))
    status, out, _ = toolpath(capsys, "sessions", "close", "agent-7", "--store", location)
    assert status == 0 and "closed session agent-7" in out and "it had no running kernel" in out
    assert SnapshotStore(location).owner("agent-7") == (False, None)


@pytest.mark.parametrize(
    "session_id, refusal",
    [
        ("", "the session id is empty"),
        ("   ", "the session id is empty"),
        ("x" * 600, "600 characters long and stores keep ids of at most 512"),
        ("a\x00b", "NUL character"),
        ("\udcff", "not UTF-8 text"),
        ("x'; drop table sessions; --", 'has no session "x\'; drop table sessions; --"'),
        ('" or 1=1 or "', "has no session '\" or 1=1 or \"'"),
        ("%", "has no session '%'"),
    ],
)
@pytest.mark.parametrize("verb", ["show", "close"])
def test_odd_ids_are_refused_clearly_and_change_nothing(tmp_path, capsys, verb, session_id, refusal):
    location = str(tmp_path / "toolpath.db")
    SnapshotStore(location).claim("agent-7", "alice")
    for json_flag in ([], ["--json"]):
        status, out, err = toolpath(capsys, "sessions", verb, session_id, "--yes" if verb == "close" else "--runs=1", "--store", location, *json_flag)
        assert status == 2 and "Traceback" not in out + err
        message = json.loads(out)["error"] if json_flag else err
        assert refusal in message
    assert SnapshotStore(location).owner("agent-7") == (True, "alice")


def test_a_session_whose_id_is_sql_is_shown_and_closed_as_any_other(tmp_path, capsys):
    location = str(tmp_path / "toolpath.db")
    odd = "x'); delete from sessions; --"
    store = SnapshotStore(location)
    store.claim(odd, "mallory")
    store.claim("agent-7", "alice")
    status, out, _ = toolpath(capsys, "sessions", "show", odd, "--store", location, "--json")
    assert status == 0 and json.loads(out)["session"]["owner"] == "mallory"
    status, out, _ = toolpath(capsys, "sessions", "close", odd, "--yes", "--store", location, "--json")
    assert status == 0 and json.loads(out)["closed"] == odd
    assert [session["session_id"] for session in json.loads(toolpath(capsys, "sessions", "list", "--store", location, "--json")[1])["sessions"]] == ["agent-7"]


def test_text_output_escapes_what_the_store_holds_so_it_cannot_drive_the_terminal(tmp_path, capsys):
    location = str(tmp_path / "toolpath.db")
    hostile = "lab\x1b[2J\x1b]0;owned\x07"
    store = SnapshotStore(location)
    store.claim(hostile, "eve\x1b[31m")
    store.save(hostile, "eve\x1b[31m", {"x\x1b[1m": "d"}, {"x\x1b[1m": b"1"}, {}, None)
    for verb in (["list"], ["show", hostile]):
        status, out, _ = toolpath(capsys, "sessions", *verb, "--store", location)
        assert status == 0 and "\x1b" not in out and "\x07" not in out
        assert repr(hostile) in out
    assert "close it:" not in out  # no command line to copy for an id a terminal cannot show


def test_a_store_that_does_not_exist_is_not_made(tmp_path, capsys):
    missing = tmp_path / "typo" / "toolpath.db"
    status, out, _ = toolpath(capsys, "sessions", "list", "--store", str(missing))
    assert status == 0 and f"there is no store at {missing} (nothing was made there)" in out
    status, out, _ = toolpath(capsys, "sessions", "list", "--store", str(missing), "--json")
    assert json.loads(out) == {"store": str(missing), "exists": False, "sessions": []}
    status, _, err = toolpath(capsys, "sessions", "show", "agent-7", "--store", str(missing))
    assert status == 2 and f"there is no store at {missing} yet" in err
    assert not missing.parent.exists()


def runs(process):
    """Whether ``process`` still runs (a zombie, ended but not yet reaped, does not)."""
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.integration
def test_close_from_another_process_stops_a_real_sessions_kernel(tmp_path, chemistry_catalog, embedder):
    """A real AgentSession holds its kernel; `toolpath sessions` run as another process sees the kernel
    running, then closes the session: the holder stops the kernel at its next lease renewal, and the
    session, used again, starts empty (its snapshot is gone)."""
    from toolpath.planner import Workspace

    store = str(tmp_path / "toolpath.db")
    workspace = Workspace.open([chemistry_catalog], embedder=embedder)

    def sessions_command(*arguments):
        completed = subprocess.run(
            [sys.executable, "-m", "toolpath.planner.interfaces.cli", "sessions", *arguments, "--store", store, "--json"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert completed.returncode == 0, completed.stderr
        return json.loads(completed.stdout)

    options = {"snapshot_store": store, "session_lease": 1.0, "snapshot_after_each_cell": True, "pool_size": 0, "timeout": 60}
    with workspace.session("ops-1", user_id="alice", **options) as session:
        assert session.execute("molecule = {'formula': 'C2H6O'}").status == "ok"
        session.declare(MOLECULE, "molecule")
        kernel = psutil.Process(int(session.execute("import os\nos.getpid()").result))

        (listed,) = sessions_command("list")["sessions"]
        assert (listed["session_id"], listed["owner"], listed["kernel_alive"], listed["held"]) == ("ops-1", "alice", True, [MOLECULE])
        shown = sessions_command("show", "ops-1")["session"]
        assert {tuple(variable["names"]): variable["carries"] for variable in shown["variables"]}[("molecule",)] == [{"state": MOLECULE, "path": None}]

        closed = sessions_command("close", "ops-1", "--yes")
        assert closed["kernel_alive"] is True and "stops its kernel" in closed["kernel"]
        deadline = time.monotonic() + 60
        while runs(kernel):
            assert time.monotonic() < deadline, "the closed session's kernel still runs"
            time.sleep(0.2)

        again = session.execute("'molecule' in globals()")
        assert again.status == "ok" and again.result == "False"
