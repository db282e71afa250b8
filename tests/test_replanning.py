"""Replanning (issue 55): a step that fails for good costs a replan from the held states, not the run
(real kernels). The `records` catalog has two routes to each goal: a record is fetched from the
primary store (cheapest, in the kernel), its mirror (a host tool) or the archive, and published through a desk that asks a person first,
or through a mirror desk that asks too, or through a quiet outbox that never asks; the publication is
confirmed in the readers' feed or its mirror."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import textwrap
from typing import Any

import pytest
import yaml

from toolpath.kernel import FailureInjection, Toolkit
from toolpath.kernel.tools.approvals import ApprovalDecision
from toolpath.planner import Workspace
from toolpath.planner.tasks.failure_injections import UnknownInjectionTargetError
from toolpath.planner.tasks.record_of_use import Recorder, history, local_user, wait_for_writes

pytestmark = pytest.mark.integration

RECORDS_CATALOG = """\
domain: records
package: records
states:
  - token: records.key_read
    description: a record key read from the user's words
  - token: records.record_fetched
    description: a record fetched from a store
  - token: records.summary_made
    description: a short summary of a record
  - token: records.summary_published
    description: a summary published for readers
  - token: records.publication_confirmed
    description: a publication confirmed in the readers' feed
tools:
  - name: read_key
    description: Read a record key.
    required_parameters: [{name: key, type: str}]
    return_spec: {name: key_text, type: str, state: records.key_read}
    state_transition: {produces: [records.key_read]}
  - name: fetch_primary
    description: Fetch a record from the primary store.
    required_parameters: [{name: key_text, type: str, state: records.key_read}]
    return_spec: {name: record, type: dict, state: records.record_fetched}
    state_transition: {requires: [records.key_read], produces: [records.record_fetched]}
    retry: {attempts: 1}
  - name: fetch_mirror
    description: Fetch a record from the mirror store, slower than the primary.
    cost: 2
    binding: host
    required_parameters: [{name: key_text, type: str, state: records.key_read}]
    return_spec: {name: record, type: dict, state: records.record_fetched}
    state_transition: {requires: [records.key_read], produces: [records.record_fetched]}
    retry: {attempts: 1}
  - name: fetch_archive
    description: Fetch a record from the archive, slowest of the stores.
    cost: 3
    required_parameters: [{name: key_text, type: str, state: records.key_read}]
    return_spec: {name: record, type: dict, state: records.record_fetched}
    state_transition: {requires: [records.key_read], produces: [records.record_fetched]}
    retry: {attempts: 1}
  - name: summarize_record
    description: Summarize a fetched record in one line.
    required_parameters: [{name: record, type: dict, state: records.record_fetched}]
    return_spec: {name: summary, type: str, state: records.summary_made}
    state_transition: {requires: [records.record_fetched], produces: [records.summary_made]}
  - name: publish_desk
    description: Publish a summary through the desk; a person approves it.
    effects: sends
    approval: always
    binding: host
    required_parameters: [{name: summary, type: str, state: records.summary_made}]
    return_spec: {name: receipt, type: str}
    state_transition: {requires: [records.summary_made], produces: [records.summary_published]}
  - name: publish_mirror_desk
    description: Publish a summary through the mirror desk; a person approves it.
    effects: sends
    approval: always
    binding: host
    cost: 2
    required_parameters: [{name: summary, type: str, state: records.summary_made}]
    return_spec: {name: receipt, type: str}
    state_transition: {requires: [records.summary_made], produces: [records.summary_published]}
  - name: publish_outbox
    description: Publish a summary through the outbox, without asking anyone.
    effects: sends
    cost: 3
    required_parameters: [{name: summary, type: str, state: records.summary_made}]
    return_spec: {name: receipt, type: str}
    state_transition: {requires: [records.summary_made], produces: [records.summary_published]}
  - name: confirm_in_feed
    description: Confirm in the readers' feed that a published summary appeared.
    required_parameters: [{name: summary, type: str, state: records.summary_made}]
    return_spec: {name: confirmation, type: str, state: records.publication_confirmed}
    state_transition: {requires: [records.summary_made, records.summary_published], produces: [records.publication_confirmed]}
    retry: {attempts: 1}
  - name: confirm_in_feed_mirror
    description: Confirm in the mirror of the readers' feed that a published summary appeared, slower.
    cost: 2
    required_parameters: [{name: summary, type: str, state: records.summary_made}]
    return_spec: {name: confirmation, type: str, state: records.publication_confirmed}
    state_transition: {requires: [records.summary_made, records.summary_published], produces: [records.publication_confirmed]}
    retry: {attempts: 1}
