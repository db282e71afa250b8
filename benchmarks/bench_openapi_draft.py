"""Time to draft a catalog from an OpenAPI description (issue 54: TMDB's 54 operations in ≤ 2 s).

Prints one JSON object: for ``../shared/data/taskplan/tmdb/tmdb_oas.json`` (1.3 MB), the seconds
:func:`toolpath.registry.openapi_draft.draft_openapi_catalog` takes (best and median of 5 runs, reading
the file included) and the YAML :func:`~toolpath.registry.openapi_draft.render_catalog` writes, with
the tools, states and TODOs the draft holds.

Usage: python benchmarks/bench_openapi_draft.py [--spec PATH] [--runs N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from toolpath.registry.openapi_draft import draft_openapi_catalog, render_catalog

DEFAULT_SPEC = Path(__file__).resolve().parents[2] / "shared" / "data" / "taskplan" / "tmdb" / "tmdb_oas.json"


def main(spec: Path, runs: int) -> dict:
    timings = []
    for _ in range(runs):
        started = time.perf_counter()
        document, todos, notes = draft_openapi_catalog(str(spec), domain="tmdb")
        text = render_catalog(document, todos, notes, spec.name, "today")
        timings.append(time.perf_counter() - started)
    return {
        "spec": str(spec),
        "spec_bytes": spec.stat().st_size,
        "operations": len(document["tools"]),
        "states": len(document["states"]),
        "todos": sum(len(items) for items in todos.values()) + len(notes),
        "yaml_chars": len(text),
        "seconds": {"best": round(min(timings), 3), "median": round(statistics.median(timings), 3)},
        "target_seconds": 2.0,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", type=Path, default=DEFAULT_SPEC)
    parser.add_argument("--runs", type=int, default=5)
    options = parser.parse_args()
    print(json.dumps(main(options.spec, options.runs), indent=2))
