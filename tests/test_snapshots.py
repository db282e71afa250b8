"""Snapshots and owners against real kernels, real SQLite files and real processes."""

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import dill
import pytest

from toolpath.kernel import CodeMode, SessionHeldError, SessionOwnerError, SnapshotStore
from toolpath.planner import Workspace

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture()
def store(tmp_path):
    return tmp_path / "snapshots.db"


def code_mode(store, **options):
    options = {"pool_size": 0, "timeout": 60, "snapshot_store": store, **options}
    return CodeMode(**options)


def test_variables_survive_shutdown_and_a_new_process(store, tmp_path, kernel_place):
    """Saved from a kernel on this machine, restored into one here and into one on a gateway."""
    script = textwrap.dedent(
        f"""
        from toolpath.kernel import CodeMode
        with CodeMode(pool_size=0, snapshot_store={str(store)!r}) as code_mode:
            result = code_mode.run('''
        import pandas as pd
        table = pd.DataFrame({{"name": ["ada", "bob"], "age": [36, 41]}})
        def older(frame, years):
            return frame.assign(age=frame.age + years)
        class Point:
            def __init__(self, x):
                self.x = x
        origin = Point(3)
        ''', "analysis", user_id="alice")
            assert result.status == "ok", result
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, cwd=ROOT, timeout=120)

    with code_mode(store, **kernel_place) as later:
        result = later.run("print(older(table, 1).age.tolist(), origin.x, isinstance(origin, Point), pd.__name__)", "analysis", user_id="alice")
        assert result.status == "ok", result
        assert result.stdout == "[37, 42] 3 True pandas\n"
        assert "Restored 5 variable(s)" in result.notice and "older" in result.notice and "table" in result.notice


def test_unpicklable_and_oversized_variables_are_skipped_and_named(store):
    with code_mode(store, max_variable_bytes=100_000) as first:
        first.run("import socket\nnumbers = (n for n in range(3))\nconnection = socket.socket()\nblob = b'x' * 200_000\nkept = [1, 2, 3]", "s")
    with code_mode(store) as second:
        result = second.run("print(kept, 'numbers' in globals(), 'connection' in globals(), 'blob' in globals())", "s")
        assert result.stdout == "[1, 2, 3] False False False\n"
        notice = result.notice
        assert "Restored 2 variable(s)" in notice  # kept, and the module socket
        assert "numbers (cannot be pickled" in notice and "generator" in notice
        assert "connection (cannot be pickled" in notice
        assert "blob (too large" in notice and "max_variable_bytes" in notice


def test_the_budget_keeps_the_most_variables_smallest_first(store):
    with code_mode(store, max_snapshot_bytes=60_000) as first:
        first.run("early = b'x' * 50_000\n" + "\n".join(f"small_{n} = b'y' * 5_000" for n in range(8)), "s")
    with code_mode(store) as second:
        result = second.run("print(sorted(name for name in globals() if name.startswith(('early', 'small'))))", "s")
        assert result.stdout == str([f"small_{n}" for n in range(8)]).replace('"', "'") + "\n"
        assert "early (over the snapshot budget" in result.notice


def test_a_host_killed_in_the_middle_of_writing_keeps_the_previous_snapshot(store, tmp_path):
    writing = tmp_path / "writing"
    # The child saves a first snapshot, then dies (SIGKILL) inside the transaction of the second:
    # after the old variables were deleted and the new ones inserted, before the commit.
    script = textwrap.dedent(
        f"""
        import time
        from pathlib import Path
        from toolpath.kernel.codemode import snapshot_store as snapshot_module
        from toolpath.kernel import CodeMode

        class SlowClock:
            def time(self):
                Path({str(writing)!r}).touch()
                time.sleep(120)

        with CodeMode(pool_size=0, snapshot_store={str(store)!r}) as code_mode:
            code_mode.run("version = 1\\nfirst_only = 'kept'", "s")
            code_mode.close()  # writes the first snapshot
            code_mode.run("version = 2\\ndel first_only\\nsecond_only = 'lost'", "s")
            snapshot_module.time = SlowClock()
            code_mode.close()
        """
    )
    child = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT)
    try:
        deadline = time.monotonic() + 90
        while not writing.exists():
            assert child.poll() is None, "the child exited before writing its second snapshot"
            assert time.monotonic() < deadline, "the child never started writing its second snapshot"
            time.sleep(0.05)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
    finally:
        if child.poll() is None:
            child.kill()

    snapshot = SnapshotStore(store).load("s")
    assert snapshot is not None and sorted(snapshot.pickles) == ["first_only", "version"]
    with code_mode(store) as later:
        assert later.run("print(version, first_only, 'second_only' in globals())", "s").stdout == "1 kept False\n"


def test_a_session_moves_from_a_gateway_kernel_to_a_local_one_and_back(store, kernel_gateway):
    # 4 MB of array: the snapshot crosses the gateway in several chunks each way.
    with code_mode(store, max_variable_bytes=8_000_000, **kernel_gateway) as remote:
        assert remote.run("import numpy as np\nweights = np.arange(500_000)\nlabel = 'w'", "moving").status == "ok"
    with code_mode(store, max_variable_bytes=8_000_000) as local:
        moved = local.run("int(weights.sum()), label", "moving")
        assert moved.result == "(124999750000, 'w')" and "Restored 3 variable(s)" in moved.notice
        local.run("weights = weights * 2", "moving")
    with code_mode(store, max_variable_bytes=8_000_000, **kernel_gateway) as remote:
        back = remote.run("int(weights.sum()), label", "moving")
        assert back.result == "(249999500000, 'w')" and "Restored 3 variable(s)" in back.notice


def test_restart_discards_the_kernel_and_its_snapshot(store, kernel_place):
    with code_mode(store, **kernel_place) as first:
        first.run("x = 1", "s", user_id="alice")
        first.close()
        assert SnapshotStore(store).load("s") is not None
        first.restart("s", user_id="alice")
        assert SnapshotStore(store).load("s") is None
        assert first.run("'x' in globals()", "s", user_id="alice").result == "False"
    with code_mode(store, **kernel_place) as second:
        result = second.run("'x' in globals()", "s", user_id="alice")
        assert result.result == "False" and "Restored" not in result.notice
    assert SnapshotStore(store).owner("s") == (True, "alice")


def test_a_session_belongs_to_the_user_who_created_it(store, kernel_place):
    with code_mode(store, **kernel_place) as first:
        first.run("secret = 'alice only'", "s", user_id="alice")
    with code_mode(store, **kernel_place) as second:  # the owner is kept in the store, for every later process
        with pytest.raises(SessionOwnerError, match="belongs to another user"):
            second.run("print(secret)", "s", user_id="bob")
        with pytest.raises(SessionOwnerError, match="pass that user's user_id"):
            second.execute("print(secret)", "s")
        with pytest.raises(SessionOwnerError):
            second.restart("s", user_id="bob")
        with pytest.raises(SessionOwnerError):
            second.bind("s", [], user_id="bob")
        assert second.sessions() == []  # no kernel was started for them
        assert second.run("print(secret)", "s", user_id="alice").stdout == "alice only\n"
        with pytest.raises(SessionOwnerError):
            second.variables("s", user_id="bob")
        # A session created without a user_id is nobody's: a user_id does not take it over.
        second.run("y = 1", "shared")
        with pytest.raises(SessionOwnerError, match="belongs to no user"):
            second.run("y", "shared", user_id="mallory")


# NUL and ids over 512 characters are refused before any kernel starts (tests/test_shared_store.py).
@pytest.mark.parametrize("session_id", ["../../../etc/passwd", "x'; drop table sessions; --", "/tmp/evil", "é" * 512, "%s%s%n"])
def test_hostile_session_ids_are_only_keys(store, tmp_path, session_id):
    work = tmp_path / "work"
    work.mkdir()
    with code_mode(store, cwd=str(work)) as first:
        assert first.run("value = 42", session_id, user_id="alice").status == "ok"
    # No file named after the session, here or anywhere the id points.
    assert os.listdir(work) == [] and sorted(os.listdir(tmp_path)) == ["snapshots.db", "work"]
    assert not Path("/tmp/evil").exists()
    with code_mode(store, cwd=str(work)) as second:
        assert second.run("print(value)", session_id, user_id="alice").stdout == "42\n"
        with pytest.raises(SessionOwnerError):
            second.run("value", session_id, user_id="bob")
    with sqlite3.connect(store) as connection:
        assert connection.execute("select count(*) from sessions").fetchone() == (1,)
    connection.close()


def test_idle_eviction_writes_the_snapshot_and_the_next_cell_restores_it(store):
    with code_mode(store, idle_ttl=0.5, snapshot_debounce=60) as short_lived:
        short_lived.run("x = 'still here'", "s")
        time.sleep(1.5)
        assert short_lived.sessions() == []
        result = short_lived.run("print(x)", "s")
        assert result.stdout == "still here\n"
        assert "without use" in result.notice and "Restored 1 variable(s)" in result.notice


def test_a_session_evicted_to_make_room_comes_back_with_its_variables(store):
    with code_mode(store, max_kernels=1, snapshot_debounce=60) as capped:
        capped.run("x = 'first'", "first")
        capped.run("y = 'second'", "second")  # evicts "first", writing its snapshot first
        assert capped.sessions() == ["second"]
        result = capped.run("print(x)", "first")
        assert result.stdout == "first\n" and "max_kernels=1" in result.notice and "Restored 1 variable(s)" in result.notice


def test_the_debounce_writes_once_cells_stop(store):
    with code_mode(store, snapshot_debounce=0.5) as debounced:
        for number in range(5):
            debounced.run(f"counter = {number}", "s")
        assert SnapshotStore(store).load("s") is None  # cells kept coming: nothing written yet
        time.sleep(2)
        snapshot = SnapshotStore(store).load("s")
        assert snapshot is not None and list(snapshot.pickles) == ["counter"]


def test_a_variable_that_fails_to_load_is_named_kept_and_restored_once_it_can_be(store, tmp_path):
    module = tmp_path / "vanishing.py"
    module.write_text("class Thing:\n    pass\n")
    with code_mode(store, cwd=str(tmp_path)) as first:
        assert first.run("import vanishing\nthing = vanishing.Thing()\nplain = 'fine'", "s").status == "ok"
    module.rename(tmp_path / "away.py")
    with code_mode(store, cwd=str(tmp_path)) as second:
        result = second.run("print(plain, 'thing' in globals())\nlater = 2", "s")
        assert result.status == "ok" and result.stdout == "fine False\n"
        assert "thing (could not be restored" in result.notice and "vanishing" in result.notice
        assert "keeps thing" in result.notice
    (tmp_path / "away.py").rename(module)  # the module is back: so is the variable, with the new work
    with code_mode(store, cwd=str(tmp_path)) as third:
        assert third.run("print(type(thing).__name__, plain, later)", "s").stdout == "Thing fine 2\n"


def test_cells_that_redirect_stdout_or_make_thousands_of_variables_are_still_saved(store):
    with code_mode(store) as first:
        first.run("import io, sys\nsys.stdout = io.StringIO()\nfor n in range(3000):\n    globals()[f'v{n}'] = n", "s")
    with code_mode(store) as second:
        assert second.run("print(v0 + v2999)", "s").stdout == "2999\n"


def test_a_variable_that_exits_or_stalls_while_pickling_or_loading_costs_only_itself(store):
    poison = "import sys, time\nclass Exits:\n    def __reduce__(self):\n        return (sys.exit, ('bye',))\nclass Stalls:\n    def __reduce__(self):\n        time.sleep(60)\n"
    with code_mode(store) as first:
        first.run("import toolpath.kernel.inside.snapshot as limits\nlimits.VARIABLE_SECONDS = 1\ndel limits", "s")
        first.run(poison + "exits = Exits()\nstalls = Stalls()\nhealthy = [1, 2]", "s")
    with code_mode(store) as second:
        result = second.run("print(healthy, 'exits' in globals())\nnew_work = 42", "s")
        assert result.stdout == "[1, 2] False\n"
        assert "stalls (too slow" in result.notice and "exits (could not be restored (SystemExit" in result.notice
        assert len(result.notice) < 1500
    with code_mode(store) as third:  # and the new work was saved
        assert third.run("print(new_work)", "s").stdout == "42\n"


def test_a_kernel_lost_without_a_snapshot_says_its_variables_are_gone(store):
    with code_mode(store, snapshot_debounce=60) as code_mode_:
        code_mode_.run("a = 1", "s")
        assert code_mode_.run("import os\nos._exit(1)", "s").status == "dead"
        result = code_mode_.run("'a' in globals()", "s")
        assert result.result == "False" and "Earlier variables are gone: the session has no snapshot." in result.notice


def test_an_unreadable_snapshot_is_reported_and_never_overwritten(store):
    with code_mode(store) as first:
        first.run("x = 1", "s")
    with sqlite3.connect(store) as connection:
        connection.execute("update sessions set skipped = 'not json' where session_id = 's'")
    connection.close()
    with code_mode(store) as second:
        result = second.run("y = 2", "s")
        assert result.status == "ok" and "could not be read" in result.notice and "will not be saved over" in result.notice
        second.close()
    with sqlite3.connect(store) as connection:
        assert connection.execute("select name from snapshot_variables where session_id = 's'").fetchall() == [("x",)]
    connection.close()


def test_snapshots_off_keep_nothing(store):
    with CodeMode(pool_size=0, snapshot=False) as first:
        first.run("x = 1", "s", user_id="alice")
        with pytest.raises(SessionOwnerError):  # owners still hold within the process
            first.run("x", "s", user_id="bob")
    with CodeMode(pool_size=0, snapshot=False) as second:
        assert second.run("'x' in globals()", "s", user_id="bob").result == "False"
    with pytest.raises(ValueError, match="snapshot_store is only used with snapshot=True"):
        CodeMode(pool_size=0, snapshot=False, snapshot_store=store)


def test_an_agent_session_comes_back_with_its_held_states(store, embedder):
    workspace = Workspace.open(embedder=embedder)
    with workspace.session("agent-7", user_id="alice", snapshot_store=store) as first:
        run = first.run_task("parse this molecule", inputs={"smiles": "CCO"})
        assert run.result.status == "ok" and first.artifacts == {"molecule": "chemistry.molecule_parsed"}
    with workspace.session("agent-7", user_id="alice", snapshot_store=store) as later:
        assert later.held == {"chemistry.molecule_parsed"} and later.artifacts == {"molecule": "chemistry.molecule_parsed"}
        follow_up = later.plan_task("compute descriptors")
        assert [step.tool.name for step in follow_up.plan.steps] == ["compute_descriptors"]
        result = later.run_task(follow_up)
        assert result.result.status == "ok" and "Restored" in result.result.notice
    with pytest.raises(SessionOwnerError):
        workspace.session("agent-7", user_id="bob", snapshot_store=store)


def test_aliases_shared_objects_cell_classes_and_enums_come_back_as_they_were(store):
    cell = textwrap.dedent(
        """
        import enum
        class Color(enum.Enum):
            RED = 1
            BLUE = 2
            CRIMSON = 1
            def shout(self):
                return self.name.upper() + "!"
        favorite = Color.RED
        palette = {"warm": [Color.CRIMSON]}
        class Base:
            pass
        class Sub(Base):
            def __init__(self, size):
                self.size = size
        item = Sub(3)
        a = [1, 2]
        b = a
        shared = {"k": 1}
        left, right = [shared], [shared]
        anonymous_left = [{"n": 1}]
        anonymous_right = (anonymous_left[0],)
        loop = []
        loop.append(loop)
        import pandas as pd
        frame_one, frame_two = pd.DataFrame({"a": [1]}), pd.DataFrame({"b": [2]})
        """
    )
    check = (
        "print(favorite is Color.RED is palette['warm'][0] is Color(1), Color.BLUE.shout(), list(Color.__members__),"
        " isinstance(item, Sub), isinstance(item, Base), issubclass(Sub, Base), item.size,"
        " b is a, left[0] is right[0] is shared, anonymous_left[0] is anonymous_right[0], loop[0] is loop)"
    )
    with code_mode(store) as first:
        assert first.run(cell, "s").status == "ok"
    # Only the variables that share an object no variable holds are one record; DataFrames, which
    # share library state, are not.
    assert [key for key in SnapshotStore(store).load("s").pickles if "," in key] == ["anonymous_left, anonymous_right"]
    with code_mode(store) as second:
        result = second.run(check + "\nb.append(3)\nshared['k'] = 2", "s")
        assert result.status == "ok", result
        assert result.stdout == "True BLUE! ['RED', 'BLUE', 'CRIMSON'] True True True 3 True True True True\n"
        assert "Not restored" not in result.notice
    with code_mode(store) as third:  # and what the second kernel changed through one name shows through the others
        assert third.run("print(a, left[0]['k'], right[0]['k'])", "s").stdout == "[1, 2, 3] 2 2\n"


def test_what_a_new_kernel_cannot_get_back_as_it_was_is_named_not_replaced(store, tmp_path):
    cell = textwrap.dedent(
        f"""
        import threading
        guard = threading.Lock()
        reentrant = threading.RLock()
        log = open({str(tmp_path / "log.txt")!r}, "w")
        guarded = [guard]
        worker = threading.Thread(target=print)
        kept = {{"rows": [1, 2]}}
        """
    )
    with code_mode(store) as first:
        assert first.run(cell, "s").status == "ok"
    with code_mode(store) as second:
        result = second.run("print(sorted(name for name in ('guard', 'reentrant', 'log', 'guarded', 'worker', 'kept') if name in globals()))", "s")
        assert result.stdout == "['kept']\n"
        notice = result.notice
        assert "guard (it holds a lock (_thread.lock)" in notice and "reentrant (it holds a lock (_thread.RLock)" in notice
        assert "log (it holds an open file or stream (_io.TextIOWrapper)" in notice
        assert "worker (it holds a thread (threading.Thread)" in notice
        assert "guarded (it refers to guard, which is not saved)" in notice


def test_a_tool_handle_held_in_a_variable_is_named_and_an_alias_of_a_variable_left_out_is_left_out(store, chemistry):
    parse = chemistry.registry.get_tool_by_name("parse_molecule")
    with code_mode(store, max_variable_bytes=100_000) as first:
        first.bind("s", [parse], universe=list(chemistry.registry))
        assert first.run("toolbox = {'chem': chemistry}\nbig = list(range(50_000))\nview = big\nsmall = [1]", "s").status == "ok"
    with code_mode(store) as second:
        result = second.run("print(sorted(name for name in ('toolbox', 'big', 'view', 'small') if name in globals()))", "s")
        assert result.stdout == "['small']\n"
        assert "toolbox (it holds a toolpath tool handle" in result.notice
        assert "big (too large" in result.notice and "view (it refers to big, which is not saved)" in result.notice


def test_a_snapshot_in_the_first_format_still_restores_and_a_newer_format_is_named(store):
    # Format 1: a plain dill pickle per variable, as toolpath wrote it before format versions.
    first_format = {"numbers": dill.dumps([1, 2, 3]), "label": dill.dumps("old")}
    newer = b"toolpath-snapshot-99\n" + dill.dumps("from the future")
    pickles = {**first_format, "future": newer}
    SnapshotStore(store).save("s", None, {name: f"digest-{name}" for name in pickles}, pickles, {}, None)
    with code_mode(store) as later:
        result = later.run("print(numbers, label, 'future' in globals())", "s")
        assert result.stdout == "[1, 2, 3] old False\n"
        assert "future (could not be restored (ValueError: it was saved in snapshot format 99" in result.notice


def test_a_snapshot_stored_before_the_kernel_modules_moved_still_restores(store):
    # Format 2 as written before issue 51: a value pickled by value is rebuilt by
    # toolpath.kernel.kernel_snapshot.load_by_value, the module's path then.
    inner = dill.dumps([1, 2, 3])
    call = b"\x80\x04ctoolpath.kernel.kernel_snapshot\nload_by_value\nB" + len(inner).to_bytes(4, "little") + inner + b"\x85R."
    SnapshotStore(store).save("s", None, {"numbers": "digest"}, {"numbers": b"toolpath-snapshot-2\n" + call}, {}, None)
    with code_mode(store) as later:
        result = later.run("print(numbers)", "s")
        assert result.stdout == "[1, 2, 3]\n", result.notice


def test_variables_that_share_an_object_but_cannot_be_pickled_together_are_named_not_copied(store):
    cell = textwrap.dedent(
        """
        class PicklesTwice:
            pickled = 0
            def __reduce__(self):
                PicklesTwice.pickled += 1
                if PicklesTwice.pickled > 2:
                    raise RuntimeError("no third pickle")
                return (PicklesTwice, ())
        one = [PicklesTwice()]
        two = [one[0]]
        alone = "fine"
        """
    )
    with code_mode(store) as first:
        assert first.run(cell, "s").status == "ok"
    with code_mode(store) as second:
        result = second.run("print(alone, 'one' in globals(), 'two' in globals())", "s")
        assert result.stdout == "fine False False\n"
        assert "one, two (they share objects, and pickling them together failed: cannot be pickled (RuntimeError: no third pickle))" in result.notice


#: A second process on one TOOLPATH_HOME: runs one cell in session "s", prints a line with its
#: result (or the error it met), then holds the session until told to end on stdin.
SECOND_PROCESS = """
import sys
from toolpath.kernel import CodeMode

with CodeMode(pool_size=0, timeout=60) as code_mode:
    try:
        result = code_mode.run(sys.argv[1], "s")
    except Exception as error:
        print(f"{type(error).__name__}: {error}", flush=True)
    else:
        code_mode.close()  # writes the snapshot now
        print(f"{result.status}: {result.stdout.strip()} | {result.notice}", flush=True)
    sys.stdin.readline()
"""


@contextlib.contextmanager
def second_process(home, code):
    """The second process, started on ``home``; yields it with the line it printed."""
    child = subprocess.Popen(
        [sys.executable, "-c", SECOND_PROCESS, code],
        cwd=ROOT,
        env={**os.environ, "TOOLPATH_HOME": str(home)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        yield child, child.stdout.readline().strip()
    finally:
        if child.poll() is None:
            child.stdin.close()  # its readline ends: it shuts down, letting go of the session
            try:
                child.wait(timeout=60)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()


@pytest.fixture()
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLPATH_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_a_session_another_running_process_holds_is_refused_and_nothing_is_lost(home):
    # Before: both processes ran their cells and the last snapshot written won, losing a variable.
    with second_process(home, "from_other = 'other'") as (child, line):
        assert line.startswith("ok:"), line
        with CodeMode(pool_size=0, timeout=60) as here:
            with pytest.raises(SessionHeldError) as refused:
                here.run("from_here = 'here'", "s")
            message = str(refused.value)
            assert f"process {child.pid} on host" in message and "'s'" in message and "still running" in message
            assert "use another session id" in message
            assert refused.value.session_id == "s" and refused.value.holder.pid == child.pid
            assert here.sessions() == []  # no kernel was started for it
        child.stdin.close()
        child.wait(timeout=60)
    with CodeMode(pool_size=0, timeout=60) as here:  # the other process let go when it shut down
        result = here.run("from_here = 'here'\nprint(from_other)", "s")
        assert result.stdout == "other\n" and "Restored 1 variable(s)" in result.notice


def test_the_other_process_is_refused_while_this_one_holds_the_session(home):
    with CodeMode(pool_size=0, timeout=60) as here:
        here.run("from_here = 'here'", "s")
        with second_process(home, "from_other = 'other'") as (_, line):
            assert line.startswith("SessionHeldError: session 's' is in use by process"), line
            assert f"process {os.getpid()} on host" in line
        assert here.run("from_here", "s").result == "'here'"
    with second_process(home, "print(from_here)") as (_, line):  # shut down: the session is free
        assert line.startswith("ok: here |") and "Restored 1 variable(s)" in line


def test_a_holder_that_died_is_taken_over_with_a_notice(home):
    with second_process(home, "kept = 'saved before dying'") as (child, line):
        assert line.startswith("ok:"), line
        child.kill()
        child.wait(timeout=60)
        with CodeMode(pool_size=0, timeout=60) as here:
            result = here.run("print(kept)", "s")
            assert result.stdout == "saved before dying\n"
            assert f"held by process {child.pid} on host" in result.notice and "took it over" in result.notice
            assert "Restored 1 variable(s)" in result.notice


def test_a_snapshot_is_never_written_over_a_newer_one_of_another_holder(store):
    # Two CodeModes of one process cannot tell each other apart by process, so the second takes the
    # session; the first's later snapshot is then refused rather than written over the second's.
    with code_mode(store) as first, code_mode(store) as second:
        first.run("x = 1", "s")
        first.close()
        assert second.run("x += 1\ny = 'second'", "s").stdout == ""
        second.close()
        first.run("x = 100", "s")
        first.close()
        assert "variables were not saved" in first.run("x", "s").notice
        snapshot = SnapshotStore(store).load("s")
        assert sorted(snapshot.pickles) == ["x", "y"]
    with code_mode(store) as later:
        assert later.run("print(x, y)", "s").stdout == "2 second\n"


def test_after_each_cell_the_snapshot_is_stored_before_the_result_returns_and_its_failure_is_told_with_it(store):
    with code_mode(store, snapshot_after_each_cell=True, snapshot_debounce=60) as durable:
        assert durable.run("marker = 'WRITTEN-BEFORE-RETURN'", "s").status == "ok"
        assert SnapshotStore(store).load("s").pickles.keys() == {"marker"}  # no debounce waited for
        # A dump that fails (here a cell replaced it with one that leaves a FIFO) is said on that cell.
        trap = (
            "import json, os\nimport toolpath.kernel.inside.snapshot as _snapshot_code\n"
            "def _trap(path, *args, **kwargs):\n    os.mkfifo(path)\n"
            "    with open(path + '.report', 'w') as file:\n        json.dump({'saved': {}, 'skipped': {}}, file)\n"
            "_snapshot_code.dump = _trap"
        )
        trapped = durable.run(trap, "s")
        assert trapped.status == "ok" and "Saving this session's snapshot failed" in trapped.notice and "FIFO" in trapped.notice


def test_a_remote_kernel_that_claims_an_endless_file_is_refused_at_the_bound(store, kernel_gateway):
    """A gateway kernel's files come over its channels: one whose transfer code a cell replaced to
    claim a file of a terabyte is refused at the first answer, not read chunk by chunk."""
    endless = (
        "import base64\nimport toolpath.kernel.inside.files as _files\n"
        "_files.send = lambda name, offset, size: _files.answer({'size': 10**12, 'data': base64.b64encode(b'x' * size).decode()})\n"
        "planted = 1"
    )
    with code_mode(store, snapshot_after_each_cell=True, **kernel_gateway) as remote:
        started = time.monotonic()
        result = remote.run(endless, "endless")
        assert result.status == "ok" and "Saving this session's snapshot failed" in result.notice
        assert "1,000,000,000,000 bytes, over the" in result.notice and time.monotonic() - started < 30
