"""What asking for approval adds to a call (issue 35): a plain bridged host call vs the same call
from a tool that asks, answered at once by an approver (sync, in a worker thread, and async), and
an in-kernel tool that asks (the ``approve`` round trip plus its policy check). Every approved call
also writes its decision to the audit log (SQLite), which is part of what is measured.

Calls of each kind run interleaved in one kernel, so load drift lands on all alike (the async
approver's CodeMode is a second one, with its own plain calls as baseline). Prints one JSON object:
per kind, p50 / p95 of one call in milliseconds, measured inside the cell (so the cell's own round
trip is not counted), and the p50 added over the plain call. Timings are noisy here: compare
within one run.

Usage: python benchmarks/bench_approvals.py [--calls 200]
"""

from __future__ import annotations

import argparse
import ast
import json
import statistics
import sys
import tempfile
from pathlib import Path

from toolpath.kernel import CodeMode, Tool, Toolkit

# An in-kernel tool that always asks: its handle checks the policy and asks the host over the bridge.
BIND_IN_KERNEL = (
    "from toolpath.kernel.inside.handles import bind_module_tools\nlocal = bind_module_tools('local', {'asks': ('abs', 'builtins', {'approval': 'always'})})"
)


def timing_cell(calls: dict[str, str], rounds: int) -> str:
    """A cell that awaits each of ``calls`` (``{kind: expression}``) in turn, ``rounds`` times, and
    evaluates to ``{kind: [milliseconds, ...]}``, timed inside the kernel."""
    pairs = ", ".join(f"({kind!r}, lambda: {expression})" for kind, expression in calls.items())
    return (
        "import time\n"
        f"timings = {{kind: [] for kind in {list(calls)!r}}}\n"
        f"for _ in range({rounds}):\n"
        f"    for kind, call in ({pairs},):\n"
        "        started = time.perf_counter()\n"
        "        await call()\n"
        "        timings[kind].append((time.perf_counter() - started) * 1000)\n"
        "timings"
    )


def plain(number: int) -> int:
    return number


def asks(number: int) -> int:
    return number


def approve(request) -> bool:
    return True


async def approve_async(request) -> bool:
    return True


def main(rounds: int) -> dict:
    timings: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="toolpath-bench-approvals-") as directory:
        store = Path(directory) / "toolpath.db"
        kit = Toolkit("bench", [plain, Tool(asks, requires_approval=True)])
        with CodeMode([kit], approver=approve, snapshot_store=store, pool_size=0) as code_mode:
            checked(code_mode.run(BIND_IN_KERNEL, "bench"))
            cell = timing_cell({"plain": "bench.plain(1)", "asks_sync_approver": "bench.asks(1)", "in_kernel_asks": "local.asks(1)"}, rounds)
            timings.update(ast.literal_eval(checked(code_mode.run(cell, "bench")).result))
        with CodeMode([kit], approver=approve_async, snapshot_store=store, pool_size=0) as code_mode:
            cell = timing_cell({"plain_again": "bench.plain(1)", "asks_async_approver": "bench.asks(1)"}, rounds)
            timings.update(ast.literal_eval(checked(code_mode.run(cell, "bench")).result))
    report: dict = {"python": sys.version.split()[0], "calls_per_kind": rounds}
    baselines = {"asks_async_approver": "plain_again"}
    for kind in ("plain", "asks_sync_approver", "in_kernel_asks", "plain_again", "asks_async_approver"):
        ordered = sorted(timings[kind])
        p50, baseline = statistics.median(ordered), statistics.median(timings[baselines.get(kind, "plain")])
        report[kind] = {"p50_ms": round(p50, 3), "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))], 3), "added_p50_ms": round(p50 - baseline, 3)}
    return report


def checked(result):
    if result.status != "ok":
        raise RuntimeError(f"the benchmark's cell failed: {result.error}")
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="calls of each kind (default 200)")
    print(json.dumps(main(parser.parse_args().calls), indent=2))
