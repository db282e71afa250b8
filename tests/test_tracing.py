"""OpenTelemetry traces (issue 56, part 1): a task's spans from the request to the tool calls in its
kernel, recorded by the real OpenTelemetry SDK.

In this process the spans go to the SDK's ``InMemorySpanExporter``. A process has one tracer
provider for good, so the provider set here samples through a switch that each test turns on and
off: other tests that run in this worker afterwards make no recorded span (and their kernels get no
trace context). ``toolpath serve`` runs in its own process and exports over OTLP/HTTP to a receiver
this module runs (no library offers one as a plain Python package: ``oteltap`` wraps a native
binary of its own).
"""

import asyncio
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult

from toolpath.kernel import CodeMode, FailureInjection, Tool, Toolkit
from toolpath.observability.tracing import VALUES_VARIABLE
from toolpath.planner import Workspace

ROOT = Path(__file__).resolve().parent.parent


class _Switch(Sampler):
    """Samples every span while ``on``, none otherwise."""

    on = False

    def should_sample(self, parent_context, trace_id, name, kind=None, attributes=None, links=None, trace_state=None):
        # A sampler gives a span its starting attributes: pass them on.
        return SamplingResult(Decision.RECORD_AND_SAMPLE, attributes) if self.on else SamplingResult(Decision.DROP)

    def get_description(self):
        return "toolpath tests' switch"


_SWITCH = _Switch()
_EXPORTER = InMemorySpanExporter()


@pytest.fixture()
def spans():
    """The spans finished during the test (call it for the list); tracing is on for the test only."""
    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        provider = TracerProvider(sampler=_SWITCH)
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        trace.set_tracer_provider(provider)
    assert trace.get_tracer_provider().sampler is _SWITCH, "another tracer provider was set in this process"
    _EXPORTER.clear()
    _SWITCH.on = True
    try:
        yield _EXPORTER.get_finished_spans
    finally:
        _SWITCH.on = False
        _EXPORTER.clear()


def _one(spans, name):
    (found,) = [span for span in spans if span.name == name]
    return found


def _parent(spans, span):
    return next(candidate for candidate in spans if span.parent is not None and candidate.context.span_id == span.parent.span_id)


def _texts(spans):
    """Every attribute and event attribute value of ``spans``, as text."""
    values = [str(value) for span in spans for value in span.attributes.values()]
    return values + [str(value) for span in spans for event in span.events for value in event.attributes.values()]


def test_a_run_from_the_command_line_is_one_trace_from_the_task_to_the_tool_calls_its_kernel_makes(spans, sheets_catalog, capsys):
    from toolpath.planner.interfaces.cli.main import main

    status = main(["run", "write a report on a table", "--catalog", str(sheets_catalog), "--input", "path=quarterly-sales.csv"])
    assert status == 0, capsys.readouterr()
    finished = spans()
    assert len({span.context.trace_id for span in finished}) == 1
    task = _one(finished, "invoke_workflow toolpath.task")
    assert task.parent is None and task.attributes["gen_ai.operation.name"] == "invoke_workflow"
    assert task.attributes["toolpath.task.status"] == "ok" and task.attributes["toolpath.plan.steps"] == ("sheets.load_csv", "sheets.write_report")

    plan = _one(finished, "plan")
    assert _parent(finished, plan) is task and plan.attributes["gen_ai.operation.name"] == "plan"
    assert plan.attributes["toolpath.task.inputs"] == ("path",) and plan.attributes["toolpath.plan.goal"] == ("sheets.report_written",)
    parts = _one(finished, "toolpath.match_parts")
    assert _parent(finished, parts) is plan and [event.name for event in parts.events] == ["toolpath.part"]
    choices = [span for span in finished if span.name == "toolpath.choose_goal"]
    assert choices and all(_parent(finished, choice) is parts for choice in choices)
    first = choices[0].attributes
    assert first["toolpath.goal.chosen"] == "state sheets.report_written" and first["toolpath.goal.candidates"][0] == "state sheets.report_written"
    assert len(first["toolpath.goal.candidate_scores"]) == len(first["toolpath.goal.candidates"])
    joint = _one(finished, "toolpath.joint_plan")
    assert _parent(finished, joint) is plan
    assert (joint.attributes["toolpath.plan.cost"], joint.attributes["toolpath.plan.optimal"], joint.attributes["toolpath.plan.gap"]) == (2.0, True, 0.0)

    cell = _one(finished, "toolpath.cell")
    assert _parent(finished, cell) is task
    assert cell.attributes["toolpath.cell.status"] == "ok" and cell.attributes["toolpath.cell.tool_calls"] == 2 and cell.attributes["toolpath.kernel.id"]
    in_kernel = _one(finished, "execute_tool sheets.load_csv")
    bridged = _one(finished, "execute_tool sheets.write_report")
    for call in (in_kernel, bridged):
        assert _parent(finished, call) is cell and call.attributes["gen_ai.operation.name"] == "execute_tool"
        assert cell.start_time <= call.start_time <= call.end_time <= cell.end_time
    assert in_kernel.attributes["toolpath.tool.binding"] == "kernel" and in_kernel.attributes["toolpath.tool.arguments"] == ("path:str",)
    assert in_kernel.attributes["toolpath.tool.result"] == "dict" and in_kernel.attributes["toolpath.tool.result_size"] == 3
    assert bridged.attributes["toolpath.tool.binding"] == "host" and bridged.attributes["toolpath.tool.called_from"] == "kernel"
    assert bridged.attributes["gen_ai.tool.name"] == "sheets.write_report" and bridged.attributes["toolpath.tool.attempt"] == 1
    # Sizes and kinds only: the input's value is nowhere, nor the task's words.
    assert not [text for text in _texts(finished) if "quarterly-sales" in text or "write a report" in text]


