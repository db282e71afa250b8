"""A normal client's latency while hostile clients load ``toolpath serve --http`` (issue 30).

Starts a real server on a free 127.0.0.1 port with two users' bearer tokens, under an open-file
limit of 1,024 (Linux's usual default), and a normal client (user ``alice``) that calls
``search_skills`` and ``execute("1 + 1")`` in turn, one call at a time. For each load below the
normal client makes ``--calls`` calls while the load runs, and the report gives its p50 / p95
(milliseconds), the calls that failed (with the first error), and the server's largest count of
open descriptors, resident memory (MB) and child processes (its kernels) seen during the phase:

- ``quiet``: nothing else;
- ``idle_connections``: 1,100 connections that send nothing (more than the server's descriptors);
- ``slow_requests``: 300 connections sending a request head one byte a second (slowloris);
- ``long_tasks``: another user (``mallory``) sends ``plan_task`` with a task of 50,000 characters,
  with "take a nap, " × 200 (both over the caps) and × 99 (just under), back to back, from two
  connections;
- ``many_sessions``: ``mallory`` opens 40 sessions, each running a cell;
- ``forged_host``: requests with ``Host: attacker.example``, back to back;
- kernel-side tricks (issue 50): ``mallory`` replaces toolpath's snapshot dump in her sandboxed
  kernel with one that leaves, where the server reads the dump, a link to ``/dev/zero``
  (``dump_link_to_dev_zero``), a link to the server's tokens file (``dump_link_to_host_file``), a
  FIFO (``dump_fifo``), a directory (``dump_directory``), a 40 MB sparse file (``dump_sparse_file``),
  or a file a thread keeps swapping for a link to the tokens file (``dump_swapped_for_a_link``), and
  runs a cell every 2 s so that the server snapshots her session; ``runaway_cell``: her cell ignores
  SIGINT and spins a core. For the dump tricks, ``refused`` counts the cells whose notice said her
  snapshot failed (each must be refused, so > 0), and ``tokens_in_store`` says whether the tokens
  file's text reached the store (it must not).

Target: no failed call of the normal client and p95 ≤ 3 × its quiet p95 under every load, and
every dump trick refused with nothing of the host's stored. ``within_target`` says, per load,
whether all held.

Usage: python benchmarks/bench_abuse.py [--calls 40]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import resource
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx2
import psutil
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale import free_port, wait_for_port  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
#: The server's open-file limit: Linux's usual default soft limit.
FILE_LIMIT = 1024
_queries = itertools.count()


def _file_limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (FILE_LIMIT, FILE_LIMIT))


class Server:
    """``toolpath serve --http`` in a subprocess, with its descriptors and memory sampled."""

    def __init__(self, home: Path, tokens: dict[str, str]):
        tokens_file = self.tokens_file = home / "tokens.json"
        tokens_file.write_text(json.dumps(tokens))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "toolpath.planner.interfaces.cli", "serve", "--http", f"127.0.0.1:{self.port}", "--tokens", str(tokens_file)],
            cwd=ROOT,
            env={**os.environ, "TOOLPATH_HOME": str(home)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=_file_limit,
        )
        wait_for_port(self.process, self.port, "toolpath serve --http", 180)

    def sample(self) -> tuple[int, float, int]:
        """(open descriptors, resident MB, child processes) of the server now; zeros once it has exited."""
        try:
            process = psutil.Process(self.process.pid)
            return process.num_fds(), process.memory_info().rss / 2**20, len(process.children())
        except psutil.Error:
            return 0, 0.0, 0

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()


def client(url: str, token: str) -> Client:
    return Client(streamable_http_client(url, http_client=httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120)))


async def normal_calls(url: str, token: str, calls: int) -> dict:
    """The normal client's ``calls`` calls (search and a cell in turn): p50 / p95 ms and failures."""
    samples, failures, first_error = [], 0, None
    async with client(url, token) as session:
        # Its kernel is up, and the server's model and catalog embeddings loaded, before timing.
        await session.call_tool("execute", {"code": "1 + 1", "session_id": "normal"})
        await session.call_tool("search_skills", {"query": "warm up", "k": 1, "session_id": "normal"})
        for number in range(calls):
            started = time.perf_counter()
            try:
                if number % 2:
                    result = await session.call_tool("execute", {"code": "1 + 1", "session_id": "normal"})
                else:
                    result = await session.call_tool(
                        "search_skills", {"query": f"compute molecular descriptors {next(_queries)}", "k": 3, "session_id": "normal"}
                    )
                if result.is_error:
                    raise RuntimeError(result.content[0].text)
            except Exception as error:  # a failed call is what this benchmark counts
                failures += 1
                first_error = first_error or f"{type(error).__name__}: {error}"[:300]
            samples.append(time.perf_counter() - started)
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 1),
        "p95_ms": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))] * 1000, 1),
        "failed": failures,
        **({"first_error": first_error} if first_error else {}),
    }


