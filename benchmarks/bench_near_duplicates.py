"""Near-duplicate tools (lint TP018): the similarities of real pairs, and the cost on large catalogs.

Prints one JSON object:

* ``catalogs``: for the shipped catalogs (tabular, chemistry, the benchmarks' media catalog) and the
  TMDB and UltraTool catalogs of ``taskplan_catalogs.py`` (built from ``../shared/data/taskplan``,
  left out when that is missing), every pair of tools with equal signatures whose terms nest and
  reach ``--floor`` in Jaccard similarity (default 0.4, below the threshold, so the pairs just under
  it show too), best first; and, as ``not_nested``, the pairs of equal signatures at or above the
  threshold whose terms do not nest (each has words of its own), which the rule leaves out: where
  :data:`toolpath.registry.near_duplicates.NEAR_DUPLICATE_SIMILARITY` comes from.
* ``scale``: seconds to find the pairs among ``--tools`` generated tools (default 10,000), in two
  shapes: bench_catalog_load's generator (many signatures), and tools that all share one signature
  (requires nothing, produces an own result, as UltraTool's) with descriptions of 4 to 8 words drawn
  from a vocabulary of 2,000: prefix filtering must keep the one large bucket cheap.

Usage: python benchmarks/bench_near_duplicates.py [--floor 0.4] [--tools 10000] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

from toolpath.registry import read_catalog
from toolpath.registry.near_duplicates import NEAR_DUPLICATE_SIMILARITY, jaccard, near_duplicates, own_results, tool_signature, tool_terms
from toolpath.registry.tools import ToolDefinition

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_catalog_load import generate_catalog  # noqa: E402
from taskplan_catalogs import DEFAULT_DATA, write_catalogs  # noqa: E402


def catalog_paths(directory: Path) -> dict[str, Path]:
    paths = {
        "tabular": HERE.parent / "catalogs" / "tabular" / "catalog.yaml",
        "chemistry": HERE.parent / "catalogs" / "chemistry" / "catalog.yaml",
        "media": HERE / "catalogs" / "media" / "catalog.yaml",
    }
    if DEFAULT_DATA.exists():
        paths.update(write_catalogs(directory))
    return paths


def pairs_of(path: Path, floor: float) -> dict:
    tools = list(read_catalog(path).tools)
    nested = [
        {"first": pair.first.name, "second": pair.second.name, "similarity": round(pair.similarity, 3)}
        for pair in sorted(near_duplicates(tools, floor), key=lambda pair: -pair.similarity)
    ]
    return {"nested": nested, "not_nested": not_nested(tools)}


def not_nested(tools: list[ToolDefinition]) -> list[dict]:
    """Pairs of equal signatures at or above the threshold whose terms do not nest (all pairs compared: small catalogs only)."""
    results = own_results(tools)
    signatures = [tool_signature(tool, results) for tool in tools]
    terms = tool_terms(tools)
    found = []
    for first in range(len(tools)):
        for second in range(first + 1, len(tools)):
            similarity = jaccard(terms[first], terms[second])
            nested = terms[first] <= terms[second] or terms[second] <= terms[first]
            if signatures[first] == signatures[second] and similarity >= NEAR_DUPLICATE_SIMILARITY and not nested:
                found.append({"first": tools[first].name, "second": tools[second].name, "similarity": round(similarity, 3)})
    return sorted(found, key=lambda pair: -pair["similarity"])


def one_signature_tools(count: int, seed: int) -> list[ToolDefinition]:
    rng = random.Random(seed)
    vocabulary = [f"word{number}" for number in range(2000)]
    return [
        ToolDefinition(
            name=f"tool_{number:06d}",
            description=" ".join(rng.sample(vocabulary, rng.randint(4, 8))),
            state_transition={"produces": [f"gen.result.tool_{number:06d}"]},
        )
        for number in range(count)
    ]


def timed(tools: list[ToolDefinition]) -> dict:
    started = time.perf_counter()
    found = near_duplicates(tools)
    return {"tools": len(tools), "seconds": round(time.perf_counter() - started, 3), "pairs": len(found)}


def main(floor: float, tools: int, seed: int) -> dict:
    with tempfile.TemporaryDirectory() as directory:
        catalogs = {name: pairs_of(path, floor) for name, path in catalog_paths(Path(directory)).items()}
        generated = Path(directory) / "generated.json"
        generated.write_text(json.dumps(generate_catalog(tools, 0, seed)))
        many_signatures = list(read_catalog(generated).tools)
    near_duplicates([])  # imports (bm25s, PyStemmer) outside the timings
    one_signature = one_signature_tools(tools, seed)
    timed(one_signature[:10])
    return {"floor": floor, "catalogs": catalogs, "scale": {"many_signatures": timed(many_signatures), "one_signature": timed(one_signature)}}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--floor", type=float, default=0.4)
    parser.add_argument("--tools", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    options = parser.parse_args()
    print(json.dumps(main(options.floor, options.tools, options.seed), indent=1))
