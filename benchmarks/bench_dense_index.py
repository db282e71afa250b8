"""Approximate dense search at 100,000 tools: which library, how exact, how fast (issue 57).

Prints one JSON object. The catalog is ``bench_scale_tools.generate_catalog(--tools, --seed)``,
embedded through the embedding cache of ``TOOLPATH_HOME`` (the first run embeds every text: about
11 minutes at 100,000 tools on 2 cores). The queries are ``bench_scale_tools.queries_of`` (worded
unlike the catalog). Three parts:

* ``libraries``: for each ``--libraries`` LIBRARY:STORAGE (usearch, faiss-cpu or hnswlib; f32, f16
  or i8; each must be installed), in a fresh process: an HNSW graph of the texts (``--connectivity``
  links per node, default toolpath's; built and searched as broadly as toolpath's, or as many texts
  as asked for, whichever is more): ``build_s`` (all cores), ``file_bytes`` saved, ``open_s`` (reading it back, memory-mapped
  where the library can) and ``rss_open_mib`` (the process's growth by it), then for 64, 256 and
  1,024 candidate texts: ``recall_at_10`` (the share of the exact top 10 entries, by best cosine
  over each entry's texts, found after re-scoring the candidates' entries exactly, as
  :class:`toolpath.planner.search.dense_index.ApproximateDenseIndex` does), its worst query, and
  ``query_ms`` p50/p95 of the graph search and the re-scoring. A fresh process each, because
  usearch 2.26 imported before onnxruntime crashes the process (see dense_index's docstring).
* ``dense_index``: toolpath's own (:func:`toolpath.planner.search.dense_index.build_dense_index`):
  build, save and load times, the files, and a fresh process that loads it and answers the
  queries (``--candidate-texts`` texts each): load time and resident memory before, after loading
  and after the queries (its vectors and codes are memory-mapped: only touched pages count).
* ``search``: :meth:`SkillIndex.search` for the 10 best hits through the exact and the approximate
  dense index, with no held states and with every input held (the two kinds alternate):
  p50/p95 ms with the query embedding, ``top10_agreement`` (the share of the exact search's hits
  the approximate one returns) and ``identical_lists`` (the share of searches whose 10 hits, scores
  and order are all identical).

Timings on a shared machine are noisy: compare figures from one run. Usage:
python benchmarks/bench_dense_index.py [--tools 100000] [--queries 100] [--candidate-texts 256]
    [--libraries faiss:i8 usearch:i8 hnswlib:f32 ...] [--connectivity 32] [--seed 0]
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

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale_tools import generate_catalog, percentiles, queries_of  # noqa: E402

from toolpath.planner.search.dense_index import EXPANSION_ADD, EXPANSION_SEARCH  # noqa: E402


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


def library_graph(library: str, storage: str, connectivity: int, vectors: np.ndarray, path: Path):
    """Build, save and reopen one library's graph: ``(build_s, open_s, resident MiB the reopened
    graph added, search(query, count) -> rows)``."""
    import psutil

    process = psutil.Process()
    threads = os.cpu_count() or 1
    started = time.perf_counter()
    if library == "usearch":
        from usearch.index import Index

        graph = Index(
            ndim=vectors.shape[1], metric="cos", dtype=storage, connectivity=connectivity, expansion_add=EXPANSION_ADD, expansion_search=EXPANSION_SEARCH
        )
        graph.add(np.arange(len(vectors), dtype=np.uint64), vectors, threads=threads)
        build = time.perf_counter() - started
        graph.save(str(path))
        del graph
        before, started = process.memory_info().rss, time.perf_counter()
        graph = Index.restore(str(path), view=True, expansion_search=EXPANSION_SEARCH)
        opened, grown = time.perf_counter() - started, (process.memory_info().rss - before) / 2**20
        return build, opened, grown, lambda query, count: np.asarray(graph.search(query, count).keys, dtype=np.int64)
    if library == "faiss":
        import faiss

        if storage == "f32":
            graph = faiss.IndexHNSWFlat(vectors.shape[1], connectivity, faiss.METRIC_INNER_PRODUCT)
        else:
            kind = {"f16": faiss.ScalarQuantizer.QT_fp16, "i8": faiss.ScalarQuantizer.QT_8bit}[storage]
            graph = faiss.IndexHNSWSQ(vectors.shape[1], kind, connectivity, faiss.METRIC_INNER_PRODUCT)
            graph.train(vectors)
        graph.hnsw.efConstruction = EXPANSION_ADD
        graph.add(vectors)
        build = time.perf_counter() - started
        faiss.write_index(graph, str(path))
        del graph
        before, started = process.memory_info().rss, time.perf_counter()
        graph = faiss.read_index(str(path), faiss.IO_FLAG_MMAP_IFC)
        opened, grown = time.perf_counter() - started, (process.memory_info().rss - before) / 2**20

        def search(query: np.ndarray, count: int) -> np.ndarray:
            parameters = faiss.SearchParametersHNSW(efSearch=max(EXPANSION_SEARCH, count))
            return graph.search(query[None, :], count, params=parameters)[1][0].astype(np.int64)

        return build, opened, grown, search
    import hnswlib

    if storage != "f32":
        raise SystemExit("hnswlib stores float32 only")
    graph = hnswlib.Index(space="ip", dim=vectors.shape[1])
    graph.init_index(max_elements=len(vectors), ef_construction=EXPANSION_ADD, M=connectivity)
    graph.set_num_threads(threads)
    graph.add_items(vectors, np.arange(len(vectors)))
    build = time.perf_counter() - started
    graph.save_index(str(path))
    del graph
    before, started = process.memory_info().rss, time.perf_counter()
    graph = hnswlib.Index(space="ip", dim=vectors.shape[1])
    graph.load_index(str(path))
    opened, grown = time.perf_counter() - started, (process.memory_info().rss - before) / 2**20
    graph.set_num_threads(1)

    def search(query: np.ndarray, count: int) -> np.ndarray:
        graph.set_ef(max(EXPANSION_SEARCH, count))
        return graph.knn_query(query, k=count)[0][0].astype(np.int64)

    return build, opened, grown, search


def measure_library(library: str, storage: str, connectivity: int, directory: Path) -> dict:
    """In a fresh process: one library's graph of the saved vectors, against the saved exact top 10s."""
    from toolpath.planner.search.dense_index import load_dense_index

    dense = load_dense_index(directory / "dense")
    vectors = np.ascontiguousarray(dense.vectors)
    owner = np.repeat(np.arange(len(dense.first_text)), np.diff(np.append(dense.first_text, len(vectors))))
    queries, truths = np.load(directory / "queries.npy"), np.load(directory / "truths.npy")
    path = directory / f"{library}-{storage}.graph"
    build, opened, grown, search = library_graph(library, storage, connectivity, vectors, path)
    report: dict = {"build_s": round(build, 1), "file_bytes": path.stat().st_size, "open_s": round(opened, 4), "rss_open_mib": round(grown)}
    for count in (64, 256, 1024):
        times, recalls = [], []
        for query, truth in zip(queries, truths):
            started = time.perf_counter()
            entries = np.unique(owner[search(query, count)])
            similarity, _ = dense.scores(query, entries)
            found = entries[np.argsort(-similarity, kind="stable")[:10]]
            times.append((time.perf_counter() - started) * 1000)
            recalls.append(len(set(found.tolist()) & set(truth.tolist())) / len(truth))
        report[f"candidate_texts_{count}"] = {
            "recall_at_10": round(statistics.mean(recalls), 4),
            "worst_recall_at_10": min(recalls),
            "query_ms": percentiles(times),
        }
    path.unlink()
    return report


