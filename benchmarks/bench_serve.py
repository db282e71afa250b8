"""Round trips through ``toolpath serve`` (stdio and Streamable HTTP) against the same work in process.

Prints one JSON object: p50 / p95 in milliseconds of

- ``search``: a skill search (``search_skills`` through the server; ``AgentSession.search`` in
  process), on the shipped catalogs; every query is new, so each embeds its text;
- ``cell``: a trivial cell (``execute`` through the server; ``AgentSession.execute`` in process,
  which is what the server runs);

each over ``--calls`` calls after a warm-up, for ``in_process``, ``stdio`` and ``http`` (a real
subprocess on a free 127.0.0.1 port, with a bearer token). ``ratios`` divide the server's p50 by the
in-process p50.

Targets (issue 16): search through the server p50 ≤ 30 ms; a cell ≤ 1.5 × the in-process cell.

Usage: python benchmarks/bench_serve.py [--calls 100]
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


def main(calls: int) -> dict:
    report: dict = {"python": sys.version.split()[0], "calls": calls, "targets": {"search_p50_ms": 30, "cell_ratio": 1.5}}
    with tempfile.TemporaryDirectory(prefix="toolpath-bench-serve-") as directory:
        os.environ["TOOLPATH_HOME"] = directory
        report["in_process"] = in_process(calls)
        report["stdio"] = over_stdio(Path(directory), calls)
        report["http"] = over_http(Path(directory), calls)
    report["ratios"] = {
        transport: {operation: round(report[transport][operation]["p50"] / report["in_process"][operation]["p50"], 2) for operation in ("search", "cell")}
        for transport in ("stdio", "http")
    }
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100)
    print(json.dumps(main(parser.parse_args().calls), indent=2))
