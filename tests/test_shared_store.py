"""The shared store on both engines (a SQLite file and a real PostgreSQL server): snapshots, owners,
holders and their leases, approval decisions; stores of older versions brought up to date in place;
two real processes writing one session."""

from __future__ import annotations

import contextlib
import re
import sqlite3
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from toolpath.kernel.codemode.snapshot_store import SessionHolder, SnapshotConflictError, SnapshotStore
from toolpath.kernel.errors import SessionHeldError
from toolpath.kernel.inside.approval_policy import ApprovalRequest
from toolpath.kernel.tools.approval_log import ApprovalLog
from toolpath.registry.database import forget_database, open_database
from toolpath.registry.storage import StoreError
from toolpath.registry.store_schema import LATEST_VERSION


def ended_process_holder() -> SessionHolder:
    """A holder on this host whose process has ended."""
    ended = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    gone = SessionHolder(SessionHolder.this_process().host, ended.pid, psutil.Process(ended.pid).create_time())
    ended.stdin.close()
    ended.wait()
    return gone


def test_snapshots_and_owners_round_trip_and_a_save_on_a_missing_record_writes_nothing(location):
    snapshots = SnapshotStore(location)
    assert snapshots.owner("s") == (False, None) and snapshots.load("s") is None
    assert snapshots.claim("s", "alice") == "alice" and snapshots.claim("s", "bob") == "alice"
    snapshots.save("s", "alice", {"x": "d1", "y": "d2"}, {"x": b"\x00pickle", "y": b"2"}, {"f": "an open file"}, {"held": ["lab.parsed"]})
    loaded = snapshots.load("s")
    assert loaded.pickles == {"x": b"\x00pickle", "y": b"2"} and loaded.skipped == {"f": "an open file"} and loaded.data == {"held": ["lab.parsed"]}
    with pytest.raises(SnapshotConflictError, match="lacks z"):
        snapshots.save("s", "alice", {"x": "d1", "z": "d3"}, {}, {}, None)
    snapshots.save("s", "alice", {"x": "d1"}, {}, {}, None)  # y is gone, x unchanged and not rewritten
    assert snapshots.load("s").pickles == {"x": b"\x00pickle"}
    snapshots.discard("s")
    assert snapshots.load("s") is None and snapshots.owner("s") == (True, "alice")


def test_holders_refuse_a_live_one_take_over_an_ended_or_expired_one_and_fence_old_writers(location):
    snapshots = SnapshotStore(location, lease_seconds=30)
    this = SessionHolder.this_process()
    gone = ended_process_holder()

    assert snapshots.take("s", gone).generation == 1
    taken = snapshots.take("s", this)
    assert taken.generation == 2 and taken.previous == gone
    with pytest.raises(SessionHeldError, match="was taken by process"):  # the ended holder's generation is over
        snapshots.save("s", None, {"x": "d1"}, {"x": b"1"}, {}, None, generation=1)
    assert snapshots.load("s") is None
    snapshots.save("s", None, {"x": "d2"}, {"x": b"2"}, {}, None, generation=2)

    elsewhere = SessionHolder("another-host.invalid", this.pid, this.started)
    with pytest.raises(SessionHeldError, match="which is still running") as refused:
        snapshots.take("s", elsewhere)
    assert f"'s' is in use by process {this.pid} on host" in str(refused.value) and refused.value.holder == this
    snapshots.release("s", generation=1)  # a stale generation lets go of nothing
    with pytest.raises(SessionHeldError):
        snapshots.check_not_held("s", elsewhere)
    snapshots.release("s", generation=2)
    snapshots.check_not_held("s", elsewhere)
    assert snapshots.take("s", elsewhere).generation == 3
    # This host cannot see the other's process: its lease decides.
    with pytest.raises(SessionHeldError, match=r"busy on another server \(its hold on the session runs out in \d+ s"):
        snapshots.take("s", this)
    assert snapshots.renew({"s": 3}) == []

    short = SnapshotStore(location, lease_seconds=1)
    assert short.take("t", elsewhere).generation == 1
    with pytest.raises(SessionHeldError, match="busy on another server"):
        short.take("t", this)
    time.sleep(1.2)  # the other server stopped renewing: its lease runs out
    taken = short.take("t", this)
    assert taken.generation == 2 and taken.previous == elsewhere
    assert short.renew({"t": 1, "s": 3}) == ["t"]  # the other server learns it lost the session
    with pytest.raises(SessionHeldError, match="was taken by process"):
        short.save("t", None, {"x": "d"}, {"x": b"late"}, {}, None, generation=1)


