"""A big catalog's first embedding: how long it takes, and how much of it a stopped run keeps (issue 57).

Prints one JSON object. For ``--tools`` tools of :func:`bench_scale_tools.generate_catalog` (one
JSON catalog in a temporary directory, deleted afterwards), each run below is a fresh process that
loads the catalog and builds the skill index (:class:`toolpath.planner.SkillIndex`) with the
embedding cache in a file of its own, as ``toolpath`` does on a new catalog:

* ``full``: every text embedded into an empty cache (in a directory of its own: the stored skill
  index, :mod:`toolpath.planner.search.stored_index`, is kept beside the cache file);
* ``stopped``: the same into another empty cache, stopped with ``--signal`` (default ``KILL``) once
  ``--stop-at`` (default 0.5) of the texts are kept in the cache (the cache is read every 0.2 s);
* ``resumed``: run again on the stopped run's cache.

Each run reports ``index_s`` (the index build, measured inside the process; for ``stopped``, from
the start of the build to the signal), ``cpu_s`` (user + system time of the whole process, which
the machine's other work changes less than the wall clock), ``peak_rss_mib`` and ``kept``, the
texts in its cache when it ended. ``resumed_over_full`` and ``stopped_plus_resumed_over_full``
compare the runs; ``uptime_load`` is the load average before and after. Runs are in the order
``stopped``, ``resumed``, ``full`` (``--skip-full`` leaves the last out). Timings on a shared
machine are noisy: compare within one run.

Usage: python benchmarks/bench_embed_resume.py [--tools 10000] [--stop-at 0.5] [--signal KILL|INT] [--skip-full]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale_tools import generate_catalog  # noqa: E402

#: The child: builds the index of the catalog ``argv[1]`` with the cache file ``argv[2]``; says on
#: standard error when the build starts, and prints its duration as JSON on standard output.
CHILD = """
import json, logging, os, sys, time
from pathlib import Path
logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")
from toolpath.planner import SkillIndex, StateGraph
from toolpath.planner.search.embedding_cache import EmbeddingCache
from toolpath.registry import load_checked
loaded = load_checked([Path(sys.argv[1])])
graph = StateGraph(loaded.registry, loaded.states)
print("building the index", file=sys.stderr, flush=True)
started = time.perf_counter()
SkillIndex(graph, cache=EmbeddingCache(sys.argv[2]))
print(json.dumps({"index_s": round(time.perf_counter() - started, 2)}), flush=True)
"""


def kept(cache: Path) -> int:
    try:
        with sqlite3.connect(cache, timeout=30) as database:
            return database.execute("select count(*) from embeddings").fetchone()[0]
    except sqlite3.OperationalError:  # no table yet
        return 0


def run(catalog: Path, cache: Path, stop_at: float | None = None, stop: signal.Signals = signal.SIGKILL) -> dict:
    """One child process (see :data:`CHILD`); with ``stop_at``, stopped once that share of its texts is kept."""
    environment = {**os.environ, "TOOLPATH_MAX_CATALOG_BYTES": str(max(catalog.stat().st_size, 16 * 2**20))}
    with tempfile.TemporaryFile("w+") as errors:
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(catalog), str(cache)], stdout=subprocess.PIPE, stderr=errors, text=True, env=environment)
        started = total = stopped_after = None
        while True:
            # wait4, not poll(): it reaps the child with its resource usage.
            pid, status, usage = os.wait4(child.pid, os.WNOHANG)
            if pid:
                break
            time.sleep(0.2)
            if stop_at is None:
                continue
            errors.seek(0)
            log = errors.read()
            if started is None and "building the index" in log:
                started = time.perf_counter()
            if total is None and "new catalog texts" in log:
                total = int(log.split(" new catalog texts")[0].rsplit(" ", 1)[-1])
            if started is not None and total is not None and kept(cache) >= stop_at * total:
                child.send_signal(stop)
                stopped_after = time.perf_counter() - started
                _, status, usage = os.wait4(child.pid, 0)
                break
        child.returncode = os.waitstatus_to_exitcode(status)
        output = child.stdout.read() if child.stdout else ""
        errors.seek(0)
        log = errors.read()
    report: dict = {"exit_status": child.returncode}
    if stopped_after is not None:
        report["index_s"] = round(stopped_after, 2)
    elif report["exit_status"] == 0:
        report.update(json.loads(output))
    else:
        raise RuntimeError(f"the index build failed:\n{log[-3000:]}")
    report.update(cpu_s=round(usage.ru_utime + usage.ru_stime, 1), peak_rss_mib=round(usage.ru_maxrss / 1024), kept=kept(cache))
    announced = [line for line in log.splitlines() if "new catalog texts" in line]
    report["texts"] = int(announced[0].split(" new catalog texts")[0].rsplit(" ", 1)[-1]) if announced else 0
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tools", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stop-at", type=float, default=0.5, help="share of the texts kept when the run is stopped")
    parser.add_argument("--signal", choices=["KILL", "INT"], default="KILL", help="KILL: a killed process; INT: Ctrl-C")
    parser.add_argument("--skip-full", action="store_true", help="leave out the uninterrupted run")
    args = parser.parse_args()
    report: dict = {"tools": args.tools, "seed": args.seed, "stop_at": args.stop_at, "signal": args.signal, "uptime_load": [os.getloadavg()]}
    with tempfile.TemporaryDirectory(prefix="toolpath-bench-resume-") as directory:
        catalog = Path(directory) / "scale.json"
        catalog.write_text(json.dumps(generate_catalog(args.tools, args.seed)), encoding="utf-8")
        # A directory per cache: the stored skill index is kept beside its cache file, and a run
        # that found another run's would embed nothing.
        for name in ("stopped", "full"):
            (Path(directory) / name).mkdir()
        stopped_cache = Path(directory) / "stopped" / "toolpath.db"
        report["stopped"] = run(catalog, stopped_cache, args.stop_at, getattr(signal, f"SIG{args.signal}"))
        report["resumed"] = run(catalog, stopped_cache)
        if not args.skip_full:
            report["full"] = run(catalog, Path(directory) / "full" / "toolpath.db")
            full = report["full"]["index_s"]
            report["resumed_over_full"] = round(report["resumed"]["index_s"] / full, 2)
            report["stopped_plus_resumed_over_full"] = round((report["stopped"]["index_s"] + report["resumed"]["index_s"]) / full, 2)
    report["uptime_load"].append(os.getloadavg())
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
