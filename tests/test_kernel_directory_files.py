"""What the host does with files a kernel left in its private directory (issue 50).

A cell can replace toolpath's kernel-side snapshot code and leave anything where the host reads the
dump: a link to ``/dev/zero`` or to a host file, a FIFO, a directory, a sparse file, a file swapped
for a link while the host reads. Each trick is tried on the host's reading and writing functions
directly, and through a real sandboxed kernel whose snapshot the host then takes: each is refused
with a notice to that session, nothing of the host's reaches the store, and the process stays as
it was (memory, threads).
"""

import os
import socket
import threading
import time

import psutil
import pytest
from conftest import wait_until_stored

from toolpath.kernel import CodeMode
from toolpath.kernel.inside.snapshot import pack
from toolpath.kernel.kernels.directory_files import UnsafeKernelFileError, read_and_remove, restrict_socket, write_replacing
from toolpath.kernel.sandbox.provisioner import SandboxPolicy, sandbox_problem

HOST_SECRET = b"HOST-ONLY-SECRET-31"
#: A host file the kernel cannot see, shaped as another session's snapshot dump would be (so that
#: a host that read it would store it as this session's).
HOST_FILE = pack({"bobs_data": HOST_SECRET})


@pytest.fixture
def host_secret(tmp_path):
    secret = tmp_path / "host-secret.dump"
    secret.write_bytes(HOST_FILE)
    return secret


@pytest.fixture
def directory(tmp_path):
    private = tmp_path / "kernel"
    private.mkdir(mode=0o700)
    return private


def test_a_regular_file_is_read_and_removed(directory):
    (directory / "dump").write_bytes(b"records")
    assert read_and_remove(str(directory), "dump", max_bytes=100) == b"records"
    assert not (directory / "dump").exists()


@pytest.mark.parametrize(
    "plant, found",
    [
        (lambda path, secret: os.symlink("/dev/zero", path), "symbolic link"),
        (lambda path, secret: os.symlink(secret, path), "symbolic link"),
        (lambda path, secret: os.mkfifo(path), "FIFO"),
        (lambda path, secret: os.mkdir(path), "directory"),
        (lambda path, secret: os.link(secret, path), "2 names"),
        (lambda path, secret: os.truncate(open(path, "wb").name, 2**40), "1,099,511,627,776 bytes"),
        (lambda path, secret: socket.socket(socket.AF_UNIX).bind(path), "a socket"),
    ],
    ids=["link-to-dev-zero", "link-to-host-file", "fifo", "directory", "hard-link", "sparse-terabyte", "socket"],
)
def test_anything_but_a_small_regular_file_is_refused_at_once_and_unread(directory, host_secret, plant, found):
    path = directory / "dump"
    plant(str(path), str(host_secret))
    started = time.monotonic()
    with pytest.raises(UnsafeKernelFileError, match=found):
        read_and_remove(str(directory), "dump", max_bytes=64 * 2**20)
    assert time.monotonic() - started < 1.0
    assert host_secret.read_bytes() == HOST_FILE
    # Whatever was there is gone (but a directory), so the kernel's next honest dump is read.
    assert os.path.isdir(path) or not os.path.lexists(path)


def test_a_file_swapped_for_a_link_during_reads_never_yields_the_link_target(directory, host_secret):
    stop = threading.Event()

    def swap():
        while not stop.is_set():
            for make in (lambda: os.symlink(host_secret, directory / "next"), lambda: (directory / "next").write_bytes(b"honest")):
                try:
                    make()
                    os.replace(directory / "next", directory / "dump")
                except OSError:
                    pass

    swapper = threading.Thread(target=swap)
    swapper.start()
    read, refused = [], 0
    deadline = time.monotonic() + 20
    try:
        # Until both a file and a link were met (a loaded machine may schedule the swapper rarely).
        attempts = 0
        while (attempts < 2000 or not (read and refused)) and time.monotonic() < deadline:
            attempts += 1
            try:
                read.append(read_and_remove(str(directory), "dump", max_bytes=100))
            except UnsafeKernelFileError:
                refused += 1
            except FileNotFoundError:
                pass
    finally:
        stop.set()
        swapper.join()
    assert read and refused  # both kinds were met
    assert set(read) == {b"honest"}