def test_values_go_into_spans_only_when_the_setting_says_so(spans, sheets_catalog, monkeypatch):
    monkeypatch.setenv(VALUES_VARIABLE, "1")
    workspace = Workspace.open([sheets_catalog])
    with workspace.session("traced-values") as session:
        run = session.run_task("write a report on a table", {"path": "quarterly-sales.csv"})
    assert run.result.status == "ok", run.result.error
    finished = spans()
    assert _one(finished, "plan").attributes["toolpath.task.text"] == "write a report on a table"
    bridged = _one(finished, "execute_tool sheets.write_report").attributes
    assert "quarterly-sales.csv" in bridged["gen_ai.tool.call.arguments"] and "quarterly-sales.csv" in bridged["gen_ai.tool.call.result"]
    assert "await sheets.write_report" in _one(finished, "toolpath.cell").attributes["toolpath.cell.code"]
    # A tool bound in the kernel reports kinds only, whatever the setting.
    assert "gen_ai.tool.call.arguments" not in _one(finished, "execute_tool sheets.load_csv").attributes


def test_a_failing_tool_marks_its_span_its_cell_and_its_task_failed_without_its_message(spans, sheets_catalog):
    workspace = Workspace.open([sheets_catalog])
    with workspace.session("traced-failure") as session:
        run = session.run_task("write a report on a table", {"path": "empty-ledger.csv"}, on_failure="stop")
    assert run.result.status == "error" and run.result.error["ename"] == "ValueError"
    finished = spans()
    failed = _one(finished, "execute_tool sheets.write_report")
    assert failed.status.status_code == trace.StatusCode.ERROR and failed.attributes["error.type"] == "ValueError"
    assert [(event.name, dict(event.attributes)) for event in failed.events] == [("exception", {"exception.type": "ValueError"})]
    for name in ("toolpath.cell", "invoke_workflow toolpath.task"):
        span = _one(finished, name)
        assert span.status.status_code == trace.StatusCode.ERROR and span.attributes["error.type"] == "ValueError", name
    assert _one(finished, "invoke_workflow toolpath.task").attributes["toolpath.task.failed_tool"] == "sheets.write_report"
    assert _one(finished, "execute_tool sheets.load_csv").status.status_code == trace.StatusCode.UNSET
    assert not [text for text in _texts(finished) if "empty-ledger" in text or "no rows to report" in text]


def test_a_denied_approval_shows_on_the_call_that_asked(spans, tmp_path):
    sent = []

    def send_payment(to: str, amount: float) -> str:
        """Send money."""
        sent.append(to)
        return "sent"

    bank = Toolkit("bank", [Tool(send_payment, requires_approval=True)])
    with CodeMode([bank], pool_size=0, timeout=60, approver=lambda request: False, snapshot_store=tmp_path / "toolpath.db") as code_mode:
        result = code_mode.run("try:\n    await bank.send_payment(to='ACME', amount=12.5)\nexcept ApprovalDenied as error:\n    print('denied')", "payer")
    assert result.stdout == "denied\n" and sent == []
    finished = spans()
    call = _one(finished, "execute_tool bank.send_payment")
    assert _parent(finished, call) is _one(finished, "toolpath.cell")
    assert call.attributes["toolpath.approval.asked"] is True and call.attributes["toolpath.approval.answer"] == "denied"
    assert call.status.status_code == trace.StatusCode.ERROR and call.attributes["error.type"] == "ApprovalDenied"
    assert [(event.name, dict(event.attributes)) for event in call.events] == [
        ("toolpath.approval", {"answer": "denied"}),
        ("exception", {"exception.type": "ApprovalDenied"}),
    ]
    assert call.attributes["toolpath.tool.arguments"] == ("to:str", "amount:float")


