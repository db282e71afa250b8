"""Cell round trips: raw jupyter_client vs CodeMode vs an agent session's free cell vs CodeMode on a
Jupyter Kernel Gateway vs CodeMode's sandboxed kernels (issue 31), and first-cell latency with and
without the pool, here, on the gateway and sandboxed; and what tracing costs (issue 56).
The kinds of cells run interleaved, on kernels started together, so load drift during the run lands
on all of them alike.

Prints one JSON object. Targets (issue 4): CodeMode median round trip ≤ 1.25 × raw jupyter_client;
first cell of a new session with the warm pool ≤ 60 ms. An agent session reads the kernel's variable
names after each cell (one silent cell more), reported as its own ratio to CodeMode. The gateway
(issue 20) is started here on 127.0.0.1 (jupyter-kernel-gateway, from the test extra), so its
figures are the cost of the REST/WebSocket path and the TLS bridge without a network. Timings on
shared machines are noisy: compare the ratios measured in one run.

Tracing (issue 56): a cell round trip, a cell making one bridged call of a host tool, and one making
20, each timed in three processes that differ only in tracing: spans sent to the OpenTelemetry
SDK's in-memory exporter (in batches, as ``toolpath[otel]`` sends them over OTLP), OpenTelemetry
imported but no provider set (tracing not configured), and OpenTelemetry not importable (the extra
absent). Their batches of cells alternate, so load drift lands on all three alike. Targets:
configured ≤ 1.05 × absent, not configured ≤ 1.01 × absent (medians).

Usage: python benchmarks/bench_cells.py [--cells 200] [--cold 3] [--warm 10] [--tracing-batches 30]
       python benchmarks/bench_cells.py --tracing-only [--tracing-batches 30]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

if __name__ == "__main__" and sys.argv[1:3] == ["--tracing-worker", "absent"]:
    # The otel extra absent: nothing of OpenTelemetry can be imported in this process.
    sys.modules["opentelemetry"] = None  # type: ignore[assignment]

from jupyter_client.manager import AsyncKernelManager

from toolpath.kernel import CodeMode, Toolkit
from toolpath.kernel.sandbox.provisioner import SandboxPolicy
from toolpath.planner import Workspace


@contextlib.asynccontextmanager
async def raw_kernel() -> AsyncIterator[Callable[[], Awaitable[float]]]:
    """A kernel driven by jupyter_client alone; yields a function timing one trivial cell (execute,
    then wait for the kernel to go idle). Same transport as CodeMode (IPC sockets), so the
    comparison measures CodeMode's own overhead."""
    directory = tempfile.TemporaryDirectory(prefix="bench-raw-")
    manager = AsyncKernelManager(
        kernel_name="python3", transport="ipc", ip=os.path.join(directory.name, "kernel"), connection_file=os.path.join(directory.name, "connection.json")
    )
    await manager.start_kernel()
    client = manager.client()
    client.start_channels()
    await client.wait_for_ready(timeout=60)

    async def round_trip() -> float:
        started = time.perf_counter()
        message_id = client.execute("1 + 1")
        while True:
            message = await client.get_iopub_msg(timeout=10)
            if message["parent_header"].get("msg_id") == message_id and message["msg_type"] == "status" and message["content"]["execution_state"] == "idle":
                break
        await client.get_shell_msg(timeout=10)
        return time.perf_counter() - started

    try:
        yield round_trip
    finally:
        client.stop_channels()
        await manager.shutdown_kernel(now=True)
        directory.cleanup()