def test_a_write_replaces_a_link_and_never_writes_through_it(directory, host_secret):
    os.symlink(host_secret, directory / "restore")
    write_replacing(str(directory), "restore", b"pickles")
    assert host_secret.read_bytes() == HOST_FILE
    assert not os.path.islink(directory / "restore") and (directory / "restore").read_bytes() == b"pickles"
    assert oct((directory / "restore").stat().st_mode & 0o777) == "0o600"
    assert sorted(os.listdir(directory)) == ["restore"]  # no partial file left


def test_a_write_onto_a_directory_is_refused_and_leaves_nothing(directory):
    (directory / "restore").mkdir()
    with pytest.raises(UnsafeKernelFileError, match="directory"):
        write_replacing(str(directory), "restore", b"pickles")
    assert sorted(os.listdir(directory)) == ["restore"]


def test_names_with_a_path_are_refused(directory):
    for name in ("../escape", "", ".", "a/b"):
        with pytest.raises(ValueError, match="bare file name"):
            read_and_remove(str(directory), name, max_bytes=10)
        with pytest.raises(ValueError, match="bare file name"):
            write_replacing(str(directory), name, b"")


def test_a_socket_swapped_for_a_link_is_not_chmodded_through(directory, host_secret):
    host_secret.chmod(0o644)
    os.symlink(host_secret, directory / "bridge.sock")
    with pytest.raises(UnsafeKernelFileError, match="not the socket"):
        restrict_socket(str(directory / "bridge.sock"))
    assert oct(host_secret.stat().st_mode & 0o777) == "0o644"


# --- through a real sandboxed kernel --------------------------------------------------------------

SANDBOX_PROBLEM = sandbox_problem()

#: A cell that replaces toolpath's kernel-side dump: it leaves ``{plant}`` at the dump path, and a
#: report that claims the dump holds a variable ``bobs_data`` (what :data:`HOST_FILE` holds).
ATTACK = """
import json, os, threading
import toolpath.kernel.inside.snapshot as _snapshot_code
def _hostile_dump(path, *args, **kwargs):
    if os.path.lexists(path):
        os.remove(path)
    {plant}
    with open(path + ".report", "w") as file:
        json.dump({{"saved": {{"bobs_data": "0" * 32}}, "skipped": {{}}}}, file)
_snapshot_code.dump = _hostile_dump
planted = 1
"""


def _snapshot_notice(code_mode, session, seconds=60.0):
    """Run cells in ``session`` until one's notice says its last snapshot failed; that notice."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.3)
        result = code_mode.run("planted", session)
        assert result.status == "ok", result.error
        if "snapshot failed" in result.notice:
            return result.notice
    raise AssertionError("no snapshot was attempted")


@pytest.fixture
def sandboxed(tmp_path, monkeypatch):
    if SANDBOX_PROBLEM:
        pytest.skip(SANDBOX_PROBLEM)
    monkeypatch.setenv("TOOLPATH_HOME", str(tmp_path / "home"))
    policy = SandboxPolicy(memory_bytes=512 * 2**20, disk_bytes=64 * 2**20)
    with CodeMode(pool_size=0, timeout=60, sandbox=policy, snapshot_debounce=0.2, max_snapshot_bytes=2_000_000) as code_mode:
        yield code_mode


@pytest.mark.integration
@pytest.mark.parametrize(
    "plant, found",
    [
        ("os.symlink('/dev/zero', path)", "symbolic link"),
        ("os.symlink({secret!r}, path)", "symbolic link"),
        ("os.mkfifo(path)", "FIFO"),
        ("os.mkdir(path)", "directory"),
        ("os.truncate(open(path, 'wb').name, 40 * 2**20)", "41,943,040 bytes"),
    ],
    ids=["link-to-dev-zero", "link-to-host-file", "fifo", "directory", "sparse-file"],
)
def test_a_hostile_dump_is_refused_with_a_notice_and_the_host_is_untouched(sandboxed, tmp_path, host_secret, plant, found):
    assert sandboxed.run(ATTACK.format(plant=plant.format(secret=str(host_secret))), "mallory").status == "ok"
    assert found in _snapshot_notice(sandboxed, "mallory")
    # Every later snapshot is refused the same way, and none leaves memory or a thread behind.
    process = psutil.Process()
    memory, threads = process.memory_info().rss, process.num_threads()
    for _ in range(3):
        assert found in _snapshot_notice(sandboxed, "mallory")
    assert process.memory_info().rss - memory < 32 * 2**20
    assert process.num_threads() <= threads + 2  # a thread stuck on each would be 3 more; the pool may grow by one
    # Only that session hears of it; another session's cells and snapshots go on.
    bystander = sandboxed.run("kept = 2", "bystander")
    assert bystander.status == "ok" and "snapshot failed" not in bystander.notice
    wait_until_stored(tmp_path / "home" / "toolpath.db", b"kept")
    assert HOST_SECRET not in (tmp_path / "home" / "toolpath.db").read_bytes()


@pytest.mark.integration
def test_a_dump_swapped_for_a_link_to_a_host_file_while_the_host_reads_never_stores_the_file(sandboxed, tmp_path, host_secret):
    # The kernel's dump leaves an honest record of bobs_data, then a thread swaps the dump path
    # between it and a link to the host's file, as fast as it can, while the host reads.
    swapping = f"""
