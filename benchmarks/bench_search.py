"""Skill search quality on MetaTool, and search speed on 10,000 affordances.

Prints one JSON object.

**Quality** (``../shared/data/metatool/``, dev split; see its README): a catalog with one tool per
MetaTool tool (its name and description, no states), searched for tools only. For BM25 only, dense
only and hybrid, in the same run: Recall@1, Recall@5 and MRR@10 over the single-tool queries (each
row counts, duplicates and conflicting labels included, as in the source), and the share of
multi-tool queries with both gold tools in the top 5. Query vectors are computed once, in batches,
by the query path (ONNX Runtime) and shared by the dense and hybrid runs (the ranking is the same as
embedding each query in turn); hybrid is also scored with sentence-transformers' query vectors, and
the two paths' largest 1 − cosine is reported over the tool texts and 1,000 queries embedded one at
a time (issue 19: ≤ 1e-5, Recall@5 unchanged ± 0.002).
``--tune`` also grid-searches the fusion constants on this dev data (the only data used to set
``toolpath.planner.search.skills.RRF_K`` and ``DENSE_WEIGHT``). Target (issue 7): hybrid beats the best single
method on Recall@5.

**Speed**: a catalog of 2,000 tools with 5 affordances each (10,000 texts, taken from the dev
queries), each tool producing its own state. Cold build throughput (texts/s, fresh cache file), reopen
time with a warm cache, and query latency p50/p95 over 200 other queries, embedding included, with a
plan on every hit. Targets: p50 ≤ 15 ms; reopen ≤ 1 s. Timings are noisy here: compare within a run.

Usage: python benchmarks/bench_search.py [--data ../shared/data/metatool] [--tune] [--queries N]
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from toolpath.planner import SkillIndex, StateGraph  # noqa: E402
from toolpath.planner.search.embedding import default_embedder  # noqa: E402
from toolpath.planner.search.embedding_cache import EmbeddingCache  # noqa: E402
from toolpath.planner.search.onnx_embedding import OnnxEmbedder  # noqa: E402
from toolpath.registry import ToolDefinition, ToolRegistry  # noqa: E402

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "metatool"


class PrecomputedQueries:
    """The default embedder, answering known query texts from vectors ``query_embedder`` computed
    in batches beforehand."""

    def __init__(self, queries: list[str], query_embedder):
        self.model = default_embedder()
        self.model_id = self.model.model_id
        unique = list(dict.fromkeys(query.strip() for query in queries))
        # Batches of similar length: ONNX Runtime pads each batch to its longest text.
        ordered = sorted(unique, key=len)
        vectors = np.concatenate([query_embedder(ordered[start : start + 64]) for start in range(0, len(ordered), 64)])
        self.known = dict(zip(ordered, vectors))

    def __call__(self, texts):
        if all(text in self.known for text in texts):
            return np.stack([self.known[text] for text in texts])
        return self.model(texts)


def metatool_graph(data: Path) -> StateGraph:
    registry = ToolRegistry()
    for tool in json.loads((data / "tools.json").read_text(encoding="utf-8")):
        registry.register_tool(ToolDefinition(name=tool["name"], description=tool["description"], module="metatool", server_name="metatool"))
    return StateGraph(registry)


def quality(index: SkillIndex, single: list[tuple[str, str]], multi: list[dict]) -> dict:
    recall_1 = recall_5 = reciprocal = 0.0
    for query, gold in single:
        names = [hit.name for hit in index.search(query, k=10, kind="tool")]
        if gold in names:
            rank = names.index(gold) + 1
            recall_1 += rank == 1
            recall_5 += rank <= 5
            reciprocal += 1 / rank
    both = sum(set(item["tools"]) <= {hit.name for hit in index.search(item["query"], k=5, kind="tool")} for item in multi)
    return {
        "recall_at_1": round(recall_1 / len(single), 4),
        "recall_at_5": round(recall_5 / len(single), 4),
        "mrr_at_10": round(reciprocal / len(single), 4),
        "multi_both_in_top_5": round(both / len(multi), 4),
    }


def measure_quality(data: Path, tune: bool, limit: int | None) -> dict:
    with (data / "queries_dev.csv").open(encoding="utf-8", newline="") as handle:
        single = [(row["Query"], row["Tool"]) for row in csv.DictReader(handle)]
    multi = json.loads((data / "multi_dev.json").read_text(encoding="utf-8"))
    if limit:
        single = single[:: max(1, len(single) // limit)][:limit]  # the file is grouped by tool: spread the sample
    single = [(query, gold) for query, gold in single if query.strip()]
    graph = metatool_graph(data)
    texts = [query for query, _ in single] + [item["query"] for item in multi]
    fast, reference = OnnxEmbedder(), default_embedder().fallback
    embedder = PrecomputedQueries(texts, fast)
    report: dict = {"single_tool_queries": len(single), "multi_tool_queries": len(multi), "tools": len(graph.registry)}
    with tempfile.TemporaryDirectory(prefix="toolpath-bench-search-") as directory:
        cache = EmbeddingCache(Path(directory) / "toolpath.db")
        for mode in ("bm25", "dense", "hybrid"):
            report[mode] = quality(SkillIndex(graph, embedder, mode=mode, cache=cache), single, multi)
        report["hybrid_with_sentence_transformers_queries"] = quality(SkillIndex(graph, PrecomputedQueries(texts, reference), cache=cache), single, multi)
        report["hybrid_recall_at_5_change_from_query_path"] = round(
            report["hybrid"]["recall_at_5"] - report["hybrid_with_sentence_transformers_queries"]["recall_at_5"], 4
        )
        report["query_path_agreement"] = agreement(
            fast, reference, [tool.description for tool in graph.registry] + list(dict.fromkeys(query.strip() for query, _ in single))[:1000]
        )
        if tune:
            grid = {}
            for rrf_k, weight in itertools.product((1, 5, 20, 60), (0.5, 0.6, 0.7, 0.8, 0.9)):
                scores = quality(SkillIndex(graph, embedder, cache=cache, rrf_k=rrf_k, dense_weight=weight), single, multi)
                grid[f"rrf_k={rrf_k},dense_weight={weight}"] = scores
            report["tuning_grid"] = grid
    best_single = max(report["bm25"]["recall_at_5"], report["dense"]["recall_at_5"])
    report["hybrid_beats_best_single_on_recall_at_5"] = report["hybrid"]["recall_at_5"] > best_single
    return report


def agreement(fast, reference, texts: list[str]) -> dict:
    """The largest 1 − cosine between the query path (one text at a time) and sentence-transformers."""
    expected = reference(texts)
    got = np.concatenate([fast([text]) for text in texts])
    distances = 1 - (got * expected).sum(axis=1)
    return {"texts": len(texts), "max_1_minus_cosine": float(distances.max()), "target": 1e-5}


def speed_graph(affordances: list[str], tools: int, per_tool: int) -> StateGraph:
    registry = ToolRegistry()
    for number in range(tools):
        texts = affordances[number * per_tool : (number + 1) * per_tool]
        registry.register_tool(
            ToolDefinition(
                name=f"tool_{number}", module="bench", server_name="bench", affordances=texts, state_transition={"produces": [f"bench.done_{number}"]}
            )
        )
    return StateGraph(registry)


def measure_speed(data: Path, tools: int = 2000, per_tool: int = 5, queries: int = 200) -> dict:
    with (data / "queries_dev.csv").open(encoding="utf-8", newline="") as handle:
        texts = list(dict.fromkeys(row["Query"].strip() for row in csv.DictReader(handle) if row["Query"].strip()))
    affordances, probes = texts[: tools * per_tool], texts[tools * per_tool : tools * per_tool + queries]
    graph = speed_graph(affordances, tools, per_tool)
    embedder = default_embedder()
    embedder(["warm the model up"])  # model loading is not index building
    with tempfile.TemporaryDirectory(prefix="toolpath-bench-search-") as directory:
        path = Path(directory) / "toolpath.db"
        started = time.perf_counter()
        index = SkillIndex(graph, embedder, cache=path)
        cold = time.perf_counter() - started
        embedded = index.cache_counts[1]
        started = time.perf_counter()
        reopened = SkillIndex(graph, embedder, cache=path)
        reopen = time.perf_counter() - started
        assert reopened.cache_counts[1] == 0, "reopening embedded texts again"
        latencies, embedding = [], []
        for query in probes:
            started = time.perf_counter()
            embedder([query])
            embedding.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            reopened.search(query, k=5)
            latencies.append((time.perf_counter() - started) * 1000)
    latencies.sort()
    return {
        "affordance_texts": len(affordances),
        "index_texts_embedded_cold": embedded,
        "cold_build_s": round(cold, 2),
        "cold_build_texts_per_s": round(embedded / cold, 1),
        "reopen_warm_cache_s": round(reopen, 3),
        "queries": len(latencies),
        "query_p50_ms": round(statistics.median(latencies), 2),
        "query_p95_ms": round(latencies[int(0.95 * (len(latencies) - 1))], 2),
        "query_embedding_alone_p50_ms": round(statistics.median(embedding), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the MetaTool dev directory")
    parser.add_argument("--tune", action="store_true", help="also grid-search the fusion constants on the dev data")
    parser.add_argument("--queries", type=int, help="use only N single-tool queries, spread evenly over the file (quick runs)")
    parser.add_argument("--skip-speed", action="store_true", help="measure quality only")
    args = parser.parse_args()
    if not (args.data / "tools.json").exists():
        parser.error(f"no MetaTool data at {args.data}; pass --data DIRECTORY")
    report = {"quality": measure_quality(args.data, args.tune, args.queries)}
    if not args.skip_speed:
        report["speed"] = measure_speed(args.data)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