@contextlib.contextmanager
def kernel_gateway() -> Iterator[dict[str, str]]:
    """A Jupyter Kernel Gateway on a free 127.0.0.1 port with a token: CodeMode's gateway options."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    token = secrets.token_hex(16)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kernel_gateway",
            "--KernelGatewayApp.ip=127.0.0.1",
            f"--KernelGatewayApp.port={port}",
            f"--KernelGatewayApp.auth_token={token}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise SystemExit(f"the Kernel Gateway exited ({process.returncode}); is jupyter-kernel-gateway installed? pip install -e '.[test]'")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit("the Kernel Gateway did not listen within 60 s") from None
                time.sleep(0.1)
        yield {"gateway_url": f"http://127.0.0.1:{port}", "gateway_token": token}
    finally:
        process.terminate()
        process.wait(timeout=30)


@contextlib.asynccontextmanager
async def codemode_kernel(**options: str) -> AsyncIterator[Callable[[], Awaitable[float]]]:
    async with CodeMode(pool_size=0, **options) as code_mode:
        await code_mode.arun("0", "bench")  # start the kernel outside the timing

        async def round_trip() -> float:
            started = time.perf_counter()
            result = await code_mode.arun("1 + 1", "bench")
            assert result.result == "2", result
            return time.perf_counter() - started

        yield round_trip


@contextlib.asynccontextmanager
async def session_kernel() -> AsyncIterator[Callable[[], Awaitable[float]]]:
    """Free cells of an agent session on the shipped catalogs (no embedding model is loaded)."""
    async with Workspace.open().session("bench") as session:
        await session.aexecute("0")

        async def round_trip() -> float:
            started = time.perf_counter()
            result = await session.aexecute("1 + 1")
            assert result.result == "2", result
            return time.perf_counter() - started

        yield round_trip


async def round_trips(cells: int, gateway: dict[str, str]) -> dict[str, list[float]]:
    """``cells`` round trips of each kind, interleaved (raw, CodeMode, session, gateway, raw, ...) on
    four kernels started together, so a change of load during the run hits all of them alike."""
    kinds = {
        "raw_jupyter_client": raw_kernel(),
        "codemode": codemode_kernel(),
        "agent_session": session_kernel(),
        "codemode_gateway": codemode_kernel(**gateway),
        "codemode_sandboxed": codemode_kernel(sandbox=SandboxPolicy()),
    }
    async with contextlib.AsyncExitStack() as stack:
        runners = {name: await stack.enter_async_context(kernel) for name, kernel in kinds.items()}
        timings: dict[str, list[float]] = {name: [] for name in runners}
        for _ in range(cells):
            for name, round_trip in runners.items():
                timings[name].append(await round_trip())
    return timings


async def first_cell(pool_size: int, sessions: int, **options: str) -> list[float]:
    """Latency of the first cell of ``sessions`` new sessions (the pool refilled before each)."""
    timings = []
    async with CodeMode(pool_size=pool_size, **options) as code_mode:
        for number in range(sessions):
            deadline = time.monotonic() + 60
            while code_mode.pool_ready() < pool_size and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            started = time.perf_counter()
            result = await code_mode.arun("1 + 1", f"session-{number}")
            timings.append(time.perf_counter() - started)
            assert result.result == "2", result
    return timings


def summary(timings: list[float]) -> dict:
    ordered = sorted(timings)
    return {
        "n": len(ordered),
        "median_ms": round(statistics.median(ordered) * 1000, 3),
        "p95_ms": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))] * 1000, 3),
    }


async def main(cells: int, cold: int, warm: int, gateway: dict[str, str]) -> dict:
    timings = await round_trips(cells, gateway)
    raw, codemode, session, on_gateway, sandboxed = (
        summary(timings[name]) for name in ("raw_jupyter_client", "codemode", "agent_session", "codemode_gateway", "codemode_sandboxed")
    )
    cold_first = summary(await first_cell(0, cold))
    warm_first = summary(await first_cell(1, warm))
    gateway_cold_first = summary(await first_cell(0, cold, **gateway))
    gateway_warm_first = summary(await first_cell(1, warm, **gateway))
    sandboxed_cold_first = summary(await first_cell(0, cold, sandbox=SandboxPolicy()))
    sandboxed_warm_first = summary(await first_cell(1, warm, sandbox=SandboxPolicy()))
    return {
        "python": sys.version.split()[0],
        "round_trip": {
            "raw_jupyter_client": raw,
            "codemode": codemode,
            "ratio": round(codemode["median_ms"] / raw["median_ms"], 3),
            "target_ratio": 1.25,
            "agent_session": session,
            "agent_session_to_codemode": round(session["median_ms"] / codemode["median_ms"], 3),
        },
        "first_cell": {"cold": cold_first, "warm_pool": warm_first, "target_warm_ms": 60},
        "gateway": {
            "round_trip": on_gateway,
            "round_trip_to_local_codemode": round(on_gateway["median_ms"] / codemode["median_ms"], 3),
            "first_cell": {"cold": gateway_cold_first, "warm_pool": gateway_warm_first},
        },
        "sandboxed": {
            "round_trip": sandboxed,
            "round_trip_to_local_codemode": round(sandboxed["median_ms"] / codemode["median_ms"], 3),
            "first_cell": {"cold": sandboxed_cold_first, "warm_pool": sandboxed_warm_first},
            "cold_first_cell_to_local": round(sandboxed_cold_first["median_ms"] / cold_first["median_ms"], 3),
        },
    }


#: The tracing set-ups compared, and the cells timed in each (a host tool ``bench.echo`` is bound).
TRACING_MODES = ("absent", "not_configured", "in_memory")
TRACED_CELLS = {
    "round_trip": "1 + 1",
    "bridged_call": "await bench.echo(1)",
    "bridged_calls_20": "for number in range(20):\n    await bench.echo(number)",
}
#: Cells of each kind a worker runs per batch.
TRACING_BATCH = 10
#: A cell timing, in microseconds, what an untraced call of a host tool costs more in the kernel:
#: looking for its cell's trace context, and the wrapper that numbers its tries.
KERNEL_CHECKS = """\
import time
from toolpath.kernel.inside import call_traces
async def _nothing():
    return None
