"""Round trips through ``toolpath serve`` (stdio and Streamable HTTP) against the same work in process.

Prints one JSON object: p50 / p95 in milliseconds of

- ``search``: a skill search (``search_skills`` through the server; ``AgentSession.search`` in
  process), on the shipped catalogs; every query is new, so each embeds its text;
- ``cell``: a trivial cell (``execute`` through the server; ``AgentSession.execute`` in process,
  which is what the server runs);

each over ``--calls`` calls after a warm-up, for ``in_process``, ``stdio`` and ``http`` (a real
subprocess on a free 127.0.0.1 port, with a bearer token). ``ratios`` divide the server's p50 by the
in-process p50.

``metrics_overhead``: a cell making one call of a host tool (through the bridge), by ``execute``
over HTTP, to two servers running at once on a small catalog of their own, one with ``--metrics``
(which counts the MCP call, the cell and the bridge call); they take turns in blocks of calls, so
both see the same machine. ``ratio`` divides the p50 with metrics by the p50 without;
``bookkeeping_us`` is what the metrics' own work for one such call costs, timed in process, and
``bookkeeping_share`` that as a share of the p50 without (issue 56).

``tracing_overhead``: a trivial cell and the same bridged cell, taking turns the same way through a
server that traces nothing (the ``otel`` extra installed, no ``OTEL_*`` variable set) and one whose
every span (the MCP call's task, the cell, the tool call) goes in batches to an in-memory exporter;
``ratios`` divide the traced p50 by the other's (target ≤ 1.05, issue 56).

Targets (issue 16): search through the server p50 ≤ 30 ms; a cell ≤ 1.5 × the in-process cell.

Usage: python benchmarks/bench_serve.py [--calls 100] [--overhead-only]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from toolpath.planner import Workspace  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale import free_port, wait_for_port  # noqa: E402

QUERY = "compute molecular descriptors"
CELL = "1 + 1"
_queries = itertools.count()

#: A catalog whose one tool runs in the server: every call of it from a cell crosses the bridge.
STAMP_CATALOG = """\
domain: stamps
package: bench_stamps
states:
  - {token: stamps.stamped, description: A text is stamped with a date., affordances: [stamp a text with a date]}
tools:
  - name: stamp_text
    description: Stamp a text with a date.
    binding: host
    required_parameters: [{name: text, type: str}]
    return_spec: {name: stamped, type: str, state: stamps.stamped}
    state_transition: {produces: [stamps.stamped]}
"""
BRIDGED_CELL = "await stamps.stamp_text(text='invoice 7')"
#: How python runs toolpath's command line.
COMMAND_LINE = ["-m", "toolpath.planner.interfaces.cli"]


def query() -> str:
    """A query never asked before (the index keeps the vectors of recent queries)."""
    return f"{QUERY} of molecule {next(_queries)}"


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"p50": round(statistics.median(ordered) * 1000, 2), "p95": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))] * 1000, 2)}


async def timed(call: Callable[[], Awaitable[object]], calls: int) -> dict[str, float]:
    for _ in range(5):  # warm-up: model, kernel, caches
        await call()
    samples = []
    for _ in range(calls):
        started = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - started)
    return percentiles(samples)


async def through(client: Client, calls: int) -> dict:
    return {
        "search": await timed(lambda: client.call_tool("search_skills", {"query": query(), "k": 5}), calls),
        "cell": await timed(lambda: client.call_tool("execute", {"code": CELL}), calls),
    }


def in_process(calls: int) -> dict:
    workspace = Workspace.open()
    with workspace.session("bench", snapshot=False) as session:

        async def search():
            return session.search(query(), k=5)

        async def cell():
            return session.execute(CELL)

        return {"search": asyncio.run(timed(search, calls)), "cell": asyncio.run(timed(cell, calls))}


def over_http(home: Path, calls: int) -> dict:
    token = secrets.token_urlsafe(32)
    tokens = home / "tokens.json"
    tokens.write_text(json.dumps({token: "bench"}))
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "toolpath.planner.interfaces.cli", "serve", "--http", f"127.0.0.1:{port}", "--tokens", str(tokens)],
        cwd=ROOT,
        env={**os.environ, "TOOLPATH_HOME": str(home)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(server, port, "toolpath serve --http")

        async def run() -> dict:
            transport = streamable_http_client(
                f"http://127.0.0.1:{port}/mcp", http_client=httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120)
            )
            async with Client(transport) as client:
                return await through(client, calls)

        return asyncio.run(run())
    finally:
        server.terminate()
        server.wait(timeout=30)


def over_stdio(home: Path, calls: int) -> dict:
    async def run() -> dict:
        parameters = StdioServerParameters(
            command=sys.executable, args=["-m", "toolpath.planner.interfaces.cli", "serve"], env={**os.environ, "TOOLPATH_HOME": str(home)}, cwd=str(ROOT)
        )
        async with Client(parameters) as client:
            return await through(client, calls)

    return asyncio.run(run())


#: ``python -c`` code that serves like ``toolpath serve`` with every span sent to an in-memory
#: exporter in batches (the SDK's standard processor): tracing's cost without a collector's.
TRACED_IN_MEMORY = """\
import sys
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
provider = TracerProvider()
provider.add_span_processor(BatchSpanProcessor(InMemorySpanExporter()))
trace.set_tracer_provider(provider)
from toolpath.planner.interfaces.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def stamps_catalog(home: Path) -> Path:
    """:data:`STAMP_CATALOG` and its tool's package, written under ``home``."""
    package = home / "bench_stamps"
    package.mkdir(exist_ok=True)
    (package / "__init__.py").write_text("")
    (package / "stamp_text.py").write_text("def stamp_text(text: str) -> str:\n    return f'{text} (stamped 2026-01-05)'\n")
    (package / "catalog.yaml").write_text(STAMP_CATALOG)
    return package / "catalog.yaml"


