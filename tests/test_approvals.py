"""Approvals (issue 35): host tools that ask a person before they run, called from cells in real
kernels over the real bridge. The cell waits with its variables intact; a no, an approver that
fails and no answer in time all leave the tool unrun; every decision is in the audit log."""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from toolpath.kernel import CodeMode, Tool, Toolkit
from toolpath.kernel.inside.approval_policy import ApprovalDenied, ApprovalRequest, approval_reason
from toolpath.kernel.tools.approvals import ApprovalDecision, ApprovalGate

pytestmark = pytest.mark.integration


class Desk:
    """The person at the other end: answers with ``self.answer(request)``, and keeps what was asked."""

    def __init__(self):
        self.asked: list[ApprovalRequest] = []
        self.answer = lambda request: True
        self.lock = threading.Lock()

    def __call__(self, request: ApprovalRequest):
        with self.lock:
            self.asked.append(request)
        return self.answer(request)


@pytest.fixture(scope="module")
def sent():
    return []


@pytest.fixture(scope="module")
def desk():
    return Desk()


def overwrite_policy(arguments):
    """Asks only when the call would write over a file that exists."""
    path = Path(arguments["path"])
    return f"it would write over {path}" if path.exists() else ""


@pytest.fixture(scope="module")
def mail(sent):
    def send_mail(to: str, body: str) -> str:
        """Send an email."""
        sent.append(("mail", to, body))
        return f"sent to {to}"

    async def lookup(number: int) -> int:
        """A plain tool: never asks."""
        sent.append(("lookup", number))
        return number * 2

    def save(path: str, text: str) -> str:
        """Write `text` to `path`."""
        Path(path).write_text(text)
        sent.append(("save", path))
        return path

    return Toolkit("mail_tools", [Tool(send_mail, requires_approval=True), lookup, Tool(save, requires_approval=overwrite_policy)])


@pytest.fixture(scope="module")
def code_mode(mail, desk, tmp_path_factory):
    store = tmp_path_factory.mktemp("home") / "toolpath.db"
    with CodeMode([mail], pool_size=0, timeout=30, approver=desk, approval_timeout=3, snapshot_store=store) as shared:
        yield shared


@pytest.fixture(autouse=True)
def fresh(desk, sent):
    desk.asked.clear()
    desk.answer = lambda request: True
    sent.clear()


def test_an_approved_call_runs_once_the_approver_says_yes(code_mode, desk, sent):
    result = code_mode.run("note = 'kept'\nawait mail.send_mail('ana@example.org', body='hello')", "yes", user_id="ana")
    assert result.status == "ok", result.error
    assert result.result == "'sent to ana@example.org'"
    assert sent == [("mail", "ana@example.org", "hello")]
    (request,) = desk.asked
    assert request.tool == "mail_tools.send_mail" and request.reason == "it always asks"
    assert request.arguments == {"to": "'ana@example.org'", "body": "'hello'"}
    assert (request.session_id, request.user_id) == ("yes", "ana")
    expected_digest = hashlib.sha256(json.dumps(["mail_tools.send_mail", {"body": "hello", "to": "ana@example.org"}], sort_keys=True).encode()).hexdigest()
    assert request.digest == expected_digest


def test_a_no_raises_in_the_cell_which_goes_on_with_its_variables(code_mode, desk, sent):
    desk.answer = lambda request: ApprovalDecision(False, note="not to that address", by="boss")
    code_mode.run("draft = 'Dear Ana'", "no")
    result = code_mode.run(
        "try:\n    await mail.send_mail('ana@example.org', body=draft)\nexcept ApprovalDenied as error:\n    outcome = str(error)\noutcome, draft",
        "no",
        user_id=None,
    )
    assert result.status == "ok", result.error
    assert "denied by boss: not to that address" in result.result and "'Dear Ana'" in result.result
    assert sent == []  # the tool never ran


def test_an_uncaught_no_is_the_cells_error_and_the_tool_does_not_run(code_mode, desk, sent):
    desk.answer = lambda request: False
    result = code_mode.run("await mail.send_mail('x@example.org', body='hi')", "uncaught")
    assert result.status == "error" and result.error["ename"] == "ApprovalDenied"
    assert sent == []