async def idle_connections(port: int, stop: asyncio.Event) -> None:
    held = []
    try:
        for _ in range(1100):
            with contextlib.suppress(OSError):
                held.append(await asyncio.open_connection("127.0.0.1", port))
        await stop.wait()
    finally:
        for _, writer in held:
            writer.close()


async def slow_requests(port: int, stop: asyncio.Event) -> None:
    async def one() -> None:
        while not stop.is_set():
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode())
                while not stop.is_set() and not writer.is_closing():
                    writer.write(b"X")
                    await writer.drain()
                    await asyncio.sleep(1)
                writer.close()
            except OSError:
                await asyncio.sleep(0.5)  # closed by the server: come back, as an attacker would

    await asyncio.gather(*(one() for _ in range(300)))


async def long_tasks(url: str, token: str, stop: asyncio.Event) -> None:
    tasks = ["summarise this text " + "and also this " * 3_500, "take a nap, " * 200, "take a nap, " * 99]

    async def one() -> None:
        async with client(url, token) as session:
            for task in itertools.cycle(tasks):
                if stop.is_set():
                    return
                with contextlib.suppress(Exception):
                    await session.call_tool("plan_task", {"task": task})

    await asyncio.gather(one(), one())


async def many_sessions(url: str, token: str, stop: asyncio.Event) -> None:
    async with client(url, token) as session:
        await asyncio.gather(
            *(session.call_tool("execute", {"code": "x = 1", "session_id": f"squat-{number}"}) for number in range(40)), return_exceptions=True
        )
    await stop.wait()


async def forged_host(port: int, stop: asyncio.Event) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}},
    }
    async with httpx2.AsyncClient(timeout=30) as http:
        while not stop.is_set():
            with contextlib.suppress(Exception):
                await http.post(
                    f"http://127.0.0.1:{port}/mcp", json=body, headers={"Host": "attacker.example", "Accept": "application/json, text/event-stream"}
                )


#: A cell that replaces toolpath's kernel-side dump with one that leaves ``{plant}`` at the dump path
#: (``path``) and a report claiming it holds a variable.
HOSTILE_DUMP = """
import json, os, threading
import toolpath.kernel.inside.snapshot as _snapshot_code
def _hostile_dump(path, *args, **kwargs):
    if os.path.lexists(path):
        os.remove(path)
    {plant}
    with open(path + ".report", "w") as file:
        json.dump({{"saved": {{"stolen": "0" * 32}}, "skipped": {{}}}}, file)
_snapshot_code.dump = _hostile_dump
planted = 1
"""
#: What each dump trick leaves at the dump path; ``{tokens}`` is the server's tokens file.
DUMP_TRICKS = {
    "dump_link_to_dev_zero": "os.symlink('/dev/zero', path)",
    "dump_link_to_host_file": "os.symlink({tokens!r}, path)",
    "dump_fifo": "os.mkfifo(path)",
    "dump_directory": "os.mkdir(path)",
    "dump_sparse_file": "os.truncate(open(path, 'wb').name, 40 * 2**20)",
    "dump_swapped_for_a_link": (
        "open(path, 'wb').write(_snapshot_code.pack({{'stolen': b'honest'}}))\n"
        "    def swap():\n"
        "        for _ in range(20000):\n"
        "            for make in (lambda: os.symlink({tokens!r}, path + '.next'), lambda: open(path + '.next', 'wb').write(b'')):\n"
        "                try:\n"
        "                    make()\n"
        "                    os.replace(path + '.next', path)\n"
        "                except OSError:\n"
        "                    pass\n"
        "    threading.Thread(target=swap, daemon=True).start()"
    ),
}