def test_each_try_of_a_retried_host_tool_is_a_span_and_an_in_kernel_tool_counts_its_retries(spans, sheets_catalog):
    workspace = Workspace.open([sheets_catalog])
    injected = [FailureInjection("sheets.load_csv", on_calls=(1,)), FailureInjection("sheets.write_report", on_calls=(1,))]
    with workspace.session("traced-retries", inject_failures=injected) as session:
        run = session.run_task("write a report on a table", {"path": "sales.csv"})
    assert run.result.status == "ok", run.result.error
    finished = spans()
    in_kernel = _one(finished, "execute_tool sheets.load_csv").attributes
    assert (in_kernel["toolpath.tool.retries"], in_kernel["toolpath.tool.injected_failures"]) == (1, 1)
    # The first try failed in the kernel, before it crossed the bridge: the host saw the second.
    assert _one(finished, "execute_tool sheets.write_report").attributes["toolpath.tool.attempt"] == 2


def test_a_program_s_own_call_has_a_span_that_says_when_the_cache_answered(spans):
    def lookup(number: int) -> int:
        return number * 2

    toolkit = Toolkit("numbers", [lookup], cache_results=True)
    assert asyncio.run(toolkit.acall("lookup", (), {"number": 4})) == 8
    assert asyncio.run(toolkit.acall("lookup", (), {"number": 4})) == 8
    calls = [span for span in spans() if span.name == "execute_tool numbers.lookup"]
    assert [(span.attributes["toolpath.tool.called_from"], span.attributes["toolpath.tool.cache_hit"]) for span in calls] == [("host", False), ("host", True)]
    assert all(span.parent is None and span.attributes["toolpath.tool.result"] == "int" for span in calls)


def _run_python(code, env, cwd):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