def compared_servers(home: Path, servers: dict[str, tuple[list[str], list[str]]], cells: dict[str, str], calls: int, blocks: int = 10) -> dict:
    """p50/p95 of each of ``cells`` (``{kind: code}``) by ``execute`` over HTTP, through each of
    ``servers`` (``{name: (python's arguments that run the command line, more arguments of serve)}``,
    each run as ``serve --http 127.0.0.1:PORT --no-auth --catalog STAMPS ...``), all running at
    once, in ``blocks`` alternating blocks of ``calls // blocks`` cells of each kind (a new client each)."""
    catalog = stamps_catalog(home)
    processes, urls = [], {}
    try:
        for name, (start, options) in servers.items():
            port = free_port()
            command = [sys.executable, *start, "serve", "--http", f"127.0.0.1:{port}", "--no-auth", "--catalog", str(catalog), *options]
            processes.append(
                subprocess.Popen(command, cwd=ROOT, env={**os.environ, "TOOLPATH_HOME": str(home)}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            )
            wait_for_port(processes[-1], port, f"toolpath serve --http ({name})")
            urls[name] = f"http://127.0.0.1:{port}/mcp"

        async def run() -> dict:
            # Two clients open at once made the second one's calls some 30 ms slower whichever server
            # it called (an A/A run showed it), so the servers take turns, a block of calls each.
            samples: dict[str, dict[str, list[float]]] = {name: {kind: [] for kind in cells} for name in urls}
            for block in range(blocks):
                for name in list(urls) if block % 2 == 0 else list(reversed(urls)):
                    async with Client(streamable_http_client(urls[name], http_client=httpx2.AsyncClient(timeout=120))) as client:
                        if block < 2:  # binds the stamps handle in the session (one store: a session id each server)
                            ran = await client.call_tool("run_task", {"task": "stamp a text with a date", "inputs": {"text": "draft"}, "session_id": name})
                            assert not ran.is_error, ran.content[0].text
                        for number in range(3 + calls // blocks):  # 3 to warm up
                            for kind, code in cells.items():
                                started = time.perf_counter()
                                result = await client.call_tool("execute", {"code": code, "session_id": name})
                                assert not result.is_error, result.content[0].text
                                if number >= 3:
                                    samples[name][kind].append(time.perf_counter() - started)
            return {kind: {name: percentiles(samples[name][kind]) for name in urls} for kind in cells}

        return asyncio.run(run())
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=30)


def with_ratios(report: dict, base: str) -> dict:
    """``report`` (per kind of cell, per server: p50/p95) with each server's p50 divided by ``base``'s."""
    for timings in report.values():
        timings["ratios"] = {name: round(timing["p50"] / timings[base]["p50"], 3) for name, timing in list(timings.items()) if name != base}
    return report


def metrics_overhead(home: Path, calls: int, blocks: int = 10) -> dict:
    """p50/p95 of :data:`BRIDGED_CELL` through a server without and with ``--metrics`` (see
    :func:`compared_servers`), and what the metrics' own bookkeeping of one such call costs in
    process (``bookkeeping_us``: the MCP middleware, the cell and the bridge call)."""
    servers = {"without": (COMMAND_LINE, []), "with": (COMMAND_LINE, ["--metrics", f"127.0.0.1:{free_port()}"])}
    report = compared_servers(home, servers, {"bridged_call": BRIDGED_CELL}, calls, blocks)["bridged_call"]
    report["ratio"] = round(report["with"]["p50"] / report["without"]["p50"], 3)
    report["bookkeeping_us"] = round(asyncio.run(_metrics_bookkeeping()) * 1e6, 1)
    report["bookkeeping_share"] = round(report["bookkeeping_us"] / 1000 / report["without"]["p50"], 5)
    return report


def tracing_overhead(home: Path, calls: int, blocks: int = 10) -> dict:
    """p50/p95 of a trivial cell and of :data:`BRIDGED_CELL` through a server that traces nothing
    (the ``otel`` extra installed, no ``OTEL_*`` variable) and one whose every span goes to an
    in-memory exporter (:data:`TRACED_IN_MEMORY`), with the traced server's p50 ÷ the other's."""
    servers = {"not_configured": (COMMAND_LINE, []), "in_memory": (["-c", TRACED_IN_MEMORY], [])}
    return with_ratios(compared_servers(home, servers, {"round_trip": CELL, "bridged_call": BRIDGED_CELL}, calls, blocks), "not_configured")


async def _metrics_bookkeeping(calls: int = 20_000) -> float:
    """Seconds the metrics add to one bridged ``execute`` call in the server: the MCP middleware
    around a metered tool, and the observer told of one cell and one bridge call."""
    from mcp_types import CallToolResult, TextContent

    from toolpath.planner.interfaces.serve_metrics import ServeMetrics

    metrics = ServeMetrics()
    result = CallToolResult(content=[TextContent(type="text", text="Out[1]: 'invoice 7'")])

    async def execute() -> CallToolResult:
        return result

    metered = metrics.metered(execute)

    class Message:  # what the middleware reads of an MCP message
        method = "tools/call"
        params = {"name": "execute"}

    async def handler(message: object) -> CallToolResult:
        return await metered()

    started = time.perf_counter()
    for _ in range(calls):
        await metrics.middleware(Message(), handler)  # type: ignore[arg-type]
        metrics.kernel_observer.cell_finished("ok", 0.02)
        metrics.kernel_observer.bridge_call_finished("stamps.stamp_text", "ok", 0.001)
    return (time.perf_counter() - started) / calls


def main(calls: int, overhead_only: bool = False) -> dict:
    report: dict = {"python": sys.version.split()[0], "calls": calls, "targets": {"search_p50_ms": 30, "cell_ratio": 1.5}}
    with tempfile.TemporaryDirectory(prefix="toolpath-bench-serve-") as directory:
        os.environ["TOOLPATH_HOME"] = directory
        if overhead_only:
            return {**report, "metrics_overhead": metrics_overhead(Path(directory), calls), "tracing_overhead": tracing_overhead(Path(directory), calls)}
        report["in_process"] = in_process(calls)
        report["stdio"] = over_stdio(Path(directory), calls)
        report["http"] = over_http(Path(directory), calls)
        report["metrics_overhead"] = metrics_overhead(Path(directory), calls)
        report["tracing_overhead"] = tracing_overhead(Path(directory), calls)
    report["ratios"] = {
        transport: {operation: round(report[transport][operation]["p50"] / report["in_process"][operation]["p50"], 2) for operation in ("search", "cell")}
        for transport in ("stdio", "http")
    }
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--overhead-only", action="store_true", help="measure only what metrics and tracing cost a server")
    options = parser.parse_args()
    print(json.dumps(main(options.calls, options.overhead_only), indent=2))