def test_approval_decisions_are_kept_per_session_and_user(location):
    log = ApprovalLog(open_database(location))
    for user, decision in (("alice", "approved"), ("bob", "denied"), (None, "timeout")):
        request = ApprovalRequest.of("mail.send_mail", {"to": "x@example.org"}, "it sends mail", session_id="s", user_id=user)
        log.record(request, decision, f"{user}'s note", "desk")
    assert [(row.user_id, row.decision, row.note) for row in log.decisions("s", "alice")] == [("alice", "approved", "alice's note")]
    assert [row.decision for row in log.decisions("s", None)] == ["timeout"]
    assert log.decisions("another", "alice") == []


def test_a_sqlite_store_from_before_versions_keeps_its_sessions_and_gains_leases(tmp_path):
    """The tables exactly as toolpath wrote them before the store had versions, with rows."""
    path = tmp_path / "toolpath.db"
    with contextlib.closing(sqlite3.connect(path)) as database, database:
        database.execute("create table sessions (session_id text primary key, owner text, saved float, skipped text, data text)")
        database.execute("create table snapshot_variables (session_id text, name text, size integer, digest text, pickle blob, primary key (session_id, name))")
        database.execute("create table session_holders (session_id text primary key, host text, pid integer, started float, since float, generation integer)")
        database.execute("insert into sessions values ('old', 'alice', 1700000000.0, '{}', '{\"held\": []}')")
        database.execute("insert into snapshot_variables values ('old', 'x', 1, 'd', x'01')")
        database.execute("insert into session_holders values ('old', 'gone-host', 1, 1.0, 1.0, 4)")
    snapshots = SnapshotStore(path)
    assert snapshots.load("old").pickles == {"x": b"\x01"} and snapshots.owner("old") == (True, "alice")
    # A holder from before leases, on another host, has no lease to run out: still refused.
    with pytest.raises(SessionHeldError, match="may still be running"):
        snapshots.take("old", SessionHolder.this_process())
    snapshots.release("old", 4)
    assert snapshots.take("old", SessionHolder.this_process()).generation == 5
    ApprovalLog(snapshots.database).record(ApprovalRequest.of("t", {}, "why", "old", "alice"), "approved", "", "desk")
    with contextlib.closing(sqlite3.connect(path)) as database:
        assert database.execute("select version from toolpath_schema").fetchone() == (LATEST_VERSION,)
        # The old tables keep exactly their columns: a toolpath from before versions still opens them.
        assert [row[1] for row in database.execute("select * from pragma_table_info('session_holders')")] == [
            "session_id",
            "host",
            "pid",
            "started",
            "since",
            "generation",
        ]
        assert database.execute("select generation, expires is not null from session_leases where session_id = 'old'").fetchone() == (5, 1)
    with contextlib.closing(sqlite3.connect(path)) as database, database:  # a toolpath from before leases takes it, on another host
        database.execute("update session_holders set host = 'old-host', pid = 7, started = 1.0, generation = 6 where session_id = 'old'")
        database.execute("update session_leases set expires = 0 where session_id = 'old'")
    with pytest.raises(SessionHeldError, match="may still be running"):  # the lease of generation 5 is not its
        snapshots.take("old", SessionHolder("third-host.invalid", 1, 1.0))


