"""Approximate dense search at 100,000 tools: which library, how exact, how fast (issue 57).

Prints one JSON object. The catalog is ``bench_scale_tools.generate_catalog(--tools, --seed)``,
embedded through the embedding cache of ``TOOLPATH_HOME`` (the first run embeds every text: about
11 minutes at 100,000 tools on 2 cores). The queries are ``bench_scale_tools.queries_of`` (worded
unlike the catalog). Three parts:

* ``libraries``: for each nearest-neighbour library installed (usearch, faiss-cpu, hnswlib; HNSW
  graphs of 16 links per node, built with 128 and searched with 64 candidates or as many texts as
  asked for, whichever is more) and each way it can store the vectors (float32, float16, int8):
  ``build_s`` (all cores), ``file_bytes`` saved, ``open_s`` (reading the file back, memory-mapped where the library
  can), ``query_ms`` p50/p95 for ``--candidate-texts`` texts plus their entries' exact re-scoring
  (:class:`toolpath.planner.search.dense_index.ApproximateDenseIndex` does the same), and
  ``recall_at_10``: the share of the exact top 10 entries (best cosine of each entry's texts) found.
* ``dense_index``: toolpath's own (:func:`toolpath.planner.search.dense_index.build_dense_index`):
  build, save and load times, the files, and the resident memory of a fresh process that loads it
  and answers ``--queries`` queries (its vectors and graph are memory-mapped: only touched pages count).
* ``search``: :meth:`SkillIndex.search` for the 10 best hits through the exact and the approximate
  dense index, with no held states and with every input held (the two kinds alternate):
  p50/p95 ms with the query embedding, ``top10_agreement`` (the share of the exact search's hits
  the approximate one returns) and ``identical_lists`` (the share of searches whose 10 hits, scores
  and order are identical).

Timings on a shared machine are noisy: compare figures from one run. Usage:
python benchmarks/bench_dense_index.py [--tools 100000] [--queries 100] [--candidate-texts 256] [--libraries usearch faiss hnswlib] [--seed 0]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale_tools import generate_catalog, percentiles, queries_of  # noqa: E402

CONNECTIVITY, EXPANSION_ADD, EXPANSION_SEARCH = 16, 128, 64


def catalog_index(tools: int, seed: int, directory: Path):
    from toolpath.planner import SkillIndex, StateGraph
    from toolpath.registry import load_checked
    from toolpath.registry.catalog_files import DEFAULT_MAX_CATALOG_BYTES, MAX_CATALOG_BYTES_VARIABLE

    path = directory / f"scale-{tools}.json"
    path.write_text(json.dumps(generate_catalog(tools, seed)), encoding="utf-8")
    os.environ[MAX_CATALOG_BYTES_VARIABLE] = str(max(DEFAULT_MAX_CATALOG_BYTES, path.stat().st_size))
    loaded = load_checked([path])
    graph = StateGraph(loaded.registry, loaded.states)
    started = time.perf_counter()
    index = SkillIndex(graph)
    return graph, index, time.perf_counter() - started


def exact_top(exact, query: np.ndarray, count: int = 10) -> np.ndarray:
    similarity, _ = exact.scores(query)
    return np.argsort(-similarity, kind="stable")[:count]


def measure_library(
    name: str, quantization: str, vectors: np.ndarray, exact, owner: np.ndarray, queries: np.ndarray, truths, texts: int, directory: Path
) -> dict:
    """Build, save, open and query one library's HNSW graph of ``vectors``."""
    threads = os.cpu_count() or 1
    path = directory / f"{name}-{quantization}.index"
    started = time.perf_counter()
    if name == "usearch":
        from usearch.index import Index

        graph = Index(
            ndim=vectors.shape[1], metric="cos", dtype=quantization, connectivity=CONNECTIVITY, expansion_add=EXPANSION_ADD, expansion_search=EXPANSION_SEARCH
        )
        graph.add(np.arange(len(vectors), dtype=np.uint64), vectors, threads=threads)
        build = time.perf_counter() - started
        graph.save(str(path))
        del graph
        started = time.perf_counter()
        graph = Index.restore(str(path), view=True, expansion_search=EXPANSION_SEARCH)
        opened = time.perf_counter() - started

        def search(query: np.ndarray) -> np.ndarray:
            return np.asarray(graph.search(query, texts).keys, dtype=np.int64)
    elif name == "faiss":
        import faiss

        faiss.omp_set_num_threads(threads)
        if quantization == "f32":
            graph = faiss.IndexHNSWFlat(vectors.shape[1], CONNECTIVITY, faiss.METRIC_INNER_PRODUCT)
        else:
            kind = {"f16": faiss.ScalarQuantizer.QT_fp16, "i8": faiss.ScalarQuantizer.QT_8bit}[quantization]
            graph = faiss.IndexHNSWSQ(vectors.shape[1], kind, CONNECTIVITY, faiss.METRIC_INNER_PRODUCT)
            graph.train(vectors)
        graph.hnsw.efConstruction = EXPANSION_ADD
        graph.add(vectors)
        build = time.perf_counter() - started
        faiss.write_index(graph, str(path))
        del graph
        started = time.perf_counter()
        graph = faiss.read_index(str(path), faiss.IO_FLAG_MMAP)
        opened = time.perf_counter() - started
        graph.hnsw.efSearch = max(EXPANSION_SEARCH, texts)
        faiss.omp_set_num_threads(1)  # one query at a time, as skill search asks

        def search(query: np.ndarray) -> np.ndarray:
            return graph.search(query[None, :], texts)[1][0]
    else:
        import hnswlib

        graph = hnswlib.Index(space="ip", dim=vectors.shape[1])
        graph.init_index(max_elements=len(vectors), ef_construction=EXPANSION_ADD, M=CONNECTIVITY)
        graph.set_num_threads(threads)
        graph.add_items(vectors, np.arange(len(vectors)))
        build = time.perf_counter() - started
        graph.save_index(str(path))
        del graph
        started = time.perf_counter()
        graph = hnswlib.Index(space="ip", dim=vectors.shape[1])
        graph.load_index(str(path))
        opened = time.perf_counter() - started
        graph.set_num_threads(1)
        graph.set_ef(max(EXPANSION_SEARCH, texts))

        def search(query: np.ndarray) -> np.ndarray:
            return graph.knn_query(query, k=texts)[0][0].astype(np.int64)

    times, recalls = [], []
    for query, truth in zip(queries, truths):
        started = time.perf_counter()
        entries = np.unique(owner[search(query)])
        similarity, _ = exact.scores(query, entries)
        found = entries[np.argsort(-similarity, kind="stable")[:10]]
        times.append((time.perf_counter() - started) * 1000)
        recalls.append(len(set(found.tolist()) & set(truth.tolist())) / len(truth))
    report = {
        "build_s": round(build, 1),
        "file_bytes": path.stat().st_size,
        "open_s": round(opened, 4),
        "query_ms": percentiles(times),
        "recall_at_10": round(statistics.mean(recalls), 4),
        "worst_recall_at_10": min(recalls),
    }
    path.unlink()
    return report


