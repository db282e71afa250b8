"""Control groups for sandboxed kernels (:mod:`toolpath.kernel.sandbox.cgroup`), on this machine's real
cgroup hierarchies; skipped, with the reason, where none is writable."""

import os
import subprocess
import sys
import time

import pytest

from toolpath.kernel.sandbox.cgroup import KernelControlGroup, control_group_problem, remove_stale_groups

pytestmark = pytest.mark.skipif(bool(control_group_problem()), reason=control_group_problem() or "control groups can be made here")


def _read(directory, *names):
    for name in names:
        if os.path.exists(os.path.join(directory, name)):
            with open(os.path.join(directory, name)) as file:
                return file.read().strip()
    return None


def test_a_group_caps_processes_and_memory_holds_what_joins_it_and_is_removed_with_its_processes():
    group = KernelControlGroup.create(processes=7, memory_bytes=300 * 2**20)
    try:
        assert {_read(directory, "pids.max") for directory in group.directories} - {None} == {"7"}
        assert {_read(directory, "memory.max", "memory.limit_in_bytes") for directory in group.directories} - {None} == {str(300 * 2**20)}
        launcher = os.path.join(os.path.dirname(sys.modules["toolpath.kernel.sandbox.cgroup"].__file__), "launch.py")
        joined = subprocess.Popen([sys.executable, "-I", "-S", launcher, *(f"--join={path}" for path in group.join_files()), "--", "sleep", "60"])
        for _ in range(100):
            if joined.pid in group.processes():
                break
            time.sleep(0.05)
        assert group.processes() == {joined.pid}
    finally:
        group.remove()
    assert joined.wait(timeout=10) == -9  # what was left in the group was stopped
    assert not any(os.path.exists(directory) for directory in group.directories)
    group.remove()  # twice is harmless


def test_only_old_empty_groups_are_removed_as_stale():
    fresh, old, busy = (KernelControlGroup.create(processes=5, memory_bytes=2**30) for _ in range(3))
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        for path in busy.join_files():
            with open(path, "w") as file:
                file.write(str(sleeper.pid))
        for directory in old.directories + busy.directories:
            os.utime(directory, (time.time() - 3600, time.time() - 3600))
        removed = remove_stale_groups()
        assert set(old.directories) <= set(removed)
        assert all(os.path.exists(directory) for directory in fresh.directories + busy.directories)
    finally:
        for group in (fresh, old, busy):
            group.remove()
        sleeper.kill()
