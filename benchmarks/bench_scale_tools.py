"""Catalogs of 1,000 to 100,000 tools: load, index, search, plan and serve (issue 57).

Prints one JSON object. For each ``--tools`` size (default 1,000 and 10,000) a seeded generator
(:func:`generate_catalog`) writes one catalog as compact JSON and as YAML into a temporary directory
(deleted afterwards). Every measurement runs in a child process of its own, one after another, so
each peak memory is its own and only one process holds a large catalog at a time:

* ``file_bytes``: each file's size (the default size limit is 16 MiB: ``TOOLPATH_MAX_CATALOG_BYTES``);
  it is raised here for the files that need it, as a user would;
* ``load``: :func:`toolpath.registry.load_checked` of each file (as the CLI loads catalogs) in a
  fresh process: ``seconds`` (the call alone: parsing, validating and, from 1 MiB, storing the
  catalog snapshot), ``peak_rss_mib`` (that process's peak resident
  memory, Linux's VmHWM, interpreter and imports included; ``baseline_rss_mib`` just before the call) and
  ``held_rss_mib`` (RSS after the call, what the loaded catalog keeps); ``yaml_parser`` says
  whether libyaml (PyYAML's C parser) or the pure-Python one read the YAML; ``again``: the same in
  a second fresh process, which reads the snapshot (``from_snapshot``:
  :mod:`toolpath.registry.catalog_snapshot`);
* ``index_first_s``: the skill index made once: embedding every text not yet in the embedding
  cache of ``TOOLPATH_HOME`` (about 90 s at 10,000 tools on a 2-core machine when the cache is
  cold) and storing the index, or loading it when it was stored before (``--cold-cache`` uses a
  fresh cache file and store beside it, so this figure is always the first embedding);
  ``index_again_s``: made again, as each new process makes it (loaded from the stored index when
  ``index_stored``);
  ``rss_mib``: the process's RSS after each stage (``loaded``, ``graph``, ``index``, ``searched``)
  and ``dense_vectors_mib``, the share of the index's dense vectors;
* ``search``: ``--queries`` queries (default 100, worded unlike the catalog) searched for the 10 best
  hits with no held states (the CLI's and MCP's default: most hits need an input and are
  unreachable, and each says why), and as many others with every input state held, alternating;
  p50/p95 in ms, the query embedding included. ``no_held_over_held_p50`` compares the two in this run;
* ``dense`` (when the index is approximate: from 100,000 texts, about 30,000 tools): over the same
  queries, ``recall_at_10`` of the dense search (the exact top 10 entries by best cosine found among
  the approximate index's candidates) and ``top10_agreement`` (the share of the exact search's 10
  hits the search returns); ``benchmarks/bench_dense_index.py`` has more;
* ``plan``: ``--plan-goals`` goals of one result state and as many of 2-3 (default 100; 0: skip),
  planned from every input state held, *cold* as ``benchmarks/bench_plan.py`` plans them (the
  planner's bounds cleared before each goal) and then *warm* (bounds kept), within the planner's
  default time budget: p50/p95 in ms and the share of cold plans proven optimal. Targets at
  100,000 tools: p50 <= 20 ms (one state), <= 40 ms (2-3 states), >= 98 % proven;
* ``fresh_process`` (``--fresh-runs N``, default 3; 0: skip): wall time of a new process running
  ``toolpath search QUERY --catalog FILE`` and ``toolpath plan --goal R --have G --catalog FILE``,
  each run next to ``python -c "import torch"`` (the same interpreter), in turns; the medians, and
  each as a ratio to the torch import (targets: search <= 0.35x at 10,000 tools, <= 0.5x at
  100,000; plan <= 0.3x at 100,000). One search runs first, untimed (``first_search_s``: it embeds
  what the cache lacks). ``search_peak_rss_mib``: the peak RSS of a ``toolpath search`` process,
  which loads the catalog, builds the index and searches once (``ru_maxrss`` of the child, from
  ``os.wait4``; the catalog is written by a child too, so this process stays smaller than any
  it measures); target <= 1.5 GB at 100,000 tools;
* ``serve`` (``--serve``; off by default): ``toolpath serve --catalog FILE`` over stdio, as an MCP
  client starts it: ``tools_list_s``, seconds from starting the process to the first answered
  ``tools/list``; ``first_search_s``, to the first answered ``search_skills`` (the server builds
  the index as it starts, and a search waits for that build; the client's own first-result work,
  importing jsonschema, is done before the clock starts); then ``--serve-calls`` searches
  (default 50, each a new query): the round trip's p50/p95 in ms (target at 10,000 tools: p50 <= 30 ms).

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
       [--plan-goals 100] [--fresh-runs 3] [--serve] [--serve-calls 50]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent

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


def _rss_mib() -> float:
    """This process's resident memory now, in MiB (Linux)."""
    with open("/proc/self/status", encoding="ascii") as status:
        kib = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    return round(kib / 1024, 1)