def test_no_answer_in_time_raises_approval_timeout(code_mode, desk, sent):
    async def never(request):
        await asyncio.sleep(60)

    desk.answer = never
    started = time.monotonic()
    result = code_mode.run("await mail.send_mail('x@example.org', body='hi')", "late")
    assert result.status == "error" and result.error["ename"] == "ApprovalTimeout", result.error
    assert time.monotonic() - started < 20
    assert sent == []


def test_an_approver_that_raises_is_a_no(code_mode, desk, sent):
    def broken(request):
        raise RuntimeError("the approval service is down")

    desk.answer = broken
    result = code_mode.run("await mail.send_mail('x@example.org', body='hi')", "broken")
    assert result.error["ename"] == "ApprovalDenied" and "the approval service is down" in result.error["evalue"]
    assert sent == []


def test_in_a_gathered_batch_only_the_call_that_asks_waits(code_mode, desk, sent):
    def after_the_others(request):
        # The plain calls finish while this one waits: nothing else in the batch is held up.
        deadline = time.monotonic() + 10
        while sum(1 for event in sent if event[0] == "lookup") < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        return sum(1 for event in sent if event[0] == "lookup") == 2

    desk.answer = after_the_others
    result = code_mode.run("import asyncio\nawait asyncio.gather(mail.lookup(1), mail.send_mail('a@example.org', body='b'), mail.lookup(2))", "batch")
    assert result.status == "ok", result.error
    assert result.result == "[2, 'sent to a@example.org', 4]"
    assert [event[0] for event in sent] == ["lookup", "lookup", "mail"]


def test_two_sessions_wait_for_answers_at_once(code_mode, desk, sent):
    both_waiting = threading.Barrier(2, timeout=10)

    def when_both_ask(request):
        both_waiting.wait()  # breaks (and so denies) unless the two sessions ask at the same time
        return True

    desk.answer = when_both_ask

    async def two_cells():
        return await asyncio.gather(
            code_mode.arun("await mail.send_mail('one@example.org', body='1')", "first"),
            code_mode.arun("await mail.send_mail('two@example.org', body='2')", "second"),
        )

    first, second = asyncio.run(two_cells())
    assert (first.status, second.status) == ("ok", "ok"), (first.error, second.error)
    assert sorted(event[1] for event in sent) == ["one@example.org", "two@example.org"]


def test_a_policy_asks_only_when_the_call_would_write_over_a_file(code_mode, desk, sent, tmp_path):
    target = tmp_path / "report.md"
    first = code_mode.run(f"await mail.save({str(target)!r}, 'v1')", "policy")
    assert first.status == "ok" and desk.asked == []  # a new file: nothing to ask
    desk.answer = lambda request: False
    second = code_mode.run(f"await mail.save({str(target)!r}, 'v2')", "policy")
    assert second.error["ename"] == "ApprovalDenied"
    assert desk.asked[0].reason == f"it would write over {target}"
    assert target.read_text() == "v1"  # the user's file is untouched


def test_every_decision_is_in_the_audit_log_for_the_sessions_owner_only(code_mode, desk):
    answers = iter([True, ApprovalDecision(False, note="too late today")])
    desk.answer = lambda request: next(answers)
    code_mode.run("await mail.send_mail('a@example.org', body='one')", "audited", user_id="ben")
    code_mode.run("try:\n    await mail.send_mail('a@example.org', body='two')\nexcept ApprovalDenied:\n    pass", "audited", user_id="ben")
    decisions = code_mode.approval_decisions("audited", user_id="ben")
    assert [(decision.decision, decision.note, decision.tool) for decision in decisions] == [
        ("approved", "", "mail_tools.send_mail"),
        ("denied", "too late today", "mail_tools.send_mail"),
    ]
    assert [decision.digest for decision in decisions] == [request.digest for request in desk.asked]
    assert all(decision.user_id == "ben" and decision.decided_by == "ben" for decision in decisions)
    assert "one" not in json.dumps([decision.to_dict() for decision in decisions])  # a digest, never the values
    assert code_mode.approval_decisions("audited", user_id="eve") == []