_n = 100_000
_t = time.perf_counter()
for _ in range(_n):
    call_traces.bridge_fields()
_fields = time.perf_counter() - _t
_t = time.perf_counter()
for _ in range(_n):
    await call_traces.numbered(_nothing, 1)
_numbered = time.perf_counter() - _t
_t = time.perf_counter()
for _ in range(_n):
    await _nothing()
(_fields + _numbered - (time.perf_counter() - _t)) / _n * 1e6
"""


def tracing_worker(mode: str) -> None:
    """One process of the tracing comparison: set tracing up as ``mode`` says, start a CodeMode
    kernel, print ``{"check_us": ...}`` (what one check of whether to trace costs here, in
    microseconds), then for each line ``N`` read on standard input run ``N`` cells of each kind and
    print their timings (seconds) as one JSON line."""
    exporter = None
    if mode == "not_configured":
        import opentelemetry.trace  # noqa: F401  (imported, as the MCP SDK imports it, with no provider set)
    elif mode == "in_memory":
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
    elif "opentelemetry" in sys.modules and sys.modules["opentelemetry"] is not None:
        raise SystemExit("the 'absent' worker imported OpenTelemetry")

    def echo(value: int) -> int:
        return value

    with CodeMode([Toolkit("bench", [echo])], pool_size=0, snapshot=False) as code_mode:
        for code in TRACED_CELLS.values():
            assert code_mode.run(code, "bench").status == "ok"
        from toolpath.observability.tracing import tracer

        checks = 200_000
        started = time.perf_counter()
        for _ in range(checks):
            tracer()
        check_us = (time.perf_counter() - started) / checks * 1e6
        kernel_check_us = float(code_mode.run(KERNEL_CHECKS, "bench").result)
        print(json.dumps({"check_us": check_us, "kernel_check_us": kernel_check_us}), flush=True)
        for line in sys.stdin:
            timings: dict[str, list[float]] = {kind: [] for kind in TRACED_CELLS}
            for _ in range(int(line)):
                for kind, code in TRACED_CELLS.items():
                    started = time.perf_counter()
                    result = code_mode.run(code, "bench")
                    timings[kind].append(time.perf_counter() - started)
                    assert result.status == "ok", result
            if exporter is not None:
                # Spans of this batch were exported (or are about to be): keep memory flat.
                exporter.clear()
            print(json.dumps(timings), flush=True)


def tracing_overhead(batches: int) -> dict:
    """The tracing comparison (module docstring): ``batches`` batches of :data:`TRACING_BATCH` cells
    of each kind per set-up, the set-ups taking turns (their order rotating each batch)."""
    workers = {
        mode: subprocess.Popen([sys.executable, __file__, "--tracing-worker", mode], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for mode in TRACING_MODES
    }
    timings = {mode: {kind: [] for kind in TRACED_CELLS} for mode in TRACING_MODES}
    try:
        check_us, kernel_check_us = {}, {}
        for mode, worker in workers.items():
            ready = worker.stdout.readline().strip()
            if not ready.startswith("{"):
                raise SystemExit(f"the {mode} tracing worker did not start ({ready!r})")
            check_us[mode], kernel_check_us[mode] = (round(json.loads(ready)[key], 3) for key in ("check_us", "kernel_check_us"))
        for batch in range(batches):
            for mode in TRACING_MODES[batch % 3 :] + TRACING_MODES[: batch % 3]:
                worker = workers[mode]
                worker.stdin.write(f"{TRACING_BATCH}\n")
                worker.stdin.flush()
                for kind, values in json.loads(worker.stdout.readline()).items():
                    timings[mode][kind].extend(values)
    finally:
        for worker in workers.values():
            worker.stdin.close()
            worker.wait(timeout=60)
    report: dict = {
        "cells_per_kind": batches * TRACING_BATCH,
        "targets": {"in_memory_to_absent": 1.05, "not_configured_to_absent": 1.01},
        # Untraced, a cell passes toolpath's check 3 times on the host (its span, its request's
        # context, its kernel's call records) and a bridged call twice (its context, its span), plus
        # once in the kernel (kernel_check_us, there whether or not the host has the extra).
        "check_us": check_us,
        "kernel_check_us": kernel_check_us,
    }
    for kind in TRACED_CELLS:
        medians = {mode: summary(timings[mode][kind]) for mode in TRACING_MODES}
        absent = medians["absent"]["median_ms"]
        calls = {"round_trip": 0, "bridged_call": 1, "bridged_calls_20": 20}[kind]
        report[kind] = {
            **medians,
            "in_memory_to_absent": round(medians["in_memory"]["median_ms"] / absent, 3),
            "not_configured_to_absent": round(medians["not_configured"]["median_ms"] / absent, 3),
            # What the untraced checks cost, as a share of the round trip: measured directly, since
            # the end-to-end ratios of separate processes are noisier than the checks are dear.
            "untraced_checks_share": round(((3 + 2 * calls) * check_us["not_configured"] + calls * kernel_check_us["absent"]) / 1000 / absent, 5),
        }
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=200)
    parser.add_argument("--cold", type=int, default=3)
    parser.add_argument("--warm", type=int, default=10)
    parser.add_argument("--tracing-batches", type=int, default=30, help="batches of 10 cells of each kind per tracing set-up")
    parser.add_argument("--tracing-only", action="store_true", help="measure only what tracing costs (no gateway, no sandbox)")
    parser.add_argument("--tracing-worker", choices=TRACING_MODES, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.tracing_worker:
        tracing_worker(options.tracing_worker)
    elif options.tracing_only:
        print(json.dumps({"python": sys.version.split()[0], "tracing": tracing_overhead(options.tracing_batches)}, indent=2))
    else:
        with kernel_gateway() as gateway:
            report = asyncio.run(main(options.cells, options.cold, options.warm, gateway))
        report["tracing"] = tracing_overhead(options.tracing_batches)
        print(json.dumps(report, indent=2))
