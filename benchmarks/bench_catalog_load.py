"""Catalog loading speed and memory on a large generated catalog, in YAML and in JSON.

Prints one JSON object. A seeded generator writes one catalog of ``--tools`` tools (default 25,000)
and ``--tools / 2`` states into a temporary directory (deleted afterwards), once as YAML and once as
JSON. Each tool has a description, an affordance, one or two typed parameters (a fifth of the tools
also an optional one), a cost, a return that carries the state it produces, and requires up to two
states made by earlier tools, so every state is produced and every tool can run. ``--unproduced``
more states (default 10) are produced by no tool: TP002 warnings, which ``load_checked`` ignores.

For each format, each entry point runs in a fresh Python subprocess, so its peak memory is its own:

* ``read_catalog``: parse and validate the file;
* ``load_catalogs``: the same, then cross-checks and registration into one ``ToolRegistry``;
* ``load_checked``: ``load_catalogs`` plus the lint checks whose errors refuse a catalog, as the CLI
  and ``Workspace.open`` load catalogs.

Reported per entry point: ``seconds`` (wall time of the call alone, imports excluded);
``full_collection_seconds``, a full ``gc.collect()`` right after (the garbage collector walks what was
loaded at least once more, in whatever the program does next); and ``peak_rss_mib``
(``resource.getrusage`` ``ru_maxrss`` of the subprocess at the end, which includes the interpreter
and its imports; ``baseline_rss_mib`` is the same figure just before the call). With
``--repeat N`` each figure is the median of N subprocesses. Target (catalog-hardening issue, item 7):
every entry point ≤ 5 s at 25,000 tools. Timings on shared machines are noisy: compare figures
from one run.

Usage: python benchmarks/bench_catalog_load.py [--tools 25000] [--unproduced 10] [--seed 0] [--repeat 1]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import statistics
import subprocess
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import yaml

from toolpath.registry.catalog_yaml import yaml_parser

ENTRY_POINTS = ("read_catalog", "load_catalogs", "load_checked")
TYPES = ("str", "int", "float", "list[str]", "dict[str, float]", "bench.Artifact | None")

#: Run in the subprocess: time one call and report peak RSS (ru_maxrss is KiB on Linux, bytes on macOS).
MEASURE = """
import gc, json, resource, sys, time
from toolpath import registry
entry_point, path = sys.argv[1], sys.argv[2]
function = getattr(registry, entry_point)
scale = 1 if sys.platform == "darwin" else 1024
baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale
started = time.perf_counter()
loaded = function(path) if entry_point == "read_catalog" else function([path])
seconds = time.perf_counter() - started
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale
started = time.perf_counter()
gc.collect()
collection = time.perf_counter() - started
tools = len(loaded.tools) if entry_point == "read_catalog" else len(loaded.registry)
print(json.dumps({"seconds": seconds, "full_collection_seconds": collection, "baseline_rss_mib": baseline / 2**20, "peak_rss_mib": peak / 2**20, "tools": tools}))
"""


def generate_catalog(tools: int, unproduced: int, seed: int) -> dict:
    """A lint-clean catalog document (see the module doc) of ``tools`` tools, plus ``unproduced`` states no tool produces."""
    rng = random.Random(seed)
    produced_count = max(1, tools // 2)
    states = [
        {
            "token": f"bench.state_{index:06d}",
            "description": f"Artifact {index} is computed.",
            "affordances": [f"compute artifact {index}"],
        }
        for index in range(produced_count + unproduced)
    ]
    definitions = []
    for number in range(tools):
        produced = number % produced_count
        requires = sorted({f"bench.state_{rng.randrange(produced):06d}" for _ in range(rng.randint(0, 2))}) if produced else []
        tool = {
            "name": f"tool_{number:06d}",
            "description": f"Step {number}: makes artifact {produced}.",
            "required_parameters": [{"name": f"input_{position}", "type": rng.choice(TYPES)} for position in range(rng.randint(1, 2))],
            "return_spec": {"name": f"artifact_{produced}", "type": "dict", "state": f"bench.state_{produced:06d}"},
            "state_transition": {"requires": requires, "produces": [f"bench.state_{produced:06d}"]},
            "affordances": [f"make artifact {produced}"],
            "cost": rng.randint(1, 5),
        }
        if rng.random() < 0.2:
            tool["optional_parameters"] = [{"name": "limit", "type": "int", "default": rng.randint(1, 100)}]
        definitions.append(tool)
    return {"domain": "bench", "package": "bench_tools", "states": states, "tools": definitions}


def write_catalogs(tools: int, unproduced: int, seed: int, directory: Path) -> dict[str, Path]:
    """Generate the catalog and write it as ``catalog.yaml`` (block style, flow style for short
    leaves) and ``catalog.json`` (compact, on one line, as a server sends it: indented, it would
    exceed the 16 MiB default size limit). Returns the paths by format."""
    document = generate_catalog(tools, unproduced, seed)
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    paths = {"yaml": directory / "catalog.yaml", "json": directory / "catalog.json"}
    paths["yaml"].write_text(yaml.dump(document, Dumper=dumper, sort_keys=False, default_flow_style=None, width=200), encoding="utf-8")
    paths["json"].write_text(json.dumps(document), encoding="utf-8")
    return paths


def measure(entry_point: str, path: Path, repeat: int) -> dict:
    """Median figures of ``repeat`` fresh subprocesses running ``entry_point`` on ``path``."""
    runs = []
    for _ in range(repeat):
        completed = subprocess.run(
            [sys.executable, "-c", MEASURE, entry_point, str(path)], capture_output=True, text=True, cwd=Path(__file__).resolve().parent.parent
        )
        if completed.returncode != 0:
            raise SystemExit(f"{entry_point} on {path.name} failed:\n{completed.stderr[-4000:]}")
        runs.append(json.loads(completed.stdout))
    return {
        "seconds": round(statistics.median(run["seconds"] for run in runs), 3),
        "full_collection_seconds": round(statistics.median(run["full_collection_seconds"] for run in runs), 3),
        "baseline_rss_mib": round(statistics.median(run["baseline_rss_mib"] for run in runs), 1),
        "peak_rss_mib": round(statistics.median(run["peak_rss_mib"] for run in runs), 1),
        "tools": runs[0]["tools"],
    }


def main(tools: int, unproduced: int, seed: int, repeat: int) -> dict:
    report: dict = {
        "python": sys.version.split()[0],
        "yaml_parser": yaml_parser(),
        "tools": tools,
        "states": max(1, tools // 2) + unproduced,
        "seed": seed,
        "repeat": repeat,
        "target_seconds": 5,
    }
    with tempfile.TemporaryDirectory(prefix="bench-catalog-") as directory:
        # Generated in a child process: Linux keeps a process's peak RSS across fork and exec, so a
        # parent holding the document would inflate every measurement below.
        with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
            paths = pool.submit(write_catalogs, tools, unproduced, seed, Path(directory)).result()
        for form, path in paths.items():
            report[form] = {
                "file_mib": round(path.stat().st_size / 2**20, 2),
                **{entry_point: measure(entry_point, path, repeat) for entry_point in ENTRY_POINTS},
            }
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", type=int, default=25_000)
    parser.add_argument("--unproduced", type=int, default=10, help="states no tool produces (TP002 warnings)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=1)
    options = parser.parse_args()
    print(json.dumps(main(options.tools, options.unproduced, options.seed, options.repeat), indent=2))
