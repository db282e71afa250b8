"""Cell round trips: raw jupyter_client vs CodeMode vs an agent session's free cell vs CodeMode on a
Jupyter Kernel Gateway vs CodeMode's sandboxed kernels (issue 31), and first-cell latency with and
without the pool, here, on the gateway and sandboxed.
The kinds of cells run interleaved, on kernels started together, so load drift during the run lands
on all of them alike.

Prints one JSON object. Targets (issue 4): CodeMode median round trip ≤ 1.25 × raw jupyter_client;
first cell of a new session with the warm pool ≤ 60 ms. An agent session reads the kernel's variable
names after each cell (one silent cell more), reported as its own ratio to CodeMode. The gateway
(issue 20) is started here on 127.0.0.1 (jupyter-kernel-gateway, from the test extra), so its
figures are the cost of the REST/WebSocket path and the TLS bridge without a network. Timings on
shared machines are noisy: compare the ratios measured in one run.

Usage: python benchmarks/bench_cells.py [--cells 200] [--cold 3] [--warm 10]
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

from jupyter_client.manager import AsyncKernelManager

from toolpath.kernel import CodeMode
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


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=200)
    parser.add_argument("--cold", type=int, default=3)
    parser.add_argument("--warm", type=int, default=10)
    options = parser.parse_args()
    with kernel_gateway() as gateway:
        print(json.dumps(asyncio.run(main(options.cells, options.cold, options.warm, gateway)), indent=2))
