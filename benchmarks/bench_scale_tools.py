"""Catalogs of 1,000 to 100,000 tools: load, index and search times (issue 57, first slice).

Prints one JSON object. For each ``--tools`` size (default 1,000 and 10,000) a seeded generator
(:func:`generate_catalog`) writes one catalog as compact JSON and as YAML into a temporary directory
(deleted afterwards) and measures, in this process:

* ``file_bytes``: each file's size (the default size limit is 16 MiB: ``TOOLPATH_MAX_CATALOG_BYTES``);
  it is raised here for the files that need it, as a user would;
* ``load_s``: :func:`toolpath.registry.load_checked` of each file (as the CLI loads catalogs);
* ``index_first_s``: the skill index built once (embedding every text not yet in the embedding
  cache of ``TOOLPATH_HOME``: about 90 s at 10,000 tools on a 2-core machine when the cache is
  cold; ``--cold-cache`` uses a fresh cache file so this figure is always the first embedding);
  ``index_from_cache_s``: built again, every vector from the cache (what each new process pays);
* ``search``: ``--queries`` queries (default 100, worded unlike the catalog) searched for the 10 best
  hits with no held states (the CLI's and MCP's default: most hits need an input and are
  unreachable, and each says why), and as many others with every input state held, alternating;
  p50/p95 in ms, the query embedding included. ``no_held_over_held_p50`` compares the two in this run.
* ``dense`` (when the index is approximate: from 100,000 texts, about 30,000 tools): over the same
  queries, ``recall_at_10`` of the dense search (the exact top 10 entries by best cosine found among
  the approximate index's candidates) and ``top10_agreement`` (the share of the exact search's 10
  hits the search returns); ``benchmarks/bench_dense_index.py`` has more.

The catalog (``generate_catalog``): one domain, ``scale``; tool *i* is a distinct (verb, object,
context) of 40 × 60 × 45 word lists ("forecast", "sensor readings", "for each warehouse"), so names,
descriptions and affordances are all distinct up to 108,000 tools. Each object has an input state
(``scale.<object>_given``, ``input: true``) that every tool working on it requires through a
parameter; each (verb, object) pair has a result state the tool produces (so several tools of one
pair are alternatives); about half the tools also require the result of an earlier tool on the same
object (a two-step plan). Held nothing, every tool is unreachable and each hit's explanation names
its missing input.

Timings on a shared machine are noisy: compare figures from one run. Usage:
python benchmarks/bench_scale_tools.py [--tools 1000 10000] [--queries 100] [--seed 0] [--cold-cache] [--skip-yaml]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

import yaml

#: (verb, the noun of its result): a result state says "a <noun> of the <object> is available".
VERBS = [
    ("summarise", "summary"),
    ("forecast", "forecast"),
    ("validate", "validation report"),
    ("translate", "translation"),
    ("classify", "classification"),
    ("deduplicate", "deduplicated copy"),
    ("geocode", "set of coordinates"),
    ("anonymise", "anonymised copy"),
    ("score", "risk score"),
    ("rank", "ranking"),
    ("cluster", "clustering"),
    ("normalise", "normalised copy"),
    ("encrypt", "encrypted archive"),
    ("compress", "compressed archive"),
    ("index", "search index"),
    ("tag", "set of tags"),
    ("audit", "audit trail"),
    ("reconcile", "reconciliation"),
    ("schedule", "schedule"),
    ("export", "spreadsheet export"),
    ("archive", "long-term archive"),
    ("enrich", "enriched copy"),
    ("estimate costs of", "cost estimate"),
    ("visualise", "chart"),
    ("compare", "comparison"),
    ("merge", "merged table"),
    ("split", "partition"),
    ("filter", "filtered subset"),
    ("aggregate", "aggregate table"),
    ("resample", "resampled series"),
    ("transcribe", "transcript"),
    ("redact", "redacted copy"),
    ("detect anomalies in", "list of anomalies"),
    ("extract keywords from", "keyword list"),
    ("price", "price list"),
    ("approve", "approval record"),
    ("route", "routing plan"),
    ("backfill", "backfilled history"),
    ("benchmark", "benchmark table"),
    ("sign", "digital signature"),
]
OBJECTS = [
    "invoices",
    "sensor readings",
    "customer reviews",
    "shipping manifests",
    "payroll records",
    "mri scans",
    "support tickets",
    "weather observations",
    "flight schedules",
    "genome variants",
    "sales leads",
    "purchase orders",
    "bank statements",
    "insurance claims",
    "lab results",
    "court filings",
    "news articles",
    "podcast episodes",
    "satellite images",
    "traffic counts",
    "energy meter data",
    "clinical trial records",
    "warehouse inventories",
    "job applications",
    "tax returns",
    "product catalogues",
    "server logs",
    "chat transcripts",
    "survey answers",
    "student grades",
    "recipes",
    "real estate listings",
    "patent texts",
    "crop yields",
    "vehicle telemetry",
    "hotel bookings",
    "donation records",
    "museum collections",
    "election results",
    "air quality samples",
    "train timetables",
    "legal contracts",
    "marketing emails",
    "app crash reports",
    "library loans",
    "parking tickets",
    "water usage readings",
    "fleet maintenance logs",
    "medical prescriptions",
    "music playlists",
    "subscription renewals",
    "loan applications",
    "building permits",
    "customs declarations",
    "fishing catches",
    "wind turbine data",
    "parcel tracking events",
    "restaurant inspections",
    "earthquake records",
    "conference talks",
]
CONTEXTS = [
    "for the finance team",
    "by region",
    "for each warehouse",
    "in real time",
    "for the quarterly report",
    "for auditors",
    "across all branches",
    "for last month",
    "per customer",
    "for the board meeting",
    "before publication",
    "for a regulator",
    "by product line",
    "for the night shift",
    "with a confidence interval",
    "for a mobile dashboard",
    "in german",
    "in bulk",
    "for a single day",
    "for the data lake",
    "per supplier",
    "for a grant proposal",
    "by postcode",
    "for the help desk",
    "over five years",
    "for a press release",
    "per department",
    "for machine learning",
    "with an email summary",
    "by season",
    "for the legal team",
    "per country",
    "for an insurance broker",
    "at the end of each week",
    "for a public website",
    "by age group",
    "for the archive office",
    "per project",
    "for the sales team",
    "by priority",
    "for a city council",
    "per device",
    "for an external partner",
    "by currency",
    "for a research paper",
]


def _slug(words: str) -> str:
    return "_".join(words.replace("-", " ").split())


def generate_catalog(tools: int, seed: int = 0) -> dict:
    """A catalog document of ``tools`` tools (at most 40 × 60 × 45 = 108,000; see the module doc).

    Raises:
        ValueError: more tools than distinct (verb, object, context) triples.
    """
    combinations = len(VERBS) * len(OBJECTS) * len(CONTEXTS)
    if tools > combinations:
        raise ValueError(f"at most {combinations:,} distinct tools, asked for {tools:,}")
    rng = random.Random(seed)
    chosen = sorted(rng.sample(range(combinations), tools), key=lambda _: rng.random())
    produced: dict[str, list[str]] = {}  # object → result tokens some earlier tool produces
    results: dict[str, dict] = {}
    definitions = []
    for number in chosen:
        verb_index, rest = divmod(number, len(OBJECTS) * len(CONTEXTS))
        object_index, context_index = divmod(rest, len(CONTEXTS))
        (verb, noun), thing, context = VERBS[verb_index], OBJECTS[object_index], CONTEXTS[context_index]
        given, result = f"scale.{_slug(thing)}_given", f"scale.{_slug(thing)}_{_slug(noun)}"
        parameters = [{"name": _slug(thing), "type": "str", "description": f"path of the {thing}", "state": given}]
        earlier = [token for token in produced.get(thing, []) if token != result]
        if earlier and rng.random() < 0.5:
            before = rng.choice(earlier)
            parameters.append({"name": before.split(".", 1)[1], "type": "dict", "description": "an earlier result", "state": before})
        results.setdefault(result, {"token": result, "description": f"A {noun} of the {thing} is available.", "affordances": [f"a {noun} of {thing}"]})
        produced.setdefault(thing, [])
        if result not in produced[thing]:
            produced[thing].append(result)
        definitions.append(
            {
                "name": _slug(f"{verb} {thing} {context}"),
                "description": f"{verb.capitalize()} the {thing} {context}.",
                "affordances": [f"make a {noun} of {thing} {context}"],
                "required_parameters": parameters,
                "return_spec": {"name": "result", "type": "dict", "description": f"the {noun}", "state": result},
                "state_transition": {"requires": sorted(parameter["state"] for parameter in parameters), "produces": [result]},
            }
        )
    used = sorted(produced)
    inputs = [
        {"token": f"scale.{_slug(thing)}_given", "description": f"The {thing} the user has, as a file.", "input": True, "affordances": [f"my {thing}"]}
        for thing in used
    ]
    return {"domain": "scale", "package": "scale_tools", "states": inputs + sorted(results.values(), key=lambda state: state["token"]), "tools": definitions}


def queries_of(count: int, seed: int) -> list[str]:
    """Requests worded unlike the catalog's texts, drawn from the same word lists."""
    rng = random.Random(seed)
    forms = ["I need to {verb} our {thing} {context}", "can you {verb} the {thing}?", "{noun} of my {thing}", "please {verb} these {thing} {context}"]
    made: dict[str, None] = {}
    while len(made) < count:
        (verb, noun), thing, context = rng.choice(VERBS), rng.choice(OBJECTS), rng.choice(CONTEXTS)
        made[rng.choice(forms).format(verb=verb, noun=noun, thing=thing, context=context)] = None
    return list(made)


