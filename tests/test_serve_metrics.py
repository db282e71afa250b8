"""Prometheus metrics of ``toolpath serve --http --metrics``: a real server process, real MCP calls,
``/metrics`` scraped over HTTP and read with prometheus-client's own parser."""

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import ElicitResult
from prometheus_client.parser import text_string_to_metric_families

from toolpath.errors import MissingExtraError
from toolpath.planner import interfaces
from toolpath.planner.interfaces.server import ServeError, serve

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent
ALICE = "alice-" + "a" * 32
BOB = "bob-" + "b" * 32

#: A domain whose second tool runs in the server (each call crosses the bridge) and whose third
#: sends, so every call of it waits for a person's approval.
LEDGER_CATALOG = """\
domain: ledger
package: {package}
states:
  - {{token: ledger.opened, description: A ledger file is opened., affordances: [open a ledger file]}}
  - {{token: ledger.entry_posted, description: An entry is posted to an open ledger., affordances: [post an entry to the ledger]}}
  - {{token: ledger.books_closed, description: The books are closed and sent to the auditor., affordances: [close the books]}}
tools:
  - name: open_ledger
    description: Open a ledger file.
    required_parameters: [{{name: path, type: str}}]
    return_spec: {{name: ledger, type: dict, state: ledger.opened}}
    state_transition: {{requires: [], produces: [ledger.opened]}}
  - name: post_entry
    description: Post an entry to an open ledger.
    binding: host
    required_parameters: [{{name: ledger, type: dict, state: ledger.opened}}]
    return_spec: {{name: entry, type: str, state: ledger.entry_posted}}
    state_transition: {{requires: [ledger.opened], produces: [ledger.entry_posted]}}
  - name: close_books
    description: Close the books and send them to the auditor.
    effects: sends
    approval: always
    binding: host
    required_parameters: [{{name: entry, type: str, state: ledger.entry_posted}}]
    return_spec: {{name: receipt, type: str, state: ledger.books_closed}}
    state_transition: {{requires: [ledger.entry_posted], produces: [ledger.books_closed]}}
"""


@pytest.fixture()
def ledger_catalog(tmp_path):
    package_name = f"ledger_{uuid.uuid4().hex[:8]}"
    package = tmp_path / package_name
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "open_ledger.py").write_text("def open_ledger(path: str) -> dict:\n    return {'path': path, 'lines': 12}\n")
    (package / "post_entry.py").write_text("def post_entry(ledger: dict) -> str:\n    return f\"entry 13 of {ledger['path']}\"\n")
    (package / "close_books.py").write_text("def close_books(entry: str) -> str:\n    return 'sent'\n")
    (package / "catalog.yaml").write_text(LEDGER_CATALOG.format(package=package_name))
    return package / "catalog.yaml"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture()
def serve_with_metrics(tmp_path, listening_server, ledger_catalog):
    """``serve_with_metrics(*options)``: ``toolpath serve --http`` with ``--metrics`` on the ledger
    catalog, for Alice and Bob, at most two sessions a user: ``(MCP URL, metrics URL)``."""

    def start(*options):
        tokens = tmp_path / "tokens.json"
        tokens.write_text(json.dumps({ALICE: "alice", BOB: "bob"}))
        metrics_port = _free_port()
        port = listening_server(
            lambda port: [
                sys.executable,
                "-m",
                "toolpath.planner.interfaces.cli",
                "serve",
                "--http",
                f"127.0.0.1:{port}",
                "--tokens",
                str(tokens),
                "--kernels",
                "plain",
                "--catalog",
                str(ledger_catalog),
                "--max-sessions-per-user",
                "2",
                "--metrics",
                f"127.0.0.1:{metrics_port}",
                *options,
            ],
            cwd=str(ROOT),
            env={**os.environ, "TOOLPATH_HOME": str(tmp_path / "home")},
        )
        return f"http://127.0.0.1:{port}/mcp", f"http://127.0.0.1:{metrics_port}/metrics"

    return start


def over_http(url, token, **callbacks):
    return Client(streamable_http_client(url, http_client=httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120)), **callbacks)


def scrape_text(url, **headers):
    """The metrics page's response; the metrics listener may start a moment after the MCP one."""
    deadline = time.monotonic() + 60  # a guard against waiting forever, not a time the test measures
    while True:
        try:
            return httpx2.get(url, headers=headers, timeout=30)
        except httpx2.ConnectError:
            assert time.monotonic() < deadline, "the metrics listener did not start"
            time.sleep(0.1)


def scrape(url):
    """``{(sample name, frozenset of its labels): value}`` of every sample on the metrics page."""
    response = scrape_text(url)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain"), response.text
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value for family in text_string_to_metric_families(response.text) for sample in family.samples
    }


def value(samples, name, **labels):
    return samples.get((name, frozenset(labels.items())), 0.0)