def test_the_instructions_say_which_calls_ask(code_mode):
    text = code_mode.instructions()
    assert "mail.send_mail" in text and "every call asks for approval first" in text
    assert "its policy decides on the arguments" in text


def test_without_an_approver_a_call_that_asks_is_denied_saying_so(mail, sent, tmp_path):
    with CodeMode([mail], pool_size=0, timeout=30, snapshot_store=tmp_path / "toolpath.db") as alone:
        result = alone.run("await mail.send_mail('x@example.org', body='hi')", "nobody")
        assert result.error["ename"] == "ApprovalDenied" and "nobody can approve" in result.error["evalue"]
        assert [decision.decision for decision in alone.approval_decisions("nobody")] == ["denied"]
    assert sent == []


def test_a_program_calling_the_toolkit_itself_gets_no_silent_yes(mail, sent):
    with pytest.raises(ApprovalDenied, match="nobody can approve it here"):
        asyncio.run(mail.acall("send_mail", ("x@example.org", "hi")))
    assert sent == []

    async def approve(request):
        return True

    gate = ApprovalGate(approve)
    from toolpath.kernel.tools.approvals import ApprovalContext

    assert asyncio.run(mail.acall("send_mail", ("x@example.org", "hi"), approval=ApprovalContext(gate))) == "sent to x@example.org"


def test_a_policy_that_cannot_decide_lets_nothing_through():
    def undecided(arguments):
        raise KeyError("path")

    with pytest.raises(KeyError):
        approval_reason(undecided, {})
    assert approval_reason(True, {}) == "it always asks" and approval_reason(False, {}) == ""


COMPOUNDS = Path(__file__).resolve().parent.parent / "catalogs" / "tabular" / "data" / "compounds.csv"


@pytest.fixture(scope="module")
def workspace():
    from toolpath.planner import Workspace

    return Workspace.open()


def report_cell(workspace, destination):
    """A planned cell that loads the shipped compounds table and writes its report to ``destination``."""
    task = workspace.plan_task("load the table and write a report", inputs={"path": str(COMPOUNDS), "tabular.write_report.path": str(destination)})
    assert [step.tool.name for step in task.plan.steps] == ["load_table", "write_report"]
    return task.cell.code


def test_a_planned_cell_asks_before_writing_over_the_users_file(workspace, desk, tmp_path):
    """write_report is `approval: on_overwrite` in the shipped catalog: its handle, in the kernel,
    sees the file exists and asks the host's approver over the bridge."""
    report = tmp_path / "report.md"
    code = report_cell(workspace, report)
    with workspace.code_mode(pool_size=0, approver=desk, approval_timeout=5, snapshot_store=tmp_path / "toolpath.db") as code_mode:
        first = code_mode.run(code, "reports")
        assert first.status == "ok", first.error
        assert desk.asked == [] and report.read_text().startswith("# Table report")
        report.write_text("my own notes")
        desk.answer = lambda request: ApprovalDecision(False, note="keep my notes")
        refused = code_mode.run(code, "reports")
        assert refused.error["ename"] == "ApprovalDenied" and "keep my notes" in refused.error["evalue"]
        assert report.read_text() == "my own notes"
        (request,) = desk.asked
        assert request.tool == "tabular.write_report"
        assert request.reason == f"it would write over {report} (argument path) (checked in the kernel, where the tool runs)"
        assert request.session_id == "reports" and request.arguments["path"] == repr(str(report))
        desk.answer = lambda request: True
        again = code_mode.run(code, "reports")
        assert again.status == "ok", again.error
        assert report.read_text().startswith("# Table report")
        assert [decision.decision for decision in code_mode.approval_decisions("reports")] == ["denied", "approved"]


