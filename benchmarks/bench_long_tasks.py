"""Planning time of long task texts (issue 30): does it grow linearly with the number of parts?

Prints one JSON object. With the shipped catalogs, each text is planned once (after one warm-up
task loads the embedding model) by :meth:`toolpath.planner.Workspace.plan_task`, and its wall time in
seconds is reported with the number of parts the planner found (``null`` when it refused the task,
with the refusal's type):

* ``nap``: "take a nap, " repeated ``--repeats`` times (matches no skill: every fragment is searched);
* ``lipinski``: "check Lipinski's rule of five and " repeated, then "compute the descriptors", as
  many fragments as the repeat count (one goal said many times: neighbours that want the same goal
  are joined);
* ``mixed``: ``--clauses`` distinct clauses joined by " and " (chemistry actions and unrelated ones).

``ratios`` divide each series' time at one size by its time at the size before: near 2 for doubled
sizes means linear, near 4 quadratic. Timings on a shared machine are noisy: compare within a run.

Usage: python benchmarks/bench_long_tasks.py [--repeats 25,50,100] [--clauses 100]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from toolpath.planner import Workspace  # noqa: E402

_ACTIONS = [
    "compute the descriptors of molecule {n}",
    "book a flight to city {n}",
    "find the functional groups of compound {n}",
    "water plant {n}",
    "cluster library {n} by similarity",
]


def timed(workspace: Workspace, text: str) -> dict:
    start = time.perf_counter()
    try:
        parts: int | None = len(workspace.plan_task(text, inputs={"smiles": "CCO"}).parts)
        refused = None
    except Exception as error:  # a refusal is a result here: report it with its time
        parts, refused = None, type(error).__name__
    return {"chars": len(text), "seconds": round(time.perf_counter() - start, 3), "parts": parts, "refused": refused}


def main(repeats: list[int], clauses: int) -> dict:
    workspace = Workspace.open()
    workspace.plan_task("is aspirin drug-like?", inputs={"smiles": "CCO"})  # loads the model
    series = {
        "nap": {count: timed(workspace, "take a nap, " * count) for count in repeats},
        "lipinski": {count: timed(workspace, "check Lipinski's rule of five and " * (count - 1) + "compute the descriptors") for count in repeats},
    }
    mixed = " and ".join(_ACTIONS[number % len(_ACTIONS)].format(n=number) for number in range(clauses))
    ratios = {
        name: [round(runs[later]["seconds"] / max(runs[earlier]["seconds"], 1e-3), 2) for earlier, later in zip(repeats, repeats[1:])]
        for name, runs in series.items()
    }
    return {**series, "mixed": timed(workspace, mixed), "ratios": ratios}


if __name__ == "__main__":
    # Measuring is not use: nothing a benchmark plans goes into the user's record of use.
    os.environ.setdefault("TOOLPATH_RECORD", "off")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", default="25,50,100", help="comma-separated repeat counts, ascending")
    parser.add_argument("--clauses", type=int, default=100, help="clauses of the mixed text")
    options = parser.parse_args()
    print(json.dumps(main([int(count) for count in options.repeats.split(",")], options.clauses), indent=2))