def test_a_version_2_store_keeps_every_row_and_gains_the_record_of_use(location):
    """A store as toolpath wrote it at version 2 (sessions, leases, approvals, with rows) becomes
    version 3: its rows stay, and tasks are recorded per user."""
    from toolpath.planner.tasks.record_of_use import Recorder, history
    from toolpath.registry.store_schema import FIRST_TABLES, LEASE_TABLE, TYPES, VERSION_TABLE

    if location.startswith("postgresql"):
        import psycopg

        connection = psycopg.connect(location, autocommit=True)
        engine, placeholder = "postgresql", "%s"
    else:
        connection = sqlite3.connect(location, isolation_level=None)
        engine, placeholder = "sqlite", "?"
    with contextlib.closing(connection):
        for table in (*FIRST_TABLES, LEASE_TABLE):
            connection.execute(table.create(TYPES[engine]))
        connection.execute(f"create table {VERSION_TABLE} (version integer not null)")
        connection.execute(f"insert into {VERSION_TABLE} values (2)")
        connection.execute("insert into sessions values ('old', 'alice', 1700000000.0, '{}', '{\"held\": []}')")
        connection.execute(f"insert into session_leases values ('old', 3, 1.0, {placeholder})", ["{}"])
    snapshots = SnapshotStore(location)
    assert snapshots.owner("old") == (True, "alice")
    Recorder("python", location).refused("alice", "a task", ValueError("no"))
    assert [entry.user for entry in history(location, "alice")] == ["alice"] and history(location, "bob") == []
    with snapshots.database.reading("test") as reading:
        assert reading.execute("select version from toolpath_schema").fetchone()[0] == LATEST_VERSION == 3
        assert reading.execute("select generation from session_leases where session_id = 'old'").fetchone()[0] == 3


def test_a_store_of_a_newer_toolpath_or_with_foreign_tables_is_refused_untouched(tmp_path, postgres_url):
    newer = tmp_path / "newer.db"
    with contextlib.closing(sqlite3.connect(newer)) as database, database:
        database.execute("create table toolpath_schema (version integer not null)")
        database.execute("insert into toolpath_schema values (99)")
    with pytest.raises(StoreError, match=r"newer\.db is unusable: its schema is version 99, newer than this toolpath's"):
        SnapshotStore(newer).load("s")
    with contextlib.closing(sqlite3.connect(newer)) as database:
        assert [row[0] for row in database.execute("select name from sqlite_master")] == ["toolpath_schema"]

    import psycopg

    with psycopg.connect(postgres_url, autocommit=True) as connection:
        connection.execute("create table sessions (id serial primary key, cookie text)")
    with pytest.raises(StoreError, match=r"its sessions table has columns \(cookie, id\).*own schema"):
        SnapshotStore(postgres_url).owner("s")
    with psycopg.connect(postgres_url) as connection:
        assert connection.execute("select count(*) from information_schema.tables where table_schema = 'public'").fetchone() == (1,)


def test_a_server_that_cannot_be_used_says_why_at_once_without_any_password(postgres_server):
    unreachable = "postgresql://toolpath:hunter2@127.0.0.1:9/toolpath?sslpassword=key-secret"
    no_database = postgres_server.get_uri(database="no_such_database").replace("postgres:@", "postgres:hunter2@")
    malformed = "postgresql://toolpath:hunter2%zz@127.0.0.1:9/toolpath"
    for url, reason in ((unreachable, "Connection refused"), (no_database, 'database "no_such_database" does not exist'), (malformed, "percent")):
        try:
            started = time.monotonic()
            with pytest.raises(StoreError, match="cannot connect to it") as refused:
                SnapshotStore(url).owner("s")
            message = str(refused.value)
            assert reason in message and "TOOLPATH_STORE" in message, message
            assert "hunter2" not in message and "key-secret" not in message
            assert time.monotonic() - started < 9  # libpq's own answer, not the pool's 10 s wait
        finally:
            forget_database(url)
    assert "snapshot store postgresql://toolpath@127.0.0.1:9/toolpath is unusable" in str(
        pytest.raises(StoreError, SnapshotStore(unreachable).owner, "s").value
    )
    forget_database(unreachable)