def _peak_rss_mib() -> float:
    """This process's peak resident memory, in MiB (Linux's VmHWM: unlike ``ru_maxrss``, it does not
    start from the memory of the process that started this one)."""
    with open("/proc/self/status", encoding="ascii") as status:
        kib = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    return round(kib / 1024, 1)


def worker_generate(tools: int, seed: int, directory: str, skip_yaml: bool) -> dict:
    """Write the catalog as JSON (and YAML): in a process of its own, so that the one measuring
    stays small (a child's ``ru_maxrss`` starts from its parent's memory, which ``os.wait4`` reports)."""
    started = time.perf_counter()
    document = generate_catalog(tools, seed)
    report: dict = {"generate_s": round(time.perf_counter() - started, 3), "paths": {"json": str(Path(directory) / f"scale-{tools}.json")}}
    Path(report["paths"]["json"]).write_text(json.dumps(document), encoding="utf-8")
    if not skip_yaml:
        report["paths"]["yaml"] = str(Path(directory) / f"scale-{tools}.yaml")
        dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
        Path(report["paths"]["yaml"]).write_text(yaml.dump(document, Dumper=dumper, sort_keys=False, default_flow_style=None, width=200), encoding="utf-8")
    # For `toolpath plan`: a goal one tool reaches from its input (a tool whose only parameter carries the input).
    tool = next(tool for tool in document["tools"] if len(tool["required_parameters"]) == 1)
    report["goal"], report["given"] = tool["return_spec"]["state"], tool["required_parameters"][0]["state"]
    return report


