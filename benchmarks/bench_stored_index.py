"""Stored skill indexes (issue 57): what a fresh process pays for the skill index of a large catalog
when it loads the stored index, against building it from the embedding cache. Prints one JSON object.

For each ``--tools`` size, :func:`bench_scale_tools.generate_catalog` writes one compact JSON catalog
into a temporary directory (deleted afterwards), and with ``TOOLPATH_HOME`` as set (its embedding
cache and models; give a home whose cache holds the catalog's texts, or the first index embeds them):

* ``catalog_index``: ``toolpath catalog index --catalog FILE --json`` once (its report: whether it
  built or found the index, texts embedded, the store's size and directory, seconds);
* ``in_process``: ``--runs`` times each, alternating, after loading the catalog once:
  ``SkillIndex(graph)`` loading the stored index (``load_s``; ``key_s`` of it is computing the key
  from the entries' texts) and ``SkillIndex(graph, store=False)``, built from the embedding cache as
  before the store (``build_s``); both search alike (``same_hits``: 5 queries, 10 hits each);
* ``fresh_process``: wall seconds (median of ``--runs``, interleaved) and peak RSS of
  ``toolpath search QUERY --catalog FILE --json`` with the stored index (``after``), and in a home
  whose store cannot be written, the same code building the index from the same cache in every
  process (``before``: what a process paid before the store), beside ``python -c "import torch"``
  (the issue's yardstick) in the same run; ``after_over_torch`` and ``before_over_torch`` are the
  ratios of medians.

Timings on a shared machine are noisy: compare figures from one run. Usage:
python benchmarks/bench_stored_index.py [--tools 10000 100000] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_scale_tools import generate_catalog, queries_of  # noqa: E402

QUERY = "forecast the sensor readings for each warehouse"


def toolpath_command(*arguments: str) -> list[str]:
    return [sys.executable, "-m", "toolpath.planner.interfaces.cli", *arguments]


def timed_process(command: list[str], environment: dict[str, str]) -> tuple[float, int, subprocess.CompletedProcess]:
    """Wall seconds and peak RSS (MiB) of one process, which must succeed."""
    with tempfile.TemporaryFile("w+") as error_file:
        started = time.perf_counter()
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=error_file, text=True, env=environment)
        # wait4, not communicate: the child's own rusage (RUSAGE_CHILDREN would be the maximum of all).
        output = process.stdout.read()
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - started
        error_file.seek(0)
        errors = error_file.read()
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({process.returncode}): {errors[-2000:]}")
    return seconds, round(usage.ru_maxrss / 1024), subprocess.CompletedProcess(command, process.returncode, output, errors)


def unstorable_home(home: Path, directory: Path) -> Path:
    """A home sharing ``home``'s embedding cache and models whose index store cannot be written:
    every process builds the index from the cache, as before the store."""
    other = directory / "home-without-store"
    if other.exists():  # made for an earlier size
        return other
    other.mkdir(mode=0o700)
    (other / "toolpath.db").symlink_to(home / "toolpath.db")
    if (home / "models").exists():
        (other / "models").symlink_to(home / "models")
    (other / "indexes").write_text("a file where the store's directory would be: nothing is stored\n")
    return other


def in_process(path: Path, runs: int) -> dict:
    from toolpath.planner import SkillIndex, StateGraph
    from toolpath.planner.search.stored_index import catalog_key, model_identity
    from toolpath.registry import load_checked

    loaded = load_checked([path])
    graph = StateGraph(loaded.registry, loaded.states)
    load_times, key_times, build_times = [], [], []
    stored = built = None
    for _ in range(runs):
        started = time.perf_counter()
        stored = SkillIndex(graph)
        load_times.append(time.perf_counter() - started)
        assert stored.stored is not None and stored.stored.loaded, "the index is not stored: run toolpath catalog index first"
        started = time.perf_counter()
        entries = [(entry.kind, entry.name, entry.server) for entry in stored._entries]
        catalog_key(entries, stored._first_text, stored._texts, stored._documents, model_identity(stored.embedder))
        key_times.append(time.perf_counter() - started)
        started = time.perf_counter()
        built = SkillIndex(graph, store=False)
        build_times.append(time.perf_counter() - started)
    assert stored is not None and built is not None
    same = all(
        [(hit.name, round(hit.score, 6)) for hit in stored.search(query, k=10)] == [(hit.name, round(hit.score, 6)) for hit in built.search(query, k=10)]
        for query in queries_of(5, 1)
    )
    return {
        "runs": runs,
        "load_s": round(statistics.median(load_times), 3),
        "key_s": round(statistics.median(key_times), 3),
        "build_s": round(statistics.median(build_times), 3),
        "same_hits": same,
    }


def fresh_process(path: Path, runs: int, home: Path, directory: Path) -> dict:
    environment = {**os.environ, "TOOLPATH_HOME": str(home), "TOOLPATH_RECORD": "off"}
    before_environment = {**environment, "TOOLPATH_HOME": str(unstorable_home(home, directory))}
    search = toolpath_command("search", QUERY, "--catalog", str(path), "--json")
    times: dict[str, list[float]] = {"torch": [], "after": [], "before": []}
    memory: dict[str, list[int]] = {"after": [], "before": []}
    for _ in range(runs):
        times["torch"].append(timed_process([sys.executable, "-c", "import torch"], environment)[0])
        for label, variables in (("after", environment), ("before", before_environment)):
            seconds, rss, completed = timed_process(search, variables)
            times[label].append(seconds)
            memory[label].append(rss)
            assert json.loads(completed.stdout)["hits"], f"{label}: no hits"
    medians = {label: statistics.median(values) for label, values in times.items()}
    return {
        "runs": runs,
        "wall_s": {label: round(value, 2) for label, value in medians.items()},
        "peak_rss_mib": {label: max(values) for label, values in memory.items()},
        "after_over_torch": round(medians["after"] / medians["torch"], 2),
        "before_over_torch": round(medians["before"] / medians["torch"], 2),
    }


def measure(tools: int, runs: int, home: Path, directory: Path) -> dict:
    path = directory / f"scale-{tools}.json"
    path.write_text(json.dumps(generate_catalog(tools, 0)), encoding="utf-8")
    from toolpath.registry.catalog_files import DEFAULT_MAX_CATALOG_BYTES, MAX_CATALOG_BYTES_VARIABLE

    os.environ[MAX_CATALOG_BYTES_VARIABLE] = str(max(DEFAULT_MAX_CATALOG_BYTES, path.stat().st_size))
    seconds, rss, completed = timed_process(toolpath_command("catalog", "index", "--catalog", str(path), "--json"), {**os.environ, "TOOLPATH_RECORD": "off"})
    report = json.loads(completed.stdout)
    index = {
        "built": report["built"],
        "texts_embedded": report["texts_embedded"],
        "entries": report["entries"],
        "texts": report["texts"],
        "store_mib": round(report["bytes"]["total"] / 2**20, 1),
        "vectors_mib": round(report["bytes"]["vectors"] / 2**20, 1),
        "bm25_mib": round(report["bytes"]["bm25"] / 2**20, 1),
        "seconds": report["seconds"],
        "wall_s": round(seconds, 2),
        "peak_rss_mib": rss,
    }
    return {"tools": tools, "catalog_index": index, "in_process": in_process(path, runs), "fresh_process": fresh_process(path, runs, home, directory)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tools", type=int, nargs="+", default=[10000])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    from toolpath.registry.storage import default_home

    home = default_home()
    report: dict = {"home": str(home), "sizes": {}}
    with tempfile.TemporaryDirectory(prefix="toolpath-bench-stored-") as directory:
        for size in args.tools:
            report["sizes"][str(size)] = measure(size, args.runs, home, Path(directory))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