@pytest.mark.parametrize(
    ("location", "refusal"),
    [
        ("mysql://root:hunter2@db/toolpath", "mysql:// is not a store toolpath can use"),
        ("postgresql+psycopg://u:hunter2@db/toolpath", "postgresql+psycopg:// is not a store toolpath can use"),
        ("host=db password=hunter2 dbname=toolpath", "libpq key=value connection strings are not taken"),
        ("   ", "no store is named"),
    ],
)
def test_a_location_that_is_neither_a_postgresql_url_nor_a_file_is_refused_not_made_a_file(location, refusal, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreError, match=re.escape(refusal)) as refused:
        SnapshotStore(location)
    assert "hunter2" not in str(refused.value) and list(tmp_path.iterdir()) == []


def test_a_url_is_read_whatever_its_spacing_or_case_and_a_home_path_is_expanded(monkeypatch, tmp_path):
    from toolpath.registry.database import store_location

    assert store_location("  PostgreSQL://u@db/toolpath ") == "postgresql://u@db/toolpath"
    monkeypatch.setenv("HOME", str(tmp_path))
    assert store_location("~/sessions.db") == str(tmp_path / "sessions.db")


@pytest.mark.parametrize("rows", [[], ["abc"], [None], [1.5], [-1], [2, 1]])
def test_a_damaged_version_row_is_a_store_error_naming_it(tmp_path, rows):
    path = tmp_path / "toolpath.db"
    with contextlib.closing(sqlite3.connect(path)) as database, database:
        database.execute("create table toolpath_schema (version integer not null)" if None not in rows else "create table toolpath_schema (version integer)")
        database.executemany("insert into toolpath_schema values (?)", [(row,) for row in rows])
    with pytest.raises(StoreError, match=r"its toolpath_schema table holds .*, not one version number\. Set it to the version") as refused:
        SnapshotStore(path).owner("s")
    assert "Delete" not in str(refused.value)


def test_a_lease_too_short_to_renew_sensibly_is_refused(tmp_path):
    for lease in (0.5, 0, -1, float("nan"), float("inf"), "30", True):
        with pytest.raises(ValueError, match="a session lease must be a number of seconds from 1"):
            SnapshotStore(tmp_path / "toolpath.db", lease_seconds=lease)


def test_ids_every_store_can_keep_are_checked_before_any_kernel_starts():
    from toolpath.kernel.codemode.session_pool import check_ids

    with pytest.raises(ValueError, match="has a NUL character"):
        check_ids("lab\x00notes", None)
    with pytest.raises(ValueError, match="at most 512 are kept"):
        check_ids("s" * 513, None)
    check_ids("é" * 512, "user")


WRITER = textwrap.dedent(
    """
    import sys
    from toolpath.kernel.codemode.snapshot_store import SnapshotStore

    store, name = SnapshotStore(sys.argv[1]), sys.argv[2]
    print("ready", flush=True)
    sys.stdin.readline()
    for round in range(40):
        records = {f"{name}{index}": f"{name}-{round}" for index in range(5)}
        store.save("shared", None, records, {key: digest.encode() for key, digest in records.items()}, {}, {"writer": name, "round": round})
    """
)