@pytest.mark.integration
def test_without_the_sdk_a_command_asked_to_trace_says_what_to_install_and_runs(tmp_path, chemistry_catalog):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import sys\nsys.modules['opentelemetry.sdk'] = None\n")
    env = {**os.environ, "PYTHONPATH": str(site), "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}
    env.pop(VALUES_VARIABLE, None)
    shown = subprocess.run(
        [sys.executable, "-m", "toolpath.planner.interfaces.cli", "plan", "--goal", "chemistry.molecule_parsed", "--catalog", str(chemistry_catalog)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stderr.splitlines() == [
        "toolpath: warning: OTEL_EXPORTER_OTLP_ENDPOINT is set, but the OpenTelemetry SDK is not installed, so no trace is sent: pip install 'toolpath[otel]'"
    ]
    assert "parse_molecule" in shown.stdout


@pytest.mark.integration
def test_a_command_traces_to_the_exporter_the_standard_variables_name(tmp_path, chemistry_catalog):
    env = {name: value for name, value in os.environ.items() if not name.startswith("OTEL_") and name != VALUES_VARIABLE}
    command = [sys.executable, "-m", "toolpath.planner.interfaces.cli", "plan", "--goal", "chemistry.molecule_parsed", "--catalog", str(chemistry_catalog)]
    console = subprocess.run(command, capture_output=True, text=True, env={**env, "OTEL_TRACES_EXPORTER": "console"}, cwd=tmp_path, timeout=300)
    assert console.returncode == 0, console.stderr
    # Spans go to standard error (standard output may be an MCP channel); the plan alone to standard output.
    assert '"name": "toolpath plan"' in console.stderr and '"service.name": "toolpath"' in console.stderr
    assert "parse_molecule" in console.stdout and "trace_id" not in console.stdout
    unknown = subprocess.run(command, capture_output=True, text=True, env={**env, "OTEL_TRACES_EXPORTER": "zipkin"}, cwd=tmp_path, timeout=300)
    assert unknown.returncode == 0 and unknown.stderr.splitlines() == [
        "toolpath: warning: OTEL_TRACES_EXPORTER names 'zipkin', which toolpath cannot send traces to (otlp, console or none); no trace is sent"
    ]
    disabled = subprocess.run(
        command, capture_output=True, text=True, env={**env, "OTEL_TRACES_EXPORTER": "console", "OTEL_SDK_DISABLED": "true"}, cwd=tmp_path, timeout=300
    )
    assert disabled.returncode == 0 and disabled.stderr == ""


def test_a_command_not_asked_to_trace_never_imports_opentelemetry(tmp_path, chemistry_catalog):
    env = {name: value for name, value in os.environ.items() if not name.startswith("OTEL_")}
    code = (
        "import sys\nfrom toolpath.planner.interfaces.cli.main import main\n"
        f"status = main(['plan', '--goal', 'chemistry.molecule_parsed', '--catalog', {str(chemistry_catalog)!r}])\n"
        "print(status, 'opentelemetry' in sys.modules)"
    )
    checked = _run_python(code, env, tmp_path)
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.splitlines()[-1] == "0 False"


class _Receiver(BaseHTTPRequestHandler):
    """OTLP/HTTP ``/v1/traces`` (protobuf): keeps each span as a dict in ``server.spans``."""

    def do_POST(self):
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse

        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = ExportTraceServiceRequest.FromString(body)
        for resource_spans in request.resource_spans:
            service = {item.key: item.value.string_value for item in resource_spans.resource.attributes}.get("service.name")
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    attributes = {item.key: _any_value(item.value) for item in span.attributes}
                    self.server.spans.append(
                        {
                            "service": service,
                            "name": span.name,
                            "trace_id": span.trace_id.hex(),
                            "span_id": span.span_id.hex(),
                            "parent_span_id": span.parent_span_id.hex(),
                            "attributes": attributes,
                            "error": span.status.code == 2,
                        }
                    )
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format, *args):
        pass


def _any_value(value):
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return tuple(_any_value(item) for item in value.array_value.values)
    return getattr(value, kind) if kind else None


@pytest.fixture()
def otlp_receiver():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    server.spans = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.integration
def test_an_mcp_run_task_joins_the_client_s_trace_from_the_server_s_request_to_the_kernel_s_calls(spans, sheets_catalog, otlp_receiver, tmp_path):
    from mcp import Client, StdioServerParameters

    env = {name: value for name, value in os.environ.items() if not name.startswith("OTEL_") and name != VALUES_VARIABLE}
    env.update(
        {
            "TOOLPATH_HOME": os.environ["TOOLPATH_HOME"],
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{otlp_receiver.server_address[1]}",
            "OTEL_SERVICE_NAME": "toolpath-under-test",
            "OTEL_BSP_SCHEDULE_DELAY": "50",
        }
    )
    served = Client(
        StdioServerParameters(
            command=sys.executable, args=["-m", "toolpath.planner.interfaces.cli", "serve", "--catalog", str(sheets_catalog)], env=env, cwd=str(ROOT)
        )
    )

    async def scenario():
        async with served as client:
            return await client.call_tool("run_task", {"task": "write a report on a table", "inputs": {"path": "sales.csv"}, "session_id": "traced"})

    with trace.get_tracer("tests").start_as_current_span("the agent's turn") as turn:
        run = asyncio.run(scenario())
    assert not run.is_error and run.structured_content["result"]["status"] == "ok", run.content
    # The server exports every 50 ms, and what it still holds as it exits with its client.
    deadline = time.monotonic() + 30
    while not any(span["name"] == "invoke_workflow toolpath.task" for span in otlp_receiver.spans) and time.monotonic() < deadline:
        time.sleep(0.1)
    received = list(otlp_receiver.spans)
    assert {span["service"] for span in received} == {"toolpath-under-test"}
    by_id = {span["span_id"]: span for span in received}

    def named(name):
        (found,) = [span for span in received if span["name"] == name]
        return found

    def parent(span):
        return by_id[span["parent_span_id"]]

    request = named("tools/call run_task")  # the MCP SDK's own server span
    task = named("invoke_workflow toolpath.task")
    cell = named("toolpath.cell")
    assert parent(task) is request and parent(named("plan")) is task and parent(cell) is task
    assert parent(named("execute_tool sheets.load_csv")) is cell and parent(named("execute_tool sheets.write_report")) is cell
    assert named("execute_tool sheets.write_report")["attributes"]["toolpath.tool.called_from"] == "kernel"
    # One trace: the agent's, whose context the client sent in the request's _meta.
    assert {span["trace_id"] for span in received} == {format(turn.get_span_context().trace_id, "032x")}