#: A cell that sends the host an ``approve`` message of its own, for ``{tool}``, through the bridge
#: client toolpath installed in its kernel; prints the answer.
FORGED_APPROVAL = """
import toolpath.kernel.inside.handles as _handles
from toolpath.kernel.inside.approval_policy import ApprovalRequest
try:
    await _handles._ask_host(ApprovalRequest.of({tool!r}, {{"to": "everyone"}}, "a forged reason"))
    print("answered yes")
except Exception as error:
    print(type(error).__name__, error)
"""


def test_a_forged_approval_request_never_reaches_the_approver_or_the_log(workspace, desk, tmp_path):
    with workspace.code_mode(pool_size=0, approver=desk, approval_timeout=5, snapshot_store=tmp_path / "toolpath.db") as code_mode:
        # The session binds tabular's tools (write_report asks, in the kernel): a real handle to ask with.
        assert code_mode.run(report_cell(workspace, tmp_path / "first.md"), "forger").status == "ok"
        for tool in ("mail_tools.send_mail", "tabular.delete_everything", "tabular.load_table"):
            result = code_mode.run(FORGED_APPROVAL.format(tool=tool), "forger")
            assert result.stdout.startswith("ApprovalDenied no tool bound in this kernel asks for approval as"), result.stdout
        assert desk.asked == []
        assert code_mode.approval_decisions("forger") == []


def test_what_a_kernel_asks_is_shown_escaped_and_needs_a_real_digest(workspace, desk, tmp_path):
    """A kernel's own words reach the approver with their control characters escaped (a terminal
    escape could hide the rest of a line, and the note that the check ran in the kernel)."""
    hidden = "import toolpath.kernel.inside.handles as _handles\nfrom toolpath.kernel.inside.approval_policy import ApprovalRequest\n"
    hidden += "await _handles._ask_host(ApprovalRequest.of('tabular.write_report', {'path\\x1b[8m': 'x\\r\\ny'}, 'it would write over a\\x1b[8m file'))"
    with workspace.code_mode(pool_size=0, approver=desk, approval_timeout=5, snapshot_store=tmp_path / "toolpath.db") as code_mode:
        assert code_mode.run(report_cell(workspace, tmp_path / "first.md"), "escapes").status == "ok"
        assert code_mode.run(hidden, "escapes").status == "ok"
        (request,) = desk.asked
        assert request.reason == "it would write over a\\x1b[8m file (checked in the kernel, where the tool runs)"
        assert request.arguments == {"path\\x1b[8m": "'x\\r\\ny'"}
        forged = "import toolpath.kernel.inside.handles as _handles, dataclasses\nfrom toolpath.kernel.inside.approval_policy import ApprovalRequest\n"
        forged += "request = dataclasses.replace(ApprovalRequest.of('tabular.write_report', {}, 'r'), digest='not-a-digest')\n"
        forged += "try:\n    await _handles._ask_host(request)\nexcept Exception as error:\n    print(type(error).__name__, error)"
        assert "digest must be the SHA-256 of the call" in code_mode.run(forged, "escapes").stdout
        assert len(desk.asked) == 1


def test_without_an_approver_a_planned_cell_never_writes_over_a_file(workspace, tmp_path):
    report = tmp_path / "report.md"
    report.write_text("my own notes")
    with workspace.code_mode(pool_size=0, snapshot=False) as code_mode:
        result = code_mode.run(report_cell(workspace, report), "alone")
    assert result.error["ename"] == "ApprovalDenied" and "nobody can approve" in result.error["evalue"]
    assert report.read_text() == "my own notes"


def test_a_catalog_tool_declares_when_it_asks():
    from pydantic import ValidationError

    from toolpath.kernel.inside.approval_policy import OverwritePolicy
    from toolpath.registry import ToolDefinition

    output = {"name": "path", "type": "str", "default": "out.md", "role": "output"}
    writer = ToolDefinition(name="write_notes", module="json", optional_parameters=[output], approval="on_overwrite")
    assert Tool.from_definition(writer).requires_approval == OverwritePolicy({"path": "out.md"})
    sender = ToolDefinition(name="dumps", module="json", approval="always", binding="host")
    assert Tool.from_definition(sender).requires_approval is True
    with pytest.raises(ValidationError, match="has no output parameter: mark the parameter it writes to `role: output`"):
        ToolDefinition(name="write_notes", module="json", approval="on_overwrite")
    with pytest.raises(ValidationError):
        ToolDefinition(name="write_notes", module="json", approval="sometimes")