#: Run in a fresh process: load a saved dense index, answer the queries, report resident memory.
_LOAD_AND_QUERY = """
import json, sys, time
import numpy as np, psutil
process = psutil.Process()
before = process.memory_info().rss
started = time.perf_counter()
from toolpath.planner.search.dense_index import load_dense_index
index = load_dense_index(sys.argv[1])
loaded = time.perf_counter() - started
after_load = process.memory_info().rss
times = []
for query in np.load(sys.argv[2]):
    started = time.perf_counter()
    index.nearest(query, int(sys.argv[3]))
    times.append((time.perf_counter() - started) * 1000)
print(json.dumps({"load_s_with_imports": round(loaded, 3), "rss_mib_before": round(before / 2**20), "rss_mib_loaded": round(after_load / 2**20),
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
    parser.add_argument("--candidate-texts", type=int, default=256, help="texts toolpath's dense index is asked for (skill search asks for 256 for 10 hits)")
    parser.add_argument("--libraries", nargs="*", default=["faiss:i8"], help="LIBRARY:STORAGE pairs to compare, e.g. usearch:i8 faiss:f16 hnswlib:f32")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--connectivity", type=int, help="links per node of the libraries' graphs (default: toolpath's, dense_index.CONNECTIVITY)")
    parser.add_argument("--library-child", nargs=4, metavar=("LIBRARY", "STORAGE", "CONNECTIVITY", "DIRECTORY"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.library_child:
        library, storage, connectivity, directory = args.library_child
        print(json.dumps(measure_library(library, storage, int(connectivity), Path(directory))))
        return
    from toolpath.planner.search.dense_index import CONNECTIVITY, ExactDenseIndex

    connectivity = args.connectivity or CONNECTIVITY
    report: dict = {"tools": args.tools, "seed": args.seed, "candidate_texts": args.candidate_texts, "library_connectivity": connectivity}
    with tempfile.TemporaryDirectory(prefix="toolpath-bench-dense-") as name:
        directory = Path(name)
        graph, index, report["skill_index_s"] = catalog_index(args.tools, args.seed, directory)
        exact = ExactDenseIndex(index.dense_index.vectors, index.dense_index.first_text)
        texts = queries_of(2 * args.queries, args.seed + 1)
        query_vectors = np.asarray(index.embedder(texts), dtype=np.float32)
        query_vectors /= np.linalg.norm(query_vectors, axis=1, keepdims=True)
        started = time.perf_counter()
        truths = np.stack([np.argsort(-exact.scores(query)[0], kind="stable")[:10] for query in query_vectors])
        report["exact_scan_ms_mean"] = round((time.perf_counter() - started) * 1000 / len(truths), 2)
        np.save(directory / "queries.npy", query_vectors)
        np.save(directory / "truths.npy", truths)
        report["dense_index"], dense = measure_dense_index(index, query_vectors, args.candidate_texts, directory)
        report["libraries"] = {}
        for pair in args.libraries:
            library, _, storage = pair.partition(":")
            child = subprocess.run(
                [sys.executable, __file__, "--library-child", library, storage or "f32", str(connectivity), str(directory)],
                capture_output=True,
                text=True,
                check=False,
            )
            lines = child.stdout.strip().splitlines()
            report["libraries"][pair] = (
                json.loads(lines[-1]) if child.returncode == 0 and lines else {"failed": child.returncode, "stderr": child.stderr[-500:]}
            )
            print(json.dumps({pair: report["libraries"][pair]}), file=sys.stderr)
        approximate = index if index.dense_index.approximate else index.with_dense_index(dense)
        report["search"] = measure_search(index, graph, approximate, texts)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
