"""How fast a fresh ``toolpath`` process answers, and how fast one query is embedded.

Prints one JSON object.

**Commands**: wall-clock time and peak RSS of whole processes, as a user meets them: ``plan --goal``,
``search``, ``cell "TASK"`` and ``run "TASK"`` (a kernel started and stopped), and ``python -c
"import torch"`` as a yardstick of the machine's speed that day. Bytecode is compiled first and
the processes may write it (as an installed package would have it); a private ``TOOLPATH_HOME`` is
warmed by one run of each command (the catalogs' vectors cached, the query model exported), then
``--rounds`` rounds run every command once each, interleaved, so load drift hits all of them alike.
Peak RSS is the largest of the process and the children it waited for (``os.wait4``); a ``run``'s
kernel is not one of them. Targets (issue 19): ``search`` ≤ 1.0 s, ``cell`` ≤ 1.0 s, ``run`` ≤ 2.0 s,
``plan`` ≤ 0.4 s; ``search`` peak RSS ≤ 200 MB. Issue 37 adds ratios to ``import torch`` (``search``
≤ 0.30, ``cell`` ≤ 0.35, ``run`` ≤ 0.90) and ``search_new_catalog``, the first search after adding a
catalog, in a fresh home (every catalog text embedded): ≤ 3 s and ≤ 250 MB.

**Query embedding** in one process: p50/p95 of one query at a time over ``--queries`` MetaTool dev
queries (``../shared/data/metatool``; the catalogs' own texts when absent), for the ONNX Runtime
query path with 1 and 2 threads and for sentence-transformers, first on an idle machine and then
with a CPU-bound process running, in the same run. Targets: ONNX p50 ≤ 3 ms idle, p95 ≤ 15 ms loaded.

Timings on shared machines are noisy: compare within one run.

Usage: python benchmarks/bench_cli.py [--rounds 5] [--queries 300]
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from toolpath.catalogs import default_catalog_paths  # noqa: E402
from toolpath.registry import load_catalogs  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "metatool"
ASPIRIN = "CC(=O)Oc1ccccc1C(=O)O"
COMMANDS = {
    "plan": ["plan", "--goal", "chemistry.molecules_clustered"],
    "search": ["search", "group similar molecules"],
    "cell": ["cell", "cluster these molecules", "--input", 'smiles_list=["CCO","CCCO","c1ccccc1"]'],
    "run": ["run", "is aspirin drug-like? check Lipinski's rule of five", "--input", f"smiles={ASPIRIN}"],
}
TARGETS_SECONDS = {"plan": 0.4, "search": 1.0, "cell": 1.0, "run": 2.0}
#: Wall time of a fresh process ÷ that of ``import torch`` in the same run (issue 37).
TARGETS_TO_IMPORT_TORCH = {"search": 0.30, "cell": 0.35, "run": 0.90}


def timed(command: list[str], environment: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of one process run to its end; raises if it fails."""
    with tempfile.TemporaryFile() as stderr:
        started = time.perf_counter()
        process = subprocess.Popen(command, env=environment, stdout=subprocess.DEVNULL, stderr=stderr)
        _, status, usage = os.wait4(process.pid, 0)
        elapsed = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode != 0:
            stderr.seek(0)
            raise RuntimeError(f"{' '.join(command)} exited with {process.returncode}: {stderr.read().decode(errors='replace')[-2000:]}")
    return elapsed, usage.ru_maxrss / 1024  # Linux reports kilobytes


def summary(values: list[float], digits: int = 3) -> dict:
    ordered = sorted(values)
    return {"n": len(ordered), "p50": round(statistics.median(ordered), digits), "p95": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], digits)}