def test_the_overwrite_policy_sees_links_and_defaults(tmp_path, monkeypatch):
    from toolpath.kernel.inside.approval_policy import OverwritePolicy

    monkeypatch.chdir(tmp_path)
    policy = OverwritePolicy({"path": "out.md"})
    assert policy({}) == "" and policy({"path": str(tmp_path / "new.md")}) == ""
    (tmp_path / "out.md").write_text("x")
    assert policy({}) == f"it would write over {tmp_path / 'out.md'} (argument path)"  # the default names it
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    assert policy({"path": "dangling"}) == f"it would write over {tmp_path / 'nowhere'} (argument path, through the link {tmp_path / 'dangling'})"
    # Paths as bytes are paths; a file descriptor or anything else cannot be checked, so it asks.
    assert policy({"path": b"out.md"}) == f"it would write over {tmp_path / 'out.md'} (argument path)"
    assert policy({"path": 3}) == "its output path is int 3, not a path, so what it replaces cannot be checked"


def toolpath_run(*arguments):
    command = [sys.executable, "-m", "toolpath.planner.interfaces.cli", "run", "load the table and write a report", "--input", f"path={COMPOUNDS}", *arguments]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)


def test_toolpath_run_without_a_terminal_refuses_to_write_over_a_file_and_yes_approves(tmp_path):
    report = tmp_path / "report.md"
    report.write_text("my own notes")
    refused = toolpath_run("--input", f"tabular.write_report.path={report}")
    assert refused.returncode == 1
    assert "ApprovalDenied" in refused.stdout and "pass --yes to approve every call" in refused.stdout
    assert report.read_text() == "my own notes"
    approved = toolpath_run("--input", f"tabular.write_report.path={report}", "--yes")
    assert approved.returncode == 0, approved.stdout + approved.stderr
    assert report.read_text().startswith("# Table report")


class FakeTerminal(io.StringIO):
    def isatty(self):
        return True


def test_the_terminal_approver_asks_and_reads_the_answer():
    from toolpath.planner.interfaces.terminal_approval import TerminalApprover

    request = ApprovalRequest.of("tabular.write_report", {"path": "/home/ana/report.md"}, "it would write over /home/ana/report.md")
    shown = io.StringIO()
    assert TerminalApprover(stdin=FakeTerminal("y\n"), stderr=shown)(request).approved
    assert "tabular.write_report(path='/home/ana/report.md') asks for approval: it would write over /home/ana/report.md." in shown.getvalue()
    declined = TerminalApprover(stdin=FakeTerminal("\n"), stderr=io.StringIO())(request)
    assert not declined.approved and declined.note == "declined at the terminal"
    assert TerminalApprover(approve_all=True, stdin=io.StringIO())(request).by == "--yes"