"""


def _counting(name: str, body: str) -> str:
    """A tool module that appends each call to the file ``$RECORDS_CALLS_LOG`` (read at each call: a
    host tool's module stays imported in the test process from one test to the next), then runs ``body``."""
    return textwrap.dedent(
        f"""
        import os

        def {name}(**arguments):
            with open(os.environ["RECORDS_CALLS_LOG"], "a") as log:
                log.write("{name}\\n")
        """
    ) + textwrap.indent(textwrap.dedent(body), "    ")


RECORD_MODULES = {
    "read_key": "return arguments['key'].strip()",
    "fetch_primary": """
        if arguments['key_text'] == 'bad key':
            raise ValueError(f"{arguments['key_text']!r} is not a record key")
        if arguments['key_text'] == 'slow':
            raise TimeoutError('the primary store did not answer in 2 s')
        if arguments['key_text'] == 'proxied':
            import requests  # through a proxy that refuses the connection: requests' ProxyError
            requests.get('http://primary.invalid/', proxies={'http': os.environ['RECORDS_PROXY']}, timeout=5)
        if arguments['key_text'] == 'stuck':
            import time
            time.sleep(60)  # until the cell's timeout interrupts it
        return {'key': arguments['key_text'], 'from': 'primary'}
        """,
    "fetch_mirror": """
        if arguments['key_text'] == 'proxied':
            import requests
            requests.get('http://mirror.invalid/', proxies={'http': os.environ['RECORDS_PROXY']}, timeout=5)
        return {'key': arguments['key_text'], 'from': 'mirror'}
        """,
    "fetch_archive": "return {'key': arguments['key_text'], 'from': 'archive'}",
    "summarize_record": "return f\"{arguments['record']['key']} (from the {arguments['record']['from']})\"",
    "publish_desk": "return 'desk:' + arguments['summary']",
    "publish_mirror_desk": "return 'mirror desk:' + arguments['summary']",
    "publish_outbox": """
        if arguments['summary'].startswith('stuck'):
            import time
            time.sleep(60)  # until the cell's timeout interrupts it, perhaps after sending
        return 'outbox:' + arguments['summary']
        """,
    "confirm_in_feed": "return 'seen in the feed: ' + arguments['summary']",
    "confirm_in_feed_mirror": "return 'seen in the feed mirror: ' + arguments['summary']",
}


@pytest.fixture()
def records(tmp_path, monkeypatch, embedder):
    """The records catalog's workspace, its kernels (and host tools) working in ``tmp_path``, where
    ``calls.log`` counts every call."""
    package = tmp_path / "records"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "catalog.yaml").write_text(RECORDS_CATALOG)
    for name, body in RECORD_MODULES.items():
        (package / f"{name}.py").write_text(_counting(name, body))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RECORDS_CALLS_LOG", str(tmp_path / "calls.log"))
    monkeypatch.setenv("RECORDS_PROXY", f"http://127.0.0.1:{_closed_port()}")
    workspace = Workspace.open([package / "catalog.yaml"], embedder=embedder)
    workspace.recorder = None
    return workspace, tmp_path


def calls(directory) -> list[str]:
    log = directory / "calls.log"
    return log.read_text().split() if log.exists() else []


SUMMARY_TASK = ["read the record key", "fetch the record", "summarize the record"]


def test_a_failing_in_kernel_tool_is_replanned_around_and_no_step_runs_twice(records):
    workspace, directory = records
    failing = FailureInjection("records.fetch_primary", on_calls=(1,))
    with workspace.session("replan-kernel", inject_failures=[failing]) as session:
        run = session.run_task(SUMMARY_TASK, inputs={"key": "r-17"})
        assert run.result.status == "ok", run.result.error
        assert "'summary': 'r-17 (from the mirror)'" in run.result.result
        # read_key ran once: the new route read its variable; the mirror (a host tool) served the record.
        assert calls(directory) == ["read_key", "fetch_mirror", "summarize_record"]
        (replan,) = run.replans
        assert replan.failure.kind == "injected" and replan.failure.tool == "records.fetch_primary"
        assert replan.old_route == ("records.fetch_primary", "records.summarize_record")
        assert replan.new_route == ("records.fetch_mirror", "records.summarize_record")
        assert [(step["tool"], step["cell"], step["status"]) for step in run.route] == [
            ("records.read_key", 0, "completed"),
            ("records.fetch_primary", 0, "failed"),
            ("records.fetch_mirror", 1, "completed"),
            ("records.summarize_record", 1, "completed"),
        ]
        assert run.made_by == {
            "records.key_read": {"tool": "records.read_key", "cell": 0, "variable": "key_text"},
            "records.record_fetched": {"tool": "records.fetch_mirror", "cell": 1, "variable": "record"},
            "records.summary_made": {"tool": "records.summarize_record", "cell": 1, "variable": "summary"},
        }
        assert "Replan 1: records.fetch_primary failed (InjectedFailure" in run.text()
        assert session.held >= {"records.key_read", "records.record_fetched", "records.summary_made"}
        payload = json.loads(json.dumps(run.to_dict()))
        assert [step["tool"] for step in payload["route"]][-1] == "records.summarize_record"
        assert payload["replans"][0]["avoided"] == ["records.fetch_primary"]