#: Run in a fresh process: load a saved dense index, answer the queries, report resident memory.
_LOAD_AND_QUERY = """
import json, sys, time, numpy as np, psutil
process = psutil.Process()
before = process.memory_info().rss
started = time.perf_counter()
from toolpath.planner.search.dense_index import load_dense_index
index = load_dense_index(sys.argv[1])
loaded = time.perf_counter() - started
after_load = process.memory_info().rss
queries = np.load(sys.argv[2])
times = []
for query in queries:
    started = time.perf_counter()
    index.nearest(query, int(sys.argv[3]))
    times.append((time.perf_counter() - started) * 1000)
print(json.dumps({"load_s_with_import": round(loaded, 3), "rss_mib_before": round(before / 2**20), "rss_mib_loaded": round(after_load / 2**20),
                  "rss_mib_after_queries": round(process.memory_info().rss / 2**20), "nearest_ms_p50": round(sorted(times)[len(times) // 2], 3)}))
"""


def measure_dense_index(index, queries: np.ndarray, texts: int, directory: Path) -> dict:
    from toolpath.planner.search.dense_index import ApproximateDenseIndex, load_dense_index

    dense = index.dense_index
    report: dict = {"approximate": dense.approximate, "texts": len(dense.vectors), "entries": len(dense.first_text)}
    if not dense.approximate:
        started = time.perf_counter()
        dense = ApproximateDenseIndex.build(dense.vectors, dense.first_text)
        report["build_s"] = round(time.perf_counter() - started, 1)
    started = time.perf_counter()
    dense.save(directory / "dense")
    report["save_s"] = round(time.perf_counter() - started, 2)
    report["file_bytes"] = {path.name: path.stat().st_size for path in sorted((directory / "dense").iterdir())}
    started = time.perf_counter()
    load_dense_index(directory / "dense")
    report["load_s"] = round(time.perf_counter() - started, 3)
    np.save(directory / "queries.npy", queries)
    child = subprocess.run(
        [sys.executable, "-c", _LOAD_AND_QUERY, str(directory / "dense"), str(directory / "queries.npy"), str(texts)],
        capture_output=True,
        text=True,
        check=True,
    )
    report["fresh_process"] = json.loads(child.stdout)
    return report, dense