def command_timings(rounds: int) -> dict:
    for package in ("registry", "planner", "kernel", "catalogs"):
        compileall.compile_dir(str(ROOT / package), quiet=1)
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as home:
        environment["TOOLPATH_HOME"] = home
        environment.pop("TOOLPATH_MODELS", None)
        processes = {name: [sys.executable, "-m", "toolpath.planner.interfaces.cli", *arguments] for name, arguments in COMMANDS.items()}
        processes["import torch"] = [sys.executable, "-c", "import torch"]
        warm_up = {name: timed(command, environment)[0] for name, command in processes.items()}
        # A new catalog's first search: a home of its own each time (so every catalog text is
        # embedded, the new catalog's and the shipped ones'), the exported model shared.
        processes["search_new_catalog"] = [*processes["search"], "--add-catalog", str(new_catalog(Path(home), environment))]
        fresh = {**environment, "TOOLPATH_MODELS": str(Path(home) / "models")}
        wall: dict[str, list[float]] = {name: [] for name in processes}
        memory: dict[str, list[float]] = {name: [] for name in processes}
        for _ in range(rounds):
            for name, command in processes.items():
                if name == "search_new_catalog":
                    with tempfile.TemporaryDirectory(prefix="bench-cli-new-home-") as new_home:
                        seconds, megabytes = timed(command, {**fresh, "TOOLPATH_HOME": new_home})
                else:
                    seconds, megabytes = timed(command, environment)
                wall[name].append(seconds)
                memory[name].append(megabytes)
    report = {}
    for name in processes:
        report[name] = {
            "wall_s": summary(wall[name]),
            "peak_rss_mb": round(max(memory[name]), 1),
            "warm_up_s": round(warm_up[name], 2) if name in warm_up else None,
        }
        if name in TARGETS_SECONDS:
            report[name]["target_s"] = TARGETS_SECONDS[name]
            report[name]["to_import_torch"] = round(report[name]["wall_s"]["p50"] / statistics.median(wall["import torch"]), 3)
        if name in TARGETS_TO_IMPORT_TORCH:
            report[name]["target_to_import_torch"] = TARGETS_TO_IMPORT_TORCH[name]
    report["search"]["target_peak_rss_mb"] = 200
    report["search_new_catalog"].update(target_s=3.0, target_peak_rss_mb=250)
    return report


def new_catalog(home: Path, environment: dict[str, str]) -> Path:
    """A catalog package made by ``toolpath init``, under ``home``."""
    subprocess.run(
        [sys.executable, "-m", "toolpath.planner.interfaces.cli", "init", "lab_notes", "--directory", str(home)],
        env=environment,
        check=True,
        capture_output=True,
    )
    return home / "lab_notes" / "catalog.yaml"


def dev_queries(data: Path, count: int) -> list[str]:
    path = data / "queries_dev.csv"
    if path.exists():
        with open(path, encoding="utf-8", newline="") as file:
            return [row["Query"].strip() for row in csv.DictReader(file) if row["Query"].strip()][:count]
    loaded = load_catalogs(default_catalog_paths())
    return [affordance for state in loaded.states.values() for affordance in state.affordances][:count]


def query_latency(embed, queries: list[str]) -> dict:
    embed([queries[0]])  # load outside the timing
    timings = []
    for query in queries:
        started = time.perf_counter()
        embed([query])
        timings.append((time.perf_counter() - started) * 1000)
    return {**summary(timings), "unit": "ms"}


@contextlib.contextmanager
def cpu_bound_process():
    """One process spinning on a core for the ``with`` block."""
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)
        yield
    finally:
        spinner.kill()
        spinner.wait()


def embedding_timings(queries: list[str]) -> dict:
    from toolpath.planner.search.embedding import SentenceTransformerEmbedder
    from toolpath.planner.search.onnx_embedding import OnnxEmbedder

    with tempfile.TemporaryDirectory(prefix="bench-models-") as scratch:
        models = os.environ.get("TOOLPATH_MODELS") or scratch
        embedders = {
            "onnx_1_thread": OnnxEmbedder(models, threads=1),
            "onnx_2_threads": OnnxEmbedder(models, threads=2),
            "sentence_transformers": SentenceTransformerEmbedder(),
        }
        report = {}
        for load in ("idle", "loaded"):
            with cpu_bound_process() if load == "loaded" else contextlib.nullcontext():
                report[load] = {name: query_latency(embed, queries) for name, embed in embedders.items()}
        sample = queries[:200]
        reference = embedders["sentence_transformers"](sample)
        fast = np.concatenate([embedders["onnx_1_thread"]([query]) for query in sample])
    report["max_1_minus_cosine_onnx_vs_sentence_transformers"] = float((1 - (fast * reference).sum(axis=1)).max())
    report["targets_ms"] = {"idle_p50": 3, "loaded_p95": 15}
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="fresh processes per command, after one warm-up (default 5)")
    parser.add_argument("--queries", type=int, default=300, help="queries embedded one at a time per embedder and load (default 300)")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the MetaTool data directory (for the queries)")
    options = parser.parse_args()
    report = {"python": sys.version.split()[0], "cpus": os.cpu_count(), "commands": command_timings(options.rounds)}
    report["query_embedding"] = embedding_timings(dev_queries(options.data, options.queries))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