def percentiles(times_ms: list[float]) -> dict:
    ordered = sorted(times_ms)
    return {"p50_ms": round(statistics.median(ordered), 2), "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))], 2)}


def measure(tools: int, seed: int, queries: int, cold_cache: bool, skip_yaml: bool, directory: Path) -> dict:
    from toolpath.planner import SkillIndex, StateGraph
    from toolpath.planner.search.embedding_cache import EmbeddingCache
    from toolpath.registry import load_checked
    from toolpath.registry.catalog_files import DEFAULT_MAX_CATALOG_BYTES, MAX_CATALOG_BYTES_VARIABLE

    report: dict = {"tools": tools}
    started = time.perf_counter()
    document = generate_catalog(tools, seed)
    report["generate_s"] = round(time.perf_counter() - started, 3)
    paths = {"json": directory / f"scale-{tools}.json", "yaml": directory / f"scale-{tools}.yaml"}
    paths["json"].write_text(json.dumps(document), encoding="utf-8")
    if not skip_yaml:
        dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
        paths["yaml"].write_text(yaml.dump(document, Dumper=dumper, sort_keys=False, default_flow_style=None, width=200), encoding="utf-8")
    else:
        del paths["yaml"]
    del document
    report["file_bytes"] = {form: path.stat().st_size for form, path in paths.items()}
    report["over_default_limit"] = {form: size > DEFAULT_MAX_CATALOG_BYTES for form, size in report["file_bytes"].items()}
    os.environ[MAX_CATALOG_BYTES_VARIABLE] = str(max(DEFAULT_MAX_CATALOG_BYTES, *report["file_bytes"].values()))
    report["load_s"] = {}
    loaded = None
    for form in ("yaml", "json"):  # JSON last: its registry is the one searched
        if form not in paths:
            continue
        started = time.perf_counter()
        loaded = load_checked([paths[form]])
        report["load_s"][form] = round(time.perf_counter() - started, 3)
    assert loaded is not None and len(loaded.registry) == tools, f"loaded {len(loaded.registry)} of {tools} tools"
    graph = StateGraph(loaded.registry, loaded.states)
    cache = EmbeddingCache(directory / "embeddings.db") if cold_cache else None
    started = time.perf_counter()
    SkillIndex(graph, cache=cache)
    report["index_first_s"] = round(time.perf_counter() - started, 3)
    started = time.perf_counter()
    index = SkillIndex(graph, cache=cache)
    report["index_from_cache_s"] = round(time.perf_counter() - started, 3)
    index.load_query_model()
    held = sorted(token for token, state in graph.states.items() if state.input)
    no_held: list[float] = []
    all_held: list[float] = []
    reachable_no_held = 0
    # Each query text is searched once: the index keeps recent query vectors, and a repeated one
    # would skip the embedding. The two kinds alternate, so both see the machine's load alike.
    for number, query in enumerate(queries_of(2 * queries, seed + 1)):
        started = time.perf_counter()
        hits = index.search(query, k=10, held=held if number % 2 else ())
        (all_held if number % 2 else no_held).append((time.perf_counter() - started) * 1000)
        reachable_no_held += 0 if number % 2 else sum(hit.reachable for hit in hits)
    report["search"] = {
        "queries": queries,
        "no_held": percentiles(no_held),
        "inputs_held": percentiles(all_held),
        "no_held_over_held_p50": round(statistics.median(no_held) / statistics.median(all_held), 2),
        "reachable_hits_with_no_held": reachable_no_held,
    }
    if index.dense_index is not None and index.dense_index.approximate:
        report["search"]["dense"] = dense_agreement(index, queries_of(2 * queries, seed + 1))
    return report


def dense_agreement(index, queries: list[str]) -> dict:
    """Recall@10 of the approximate dense search and top-10 agreement of the search's hits, both
    against scoring every text (issue 57)."""
    import numpy as np

    from toolpath.planner.search.dense_index import ExactDenseIndex

    dense = index.dense_index
    exact = ExactDenseIndex(dense.vectors, dense.first_text)
    exact_index = index.with_dense_index(exact)
    vectors = np.asarray(index.embedder(queries), dtype=np.float32)
    recall, agreement = [], []
    for query, vector in zip(queries, vectors / np.linalg.norm(vectors, axis=1, keepdims=True)):
        truth = set(np.argsort(-exact.scores(vector)[0], kind="stable")[:10].tolist())
        found = dense.nearest(vector, 256)
        recall.append(len(truth & set(found.entries[np.argsort(-found.similarity, kind="stable")[:10]].tolist())) / 10)
        expected = {(hit.kind, hit.name) for hit in exact_index.search(query, k=10)}
        agreement.append(len(expected & {(hit.kind, hit.name) for hit in index.search(query, k=10)}) / len(expected))
    return {"queries": len(queries), "recall_at_10": round(statistics.mean(recall), 4), "top10_agreement": round(statistics.mean(agreement), 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tools", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cold-cache", action="store_true", help="embed into a fresh cache file, so index_first_s is always the first embedding")
    parser.add_argument("--skip-yaml", action="store_true", help="write and load JSON only (YAML of 100,000 tools takes minutes and GiBs)")
    args = parser.parse_args()
    report: dict = {"seed": args.seed, "sizes": {}}
    with tempfile.TemporaryDirectory(prefix="toolpath-bench-scale-") as directory:
        for size in args.tools:
            report["sizes"][str(size)] = measure(size, args.seed, args.queries, args.cold_cache, args.skip_yaml, Path(directory))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