def test_over_mcp_the_clients_user_is_asked_by_elicitation(tmp_path):
    """toolpath serve, driven by the SDK's client: accept with approve, accept without, decline and
    cancel, each seen in the file and in the session's audit log; a client without elicitation is
    told so; a client of the handshake era is asked within its request."""
    from mcp import Client, StdioServerParameters
    from mcp_types import ElicitResult

    report = tmp_path / "report.md"
    report.write_text("my own notes")
    answers: list[ElicitResult] = []
    asked: list[str] = []

    async def elicit(context, params):
        asked.append(params.message)
        return answers.pop(0)

    def served(**options):
        parameters = StdioServerParameters(
            command=sys.executable,
            args=["-m", "toolpath.planner.interfaces.cli", "serve"],
            env={**os.environ, "TOOLPATH_HOME": str(tmp_path / "home")},
            cwd=str(tmp_path),
        )
        return Client(parameters, **options)

    task = {"task": "load the table and write a report", "inputs": {"path": str(COMPOUNDS), "tabular.write_report.path": str(report)}, "session_id": "mcp"}

    async def scenario():
        async with served(elicitation_callback=elicit) as client:
            answers.append(ElicitResult(action="accept", content={"approve": False, "note": "not now"}))
            denied = await client.call_tool("run_task", task)
            assert denied.is_error and "not now" in denied.content[0].text and report.read_text() == "my own notes"
            assert "tabular.write_report(" in asked[0] and f"it would write over {report}" in asked[0]
            answers.extend([ElicitResult(action="decline"), ElicitResult(action="cancel")])
            for _ in range(2):
                assert (await client.call_tool("run_task", task)).is_error
            assert report.read_text() == "my own notes"
            answers.append(ElicitResult(action="accept", content={"approve": True, "note": ""}))
            approved = await client.call_tool("run_task", task)
            assert not approved.is_error, approved.content[0].text
            assert report.read_text().startswith("# Table report")
            overview = await client.call_tool("session_overview", {"session_id": "mcp"})
            decisions = [(row["decision"], row["note"]) for row in overview.structured_content["approvals"]]
            assert decisions == [
                ("denied", "not now"),
                ("denied", "the user declined the approval request"),
                ("denied", "the user cancelled the approval request"),
                ("approved", ""),
            ]
        report.write_text("my own notes again")
        async with served() as client:  # the SDK's default: no elicitation
            refused = await client.call_tool("run_task", {**task, "session_id": "plain-client"})
            assert refused.is_error and "does not support elicitation" in refused.content[0].text
        assert report.read_text() == "my own notes again"
        async with served(mode="legacy", elicitation_callback=elicit) as client:  # protocol 2025-11-25: asked within the request
            answers.append(ElicitResult(action="accept", content={"approve": False, "note": "asked the old way"}))
            denied = await client.call_tool("run_task", {**task, "session_id": "handshake"})
            assert denied.is_error and "asked the old way" in denied.content[0].text and report.read_text() == "my own notes again"
            answers.append(ElicitResult(action="accept", content={"approve": True, "note": ""}))
            assert not (await client.call_tool("run_task", {**task, "session_id": "handshake"})).is_error
        assert report.read_text().startswith("# Table report")

    asyncio.run(scenario())


REPORT_TASK = "load the table and write a report"


def users_report(tmp_path):
    """A report file the user already has ("my own notes"), and the inputs of :data:`REPORT_TASK`
    that would write over it (so its run asks, or pauses, before write_report)."""
    report = tmp_path / "report.md"
    report.write_text("my own notes")
    return report, {"path": str(COMPOUNDS), "tabular.write_report.path": str(report)}


def approving_session(workspace, desk, tmp_path, session_id):
    """A session whose approver is ``desk``, its snapshots in ``tmp_path`` (the same for a reopened one)."""
    return workspace.session(session_id, approver=desk, snapshot_store=tmp_path / "toolpath.db", pool_size=0)


def test_a_paused_task_resumes_in_the_same_kernel_without_running_earlier_steps(workspace, desk, tmp_path):
    """run_task(on_approval="pause") stops before write_report (the file exists); the table the
    first step loaded stays in the kernel, and resume writes the report from *that* table."""
    report, inputs = users_report(tmp_path)
    with approving_session(workspace, desk, tmp_path, "pausing") as session:
        paused = session.run_task(REPORT_TASK, inputs, on_approval="pause")
        assert paused.paused["step"] == 1 and paused.paused["tool"] == "write_report"
        assert paused.paused["request"]["reason"] == f"it would write over {report} (argument path) (checked in the kernel, where the tool runs)"
        assert paused.text().startswith("Paused before step 2 (tabular.write_report(") and report.read_text() == "my own notes"
        assert desk.asked == []  # nobody was asked: the run paused instead
        assert session.paused is not None and paused.completed_steps == (0,)
        with pytest.raises(Exception, match="resume it with resume"):
            session.run_task("load the table", {"path": str(COMPOUNDS)})
        # Mark what the first step made (a rerun of it would make a new table without the mark).
        assert session.execute("table.attrs['made'] = 'before the pause'").status == "ok"
        resumed = session.resume(approved=True, note="fine, replace it")
        assert resumed.result.status == "ok", resumed.result.error
        assert resumed.completed_steps == (0, 1) and resumed.paused is None and session.paused is None
        assert report.read_text().startswith("# Table report")
        assert session.execute("table.attrs").result == "{'made': 'before the pause'}"
        assert [(decision.decision, decision.note) for decision in session.approval_decisions()] == [("approved", "fine, replace it")]


