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

**Learned search** (issue 53): the single-tool queries are split by
``sha256(query.strip())``'s *last* hex digit (the README's dev rule uses the first): 0-3 → the
measuring part (a quarter), 4-f → the learning part. Learned data is built from the learning part
through the public functions ``toolpath learn`` uses (``LearnedSearch.from_phrasings`` and
``choose_query_adapter``, which fits the adapter only if it beats none on held-back folds of the
labels themselves, at the best of ``ADAPTER_RIDGES``; each row says what it chose) and measured on the measuring part only, at several amounts of labels: all of
the learning part; 5 per tool (random, seed 0); only queries whose gold tool the unlearned search
showed in its top 5 (a user accepting a shown tool); 1 % (random); half an example per tool
(random); each without and with the query adapter. Query latency p50 of the unlearned and the
learned index (all labels, adapter) is measured in the same run, embedding included, interleaved.
Targets: all R@1 ≥ .78, R@5 ≥ .93; 5 per tool ≥ .65 / .87; top-5 labels ≥ .75 / .90; under one
example per tool never below unlearned; latency p50 ≤ 1.2× unlearned. ``--tune`` also grid-searches
the learned constants (``LEARNED_THRESHOLD``, ``LEARNED_WEIGHT``, ``ADAPTER_RIDGES`` (a single ridge
against the set), ``LEARNED_LEXICAL_MIN``,
``LEARNED_BLEND_PHRASINGS``) on a held-back
part *of the learning part* (second-to-last hex digit 0-1), learning from the rest.

**Speed**: a catalog of 2,000 tools with 5 affordances each (10,000 texts, taken from the dev
queries), each tool producing its own state. Cold build throughput (texts/s, fresh cache file), reopen
time with a warm cache, and query latency p50/p95 over 200 other queries, embedding included, with a
plan on every hit. Targets: p50 ≤ 15 ms; reopen ≤ 1 s. Timings are noisy here: compare within a run.

Usage: python benchmarks/bench_search.py [--data ../shared/data/metatool] [--tune] [--queries N] [--skip-learned]
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import hashlib
import itertools
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from toolpath.planner import SkillIndex, StateGraph  # noqa: E402
from toolpath.planner.search import learned as learned_module  # noqa: E402
from toolpath.planner.search import skills as skills_module  # noqa: E402
from toolpath.planner.search.embedding import default_embedder  # noqa: E402
from toolpath.planner.search.embedding_cache import EmbeddingCache  # noqa: E402
from toolpath.planner.search.learned import AdapterChoice, LearnedSearch, choose_query_adapter  # noqa: E402
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
    scores = {
        "recall_at_1": round(recall_1 / len(single), 4),
        "recall_at_5": round(recall_5 / len(single), 4),
        "mrr_at_10": round(reciprocal / len(single), 4),
    }
    if multi:
        both = sum(set(item["tools"]) <= {hit.name for hit in index.search(item["query"], k=5, kind="tool")} for item in multi)
        scores["multi_both_in_top_5"] = round(both / len(multi), 4)
    return scores


def single_tool_queries(data: Path) -> list[tuple[str, str]]:
    with (data / "queries_dev.csv").open(encoding="utf-8", newline="") as handle:
        return [(row["Query"], row["Tool"]) for row in csv.DictReader(handle)]


def measure_quality(data: Path, tune: bool, limit: int | None) -> dict:
    single = single_tool_queries(data)
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


def _hex(query: str) -> str:
    return hashlib.sha256(query.strip().encode("utf-8")).hexdigest()