def test_stop_keeps_the_first_failure_and_a_bad_input_is_never_replanned(records):
    workspace, directory = records
    failing = FailureInjection("records.fetch_primary", on_calls=(1,))
    with workspace.session("replan-stop", inject_failures=[failing]) as session:
        stopped = session.run_task(SUMMARY_TASK, inputs={"key": "r-1"}, on_failure="stop")
        assert stopped.result.status == "error" and stopped.replans == () and stopped.failed_step == 1
        assert calls(directory) == ["read_key"]

        # A ValueError from the user's own key is not the tool's outage: the mirror would answer
        # something else for the same bad key, so the run stops and says why.
        refused = session.run_task(SUMMARY_TASK, inputs={"key": "bad key"})
        assert refused.result.status == "error" and refused.replans == ()
        assert refused.stopped.startswith("not replanned: the tool ran and refused its input")
        assert calls(directory) == ["read_key", "read_key", "fetch_primary"]
        assert "fetch_mirror" not in calls(directory)


def test_a_timeout_is_replanned_and_max_replans_bounds_the_run(records):
    workspace, directory = records
    with workspace.session("replan-timeout") as session:
        run = session.run_task(SUMMARY_TASK, inputs={"key": "slow"})
        assert run.result.status == "ok", run.result.error
        assert run.replans[0].failure.kind == "timeout" and "'slow (from the mirror)'" in run.result.result

    with workspace.session("replan-none") as session:
        bounded = session.run_task(SUMMARY_TASK, inputs={"key": "slow"}, max_replans=0)
        assert bounded.result.status == "error" and "max_replans=0" in bounded.stopped


def test_an_http_clients_connection_error_is_replanned_in_the_kernel_and_from_the_host(records):
    """requests' ProxyError derives from its ConnectionError, not the built-in one: the primary (in
    the kernel) and the mirror (a host tool) both lose their connection, and the archive serves."""
    workspace, directory = records
    with workspace.session("replan-proxied") as session:
        run = session.run_task(SUMMARY_TASK, inputs={"key": "proxied"})
    assert run.result.status == "ok", run.text()
    assert "'summary': 'proxied (from the archive)'" in run.result.result
    assert [(replan.failure.tool, replan.failure.kind) for replan in run.replans] == [
        ("records.fetch_primary", "connection"),
        ("records.fetch_mirror", "connection"),
    ]
    assert run.replans[0].failure.error.startswith("ProxyError: ")
    assert run.replans[1].failure.error.startswith("ConnectionError: ProxyError: ")  # crossed the bridge
    assert calls(directory) == ["read_key", "fetch_primary", "fetch_mirror", "fetch_archive", "summarize_record"]


