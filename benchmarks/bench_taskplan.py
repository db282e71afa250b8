"""Planning tasks with several parts, against gold tool chains (RestBench TMDB and UltraTool).

Prints one JSON object. For each data set of ``../shared/data/taskplan/`` (see its README), with the
catalogs of :mod:`taskplan_catalogs`, in one run, three planners:

- ``single_goal``: the whole request as one part (what ``plan_task`` did before tasks had parts);
- ``request``: the new planner on the raw request (split into parts, matched, planned jointly);
- ``steps``: the new planner given the gold ``task_steps`` as the agent's steps (the "Step N"
  numbering removed);
- ``request_learned``: ``request`` again, with the catalog and the overlay ``toolpath learn`` writes
  from the training examples (:mod:`taskplan_training`: UltraTool's requests outside the test ids;
  for TMDB only our own development requests, ``tmdb_dev_requests.jsonl``), opened as
  ``Workspace.open([catalog, overlay])`` and scored on the test ids only; the learner's report
  (thresholds of the prerequisite habits and their validation figures) is kept beside.

``tmdb_drafted`` is TMDB again with the catalog ``toolpath catalog draft --openapi`` drafts from
``tmdb_oas.json`` (issue 54; see :mod:`taskplan_catalogs`), on the same requests, beside ``tmdb``;
``tmdb_reviewed`` is that draft with a catalog author's reviewed edits (``tmdb_reviewed_edits.yaml``),
reported apart.

For TMDB the ``request`` planner is also scored on our development requests (``dev_requests``): a
figure to develop against without looking at the test ids.

Metrics, averaged per request as in the data's README: node precision / recall / F1 between the
plan's tools and ``task_nodes``; link F1 between the plan's consecutive pairs and ``task_links``
(also on each tool's first call only, and in each gold graph's own convention for repeated
tools, see :func:`scores`);
exact-set match of the tool sets; and planning time per request (p50 / p95, search and planning,
the embedding model loaded beforehand). A request whose planning raises counts as an empty plan.
Figures are given on all requests and on the paper's test ids (``split_ids.json``) separately.
Nothing is tuned on the test ids.

Targets (issue 14): from steps, node F1 ≥ 0.90 (TMDB) and ≥ 0.85 (UltraTool); from the raw request,
≥ 0.80 and ≥ 0.70. Issue 29 (data flow): from steps, link F1 ≥ 0.90 (TMDB) and ≥ 0.98 (UltraTool),
node F1 not lower; from raw requests, link F1 reported beside.

``--tune`` instead grid-searches ``toolpath.planner.tasks.matching.FRAGMENT_MIN_SCORE`` for the raw requests on
development requests only (UltraTool's requests outside the test ids; for TMDB our own development
requests), and prints node F1 per value.

Usage: python benchmarks/bench_taskplan.py [--data ../shared/data/taskplan] [--limit N] [--sets tmdb tmdb_drafted tmdb_reviewed ultratool] [--learned-only] [--tune]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from taskplan_catalogs import DEFAULT_DATA, write_catalogs  # noqa: E402
from taskplan_training import TMDB_DEV_REQUESTS, as_taskplan_request, training_examples  # noqa: E402

from toolpath.planner import Workspace, learn  # noqa: E402
from toolpath.planner.learning.examples import LabelledExample, read_examples  # noqa: E402
from toolpath.planner.tasks import matching as matching_module  # noqa: E402

#: Values of ``FRAGMENT_MIN_SCORE`` tried by ``--tune``.
FRAGMENT_GRID = (0.35, 0.45, 0.55, 0.6, 0.65, 0.7, 0.8)

_STEP_NUMBER = re.compile(r"^\s*step\s*\d+\s*[:.)-]?\s*", flags=re.IGNORECASE)


#: Catalog variants scored on another set's requests.
REQUESTS_OF = {"tmdb_drafted": "tmdb", "tmdb_reviewed": "tmdb"}


def load_requests(data: Path, name: str) -> tuple[list[dict], set]:
    name = REQUESTS_OF.get(name, name)
    requests = [json.loads(line) for line in (data / name / "data.json").read_text().splitlines() if line.strip()]
    split = json.loads((data / name / "split_ids.json").read_text())["test_ids"]
    test_ids = {str(identifier) for identifier in (split["chain"] if isinstance(split, dict) else split)}
    return requests, test_ids


def _link_f1(predicted: list[str], gold_links: set[tuple[str, str]]) -> float:
    links = set(zip(predicted, predicted[1:]))
    if not gold_links and not links:
        return 1.0  # one gold tool, one planned tool: no link to get wrong
    precision = len(links & gold_links) / len(links) if links else 0.0
    recall = len(links & gold_links) / len(gold_links) if gold_links else 0.0
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


def scores(predicted: list[str], request: dict) -> dict[str, float]:
    """Node precision / recall / F1, link F1 and exact-set match of one plan against the gold chain.

    ``link_f1`` takes the plan's calls as they are: a tool the request asks for twice is called
    twice. ``link_f1_first_calls`` keeps each tool's first call only, which is how most gold graphs
    list a tool asked for twice (once). The annotators do both: of UltraTool's 3,527 requests, 345
    have more steps than distinct tools and 39 gold graphs list a repeated tool per call, with
    self-links such as ``postal_code_search → postal_code_search`` (TMDB: 4 and 1 of 100).
    ``link_f1_as_gold_lists`` scores each request in its own gold graph's convention: all calls when
    the gold lists some tool more than once, first calls otherwise. All three are reported.
    """
    gold_tools = [node["task"] for node in request["task_nodes"]]
    gold_nodes = set(gold_tools)
    gold_links = {(link["source"], link["target"]) for link in request["task_links"]}
    first_calls = list(dict.fromkeys(predicted))
    nodes = set(predicted)
    precision = len(nodes & gold_nodes) / len(nodes) if nodes else 0.0
    recall = len(nodes & gold_nodes) / len(gold_nodes) if gold_nodes else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "node_precision": precision,
        "node_recall": recall,
        "node_f1": f1,
        "link_f1": _link_f1(predicted, gold_links),
        "link_f1_first_calls": _link_f1(first_calls, gold_links),
        "link_f1_as_gold_lists": _link_f1(predicted if len(gold_tools) > len(gold_nodes) else first_calls, gold_links),
        "exact_set": float(nodes == gold_nodes),
    }


def planned_tools(workspace: Workspace, task: str | list[str]) -> list[str]:
    try:
        return [step.tool.name for step in workspace.plan_task(task).plan.steps]
    except Exception:  # a request the planner cannot serve is an empty plan, scored as such
        return []


def summarise(rows: list[dict[str, float]]) -> dict[str, float]:
    return {key: round(statistics.fmean(row[key] for row in rows), 4) for key in rows[0]} if rows else {}


VARIANTS = {
    "single_goal": lambda request: [request["user_request"].strip()],
    "request": lambda request: request["user_request"].strip(),
    "steps": lambda request: [_STEP_NUMBER.sub("", step) for step in request["task_steps"]],
}


def run_set(workspace: Workspace, requests: list[dict], test_ids: set, variants: tuple[str, ...] = tuple(VARIANTS)) -> dict:
    report = {}
    for variant in variants:
        task_of = VARIANTS[variant]
        rows, test_rows, timings = [], [], []
        for request in requests:
            started = time.perf_counter()
            tools = planned_tools(workspace, task_of(request))
            timings.append(time.perf_counter() - started)
            row = scores(tools, request)
            rows.append(row)
            if str(request["id"]) in test_ids:
                test_rows.append(row)
        ordered = sorted(timings)
        report[variant] = {
            "all": {"n": len(rows), **summarise(rows)},
            "test_ids": {"n": len(test_rows), **summarise(test_rows)},
            "plan_ms": {"p50": round(statistics.median(ordered) * 1000, 2), "p95": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))] * 1000, 2)},
        }
    return report


@contextlib.contextmanager
def fragment_min_score(value: float):
    previous, matching_module.FRAGMENT_MIN_SCORE = matching_module.FRAGMENT_MIN_SCORE, value
    try:
        yield
    finally:
        matching_module.FRAGMENT_MIN_SCORE = previous


def tune(data: Path, sets: list[str], limit: int | None) -> dict:
    """Node F1 of the raw-request planner per ``FRAGMENT_MIN_SCORE``, on requests outside the test ids."""
    results: dict = {}
    with tempfile.TemporaryDirectory(prefix="toolpath-taskplan-") as directory:
        catalogs = write_catalogs(Path(directory), data)
        for name in sets:
            requests, test_ids = load_requests(data, name)
            dev = development_requests(name, requests, test_ids)[:limit]
            workspace = Workspace.open([catalogs[name]])
            results[name] = {"dev_requests": len(dev)}
            for value in FRAGMENT_GRID:
                with fragment_min_score(value):
                    rows = [scores(planned_tools(workspace, request["user_request"].strip()), request) for request in dev]
                results[name][str(value)] = summarise(rows)
    return results


def development_requests(name: str, requests: list[dict], test_ids: set) -> list[dict]:
    """Requests to develop against: for TMDB our own (``tmdb_dev_requests.jsonl``), else those outside the test ids."""
    if REQUESTS_OF.get(name, name) == "tmdb":
        return [as_taskplan_request(example) for example in read_examples(TMDB_DEV_REQUESTS)]
    return [request for request in requests if str(request["id"]) not in test_ids]


def learned_workspace(catalog: Path, examples: list[LabelledExample], directory: Path) -> tuple[Workspace, dict]:
    """The workspace of ``catalog`` and the overlay :func:`toolpath.planner.learn` writes from
    ``examples`` (the product's learning, as ``toolpath learn`` runs it), and the learner's report."""
    overlay = directory / f"{catalog.name.removesuffix('.catalog.json')}.overlay.yaml"
    report = learn([catalog], examples, overlay)
    return Workspace.open([catalog, overlay]), report.to_dict()


def main(data: Path, sets: list[str], limit: int | None, learned_only: bool = False) -> dict:
    results: dict = {
        "python": sys.version.split()[0],
        "targets_node_f1": {
            "tmdb": {"steps": 0.90, "request": 0.80, "request_learned": 0.50},
            "tmdb_drafted": {"steps": 0.95, "request": 0.55, "request_learned": 0.50},
            "tmdb_reviewed": {"steps": 0.95, "request": 0.55, "request_learned": 0.50},
            "ultratool": {"steps": 0.85, "request": 0.70, "request_learned": 0.65},
        },
        "targets_link_f1": {"tmdb": {"steps": 0.90}, "tmdb_drafted": {"steps": 0.90}, "tmdb_reviewed": {"steps": 0.90}, "ultratool": {"steps": 0.98}},
    }
    with tempfile.TemporaryDirectory(prefix="toolpath-taskplan-") as directory:
        catalogs = write_catalogs(Path(directory), data)
        for name in sets:
            requests, test_ids = load_requests(data, name)
            training = training_examples(REQUESTS_OF.get(name, name), requests, test_ids, data)
            requests = requests[:limit] if limit else requests
            results[name] = {"requests": len(requests)}
            if not learned_only:
                workspace = Workspace.open([catalogs[name]])
                workspace.search("warm up the embedding model", k=1)
                results[name].update(run_set(workspace, requests, test_ids))
                if REQUESTS_OF.get(name, name) == "tmdb":
                    dev = development_requests(name, requests, test_ids)
                    results[name]["dev_requests"] = run_set(workspace, dev, set(), ("request",))["request"]["all"]
            # What the training examples teach, learned as the product learns it, scored on the
            # test ids only: the other requests (for TMDB, our own) taught it.
            tests = [request for request in requests if str(request["id"]) in test_ids]
            workspace, learn_report = learned_workspace(catalogs[name], training, Path(directory))
            report = run_set(workspace, tests, test_ids, ("request",))["request"]
            results[name]["request_learned"] = {
                "training_examples": len(training),
                "test_ids": report["test_ids"],
                "plan_ms": report["plan_ms"],
                "learn": learn_report,
            }
    return results


if __name__ == "__main__":
    # Measuring is not use: nothing a benchmark plans goes into the user's record of use.
    os.environ.setdefault("TOOLPATH_RECORD", "off")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--sets", nargs="+", default=["tmdb", "ultratool"], choices=["tmdb", "tmdb_drafted", "tmdb_reviewed", "ultratool"])
    parser.add_argument("--limit", type=int, default=None, help="only the first N requests of each set (for a quick look)")
    parser.add_argument("--learned-only", action="store_true", help="only request_learned: learn the overlays and score the test ids with them")
    parser.add_argument("--tune", action="store_true", help="grid-search FRAGMENT_MIN_SCORE on the requests outside the test ids")
    options = parser.parse_args()
    if options.tune:
        print(json.dumps(tune(options.data, options.sets, options.limit), indent=2))
    else:
        print(json.dumps(main(options.data, options.sets, options.limit, options.learned_only), indent=2))