def test_two_processes_saving_one_session_at_once_leave_one_whole_snapshot(location, tmp_path):
    """Each save replaces the whole snapshot: whatever the interleaving, the stored one is exactly
    one writer's last, never a mix of both."""
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    writers = [subprocess.Popen([sys.executable, str(script), location, name], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for name in "ab"]
    for writer in writers:
        assert writer.stdout.readline().strip() == "ready"
    for writer in writers:  # both start at once
        writer.stdin.write("go\n")
        writer.stdin.flush()
    for writer in writers:
        assert writer.wait(timeout=120) == 0
    snapshot = SnapshotStore(location).load("shared")
    name = snapshot.data["writer"]
    assert snapshot.data["round"] == 39
    assert snapshot.pickles == {f"{name}{index}": f"{name}-39".encode() for index in range(5)}


REPLICA = textwrap.dedent(
    """
    import socket, sys
    socket.gethostname = lambda: "replica-a.invalid"  # another server, as far as the store can tell
    from toolpath.kernel import CodeMode

    with CodeMode(pool_size=0, timeout=60, snapshot_store=sys.argv[1], session_lease=float(sys.argv[2])) as replica:
        result = replica.run("kept = 'from replica a'", "s")
        replica.close()  # writes the snapshot now; the kernel and the hold stay
        print(result.status, flush=True)
        sys.stdin.readline()
    """
)


@pytest.mark.integration
def test_a_session_another_server_drives_is_busy_until_its_lease_runs_out_then_it_moves_with_its_variables(postgres_url, tmp_path):
    """Replica A (another process, another host name) drives session "s" and renews its lease;
    here it is refused as busy. Once A is killed, its lease runs out and this process takes the
    session over, restoring A's variables from the last snapshot, and says so."""
    from toolpath.kernel import CodeMode

    script = tmp_path / "replica.py"
    script.write_text(REPLICA)
    lease = 2.0
    replica = subprocess.Popen([sys.executable, str(script), postgres_url, str(lease)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert replica.stdout.readline().strip() == "ok"
        with CodeMode(pool_size=0, timeout=60, snapshot_store=postgres_url, session_lease=lease) as here:
            time.sleep(lease * 1.5)  # A renews meanwhile: its hold outlives the first lease
            with pytest.raises(SessionHeldError, match=r"on host 'replica-a\.invalid' .* busy on another server"):
                here.run("kept", "s")
            replica.kill()
            replica.wait(timeout=60)
            moved = here.run("kept", "s")  # waits briefly for the lease to run out
            assert moved.status == "ok" and moved.result == "'from replica a'", (moved.error, moved.notice)
            assert "stopped renewing its hold" in moved.notice and "Restored 1 variable(s)" in moved.notice
    finally:
        if replica.poll() is None:
            replica.kill()
            replica.wait()


GATEWAY_REPLICA = textwrap.dedent(
    """
    import json, socket, sys
    socket.gethostname = lambda: "replica-a.invalid"
    from toolpath.kernel import CodeMode, Toolkit

    def server_name() -> str:
        'The host name of the server this tool runs in.'
        return socket.gethostname()

    options = json.loads(sys.argv[1])
    with CodeMode([Toolkit("server_tools", [server_name])], pool_size=0, timeout=60, session_lease=2.0, **options) as replica:
        result = replica.run("import threading\\nkept = 'from replica a'\\nlock = threading.Lock()", "s")
        replica.close()  # writes the snapshot (the lock cannot be pickled: it is left out)
        print(json.dumps([result.status, replica.kernel_id("s")]), flush=True)
        sys.stdin.readline()
    """
)


def _gateway_replica(tmp_path, options):
    """Replica A on another host name, its session's kernel on the gateway; returns it and the kernel's id."""
    import json

    script = tmp_path / "gateway_replica.py"
    script.write_text(GATEWAY_REPLICA)
    errors = tmp_path / "gateway_replica.err"
    with open(errors, "w") as stderr:  # a file, not a pipe: a chatty replica never blocks on it
        replica = subprocess.Popen([sys.executable, str(script), json.dumps(options)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True)
    line = replica.stdout.readline()
    if not line:  # it died before its run ended: say why, not that "" is no JSON
        replica.wait(timeout=60)
        pytest.fail(f"replica A ended (exit {replica.returncode}) before its run: {errors.read_text()[-3000:]}")
    status, kernel_id = json.loads(line)
    assert status == "ok"
    return replica, kernel_id


@pytest.mark.integration
@pytest.mark.parametrize("kernel_left", ["running", "gone"])
def test_a_server_taking_over_a_session_attaches_to_its_kernel_still_on_the_gateway_or_restores_it(postgres_url, enterprise_gateway, tmp_path, kernel_left):
    """Replica A is killed; its kernel stays on Enterprise Gateway. This process takes the session
    over and attaches to that kernel (even the lock, which no snapshot could hold, is there), or,
    when the gateway no longer has it, restores the snapshot into a new kernel; the notice says which."""
    import urllib.request

    from toolpath.kernel import CodeMode

    options = {**enterprise_gateway, "snapshot_store": postgres_url}
    replica, kernel_id = _gateway_replica(tmp_path, options)
    replica.kill()
    replica.wait(timeout=60)
    if kernel_left == "gone":
        request = urllib.request.Request(
            f"{enterprise_gateway['gateway_url']}/api/kernels/{kernel_id}",
            method="DELETE",
            headers={"Authorization": f"token {enterprise_gateway['gateway_token']}"},
        )
        urllib.request.urlopen(request, timeout=30).close()
    import socket

    from toolpath.kernel import Toolkit

    def server_name() -> str:
        """The host name of the server this tool runs in."""
        return socket.gethostname()

    with CodeMode([Toolkit("server_tools", [server_name])], pool_size=0, timeout=60, session_lease=2.0, **options) as here:
        moved = here.run("kept, 'lock' in globals()", "s")  # waits for A's lease to run out
        assert moved.status == "ok", moved.error
        assert "replica-a.invalid" in moved.notice and "took it over" in moved.notice
        if kernel_left == "running":
            assert moved.result == "('from replica a', True)"
            assert here.kernel_id("s") == kernel_id and f"Its kernel {kernel_id} was still running on the gateway" in moved.notice
            assert "Restored" not in moved.notice
        else:
            assert moved.result == "('from replica a', False)"
            assert here.kernel_id("s") != kernel_id and "is not on this process's gateway any more" in moved.notice
            assert "Restored 2 variable(s)" in moved.notice and "Not restored: lock" in moved.notice
        # The kernel's handles call this process's host tools now, not the dead replica's.
        assert here.run("await server.server_name()", "s").result == repr(socket.gethostname())


@pytest.mark.integration
def test_a_process_that_lost_its_hold_lets_go_of_the_kernel_and_is_refused_the_session(postgres_url):
    """This process could not renew in time and another server took the session: the next renewal
    finds out, the kernel is let go (never two processes driving one session), and its next cell is
    refused as busy instead of running."""
    import psycopg

    from toolpath.kernel import CodeMode

    with CodeMode(pool_size=0, timeout=60, snapshot_store=postgres_url, session_lease=1.5) as here:
        assert here.run("x = 1", "s").status == "ok" and here.kernel_id("s") is not None
        with psycopg.connect(postgres_url, autocommit=True) as connection, connection.transaction():  # what another server's take writes
            connection.execute(
                "update session_holders set host = 'replica-b.invalid', pid = 1, started = 1, generation = generation + 1 where session_id = 's'"
            )
            connection.execute(
                "update session_leases set generation = generation + 1, expires = extract(epoch from clock_timestamp()) + 60, kernel = null where session_id = 's'"
            )
        deadline = time.monotonic() + 10
        while here.kernel_id("s") is not None:
            assert time.monotonic() < deadline, "the lost session's kernel was not let go"
            time.sleep(0.1)
        with pytest.raises(SessionHeldError, match=r"on host 'replica-b\.invalid' .* busy on another server"):
            here.run("x", "s")


def test_a_url_shown_in_a_message_keeps_no_secret_even_when_it_cannot_be_read():
    from toolpath.registry.postgres import redacted, shown_url

    broken = "postgresql://u:hun%40ter2@[::1/db?sslpassword=key%20word"
    assert shown_url(broken) == "postgresql://(a URL that cannot be read)"
    assert redacted("libpq quoted hun%40ter2, hun@ter2 and key word", broken) == "libpq quoted ***, *** and ***"
    assert shown_url("postgresql:///toolpath?host=/run/pg&password=x") == "postgresql:///toolpath?host=%2Frun%2Fpg"
