"""Snapshot and restore of a session's kernel state, and what the debounced snapshots cost a cell loop.

Prints one JSON object:

- ``snapshot_s``: writing the snapshot of about 64 MB of state (one 40 MB numpy array, a pandas
  DataFrame of about 16 MB, 10,000 small dicts) into a fresh SQLite file: the time of
  ``CodeMode.close()`` after a cell changed the state (pickling in the kernel, reading the pickles,
  one SQLite transaction). p50 / max over ``--runs`` runs.
- ``snapshot_again_s``: the next snapshot, after a cell changed one small variable: only changed
  variables are written again (the others are pickled and compared by digest).
- ``restore_s``: bringing that state back into a new kernel: ``CodeMode.start()`` of the session
  minus ``start()`` of a session with no snapshot (both start a kernel), p50 over the runs.
- ``cells_per_s``: a loop of ``--cells`` small cells with snapshots on and off, in the same run; the
  debounce (1.5 s) writes nothing while cells keep coming. ``slowdown`` is 1 - on / off.

- ``after_each_cell_ms``: what ``snapshot_after_each_cell`` (the default on a shared store) costs
  a cell that changes one small variable, against the debounced snapshot: p50 / p95 milliseconds
  of ``--cells`` such cells (a tenth of them for the 64 MB state), in a small session
  (``small``) and in one holding the 64 MB state above (``state_64mb``). Each snapshot pickles
  every variable to find the changed ones (writing only those), so its cost grows with the state.

Targets (issue 15): ≤ 1 s each way; ≤ 10 % fewer cells/s with snapshots on. The machine is noisy:
compare figures of one run.

With ``--gateway`` the snapshot and restore are measured again on kernels of a Jupyter Kernel
Gateway started on 127.0.0.1 (``gateway``): a remote kernel's snapshot travels over its channels in
1 MiB cells (issue 20).

Usage: python benchmarks/bench_snapshot.py [--runs 5] [--cells 300] [--gateway]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from toolpath.kernel import CodeMode  # noqa: E402

STATE = """
import numpy as np
import pandas as pd
array = np.random.default_rng({run}).random(5_000_000)  # 40 MB
frame = pd.DataFrame({{"a": np.arange(1_000_000, dtype="float64"), "b": np.arange(1_000_000, dtype="float64")}})  # 16 MB
records = [{{"id": n, "name": f"item-{{n}}", "tags": ["x", "y"]}} for n in range(10_000)]
"""
#: Large enough for the 40 MB array and the whole state (the defaults are 2 MB and 64 MB).
LIMITS = {"max_variable_bytes": 48_000_000, "max_snapshot_bytes": 64_000_000}


def snapshot_and_restore(runs: int, **place: str) -> dict:
    writes, rewrites, restores, sizes = [], [], [], []
    with tempfile.TemporaryDirectory(prefix="toolpath-bench-snapshot-") as directory:
        for run in range(runs):
            store = Path(directory) / f"run-{run}.db"
            with CodeMode(pool_size=0, timeout=120, snapshot_store=store, **LIMITS, **place) as writer:
                result = writer.run(STATE.format(run=run), "bench")
                if result.status != "ok":
                    raise RuntimeError(f"building the state failed: {result.error}")
                started = time.perf_counter()
                writer.close()
                writes.append(time.perf_counter() - started)
                writer.run("records[0]['name'] = 'changed'", "bench")
                started = time.perf_counter()
                writer.close()
                rewrites.append(time.perf_counter() - started)
            sizes.append(store.stat().st_size)
            with CodeMode(pool_size=0, timeout=120, snapshot_store=store, **LIMITS, **place) as reader:
                started = time.perf_counter()
                reader.start(f"empty-{run}")
                empty = time.perf_counter() - started
                started = time.perf_counter()
                reader.start("bench")
                restores.append(time.perf_counter() - started - empty)
                check = reader.run("print(array.shape, frame.shape, len(records), records[0]['name'])", "bench")
                if check.stdout != "(5000000,) (1000000, 2) 10000 changed\n":
                    raise RuntimeError(f"the state did not come back: {check.stdout!r} {check.notice!r}")
    return {
        "store_mb": round(statistics.median(sizes) / 1e6, 1),
        "snapshot_s": {"p50": round(statistics.median(writes), 3), "max": round(max(writes), 3)},
        "snapshot_again_s": {"p50": round(statistics.median(rewrites), 3), "max": round(max(rewrites), 3)},
        "restore_s": {"p50": round(statistics.median(restores), 3), "max": round(max(restores), 3)},
    }


def cell_loop(cells: int) -> dict:
    rates = {}
    with tempfile.TemporaryDirectory(prefix="toolpath-bench-snapshot-") as directory:
        for label, options in (("off", {"snapshot": False}), ("on", {"snapshot_store": Path(directory) / "loop.db"}), ("off_again", {"snapshot": False})):
            with CodeMode(pool_size=0, timeout=60, **options) as code_mode:
                code_mode.run("counter = 0\nitems = list(range(1000))", "loop")
                started = time.perf_counter()
                for _ in range(cells):
                    code_mode.run("counter += 1", "loop")
                rates[label] = cells / (time.perf_counter() - started)
    off = (rates["off"] + rates["off_again"]) / 2  # off before and after, against drift
    return {"cells": cells, "cells_per_s": {key: round(value, 1) for key, value in rates.items()}, "slowdown": round(1 - rates["on"] / off, 3)}


def after_each_cell_cost(cells: int) -> dict:
    report: dict = {}
    with tempfile.TemporaryDirectory(prefix="toolpath-bench-snapshot-") as directory:
        for state_name, state, count in (("small", "counter = 0\nitems = list(range(1000))", cells), ("state_64mb", STATE.format(run=0), max(10, cells // 10))):
            for label, after_each_cell in (("debounce", False), ("after_each_cell", True)):
                store = Path(directory) / f"{state_name}-{label}.db"
                with CodeMode(pool_size=0, timeout=120, snapshot_store=store, snapshot_after_each_cell=after_each_cell, **LIMITS) as code_mode:
                    code_mode.run(state + "\ncounter = 0", "loop")
                    samples = []
                    for _ in range(count):
                        started = time.perf_counter()
                        code_mode.run("counter += 1", "loop")
                        samples.append(time.perf_counter() - started)
                samples.sort()
                report.setdefault(state_name, {})[label] = {
                    "p50": round(statistics.median(samples) * 1000, 1),
                    "p95": round(samples[min(len(samples) - 1, int(0.95 * len(samples)))] * 1000, 1),
                }
    return {"after_each_cell_ms": report}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--cells", type=int, default=300)
    parser.add_argument("--gateway", action="store_true", help="also measure snapshot and restore on a Kernel Gateway's kernels")
    options = parser.parse_args()
    report = {"python": sys.version.split()[0], "targets": {"snapshot_s": 1.0, "restore_s": 1.0, "slowdown": 0.10}}
    report.update(snapshot_and_restore(options.runs))
    report.update(cell_loop(options.cells))
    report.update(after_each_cell_cost(options.cells))
    if options.gateway:
        from bench_cells import kernel_gateway  # this script's directory is on sys.path

        with kernel_gateway() as gateway:
            report["gateway"] = snapshot_and_restore(options.runs, **gateway)
    print(json.dumps(report, indent=2))