def test_an_answer_is_for_the_arguments_it_was_given_on(workspace, desk, tmp_path):
    """Change the call's arguments while it is paused, and the yes given for the old ones does not
    carry over: the run pauses again, naming the new arguments."""
    report, inputs = users_report(tmp_path)
    with approving_session(workspace, desk, tmp_path, "changed") as session:
        first = session.run_task(REPORT_TASK, inputs, on_approval="pause").paused
        assert session.execute("table = table.head(3)").status == "ok"
        again = session.resume(approved=True).paused
        assert again is not None and again["request"]["digest"] != first["request"]["digest"]
        assert report.read_text() == "my own notes"
        assert session.resume(approved=True).result.status == "ok"
        assert "3 rows" in report.read_text()


def test_a_paused_task_resumed_with_a_no_ends_there_and_the_file_stays(workspace, desk, tmp_path):
    report, inputs = users_report(tmp_path)
    with approving_session(workspace, desk, tmp_path, "refusing") as session:
        assert session.run_task(REPORT_TASK, inputs, on_approval="pause").paused is not None
        refused = session.resume(approved=False, note="keep my notes")
        assert refused.result.error["ename"] == "ApprovalDenied" and "keep my notes" in refused.result.error["evalue"]
        assert refused.failed_step == 1 and session.paused is None and report.read_text() == "my own notes"
        with pytest.raises(ValueError, match="no paused task"):
            session.resume(approved=True)


def test_a_paused_task_comes_back_with_the_session_after_a_restart_and_resumes(workspace, desk, tmp_path):
    """The pause is saved with the session's snapshot: a new process's session resumes it from the
    restored variables, and the step before the pause does not run again."""
    report, inputs = users_report(tmp_path)
    with approving_session(workspace, desk, tmp_path, "restarted") as session:
        assert session.run_task(REPORT_TASK, inputs, on_approval="pause").paused is not None
        assert session.execute("table.attrs['made'] = 'before the restart'").status == "ok"
    with approving_session(workspace, desk, tmp_path, "restarted") as again:
        assert again.paused is not None and again.paused.tool == "write_report" and again.paused.task_plan is None
        resumed = again.resume(approved=True, note="after the restart")
        assert resumed.result.status == "ok", resumed.result.error
        assert [step.tool.name for step in resumed.task_plan.plan.steps] == ["write_report"]  # the table was held
        assert again.execute("table.attrs").result == "{'made': 'before the restart'}"
        assert report.read_text().startswith("# Table report") and again.paused is None
        assert [decision.note for decision in again.approval_decisions()] == ["after the restart"]


def test_a_saved_paused_task_is_checked_when_read():
    from toolpath.planner.tasks.session_state import PausedTask, SessionState

    request = {"tool": "tabular.write_report", "reason": "r", "digest": "d", "arguments": {}}
    saved = PausedTask("write a report", {"path": "a.csv"}, 1, "write_report", ("tabular.write_report",), request)
    assert SessionState.from_dict({"session_id": "s", "paused": saved.to_dict()}).paused == saved.to_dict()
    with pytest.raises(ValueError, match="'request'"):
        SessionState.from_dict({"session_id": "s", "paused": {**saved.to_dict(), "request": {"tool": 1}}})
    with pytest.raises(ValueError, match="'paused' must be an object"):
        SessionState.from_dict({"session_id": "s", "paused": "yes"})