async def hostile_dump(url: str, token: str, plant: str, outcome: dict, stop: asyncio.Event) -> None:
    """Run :data:`HOSTILE_DUMP` with ``plant``, then a cell every 2 s (past the snapshot debounce),
    counting in ``outcome["refused"]`` the cells whose notice says the snapshot failed."""
    async with client(url, token) as session:
        await session.call_tool("execute", {"code": HOSTILE_DUMP.format(plant=plant), "session_id": "trick"})
        while not stop.is_set():
            with contextlib.suppress(Exception):
                result = await session.call_tool("execute", {"code": "planted", "session_id": "trick"})
                if "snapshot failed" in (result.structured_content or {}).get("notice", ""):
                    outcome["refused"] += 1
            await asyncio.sleep(2)


async def runaway_cell(url: str, token: str, stop: asyncio.Event) -> None:
    async with client(url, token) as session:
        cell = asyncio.create_task(
            session.call_tool("execute", {"code": "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass", "session_id": "spin"})
        )
        await stop.wait()
        cell.cancel()
        await asyncio.gather(cell, return_exceptions=True)


async def phase(server: Server, tokens: dict[str, str], calls: int, load: Callable[[asyncio.Event], Awaitable[None]] | None) -> dict:
    stop = asyncio.Event()
    peak = [0, 0.0, 0]

    async def sampling() -> None:
        while not stop.is_set():
            peak[:] = map(max, peak, server.sample())
            await asyncio.sleep(0.5)

    background = [asyncio.create_task(sampling())] + ([asyncio.create_task(load(stop))] if load else [])
    if load:
        await asyncio.sleep(5)  # the load builds up before the normal client starts
    try:
        result = await normal_calls(server.url, tokens["alice"], calls)
    finally:
        stop.set()
        await asyncio.wait(background, timeout=60)
    return {
        **result,
        "server_fds_max": peak[0],
        "server_rss_mb_max": round(peak[1], 1),
        "server_children_max": peak[2],
        "server_alive": server.process.poll() is None,
    }


def main(calls: int) -> dict:
    tokens = {"alice": secrets.token_urlsafe(32), "mallory": secrets.token_urlsafe(32)}
    loads: dict[str, Callable[[Server], Callable[[asyncio.Event], Awaitable[None]] | None]] = {
        "quiet": lambda server: None,
        "idle_connections": lambda server: lambda stop: idle_connections(server.port, stop),
        "slow_requests": lambda server: lambda stop: slow_requests(server.port, stop),
        "long_tasks": lambda server: lambda stop: long_tasks(server.url, tokens["mallory"], stop),
        "many_sessions": lambda server: lambda stop: many_sessions(server.url, tokens["mallory"], stop),
        "forged_host": lambda server: lambda stop: forged_host(server.port, stop),
        "runaway_cell": lambda server: lambda stop: runaway_cell(server.url, tokens["mallory"], stop),
    }
    outcomes = {name: {"refused": 0} for name in DUMP_TRICKS}
    for name, plant in DUMP_TRICKS.items():
        loads[name] = lambda server, name=name, plant=plant: (
            lambda stop: hostile_dump(server.url, tokens["mallory"], plant.format(tokens=str(server.tokens_file)), outcomes[name], stop)
        )
    report: dict = {"python": sys.version.split()[0], "calls": calls, "server_file_limit": FILE_LIMIT, "targets": {"failed": 0, "p95_over_quiet_p95": 3.0}}
    with tempfile.TemporaryDirectory(prefix="toolpath-bench-abuse-") as directory:
        server = Server(Path(directory), {token: user for user, token in tokens.items()})
        try:
            for name, load in loads.items():
                report[name] = asyncio.run(phase(server, tokens, calls, load(server)))
                if name in outcomes:
                    store = Path(directory) / "toolpath.db"
                    report[name].update(outcomes[name], tokens_in_store=any(token.encode() in store.read_bytes() for token in tokens.values()))
                if not report[name]["server_alive"]:
                    break
        finally:
            server.stop()
    quiet_p95 = report["quiet"]["p95_ms"]
    report["within_target"] = {
        name: report[name]["failed"] == 0
        and report[name]["p95_ms"] <= 3 * quiet_p95
        and (name not in outcomes or (report[name]["refused"] > 0 and not report[name]["tokens_in_store"]))
        for name in loads
        if name in report and name != "quiet"
    }
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=40, help="normal calls per load (default 40)")
    print(json.dumps(main(parser.parse_args().calls), indent=2))