def measure_search(index, graph, approximate, queries: list[str]) -> dict:
    from toolpath.planner.search.dense_index import ExactDenseIndex

    exact = index.with_dense_index(ExactDenseIndex(index.dense_index.vectors, index.dense_index.first_text))
    held = sorted(token for token, state in graph.states.items() if state.input)
    for searched in (exact, approximate):
        searched.load_query_model()
    times: dict[str, dict[str, list[float]]] = {"exact": {"no_held": [], "inputs_held": []}, "approximate": {"no_held": [], "inputs_held": []}}
    agreement, identical = [], []
    for number, query in enumerate(queries):
        kind = "inputs_held" if number % 2 else "no_held"
        found = {}
        # Each query text is searched once per index: the index keeps recent query vectors, and
        # a repeated one would skip the embedding.
        for name, searched in (("exact", exact), ("approximate", approximate)):
            started = time.perf_counter()
            hits = searched.search(query, k=10, held=held if number % 2 else ())
            times[name][kind].append((time.perf_counter() - started) * 1000)
            found[name] = [(hit.kind, hit.name, hit.score, hit.similarity) for hit in hits]
        expected = {hit[:2] for hit in found["exact"]}
        agreement.append(len(expected & {hit[:2] for hit in found["approximate"]}) / len(expected))
        identical.append(found["exact"] == found["approximate"])
    return {
        "queries": len(queries),
        "exact": {kind: percentiles(values) for kind, values in times["exact"].items()},
        "approximate": {kind: percentiles(values) for kind, values in times["approximate"].items()},
        "top10_agreement": round(statistics.mean(agreement), 4),
        "identical_lists": round(statistics.mean(identical), 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tools", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--candidate-texts", type=int, default=256, help="texts asked of each graph (skill search asks for 256 for 10 hits)")
    parser.add_argument("--libraries", nargs="*", default=["usearch", "faiss", "hnswlib"])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    from toolpath.planner.search.dense_index import ExactDenseIndex

    report: dict = {"tools": args.tools, "seed": args.seed, "candidate_texts": args.candidate_texts}
    with tempfile.TemporaryDirectory(prefix="toolpath-bench-dense-") as name:
        directory = Path(name)
        graph, index, report["skill_index_s"] = catalog_index(args.tools, args.seed, directory)
        vectors, first_text = np.ascontiguousarray(index.dense_index.vectors), index.dense_index.first_text
        exact = ExactDenseIndex(vectors, first_text)
        owner = np.repeat(np.arange(len(first_text)), np.diff(np.append(first_text, len(vectors))))
        texts = queries_of(2 * args.queries, args.seed + 1)
        query_vectors = np.asarray(index.embedder(texts), dtype=np.float32)
        query_vectors /= np.linalg.norm(query_vectors, axis=1, keepdims=True)
        started = time.perf_counter()
        truths = [exact_top(exact, query) for query in query_vectors]
        report["exact_scan_ms_mean"] = round((time.perf_counter() - started) * 1000 / len(truths), 2)
        report["libraries"] = {}
        for library in args.libraries:
            module = {"faiss": "faiss", "usearch": "usearch", "hnswlib": "hnswlib"}[library]
            if importlib.util.find_spec(module) is None:
                report["libraries"][library] = "not installed"
                continue
            for quantization in ["f32"] if library == "hnswlib" else ["f32", "f16", "i8"]:
                report["libraries"][f"{library}-{quantization}"] = measure_library(
                    library, quantization, vectors, exact, owner, query_vectors, truths, args.candidate_texts, directory
                )
                print(json.dumps({f"{library}-{quantization}": report["libraries"][f"{library}-{quantization}"]}), file=sys.stderr)
        report["dense_index"], dense = measure_dense_index(index, query_vectors, args.candidate_texts, directory)
        approximate = index if index.dense_index.approximate else index.with_dense_index(dense)
        report["search"] = measure_search(index, graph, approximate, texts)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
