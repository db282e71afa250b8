"""Kernel directories left by a killed host: found and removed without blocking or following links."""

import json
import os
import threading

from toolpath.kernel.kernels.private_directories import owner, remove_stale_directories


def test_stale_directory_cleanup_reads_owner_files_without_blocking(tmp_path):
    fifo, malformed, live, fresh, target = (
        tmp_path / name for name in ("toolpath-kernel-fifo", "toolpath-kernel-bad", "toolpath-kernel-live", "toolpath-kernel-new", "elsewhere")
    )
    for directory in (fifo, malformed, live, fresh, target):
        directory.mkdir()
    os.mkfifo(fifo / "owner.json")
    (malformed / "owner.json").write_text('{"pid": ')
    (live / "owner.json").write_text(json.dumps(owner()))
    (tmp_path / "toolpath-kernel-link").symlink_to(target)
    for directory in (fifo, malformed):
        os.utime(directory, (0, 0))  # over an hour old

    removed: list = []
    worker = threading.Thread(target=lambda: removed.extend(remove_stale_directories(str(tmp_path))), daemon=True)
    worker.start()
    worker.join(10)
    assert not worker.is_alive(), "reading a FIFO owner file blocked"
    assert sorted(removed) == sorted([str(fifo), str(malformed)])
    assert live.is_dir() and fresh.is_dir() and target.is_dir()  # a live owner, an unowned young dir, a link's target


def test_a_dead_owners_directory_nested_past_the_recursion_limit_is_removed(tmp_path):
    stale = tmp_path / "toolpath-kernel-deep"
    stale.mkdir()
    (stale / "owner.json").write_text(json.dumps({"pid": 2**22 + 1, "started": 0.0}))  # no such process
    deepest = stale
    for _ in range(1500):  # past Python's recursion limit, which shutil.rmtree recursed into on 3.11
        deepest = deepest / "a"
        deepest.mkdir()
    (deepest / "bottom").write_text("kept in RAM when the directory is on /dev/shm")
    assert remove_stale_directories(str(tmp_path)) == [str(stale)]
    assert not stale.exists()