def learned_split(single: list[tuple[str, str]]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(learning part, measuring part): the last hex digit of the stripped query's sha256, 4-f or 0-3."""
    measuring = [(query, gold) for query, gold in single if _hex(query)[-1] in "0123"]
    learning = [(query, gold) for query, gold in single if _hex(query)[-1] not in "0123"]
    return learning, measuring


def label_sets(learning: list[tuple[str, str]], unlearned: SkillIndex, tools: int, seed: int = 0) -> dict[str, list[tuple[str, str]]]:
    """The amounts of labels learned from (see the module docstring)."""
    rng = random.Random(seed)
    by_tool: dict[str, list[tuple[str, str]]] = {}
    for query, gold in learning:
        by_tool.setdefault(gold, []).append((query, gold))
    five = [example for gold in sorted(by_tool) for example in rng.sample(by_tool[gold], min(5, len(by_tool[gold])))]
    shown = [(query, gold) for query, gold in learning if gold in {hit.name for hit in unlearned.search(query, k=5, kind="tool")}]
    return {
        "all": learning,
        "five_per_tool": five,
        "top_5_shown_only": shown,
        "one_percent": rng.sample(learning, len(learning) // 100),
        "half_per_tool": rng.sample(learning, tools // 2),
    }


def learned_search(index: SkillIndex, labelled: list[tuple[str, str]], adapter: bool) -> tuple[LearnedSearch, AdapterChoice | None]:
    """The learned data ``toolpath learn`` would build from these labels: every phrasing, and if
    asked the adapter its own check chooses (``choose_query_adapter``: none, or the best ridge on
    held-back folds of these labels), with that choice."""
    phrasings = [(query, ("tool", "metatool", gold)) for query, gold in labelled]
    learned = LearnedSearch.from_phrasings(index.embedder, phrasings)
    if not adapter:
        return learned, None
    choice = choose_query_adapter(index, learned)
    return learned.with_adapter(choice.adapter), choice


@contextlib.contextmanager
def learned_constants(threshold: float, weight: float, ridges: tuple[float, ...], lexical_min: float, blend_phrasings: float):
    """Set the learned-search constants for a tuning run (module constants, read when used)."""
    saved = (
        skills_module.LEARNED_THRESHOLD,
        skills_module.LEARNED_WEIGHT,
        learned_module.ADAPTER_RIDGES,
        skills_module.LEARNED_LEXICAL_MIN,
        skills_module.LEARNED_BLEND_PHRASINGS,
    )
    (
        skills_module.LEARNED_THRESHOLD,
        skills_module.LEARNED_WEIGHT,
        learned_module.ADAPTER_RIDGES,
        skills_module.LEARNED_LEXICAL_MIN,
        skills_module.LEARNED_BLEND_PHRASINGS,
    ) = (threshold, weight, ridges, lexical_min, blend_phrasings)
    try:
        yield
    finally:
        (
            skills_module.LEARNED_THRESHOLD,
            skills_module.LEARNED_WEIGHT,
            learned_module.ADAPTER_RIDGES,
            skills_module.LEARNED_LEXICAL_MIN,
            skills_module.LEARNED_BLEND_PHRASINGS,
        ) = saved


def measure_learned(data: Path, tune: bool) -> dict:
    single = [(query.strip(), gold) for query, gold in single_tool_queries(data) if query.strip()]
    learning, measuring = learned_split(single)
    graph = metatool_graph(data)
    embedder = PrecomputedQueries([query for query, _ in single], OnnxEmbedder())
    report: dict = {
        "split": "sha256(query.strip()) last hex digit: 0-3 measuring, 4-f learning",
        "learning_queries": len(learning),
        "measuring_queries": len(measuring),
    }
    with tempfile.TemporaryDirectory(prefix="toolpath-bench-search-") as directory:
        cache = EmbeddingCache(Path(directory) / "toolpath.db")
        unlearned = SkillIndex(graph, embedder, cache=cache)
        report["unlearned"] = quality(unlearned, measuring, [])
        for name, labelled in label_sets(learning, unlearned, len(graph.registry)).items():
            row: dict = {"labels": len(labelled), "per_tool": round(len(labelled) / len(graph.registry), 2)}
            for adapter in (False, True):
                started = time.perf_counter()
                learned, choice = learned_search(unlearned, labelled, adapter)
                built = time.perf_counter() - started
                scores = quality(SkillIndex(graph, embedder, cache=cache, learned=learned), measuring, [])
                row["with_adapter" if adapter else "without_adapter"] = {**scores, "built_s": round(built, 2)}
                if choice is not None:
                    row["adapter_choice"] = {"ridge": choice.ridge, "note": choice.note}
            report[name] = row
        report["latency"] = learned_latency(graph, cache, learning, [query for query, _ in measuring][:200])
        if tune:
            report["tuning_on_held_back_learning_part"] = tune_learned(graph, embedder, cache, learning)
    return report


def learned_latency(graph: StateGraph, cache: EmbeddingCache, learning: list[tuple[str, str]], probes: list[str]) -> dict:
    """Query latency p50 with the real query path (embedding included), unlearned and learned
    (all labels, adapter), interleaved so both see the same machine load."""
    embedder = default_embedder()
    unlearned = SkillIndex(graph, embedder, cache=cache)
    learned = SkillIndex(graph, embedder, cache=cache, learned=learned_search(unlearned, learning, adapter=True)[0])
    unlearned.load_query_model()
    times: dict[str, list[float]] = {"unlearned": [], "learned": []}
    for query in probes:
        for name, index in (("unlearned", unlearned), ("learned", learned)):
            started = time.perf_counter()
            index.search(query, k=5)  # each index keeps its own recent query vectors, so both embed the query
            times[name].append((time.perf_counter() - started) * 1000)
    p50 = {name: statistics.median(values) for name, values in times.items()}
    return {
        "queries": len(probes),
        "learned_phrasings": len(learning),
        "unlearned_p50_ms": round(p50["unlearned"], 2),
        "learned_p50_ms": round(p50["learned"], 2),
        "ratio": round(p50["learned"] / p50["unlearned"], 3),
        "target_ratio": 1.2,
    }


def tune_learned(graph: StateGraph, embedder, cache: EmbeddingCache, learning: list[tuple[str, str]]) -> dict:
    """Grid of the learned constants, learning from most of the learning part and measuring on the
    rest (second-to-last hex digit 0-1); the measuring part is not used."""
    held_back = [(query, gold) for query, gold in learning if _hex(query)[-2] in "01"]
    rest = [(query, gold) for query, gold in learning if _hex(query)[-2] not in "01"]
    unlearned = SkillIndex(graph, embedder, cache=cache)
    grid: dict = {"held_back_queries": len(held_back), "unlearned": quality(unlearned, held_back, [])}
    label_amounts = label_sets(rest, unlearned, len(graph.registry))
    # The fused-score constants on a grid, then the ridge, the lexical minimum and the blend one at a
    # time around the shipped values (lexical minimum 0: phrasings always join BM25, infinity: never;
    # blend 0: the larger of nearest phrasing and prototype alone).
    ridges = learned_module.ADAPTER_RIDGES
    settings = [(threshold, weight, ridges, 1.0, 5.0) for threshold, weight in itertools.product((0.4, 0.5, 0.6), (0.05, 0.1, 0.3))]
    settings += [(0.5, 0.05, (ridge,), 1.0, 5.0) for ridge in (1.0, 2.0, 4.0)]
    settings += [(0.5, 0.05, ridges, lexical_min, 5.0) for lexical_min in (0.0, float("inf"))]
    settings += [(0.5, 0.05, ridges, 1.0, blend) for blend in (0.0, 10.0, 20.0, 40.0)]
    for threshold, weight, ridge, lexical_min, blend in settings:
        with learned_constants(threshold, weight, ridge, lexical_min, blend):
            row = {}
            for name, labelled in label_amounts.items():
                scores = quality(SkillIndex(graph, embedder, cache=cache, learned=learned_search(unlearned, labelled, adapter=True)[0]), held_back, [])
                row[name] = f"{scores['recall_at_1']:.3f}/{scores['recall_at_5']:.3f}"
        grid[f"threshold={threshold},weight={weight},ridges={','.join(map(str, ridge))},lexical_min={lexical_min},blend_phrasings={blend}"] = row
    return grid


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
    parser.add_argument("--skip-learned", action="store_true", help="leave out the learned-search section")
    parser.add_argument("--learned-only", action="store_true", help="measure the learned-search section only")
    args = parser.parse_args()
    if not (args.data / "tools.json").exists():
        parser.error(f"no MetaTool data at {args.data}; pass --data DIRECTORY")
    report: dict = {}
    if not args.learned_only:
        report["quality"] = measure_quality(args.data, args.tune, args.queries)
    if not args.skip_learned:
        report["learned"] = measure_learned(args.data, args.tune)
    if not args.skip_speed and not args.learned_only:
        report["speed"] = measure_speed(args.data)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
