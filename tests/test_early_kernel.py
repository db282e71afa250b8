"""A kernel started while a task is planned: CodeMode.start_soon and Workspace.run_task(code_mode=...)."""

from __future__ import annotations

import time

import pytest
from test_codemode import kernel_pids

from toolpath.kernel import CodeMode

pytestmark = pytest.mark.integration


def test_a_cell_after_start_soon_runs_in_the_kernel_started_in_the_background():
    with CodeMode(pool_size=0, snapshot=False) as code_mode:
        started = time.monotonic()
        code_mode.start_soon("s")
        assert time.monotonic() - started < 0.5  # returns at once
        deadline = time.monotonic() + 60
        while code_mode.kernel_id("s") is None and time.monotonic() < deadline:
            time.sleep(0.05)
        kernel_id = code_mode.kernel_id("s")
        assert kernel_id is not None
        assert code_mode.run("21 * 2", "s").result == "42"
        assert code_mode.kernel_id("s") == kernel_id  # the kernel started early, not a second one
    assert not kernel_pids()


def test_shutting_down_while_a_kernel_starts_stops_that_kernel():
    before = kernel_pids()
    code_mode = CodeMode(pool_size=0, snapshot=False)
    code_mode.start_soon("s")
    deadline = time.monotonic() + 30
    while not kernel_pids() - before and time.monotonic() < deadline:
        time.sleep(0.01)  # until its process exists, before it answers
    assert code_mode.kernel_id("s") is None
    code_mode.shutdown()
    assert kernel_pids() <= before


def test_a_cell_runs_when_the_background_start_failed_and_says_why(tmp_path):
    with CodeMode(pool_size=0, snapshot=False, python=str(tmp_path / "no-python")) as code_mode:
        code_mode.start_soon("s")
        with pytest.raises(Exception, match="could not start an IPython kernel"):
            code_mode.run("1", "s")


def test_run_task_in_a_given_code_mode_leaves_it_running(workspace):
    task_plan = workspace.plan_task("check Lipinski's rule of five", {"smiles": "CCO"})
    with workspace.code_mode(snapshot=False) as code_mode:
        code_mode.start_soon("toolpath-run")
        run = workspace.run_task(task_plan, code_mode=code_mode)
        assert run.result.status == "ok", run.result.error
        assert code_mode.sessions() == ["toolpath-run"]
        with pytest.raises(ValueError, match="options of a fresh CodeMode"):
            workspace.run_task(task_plan, code_mode=code_mode, gateway_url="http://127.0.0.1:1")