import json, os, threading, toolpath.kernel.inside.snapshot as _snapshot_code
def _racing_dump(path, *args, **kwargs):
    honest = _snapshot_code.pack({{"bobs_data": b"honest"}})
    with open(path, "wb") as file:
        file.write(honest)
    with open(path + ".report", "w") as file:
        json.dump({{"saved": {{"bobs_data": "0" * 32}}, "skipped": {{}}}}, file)
    def swap():
        for _ in range(5000):
            for make in (lambda: os.symlink({str(host_secret)!r}, path + ".next"), lambda: open(path + ".next", "wb").write(honest)):
                try:
                    make()
                    os.replace(path + ".next", path)
                except OSError:
                    pass
    threading.Thread(target=swap, daemon=True).start()
_snapshot_code.dump = _racing_dump
"""
    assert sandboxed.run(swapping, "mallory").status == "ok"
    for round_ in range(15):
        assert sandboxed.run(f"value_{round_} = {round_}", "mallory").status == "ok"
        time.sleep(0.4)
    assert HOST_SECRET not in (tmp_path / "home" / "toolpath.db").read_bytes()


@pytest.mark.integration
def test_a_kernel_directory_nested_past_pythons_recursion_limit_is_still_removed_and_a_restart_works(tmp_path, monkeypatch):
    # shutil.rmtree recurses once per level on Python 3.11: a cell's 1,500-deep tree made every
    # shutdown of that kernel (an eviction for another user, a restart) raise RecursionError, and
    # its files stayed in /dev/shm for good.
    monkeypatch.setenv("TOOLPATH_HOME", str(tmp_path / "home"))
    nest = "import os\nos.chdir({directory!r})\nfor _ in range(1500):\n    os.mkdir('a')\n    os.chdir('a')\nopen('bottom', 'w').write('x')\nos.chdir('/')"
    with CodeMode(pool_size=0, timeout=120, snapshot=False) as code_mode:
        directory = code_mode._engine.pool.sessions["deep"].kernel.directory if code_mode.run("1", "deep").status == "ok" else None
        assert code_mode.run(nest.format(directory=directory), "deep").status == "ok"
        code_mode.restart("deep")
        assert not os.path.exists(directory)
        assert code_mode.run("'fresh'", "deep").result == "'fresh'"


def test_a_report_with_a_lone_surrogate_or_the_wrong_shape_is_refused():
    from toolpath.kernel.codemode.session_snapshots import checked_report
    from toolpath.kernel.errors import KernelError

    shape = {"saved": dict, "skipped": dict}
    assert checked_report(b'{"saved": {"x": "d"}, "skipped": {}}', shape) == {"saved": {"x": "d"}, "skipped": {}}
    for report, said in (
        (b'{"saved": {}, "skipped": {"\\ud800": "why"}}', "not Unicode"),
        (b'{"saved": [], "skipped": {}}', "saved is not a mapping"),
        (b'{"saved": {}, "skipped": {}, "extra": 1}', "does not have the fields"),
        (b"[" * 100_000, "not JSON"),
    ):
        with pytest.raises(KernelError, match=said):
            checked_report(report, shape)