def _child(*arguments: str) -> dict:
    """Run this script as ``--worker ARGUMENTS`` in a new process; its report (the last line it prints)."""
    done = subprocess.run([sys.executable, __file__, "--worker", *arguments], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"worker {arguments[0]} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def worker_load(path: str) -> dict:
    """``load_checked`` of one file, in this (fresh) process."""
    from toolpath.registry import load_checked
    from toolpath.registry.catalog_yaml import yaml_parser

    baseline = _peak_rss_mib()
    started = time.perf_counter()
    loaded = load_checked([path])
    seconds = time.perf_counter() - started
    report = {
        "seconds": round(seconds, 3),
        "baseline_rss_mib": baseline,
        "peak_rss_mib": _peak_rss_mib(),
        "held_rss_mib": _rss_mib(),
        "tools": len(loaded.registry),
        "from_snapshot": type(loaded.registry).__name__ == "StoredToolRegistry",
    }
    if not path.endswith(".json"):
        report["yaml_parser"] = yaml_parser()
    return report


def worker_in_process(path: str, seed: int, queries: int, cold_cache: bool, plan_goals: int, directory: str) -> dict:
    """Index, search and plan over the JSON catalog at ``path``, in this process."""
    from toolpath.planner import SkillIndex, StateGraph, plan
    from toolpath.planner.search.embedding_cache import EmbeddingCache
    from toolpath.registry import load_checked

    report: dict = {"rss_mib": {}}
    loaded = load_checked([path])
    report["rss_mib"]["loaded"] = _rss_mib()
    graph = StateGraph(loaded.registry, loaded.states)
    task = graph.delete_free_task
    report["rss_mib"]["graph"] = _rss_mib()
    cache = EmbeddingCache(Path(directory) / "embeddings.db") if cold_cache else None
    started = time.perf_counter()
    SkillIndex(graph, cache=cache)
    report["index_first_s"] = round(time.perf_counter() - started, 3)
    started = time.perf_counter()
    index = SkillIndex(graph, cache=cache)
    report["index_again_s"] = round(time.perf_counter() - started, 3)
    report["index_stored"] = getattr(index, "stored", None) is not None
    report["rss_mib"]["index"] = _rss_mib()
    vectors = getattr(index, "_vectors", None)  # the dense vectors' share, where the index keeps them in memory
    report["dense_vectors_mib"] = round(vectors.nbytes / 2**20, 1) if hasattr(vectors, "nbytes") else None
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
    report["rss_mib"]["searched"] = _rss_mib()
    report["peak_rss_mib"] = _peak_rss_mib()
    report["search"] = {
        "queries": queries,
        "no_held": percentiles(no_held),
        "inputs_held": percentiles(all_held),
        "no_held_over_held_p50": round(statistics.median(no_held) / statistics.median(all_held), 2),
        "reachable_hits_with_no_held": reachable_no_held,
    }
    if index.dense_index is not None and index.dense_index.approximate:
        report["search"]["dense"] = dense_agreement(index, queries_of(2 * queries, seed + 1))
    if plan_goals > 0:
        rng = random.Random(seed + 2)
        results = sorted({token for tool in loaded.registry for token in tool.state_transition.produces})
        report["plan"] = {"held": len(held)}
        for kind, sizes in (("single_state_goals", (1, 1)), ("multi_state_goals", (2, 3))):
            cold, warm, proven = [], [], 0
            for _ in range(plan_goals):
                goal = rng.sample(results, rng.randint(*sizes))
                task.clear_cache()  # cold, as bench_plan measures: the bounds from the held states computed anew
                started = time.perf_counter()
                found = plan(graph, goal, held)
                cold.append((time.perf_counter() - started) * 1000)
                proven += found.optimal
                started = time.perf_counter()
                plan(graph, goal, held)  # warm: the bounds kept, as for an agent's next goal from the same states
                warm.append((time.perf_counter() - started) * 1000)
            report["plan"][kind] = {
                "goals": plan_goals,
                "cold": percentiles(cold),
                "warm": percentiles(warm),
                "proven_optimal_share": round(proven / plan_goals, 3),
            }
    return report


def _timed_run(command: list[str], environment: dict) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of ``command``, which must succeed."""
    started = time.perf_counter()
    process = subprocess.Popen(command, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    error = process.stderr.read().decode(errors="replace") if process.stderr else ""
    if process.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:4])}... failed ({process.returncode}):\n{error[-3000:]}")
    return seconds, round(usage.ru_maxrss / 1024, 1)


def fresh_process(path: Path, goal: str, given: str, seed: int, runs: int, environment: dict) -> dict:
    """New processes searching and planning over the catalog, next to importing torch (see the module doc)."""
    cli = [sys.executable, "-m", "toolpath.planner.interfaces.cli"]
    query = queries_of(1, seed + 3)[0]
    commands = {
        "search": [*cli, "search", query, "--catalog", str(path), "--json"],
        "plan": [*cli, "plan", "--goal", goal, "--have", given, "--catalog", str(path), "--json"],
    }
    report: dict = {"runs": runs, "query": query, "goal": goal}
    report["first_search_s"] = round(_timed_run(commands["search"], environment)[0], 2)
    torch_available = subprocess.run([sys.executable, "-c", "import torch"], env=environment, capture_output=True, check=False).returncode == 0
    seconds: dict[str, list[float]] = {"import_torch": [], "search": [], "plan": []}
    peaks: list[float] = []
    for _ in range(runs):
        if torch_available:
            seconds["import_torch"].append(_timed_run([sys.executable, "-c", "import torch"], environment)[0])
        elapsed, peak = _timed_run(commands["search"], environment)
        seconds["search"].append(elapsed)
        peaks.append(peak)
        seconds["plan"].append(_timed_run(commands["plan"], environment)[0])
    report.update({f"{name}_s": round(statistics.median(values), 2) for name, values in seconds.items() if values})
    report["search_peak_rss_mib"] = max(peaks)
    if torch_available:
        report["search_over_import_torch"] = round(report["search_s"] / report["import_torch_s"], 2)
        report["plan_over_import_torch"] = round(report["plan_s"] / report["import_torch_s"], 2)
    else:
        report["import_torch"] = "skipped: torch is not installed in this interpreter"
    return report


def serve(path: Path, seed: int, calls: int, environment: dict) -> dict:
    """Start-up and search round trips of ``toolpath serve`` over stdio (see the module doc)."""
    import asyncio

    # The client checks each result against its tool's outputSchema with jsonschema, which it
    # imports on the first result (1.4 s here): imported now, so first_search_s times the server.
    import jsonschema.validators  # noqa: F401
    from mcp import Client, StdioServerParameters

    parameters = StdioServerParameters(
        command=sys.executable, args=["-m", "toolpath.planner.interfaces.cli", "serve", "--catalog", str(path)], env=environment, cwd=str(ROOT)
    )
    queries = iter(queries_of(calls + 4, seed + 4))

    async def run() -> dict:
        started = time.perf_counter()
        async with Client(parameters) as client:
            await client.list_tools()
            report = {"tools_list_s": round(time.perf_counter() - started, 2)}
            first = await client.call_tool("search_skills", {"query": next(queries), "k": 10})
            assert not first.is_error, first.content[0].text
            report["first_search_s"] = round(time.perf_counter() - started, 2)
            for _ in range(3):  # warm-up: the query model's first calls
                await client.call_tool("search_skills", {"query": next(queries), "k": 10})
            times = []
            for _ in range(calls):
                sent = time.perf_counter()
                result = await client.call_tool("search_skills", {"query": next(queries), "k": 10})
                times.append((time.perf_counter() - sent) * 1000)
                assert not result.is_error, result.content[0].text
            report["search_round_trip"] = {"calls": calls, **percentiles(times)}
            return report

    return asyncio.run(run())


def measure(tools: int, args: argparse.Namespace, directory: Path) -> dict:
    from toolpath.registry.catalog_files import DEFAULT_MAX_CATALOG_BYTES, MAX_CATALOG_BYTES_VARIABLE

    report: dict = {"tools": tools}
    generated = _child("generate", str(tools), str(args.seed), str(directory), str(int(args.skip_yaml)))
    report["generate_s"] = generated["generate_s"]
    paths = {form: Path(path) for form, path in generated["paths"].items()}
    goal, given = generated["goal"], generated["given"]
    report["file_bytes"] = {form: path.stat().st_size for form, path in paths.items()}
    report["over_default_limit"] = {form: size > DEFAULT_MAX_CATALOG_BYTES for form, size in report["file_bytes"].items()}
    limit = max(DEFAULT_MAX_CATALOG_BYTES, *report["file_bytes"].values())
    os.environ[MAX_CATALOG_BYTES_VARIABLE] = str(limit)  # the children inherit it
    report["load"] = {form: {**_child("load", str(path)), "again": _child("load", str(path))} for form, path in paths.items()}
    in_process = _child("in-process", str(paths["json"]), str(args.seed), str(args.queries), str(int(args.cold_cache)), str(args.plan_goals), str(directory))
    assert report["load"]["json"]["tools"] == tools, f"loaded {report['load']['json']['tools']} of {tools} tools"
    report.update(in_process)
    if args.fresh_runs > 0:
        report["fresh_process"] = fresh_process(paths["json"], goal, given, args.seed, args.fresh_runs, dict(os.environ))
    if args.serve:
        report["serve"] = serve(paths["json"], args.seed, args.serve_calls, dict(os.environ))
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
    parser.add_argument("--skip-yaml", action="store_true", help="write and load JSON only")
    parser.add_argument("--plan-goals", type=int, default=100, help="goals of one state, and as many of 2-3 states, planned in process (0: none)")
    parser.add_argument("--fresh-runs", type=int, default=3, help="timed runs of a new `toolpath search` and `toolpath plan` process each (0: none)")
    parser.add_argument("--serve", action="store_true", help="also measure `toolpath serve` over stdio: start-up and search round trips")
    parser.add_argument("--serve-calls", type=int, default=50)
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        kind, *rest = args.worker
        if kind == "generate":
            result = worker_generate(int(rest[0]), int(rest[1]), rest[2], rest[3] == "1")
        elif kind == "load":
            result = worker_load(rest[0])
        else:
            path, seed, queries, cold_cache, plan_goals, directory = rest
            result = worker_in_process(path, int(seed), int(queries), cold_cache == "1", int(plan_goals), directory)
        print(json.dumps(result))
        return
    report: dict = {"seed": args.seed, "python": sys.version.split()[0], "sizes": {}}
    with tempfile.TemporaryDirectory(prefix="toolpath-bench-scale-") as directory:
        for size in args.tools:
            report["sizes"][str(size)] = measure(size, args, Path(directory))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