def test_a_planned_cells_instructions_say_which_call_may_ask(workspace):
    task = workspace.plan_task("load the table and write a report", inputs={"path": str(COMPOUNDS)})
    lines = task.cell.instructions.splitlines()
    report = next(number for number, line in enumerate(lines) if "tabular.write_report(" in line)
    assert "a call that would write over a file that exists asks a person for approval first" in lines[report + 3]
    assert not any("approval" in line for line in lines[:report])  # load_table never asks


def test_only_a_real_yes_is_a_yes():
    from toolpath.kernel.tools.approvals import ApprovalContext

    with pytest.raises(TypeError, match="approved must be True or False"):
        ApprovalDecision("no")
    for odd in (1, ["it deletes"], "it deletes"):
        assert approval_reason(lambda arguments, odd=odd: odd, {}) != ""  # an odd policy answer asks
    assert approval_reason(lambda arguments: None, {}) == approval_reason(lambda arguments: "", {}) == ""

    asked = []

    def no(request):
        asked.append(request.tool)
        return False

    request = ApprovalRequest.of("kit.preview", {"path": "/data/x"}, "it always asks")
    context = ApprovalContext(ApprovalGate(no), answers={request.digest: ApprovalDecision(True)})
    other_tool = ApprovalRequest.of("kit.delete", {"path": "/data/x"}, "it always asks")
    assert other_tool.digest != request.digest  # an answer on one tool's call is no other's
    with pytest.raises(ApprovalDenied):
        asyncio.run(context.check(other_tool))
    assert asyncio.run(context.check(request)).approved  # the given answer, used once
    with pytest.raises(ApprovalDenied):
        asyncio.run(context.check(request))
    assert asked == ["kit.delete", "kit.preview"]


def test_restarting_a_session_drops_its_paused_task(workspace, desk, tmp_path):
    report, inputs = users_report(tmp_path)
    with approving_session(workspace, desk, tmp_path, "dropped") as session:
        assert session.run_task(REPORT_TASK, inputs, on_approval="pause").paused is not None
        with pytest.raises(TypeError, match="approved must be True or False"):
            session.resume("no")
        assert session.paused is not None  # a wrong answer changes nothing
        session.restart()
        assert session.paused is None
        assert session.run_task("load the table", {"path": str(COMPOUNDS)}).result.status == "ok"
    assert report.read_text() == "my own notes"


def test_a_restored_paused_task_whose_variables_are_gone_is_dropped_not_stuck(workspace, desk, tmp_path):
    report, inputs = users_report(tmp_path)
    with approving_session(workspace, desk, tmp_path, "stuck") as session:
        assert session.run_task(REPORT_TASK, inputs, on_approval="pause").paused is not None
    with approving_session(workspace, desk, tmp_path, "stuck") as again:
        assert again.execute("del table").status == "ok"
        with pytest.raises(RuntimeError, match="cannot continue, so it is dropped"):
            again.resume(approved=False)
        assert again.paused is None
        assert again.run_task("load the table", {"path": str(COMPOUNDS)}).result.status == "ok"  # the session goes on
    assert report.read_text() == "my own notes"


def test_a_sync_approver_nobody_answers_does_not_keep_the_process_from_exiting(tmp_path):
    """A terminal prompt left unanswered outlives the approval timeout; the program (toolpath run)
    still ends once its result is in, instead of waiting for a key press."""
    script = tmp_path / "unanswered.py"
    script.write_text(
        "import asyncio, threading\n"
        "from toolpath.kernel.inside.approval_policy import ApprovalRequest, ApprovalTimeout\n"
        "from toolpath.kernel.tools.approvals import ApprovalGate\n"
        "def nobody_answers(request):\n"
        "    threading.Event().wait()\n"
        "gate = ApprovalGate(nobody_answers, timeout=0.5)\n"
        "try:\n"
        "    asyncio.run(gate.ask(ApprovalRequest.of('mail.send_mail', {'to': 'x'}, 'it sends mail')))\n"
        "except ApprovalTimeout as timeout:\n"
        "    print('timed out:', timeout)\n"
    )
    finished = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert finished.returncode == 0, finished.stderr
    assert "timed out: mail.send_mail needs approval (it sends mail); no answer came within 0.5 s" in finished.stdout