def test_metrics_count_the_calls_cells_bridge_calls_sessions_and_approvals_a_server_sees(serve_with_metrics, tmp_path):
    url, metrics_url = serve_with_metrics()
    ledger_file = tmp_path / "quarterly-ledger-zx81.csv"  # a path no metric may show
    before = scrape(metrics_url)
    assert value(before, "toolpath_kernels_running") == 0 and value(before, "toolpath_sessions_open") == 0

    async def calls():
        async with over_http(url, ALICE) as alice:
            # Metered tools keep their schemas: the SDK reads them through the wrappers.
            tools = {tool.name: tool for tool in (await alice.list_tools()).tools}
            assert tools["run_task"].output_schema and "on_approval" in tools["run_task"].input_schema["properties"]
            search = await alice.call_tool("search_skills", {"query": "post an entry to the ledger", "k": 3})
            assert not search.is_error
            invalid = await alice.call_tool("search_skills", {"query": "ledger", "k": "several"})  # fails the tool's schema
            assert invalid.is_error
            planned = await alice.call_tool("plan_task", {"task": "post an entry to the ledger", "inputs": {"path": str(ledger_file)}})
            assert not planned.is_error
            run = await alice.call_tool(
                "run_task", {"task": "post an entry to the ledger", "inputs": {"path": str(ledger_file)}, "session_id": "lab-quartz-42"}
            )
            assert not run.is_error and run.structured_content["result"]["status"] == "ok", run.content[0].text
            bad_input = await alice.call_tool("run_task", {"task": "post an entry to the ledger", "inputs": {"not an identifier": 1}})
            assert bad_input.is_error
            over_quota = await alice.call_tool("list_variables", {"session_id": "third-session"})  # "main" and the lab are her two
            assert over_quota.is_error and "--max-sessions-per-user 2" in over_quota.content[0].text
            failing = await alice.call_tool("execute", {"code": "zebra_marker_913 = 1 / 0", "session_id": "lab-quartz-42"})
            assert failing.is_error and failing.structured_content["status"] == "error"
            paused = await alice.call_tool("run_task", {"task": "close the books", "session_id": "lab-quartz-42", "on_approval": "pause"})
            assert not paused.is_error and paused.structured_content["paused"], paused.content[0].text
            return paused

    asyncio.run(calls())
    after = scrape(metrics_url)

    def moved(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    # Each call once, by tool and how it ended; a refusal under its reason code.
    assert moved("toolpath_requests_total", tool="search_skills", status="ok") == 1
    assert moved("toolpath_requests_total", tool="search_skills", status="refused") == 1
    assert moved("toolpath_requests_total", tool="plan_task", status="ok") == 1
    assert moved("toolpath_requests_total", tool="run_task", status="ok") == 2  # the run, and the one paused for approval
    assert moved("toolpath_requests_total", tool="run_task", status="refused") == 1
    assert moved("toolpath_requests_total", tool="list_variables", status="refused") == 1
    assert moved("toolpath_requests_total", tool="execute", status="error") == 1
    assert total(after, "toolpath_requests_total") - total(before, "toolpath_requests_total") == 8
    assert moved("toolpath_refusals_total", reason="invalid_arguments") == 1
    assert moved("toolpath_refusals_total", reason="bad_input") == 1
    assert moved("toolpath_refusals_total", reason="max_sessions_per_user") == 1
    assert total(after, "toolpath_refusals_total") - total(before, "toolpath_refusals_total") == 3
    # Durations: one observation per call, search and planning timed on their own.
    assert moved("toolpath_request_duration_seconds_count", tool="run_task") == 3
    assert moved("toolpath_request_duration_seconds_count", tool="search_skills") == 2
    assert moved("toolpath_search_duration_seconds_count") == 1  # the call that failed the schema never searched
    assert moved("toolpath_plan_duration_seconds_count") == 1
    assert value(after, "toolpath_request_duration_seconds_sum", tool="run_task") > 0
    # Cells: the run's, the one that raised, the paused run's; post_entry crossed the bridge once.
    assert moved("toolpath_cell_duration_seconds_count", status="ok") == 1
    assert moved("toolpath_cell_duration_seconds_count", status="error") == 1
    assert moved("toolpath_cell_duration_seconds_count", status="paused") == 1
    assert moved("toolpath_bridge_calls_total", tool="ledger.post_entry", outcome="ok") == 1
    assert total(before, "toolpath_bridge_calls_total") == 0
    assert total(after, "toolpath_bridge_call_duration_seconds_count") == total(after, "toolpath_bridge_calls_total") >= 2  # post_entry, close_books
    # What the server holds now: Alice's two sessions, the lab's kernel, the paused task.
    assert value(after, "toolpath_sessions_open") == 2
    assert value(after, "toolpath_kernels_running") == value(after, "toolpath_user_kernels_running", user="alice") >= 1
    assert value(after, "toolpath_user_kernels_running", user="bob") == 0
    assert value(after, "toolpath_approvals_pending", kind="paused") == 1
    assert value(after, "toolpath_approvals_pending", kind="asking") == 0

    async def resume():
        async with over_http(url, ALICE) as alice:
            denied = await alice.call_tool("resume_task", {"approved": False, "note": "not yet", "session_id": "lab-quartz-42"})
            assert "not yet" in denied.content[0].text

    asyncio.run(resume())
    assert value(scrape(metrics_url), "toolpath_approvals_pending", kind="paused") == 0

    # While Alice is asked (an elicitation), the cell waits: counted as asking.
    pages = []

    async def answer(context, params):
        async with httpx2.AsyncClient(timeout=30) as http:
            pages.append((await http.get(metrics_url)).text)
        return ElicitResult(action="decline")

    async def ask():
        async with over_http(url, ALICE, elicitation_callback=answer) as alice:
            asked = await alice.call_tool("run_task", {"task": "close the books", "session_id": "lab-quartz-42"})
            assert "declined" in asked.content[0].text

    asyncio.run(ask())
    waiting = {
        (sample.name, frozenset(sample.labels.items())): sample.value for family in text_string_to_metric_families(pages[0]) for sample in family.samples
    }
    assert value(waiting, "toolpath_approvals_pending", kind="asking") == 1
    assert value(scrape(metrics_url), "toolpath_approvals_pending", kind="asking") == 0
    # Snapshots are written 1.5 s after a session's last cell (SQLite store): wait for the first.
    deadline = time.monotonic() + 60  # a guard against waiting forever, not a time the test measures
    while (written := scrape(metrics_url)).get(("toolpath_snapshots_written_total", frozenset()), 0) < 1:
        assert time.monotonic() < deadline, "no snapshot was counted"
        time.sleep(0.5)
    assert value(written, "toolpath_snapshots_written_bytes_total") > 0

    # Nothing of what Alice sent: not her paths, session ids, code or task words, nor a token.
    page = scrape_text(metrics_url).text
    for secret in (
        str(ledger_file),
        "quarterly-ledger",
        str(tmp_path),
        "lab-quartz-42",
        "third-session",
        "zebra_marker_913",
        "several",
        ALICE,
        BOB,
        "post an entry",
    ):
        assert secret not in page, secret


def total(samples, name):
    """The sum of ``name``'s samples over all their labels."""
    return sum(sample_value for (sample_name, _), sample_value in samples.items() if sample_name == name)


def test_the_metrics_port_answers_while_the_mcp_port_is_at_its_cap_and_counts_the_cap_hits(serve_with_metrics):
    url, metrics_url = serve_with_metrics("--max-connections", "1")
    before = scrape(metrics_url)  # no token asked for
    mcp_port = int(url.split(":")[2].split("/")[0])
    with socket.create_connection(("127.0.0.1", mcp_port)) as idle, socket.create_connection(("127.0.0.1", mcp_port)):
        idle.settimeout(30)
        assert idle.recv(1) == b""  # the idle connection made room for the new one
        after = scrape(metrics_url)
    assert (
        value(after, "toolpath_connection_cap_hits_total", outcome="replaced_waiting")
        - value(before, "toolpath_connection_cap_hits_total", outcome="replaced_waiting")
        == 1
    )
    assert value(after, "toolpath_connection_cap_hits_total", outcome="refused") == 0
    # Metrics only, at /metrics, by GET, for a Host this server answers to: a page whose name an
    # attacker re-pointed at this address (DNS rebinding) names its own.
    assert scrape_text(metrics_url.replace("/metrics", "/mcp")).status_code == 404
    assert scrape_text(metrics_url, host="attacker.example:80").status_code == 421
    assert httpx2.post(metrics_url, timeout=30).status_code == 405


def test_metrics_need_http_a_port_of_their_own_and_the_extra(monkeypatch):
    with pytest.raises(ServeError, match="only apply with --http"):
        serve(metrics="127.0.0.1:9464")
    with pytest.raises(ServeError, match="--metrics takes HOST:PORT"):
        serve(http="127.0.0.1:8765", no_auth=True, metrics="9464")
    with pytest.raises(ServeError, match="--metrics needs a port of its own"):
        serve(http="127.0.0.1:8765", no_auth=True, metrics="127.0.0.1:8765")
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # as if the extra were not installed
    monkeypatch.delitem(sys.modules, "toolpath.planner.interfaces.serve_metrics", raising=False)
    monkeypatch.delattr(interfaces, "serve_metrics", raising=False)
    with pytest.raises(MissingExtraError, match=r"pip install 'toolpath\[metrics\]'"):
        serve(http=f"127.0.0.1:{_free_port()}", no_auth=True, metrics=f"127.0.0.1:{_free_port()}")


def test_serving_without_metrics_does_not_import_prometheus_client():
    code = (
        "import sys\n"
        "from toolpath.planner.interfaces.cli.main import build_parser\n"
        "from toolpath.planner.interfaces.server import ToolpathServer, serve\n"
        "build_parser().parse_args(['serve', '--http', '127.0.0.1:8765'])\n"
        "print('prometheus_client' in sys.modules)\n"
    )
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=str(ROOT))
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == "False"