def test_a_failing_host_tool_is_replanned_in_a_fresh_kernel_run(records):
    """Workspace.run_task with on_failure="replan" (its default stays "stop"): the primary fails, then
    the mirror (a host tool) fails, and the archive serves on the second replan."""
    workspace, directory = records
    task_plan = workspace.plan_task(SUMMARY_TASK, inputs={"key": "r-3"})
    assert [step.tool.name for step in task_plan.plan.steps] == ["read_key", "fetch_primary", "summarize_record"]
    failing = [FailureInjection("records.fetch_primary", on_calls=(1,)), FailureInjection("records.fetch_mirror", on_calls=(1,))]
    # summarize_record (read-only, the default retry policy) fails its first try and is tried again.
    failing.append(FailureInjection("records.summarize_record", on_calls=(1,)))
    stopped = workspace.run_task(task_plan, inject_failures=failing)
    assert stopped.result.status == "error" and stopped.replans == () and stopped.failed_step == 1

    workspace.recorder = Recorder("python", store=directory / "record.db")
    run = workspace.run_task(task_plan, inject_failures=failing, on_failure="replan")
    assert run.result.status == "ok", run.result.error
    assert "'summary': 'r-3 (from the archive)'" in run.result.result
    assert [(replan.failure.tool, replan.new_route[0]) for replan in run.replans] == [
        ("records.fetch_primary", "records.fetch_mirror"),
        ("records.fetch_mirror", "records.fetch_archive"),
    ]
    assert run.replans[1].avoided == ("records.fetch_primary", "records.fetch_mirror")
    assert [step["status"] for step in run.route] == ["completed", "failed", "failed", "completed", "completed"]
    # Once per run_task, never again within a run; the injected failures stop the tools before they run.
    assert calls(directory) == ["read_key", "read_key", "fetch_archive", "summarize_record"]
    # The record of use lists the route actually taken, and each replan.
    wait_for_writes()
    (entry,) = history(directory / "record.db", local_user())
    assert entry.outcome == "ran" and entry.ran == ("records/read_key", "records/fetch_archive", "records/summarize_record")
    assert entry.shown == ("records/read_key", "records/fetch_primary", "records/summarize_record")
    assert [(replan["failed"], replan["new_route"][0]) for replan in entry.replans] == [
        ("records/fetch_primary", "records/fetch_mirror"),
        ("records/fetch_mirror", "records/fetch_archive"),
    ]
    # The record counts, per tool over the run's three cells, each failure injected and each retry
    # (the fetches have one try each: none retried).
    assert entry.injected_failures == {"records/fetch_primary": 1, "records/fetch_mirror": 1, "records/summarize_record": 1}
    assert entry.retries == {"records/summarize_record": 1}
    shown = subprocess.run(
        [sys.executable, "-m", "toolpath.planner.interfaces.cli", "history", "--store", str(directory / "record.db")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert shown.returncode == 0, shown.stderr
    assert "    retried: records/summarize_record 1\n" in shown.stdout
    assert "    injected failures: records/fetch_primary 1, records/fetch_mirror 1, records/summarize_record 1\n" in shown.stdout

    with pytest.raises(ValueError, match="on_failure is one of 'replan', 'stop'"):
        workspace.run_task(task_plan, on_failure="retry")


def test_a_denied_approval_avoids_the_tool_and_every_quiet_tool_with_effects(records):
    workspace, directory = records
    asked: list[str] = []

    def approver(request):
        asked.append(request.tool)
        return ApprovalDecision(approved=request.tool.endswith("publish_mirror_desk"))

    with workspace.session("replan-approval", approver=approver) as session:
        run = session.run_task([*SUMMARY_TASK, "publish the summary through the desk"], inputs={"key": "r-9"})
        assert run.result.status == "ok", run.result.error
        assert asked == ["records.publish_desk", "records.publish_mirror_desk"]
        (replan,) = run.replans
        assert replan.failure.kind == "approval"
        # The outbox publishes without asking: avoided, so the effect denied is asked for again.
        assert set(replan.avoided) == {"records.publish_desk", "records.publish_outbox"}
        assert replan.new_route == ("records.publish_mirror_desk",)
        assert calls(directory) == ["read_key", "fetch_primary", "summarize_record", "publish_mirror_desk"], run.text()
        assert "'mirror desk:r-9 (from the primary)'" in run.result.result


PUBLISH_TASK = [*SUMMARY_TASK, "publish the summary through the desk", "confirm the publication in the readers' feed"]
#: The primary store fails before the pause (the first replan takes the mirror), the feed after it.
PRIMARY_THEN_FEED = [FailureInjection("records.fetch_primary", on_calls=(1,)), FailureInjection("records.confirm_in_feed", on_calls=(1,))]


def test_a_task_resumed_after_an_approval_pause_replans_a_later_failure(records):
    """Once the desk's call is approved, the feed fails and is planned around as in a task that never
    paused: the mirror of the feed confirms the summary made before the pause, nothing runs twice."""
    workspace, directory = records
    with workspace.session("resume-replan", inject_failures=PRIMARY_THEN_FEED) as session:
        paused = session.run_task(PUBLISH_TASK, inputs={"key": "r-8"}, on_approval="pause")
        assert paused.paused is not None and paused.paused["tool"] == "publish_desk", paused.text()
        assert [replan.failure.tool for replan in paused.replans] == ["records.fetch_primary"]
        resumed = session.resume(approved=True)
        assert resumed.result.status == "ok", resumed.text()
        assert "seen in the feed mirror: r-8 (from the mirror)" in resumed.result.result
        assert calls(directory) == ["read_key", "fetch_mirror", "summarize_record", "publish_desk", "confirm_in_feed_mirror"]
        assert [(replan.failure.tool, replan.new_route) for replan in resumed.replans] == [
            ("records.fetch_primary", ("records.fetch_mirror", "records.summarize_record", "records.publish_desk", "records.confirm_in_feed")),
            ("records.confirm_in_feed", ("records.confirm_in_feed_mirror",)),
        ]
        assert resumed.replans[1].avoided == ("records.fetch_primary", "records.confirm_in_feed")
        assert [(step["tool"], step["cell"], step["status"]) for step in resumed.route] == [
            ("records.read_key", 0, "completed"),
            ("records.fetch_primary", 0, "failed"),
            ("records.fetch_mirror", 1, "completed"),
            ("records.summarize_record", 1, "completed"),
            ("records.publish_desk", 1, "completed"),
            ("records.confirm_in_feed", 1, "failed"),
            ("records.confirm_in_feed_mirror", 2, "completed"),
        ]
        assert "Replan 2: records.confirm_in_feed failed (InjectedFailure" in resumed.text()
        assert session.paused is None and "records.publication_confirmed" in session.held


def test_replans_made_before_a_pause_count_against_max_replans_after_the_session_comes_back(records):
    """max_replans=1 is spent before the pause; the pause is saved with the session's snapshot, and
    the session reopened in a new kernel stops at the feed's failure instead of replanning again."""
    workspace, directory = records
    store = directory / "toolpath.db"
    with workspace.session("resume-bound", inject_failures=PRIMARY_THEN_FEED, snapshot_store=store) as session:
        paused = session.run_task(PUBLISH_TASK, inputs={"key": "r-4"}, on_approval="pause", max_replans=1)
        assert paused.paused is not None and len(paused.replans) == 1
    with workspace.session("resume-bound", inject_failures=PRIMARY_THEN_FEED, snapshot_store=store) as again:
        assert again.paused is not None and again.paused.task_plan is None
        stopped = again.resume(approved=True)
        assert stopped.result.status == "error" and stopped.result.error["ename"] == "InjectedFailure"
        assert "already replanned 1 time(s) (max_replans=1)" in stopped.stopped
        assert [replan.failure.tool for replan in stopped.replans] == ["records.fetch_primary"]
        assert calls(directory) == ["read_key", "fetch_mirror", "summarize_record", "publish_desk"]


def test_a_no_given_when_a_task_resumes_is_planned_around_only_through_a_tool_that_asks(records):
    """The outbox would publish without asking: the new route takes the mirror desk, which asks, so
    the task pauses again before it. With on_failure="stop" a no ends the task there."""
    workspace, directory = records
    task = [*SUMMARY_TASK, "publish the summary through the desk"]
    with workspace.session("resume-denied") as session:
        assert session.run_task(task, inputs={"key": "r-2"}, on_approval="pause").paused["tool"] == "publish_desk"
        refused = session.resume(approved=False, note="not through the desk")
        assert refused.paused is not None and refused.paused["tool"] == "publish_mirror_desk", refused.text()
        (replan,) = refused.replans
        assert replan.failure.kind == "approval" and set(replan.avoided) == {"records.publish_desk", "records.publish_outbox"}
        done = session.resume(approved=True, note="the mirror desk may")
        assert done.result.status == "ok", done.text()
        assert "'mirror desk:r-2 (from the primary)'" in done.result.result
        assert calls(directory) == ["read_key", "fetch_primary", "summarize_record", "publish_mirror_desk"]
        assert [(step["tool"], step["status"]) for step in done.route][-2:] == [
            ("records.publish_desk", "failed"),
            ("records.publish_mirror_desk", "completed"),
        ]
        assert [decision.note for decision in session.approval_decisions()] == ["not through the desk", "the mirror desk may"]

        assert session.run_task(task, inputs={"key": "r-3"}, on_approval="pause", on_failure="stop").paused is not None
        ended = session.resume(approved=False)
        assert ended.result.error["ename"] == "ApprovalDenied" and ended.replans == () and session.paused is None
        assert calls(directory)[4:] == ["read_key", "fetch_primary", "summarize_record"]


def test_toolpath_run_replans_around_an_injected_failure_in_text_and_json(records, toolpath_home):
    """The run shows each cell's output in order: the failed cell's retries, then the replan's result."""
    workspace, directory = records
    catalog = directory / "records" / "catalog.yaml"
    # fetch_primary tried 3 times, at once: its retries are the failed cell's stderr.
    catalog.write_text(RECORDS_CATALOG.replace("    retry: {attempts: 1}\n", "    retry: {attempts: 3, backoff: 0}\n", 1))
    arguments = [
        sys.executable,
        "-m",
        "toolpath.planner.interfaces.cli",
        "run",
        "--catalog",
        str(catalog),
        "--step",
        "read the record key",
        "--step",
        "fetch the record",
        "--step",
        "summarize the record",
        "--input",
        "key=r-5",
        "--inject-failure",
        "records.fetch_primary",
    ]
    environment = {**os.environ, "TOOLPATH_HOME": str(toolpath_home), "TOOLPATH_RECORD": "off", "PYTHONPATH": str(directory)}
    text = subprocess.run(arguments, capture_output=True, text=True, timeout=300, cwd=directory, stdin=subprocess.DEVNULL, env=environment)
    assert text.returncode == 0, text.stdout + text.stderr
    assert "Replan 1: records.fetch_primary failed (InjectedFailure" in text.stdout
    assert "records.fetch_primary -> records.summarize_record became records.fetch_mirror -> records.summarize_record" in text.stdout
    assert "Route taken: records.read_key -> records.fetch_primary (failed) -> records.fetch_mirror -> records.summarize_record" in text.stdout
    first, replanned = text.stdout.split("Output of cell 1 of 2 (the first route), error: step 2 (records.fetch_primary) failed\n")[1].split(
        "Result (ok), from cell 2 of 2 (replan 1):"
    )
    assert "retrying records.fetch_primary (try 2 of 3) after InjectedFailure" in first
    assert "retrying records.fetch_primary (try 3 of 3) after InjectedFailure" in first
    assert "retrying" not in replanned and "Replan 1: records.fetch_primary failed" in replanned

    as_json = subprocess.run([*arguments, "--json"], capture_output=True, text=True, timeout=300, cwd=directory, stdin=subprocess.DEVNULL, env=environment)
    assert as_json.returncode == 0, as_json.stdout + as_json.stderr
    payload = json.loads(as_json.stdout)
    assert [step["tool"] for step in payload["route"]] == ["records.read_key", "records.fetch_primary", "records.fetch_mirror", "records.summarize_record"]
    assert payload["replans"][0]["new_route"] == ["records.fetch_mirror", "records.summarize_record"]
    assert payload["result"]["result"]["summary"] == "r-5 (from the mirror)"
    failed, last = payload["cells"]
    assert failed["tools"][failed["failed_step"]] == "records.fetch_primary" and failed["status"] == "error"
    assert "retrying records.fetch_primary (try 3 of 3) after InjectedFailure" in failed["stderr"]
    assert failed["retries"] == {"records.fetch_primary": 2} and failed["injected_failures"] == {"records.fetch_primary": 3}
    assert last["status"] == "ok" and last["tools"] == ["records.fetch_mirror", "records.summarize_record"] and "retrying" not in last["stderr"]


def test_a_failure_injected_from_python_into_a_tool_nobody_has_is_refused_before_any_kernel_starts(records):
    """A misspelt tool would fail nothing and the run would look fine: run_task and sessions refuse it,
    naming it and the closest tool; a tool of a toolkit given to the session is known."""
    workspace, directory = records
    task_plan = workspace.plan_task(SUMMARY_TASK, inputs={"key": "r-1"})
    misspelt = [FailureInjection("records.fetch_primry", probability=1.0)]
    says = "FailureInjection('records.fetch_primry'): no loaded catalog or toolkit has a tool 'records.fetch_primry'; did you mean 'records.fetch_primary'?"
    with pytest.raises(UnknownInjectionTargetError) as refused:
        workspace.run_task(task_plan, inject_failures=misspelt, on_failure="replan")
    assert says in str(refused.value)
    with pytest.raises(ValueError, match="no loaded catalog or toolkit has a tool 'fetch_nowhere'"):
        workspace.session("injected-nowhere", inject_failures=(injection for injection in [FailureInjection("fetch_nowhere", probability=1.0)]))
    assert calls(directory) == []

    def lookup(key: str) -> str:
        return key

    extra = Toolkit("lookup_tools", [lookup])
    # Known: the toolkit's tool (by toolkit, handle or bare name) and a catalog tool by its bare name.
    for known in ("lookup_tools.lookup", "lookup.lookup", "lookup", "fetch_mirror"):
        with workspace.session(f"injected-{known}", tools=[extra], inject_failures=[FailureInjection(known, on_calls=(1,))]) as session:
            assert session.code_mode is not None
    with pytest.raises(UnknownInjectionTargetError, match="'lookup.lookp'; did you mean 'lookup_tools.lookup'"):
        workspace.session("injected-lookp", tools=[extra], inject_failures=[FailureInjection("lookup.lookp", probability=1.0)])


SENDING_CATALOG = """\
domain: sending
package: sending
states:
  - token: sending.message_sent
    description: a message sent to its reader
tools:
  - name: send_primary
    description: Send a message through the primary sender, without asking anyone.
    effects: sends
    required_parameters: [{name: message, type: str}]
    return_spec: {name: receipt, type: str}
    state_transition: {produces: [sending.message_sent]}
  - name: send_backup
    description: Send a message through the backup sender, without asking anyone.
    effects: sends
    cost: 2
    required_parameters: [{name: message, type: str}]
    return_spec: {name: receipt, type: str}
    state_transition: {produces: [sending.message_sent]}
"""


@pytest.mark.parametrize(
    "failure",
    [
        "raise ConnectionResetError('the connection was reset after the message went out')",
        "raise TimeoutError('no receipt within 2 s')",
    ],
)
def test_a_tool_with_effects_that_lost_its_connection_is_not_replanned_through_another_sender(tmp_path, monkeypatch, embedder, failure):
    """A lost connection or a timeout may come after the message went out: sending it again through
    the backup, which asks nobody, could send it twice."""
    package = tmp_path / "sending"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "catalog.yaml").write_text(SENDING_CATALOG)
    (package / "send_primary.py").write_text(_counting("send_primary", failure))
    (package / "send_backup.py").write_text(_counting("send_backup", "return 'backup:' + arguments['message']"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RECORDS_CALLS_LOG", str(tmp_path / "calls.log"))
    workspace = Workspace.open([package / "catalog.yaml"], embedder=embedder)
    workspace.recorder = None
    with workspace.session("replan-effects") as session:
        run = session.run_task("send the message through the primary sender", inputs={"message": "hello"})
        assert run.result.status == "error" and run.replans == ()
        assert calls(tmp_path) == ["send_primary"]
        assert run.stopped.startswith("not replanned:") and "may have done its effect" in run.stopped


def test_a_failure_injected_into_a_tool_of_a_replanned_cell_strikes(records):
    """The cell after a replan binds the domain again; a failure injected into records.fetch_archive
    must strike there too."""
    workspace, directory = records
    task_plan = workspace.plan_task(SUMMARY_TASK, inputs={"key": "r-4"})
    failing = [FailureInjection(f"records.{name}", probability=1) for name in ("fetch_primary", "fetch_mirror", "fetch_archive")]
    run = workspace.run_task(task_plan, inject_failures=failing, on_failure="replan")
    assert run.result.status == "error", run.result.result
    assert "fetch_archive" not in calls(directory)
    assert run.result.error["ename"] == "InjectedFailure"


def test_a_host_tool_that_returned_in_a_replanned_cell_is_not_run_again_when_a_later_step_fails(records):
    """fetch_mirror (a host tool) completes in the cell after the first replan and summarize_record
    then fails for good: the run reports summarize_record, and never fetches the record a third way."""
    workspace, directory = records
    task_plan = workspace.plan_task(SUMMARY_TASK, inputs={"key": "r-7"})
    failing = [FailureInjection("records.fetch_primary", probability=1), FailureInjection("records.summarize_record", probability=1)]
    run = workspace.run_task(task_plan, inject_failures=failing, on_failure="replan")
    assert run.result.status == "error" and run.failed_step is not None
    assert run.task_plan.plan.steps[run.failed_step].tool.name == "summarize_record"
    assert calls(directory).count("fetch_mirror") == 1 and "fetch_archive" not in calls(directory)


def test_a_host_tool_the_task_asked_for_is_bound_in_a_run_that_may_replan(records):
    """publish_desk (a host tool) is a step the task asks for, not on a route to the goal's states:
    a fresh CodeMode that may replan binds it too."""
    workspace, directory = records
    task_plan = workspace.plan_task([*SUMMARY_TASK, "publish the summary through the desk"], inputs={"key": "r-6"})
    assert [step.tool.name for step in task_plan.plan.steps][-1] == "publish_desk"
    run = workspace.run_task(task_plan, on_failure="replan", approver=lambda request: ApprovalDecision(approved=True))
    assert run.result.status == "ok", run.result.error
    assert calls(directory) == ["read_key", "fetch_primary", "summarize_record", "publish_desk"]


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released): a connection to it is refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _ledger_catalog(remote: str) -> str:
    """A catalog where a ledger entry is found by two tools of one remote (an MCP server whose
    process exits as it starts, or an HTTP API on a closed port), cheapest first, or by an in-kernel tool."""
    key_read = {"name": "key_text", "type": "str", "state": "ledger.key_read"}

    def finder(name: str, description: str, cost: int, **serving: Any) -> dict[str, Any]:
        return {
            "name": name,
            "description": description,
            "cost": cost,
            **serving,
            "required_parameters": [key_read],
            "return_spec": {"name": "entry", "type": "dict", "state": "ledger.entry_found"},
            "state_transition": {"requires": ["ledger.key_read"], "produces": ["ledger.entry_found"]},
        }

    if remote == "mcp":
        served: dict[str, Any] = {
            "mcp_servers": {
                "ledger": {"command": sys.executable, "args": ["-c", "import sys; sys.exit('the ledger is down for maintenance')"], "connect_timeout": 10}
            }
        }
        # Their own retry policies: the first is tried twice (an MCP connection failure is a
        # `connection` failure once it crosses the bridge), the other once.
        fast = {"mcp_server": "ledger", "retry": {"attempts": 2, "backoff": 0}}
        full = {"mcp_server": "ledger", "retry": {"attempts": 1}}
    else:
        served = {"http_apis": {"ledger": {"base_url": f"http://127.0.0.1:{_closed_port()}", "retries": 0, "timeout_seconds": 5}}}
        fast = {"http": {"api": "ledger", "method": "GET", "path": "/entries/{key_text}"}}
        full = {"http": {"api": "ledger", "method": "GET", "path": "/entries/{key_text}/full"}}
    catalog = {
        "domain": "ledger",
        "package": "ledger",
        **served,
        "states": [
            {"token": "ledger.key_read", "description": "a ledger key read from the user's words"},
            {"token": "ledger.entry_found", "description": "a ledger entry found by its key"},
        ],
        "tools": [
            {
                "name": "read_key",
                "description": "Read a ledger key.",
                "required_parameters": [{"name": "key", "type": "str"}],
                "return_spec": {"name": "key_text", "type": "str", "state": "ledger.key_read"},
                "state_transition": {"produces": ["ledger.key_read"]},
            },
            finder("find_entry_fast", "Find a ledger entry on the ledger service, by its index.", 1, **fast),
            finder("find_entry_full", "Find a ledger entry on the ledger service, by a full scan.", 2, **full),
            finder("find_entry_local", "Find a ledger entry in the local copy of the ledger.", 3),
        ],
    }
    return yaml.safe_dump(catalog, sort_keys=False)


@pytest.mark.parametrize("remote", ["mcp", "http"])
def test_an_unreachable_server_rules_out_every_one_of_its_tools(remote, tmp_path, monkeypatch, embedder):
    """The cheapest route's remote cannot be reached: the replan skips its other tool (cheaper than
    the local copy) and finds the entry in the kernel."""
    package = tmp_path / "ledger"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "catalog.yaml").write_text(_ledger_catalog(remote))
    (package / "read_key.py").write_text("def read_key(key):\n    return key.strip()\n")
    (package / "find_entry_local.py").write_text("def find_entry_local(key_text):\n    return {'key': key_text, 'from': 'the local copy'}\n")
    monkeypatch.chdir(tmp_path)
    workspace = Workspace.open([package / "catalog.yaml"], embedder=embedder)
    workspace.recorder = None
    with workspace.session(f"replan-unreachable-{remote}", snapshot=False) as session:
        run = session.run_task(["read the ledger key", "find the ledger entry"], inputs={"key": "L-42"})
        assert run.result.status == "ok", (run.result.error, run.stopped)
        assert run.result.result == "{'key': 'L-42', 'from': 'the local copy'}"
        (replan,) = run.replans
        assert replan.failure.kind == "connection" and replan.failure.tool == "ledger.find_entry_fast"
        kind = "MCP server" if remote == "mcp" else "HTTP API"
        assert f"its {kind} 'ledger' could not be reached, so none of its tools is used" in replan.failure.why
        assert set(replan.avoided) == {"ledger.find_entry_fast", "ledger.find_entry_full"}
        assert replan.new_route == ("ledger.find_entry_local",)
        # The MCP tool's own retry policy tried it again first; the HTTP API retries only 429 and 5xx.
        assert run.earlier[0].result.retries == ({"ledger.find_entry_fast": 1} if remote == "mcp" else {})
        assert [(step["tool"], step["status"]) for step in run.route] == [
            ("ledger.read_key", "completed"),
            ("ledger.find_entry_fast", "failed"),
            ("ledger.find_entry_local", "completed"),
        ]


def test_the_kernels_timeout_interrupting_a_read_only_tool_is_replanned_and_one_with_effects_stops(records):
    """A cell's own timeout (3 s here) interrupts a tool that hangs: a fetch (read only) is tried on
    another store; a publication (it sends) may have gone out before the interrupt, so the run stops."""
    workspace, directory = records
    with workspace.session("replan-interrupted", timeout=3) as session:
        run = session.run_task(SUMMARY_TASK, inputs={"key": "stuck"})
        assert run.result.status == "ok", (run.result.error, run.stopped)
        assert run.earlier[0].result.status == "timeout"
        (replan,) = run.replans
        assert (replan.failure.kind, replan.failure.tool, replan.failure.error) == ("timeout", "records.fetch_primary", "timeout")
        assert replan.new_route == ("records.fetch_mirror", "records.summarize_record")
        assert "'stuck (from the mirror)'" in run.result.result
        assert calls(directory) == ["read_key", "fetch_primary", "fetch_mirror", "summarize_record"]

    with workspace.session("replan-interrupted-effect", timeout=3) as session:
        (directory / "calls.log").unlink()
        outbox_plan = session.plan_task([*SUMMARY_TASK, "publish the summary through the outbox"], inputs={"key": "stuck-9"})
        assert [step.tool.name for step in outbox_plan.plan.steps][-1] == "publish_outbox", outbox_plan.plan.steps
        stopped = session.run_task(outbox_plan)
        assert stopped.result.status == "timeout" and stopped.replans == ()
        assert stopped.stopped == (
            "not replanned: it timed out, and a tool with effects (sends) may have done its effect before: another route could do it twice"
        )
        # The desks publish too: neither was tried after the outbox hung. The values made stay.
        assert calls(directory) == ["read_key", "fetch_primary", "summarize_record", "publish_outbox"]
        assert session.held >= {"records.record_fetched", "records.summary_made"}


def test_mcp_run_task_over_toolpath_serve_replans_and_says_so_in_its_structured_result(records, toolpath_home):
    """An agent's run_task over a real `toolpath serve` (stdio): the primary store times out, the
    result's route and replans show the mirror taking over; on_failure='stop' and max_replans=0 do not."""
    from mcp import Client, StdioServerParameters

    workspace, directory = records
    environment = {**os.environ, "TOOLPATH_HOME": str(toolpath_home), "TOOLPATH_RECORD": "off", "PYTHONPATH": str(directory)}
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "toolpath.planner.interfaces.cli", "serve", "--catalog", str(directory / "records" / "catalog.yaml")],
        env=environment,
        cwd=str(directory),
    )
    task = {"task": SUMMARY_TASK, "inputs": {"key": "slow"}}

    async def scenario():
        async with Client(server) as client:
            run = await client.call_tool("run_task", {**task, "session_id": "agent-replan"})
            assert not run.is_error, run.content
            result = run.structured_content
            assert result["result"]["status"] == "ok", result["result"]
            assert [(step["tool"], step["cell"], step["status"]) for step in result["route"]] == [
                ("records.read_key", 0, "completed"),
                ("records.fetch_primary", 0, "failed"),
                ("records.fetch_mirror", 1, "completed"),
                ("records.summarize_record", 1, "completed"),
            ]
            (replan,) = result["replans"]
            assert replan["failure"]["kind"] == "timeout" and replan["failure"]["error"].startswith("TimeoutError: the primary store did not answer")
            assert replan["new_route"] == ["records.fetch_mirror", "records.summarize_record"]
            assert result["made_by"]["records.record_fetched"] == {"tool": "records.fetch_mirror", "cell": 1, "variable": "record"}
            assert "Replan 1: records.fetch_primary failed (TimeoutError" in run.content[0].text

            stopped = await client.call_tool("run_task", {**task, "session_id": "agent-stop", "on_failure": "stop"})
            assert stopped.structured_content["result"]["status"] == "error" and stopped.structured_content["replans"] == []
            assert stopped.structured_content["failed_step"] == {"index": 1, "tool": "fetch_primary"}

            bounded = await client.call_tool("run_task", {**task, "session_id": "agent-bounded", "max_replans": 0})
            assert bounded.structured_content["replans"] == []
            assert "max_replans=0" in bounded.structured_content["replan_stopped"]

    asyncio.run(scenario())
    assert calls(directory).count("fetch_mirror") == 1
