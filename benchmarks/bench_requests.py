"""Requests in words (issue 34): are facts, quotes, connectives and noun phrases read as a person would?

Prints one JSON object. Each case of ``requests_cases.yaml`` (beside this file; its header describes
the fields) is a request as a user would type it, on some of the shipped chemistry and tabular
catalogs and the type-level media catalog of ``catalogs/media/``, with what a careful human planner
would make of it. One :class:`toolpath.planner.Workspace` is opened per combination of catalogs, the
embedding model is loaded beforehand, and each request is planned with ``plan_task(request,
inputs=...)``. A case passes when all three checks pass:

- ``tools``: the set of tools the plan runs equals the expected set (order and repeats aside);
- ``parts``: the plan's parts, in order, are the expected ones: each of the same kind (``action``,
  ``fact`` or ``context``; a part without a ``kind`` attribute is an action) and holding the
  expected piece of text (ignoring case). Every action and fact part must be expected; a context
  part nobody expected is let pass, since it runs nothing;
- ``held``: when the case gives ``held``, the states the plan starts from (``plan.held``) are
  exactly those.

A case whose planning raises fails every check, with the error's message.

The report gives cases and passes per pattern (the seven patterns of issue 34 and the ``control``
cases that planned right before it), the overall figure, planning time per request (p50 / p95, in
ms, search and planning; the model loaded beforehand), and for each failing case what was expected,
what came out (tools, parts as ``[kind, text]``, held) and which checks failed. Exit status 1 when a
case fails.

Usage: python benchmarks/bench_requests.py [--cases FILE] [--case ID ...] [--pattern P ...]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
CASES = HERE / "requests_cases.yaml"

#: The patterns of issue 34, in its order, then the cases that must keep working.
PATTERNS = ("facts", "quotes", "glued", "connectives", "noun-phrases", "direction", "entities", "control")
#: What a part may be: it runs something, states what the user holds, or says when or why.
KINDS = ("action", "fact", "context")
_CASE_ID = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")


def catalog_paths() -> dict[str, Path]:
    """The catalog file of each name a case may use: the shipped catalogs (by directory) and media."""
    from toolpath.catalogs import default_catalog_paths

    return {**{path.parent.name: path for path in default_catalog_paths()}, "media": HERE / "catalogs" / "media" / "catalog.yaml"}


def load_cases(path: Path = CASES) -> list[dict]:
    """The cases of ``path``, each checked for the fields :func:`run_case` reads.

    Returns:
        The cases in file order, as mappings (``inputs`` defaults to ``{}``).

    Raises:
        ValueError: naming the file, the case's line and id and the field: a case that is not a
            mapping, an id that is missing, not kebab-case or used before, an unknown pattern,
            catalog or part kind, an empty request, inputs that are not a mapping, or an
            expectation without tools or parts.
    """
    text = path.read_text(encoding="utf-8")
    document = yaml.compose(text)
    cases = yaml.safe_load(text)
    if document is None or not isinstance(cases, list):
        raise ValueError(f"{path}: the file must be a YAML list of cases")
    known_catalogs = set(catalog_paths())
    seen: set[str] = set()
    for node, case in zip(document.value, cases):
        where = f"{path}:{node.start_mark.line + 1}"

        def refuse(field: str, problem: str, where: str = where, case: Any = case) -> ValueError:
            name = case.get("id") if isinstance(case, dict) else None
            return ValueError(f"{where}: case {name or '(no id)'}: {field}: {problem}")

        if not isinstance(case, dict):
            raise refuse("case", "must be a mapping with id, pattern, catalogs, request and expect")
        case_id = case.get("id")
        if not isinstance(case_id, str) or not _CASE_ID.fullmatch(case_id):
            raise refuse("id", "must be kebab-case (lower-case words joined by '-')")
        if case_id in seen:
            raise refuse("id", "is used by an earlier case; give each case its own")
        seen.add(case_id)
        if case.get("pattern") not in PATTERNS:
            raise refuse("pattern", f"must be one of {', '.join(PATTERNS)}")
        catalogs = case.get("catalogs")
        if not isinstance(catalogs, list) or not catalogs or not set(catalogs) <= known_catalogs:
            raise refuse("catalogs", f"must be a non-empty list of {', '.join(sorted(known_catalogs))}")
        if not isinstance(case.get("request"), str) or not case["request"].strip():
            raise refuse("request", "must be a non-empty text")
        case["inputs"] = case.get("inputs") or {}
        if not isinstance(case["inputs"], dict):
            raise refuse("inputs", "must be a mapping of input names to values")
        expect = case.get("expect")
        if not isinstance(expect, dict) or not isinstance(expect.get("tools"), list) or not expect["tools"]:
            raise refuse("expect.tools", "must be a non-empty list of tool names")
        parts = expect.get("parts")
        if not isinstance(parts, list) or not parts:
            raise refuse("expect.parts", "must be a non-empty list of {kind, has}")
        for number, part in enumerate(parts, 1):
            if not isinstance(part, dict) or part.get("kind") not in KINDS or not isinstance(part.get("has"), str) or not part["has"]:
                raise refuse(f"expect.parts[{number}]", f"must be {{kind: {' | '.join(KINDS)}, has: TEXT}}")
        if "held" in expect and not (isinstance(expect["held"], list) and all(isinstance(token, str) for token in expect["held"])):
            raise refuse("expect.held", "must be a list of state tokens")
    return cases


def parts_agree(expected: Sequence[dict], parts: Sequence[Sequence[str]]) -> bool:
    """Whether the planned ``parts`` (``[kind, text]`` in order) are the ``expected`` ones: each
    expected part in turn is a planned part of its kind whose text holds its ``has`` (ignoring
    case), and every other planned part is context. So two actions glued into one part, a fact
    planned as an action, or an action lost all disagree; a greeting kept as context does not."""
    waiting = list(expected)
    for kind, text in parts:
        if waiting and kind == waiting[0]["kind"] and waiting[0]["has"].casefold() in text.casefold():
            waiting.pop(0)
        elif kind != "context":
            return False
    return not waiting


def outcome(task_plan: Any) -> dict[str, Any]:
    """What a task plan came to: ``tools`` (in plan order, with repeats), ``parts`` (``[kind, text]``)
    and ``held`` (sorted state tokens)."""
    return {
        "tools": [step.tool.name for step in task_plan.plan.steps],
        "parts": [[part.kind, part.text] for part in task_plan.parts],
        "held": sorted(task_plan.plan.held),
    }


def failed_checks(case: dict, came: dict[str, Any]) -> list[str]:
    """The checks ``came`` (:func:`outcome`) fails for ``case``: ``tools``, ``parts``, ``held``."""
    expect = case["expect"]
    failed = []
    if set(came["tools"]) != set(expect["tools"]):
        failed.append("tools")
    if not parts_agree(expect["parts"], came["parts"]):
        failed.append("parts")
    if "held" in expect and set(came["held"]) != set(expect["held"]):
        failed.append("held")
    return failed


def run_case(workspace: Any, case: dict) -> tuple[dict[str, Any], float]:
    """Plan one case: its result (``id``, ``pattern``, ``passed``, and when it failed ``failed``,
    ``expected`` and ``came`` or ``error``) and the planning time in seconds."""
    started = time.perf_counter()
    try:
        task_plan = workspace.plan_task(case["request"], inputs=case["inputs"])
    except Exception as error:  # a request the planner cannot serve is a failed case, not a failed run
        seconds = time.perf_counter() - started
        failed = ["tools", "parts", *(["held"] if "held" in case["expect"] else [])]  # nothing came out
        error_text = f"{type(error).__name__}: {error}"
        return {"id": case["id"], "pattern": case["pattern"], "passed": False, "failed": failed, "expected": case["expect"], "error": error_text}, seconds
    seconds = time.perf_counter() - started
    came = outcome(task_plan)
    failed = failed_checks(case, came)
    result: dict[str, Any] = {"id": case["id"], "pattern": case["pattern"], "passed": not failed}
    if failed:
        result.update(failed=failed, expected=case["expect"], came=came)
    return result, seconds


def run(cases: Sequence[dict]) -> dict[str, Any]:
    """Plan every case, one workspace per combination of catalogs; the report (see the module docstring)."""
    from toolpath.planner import Workspace

    paths = catalog_paths()
    results, timings = [], []
    for catalogs in dict.fromkeys(tuple(sorted(case["catalogs"])) for case in cases):
        workspace = Workspace.open([paths[name] for name in catalogs])
        workspace.search("warm up the embedding model", k=1)
        for case in cases:
            if tuple(sorted(case["catalogs"])) == catalogs:
                result, seconds = run_case(workspace, case)
                results.append(result)
                timings.append(seconds)
    by_id = {result["id"]: result for result in results}
    ordered = [by_id[case["id"]] for case in cases]
    timings.sort()
    return {
        "python": sys.version.split()[0],
        "patterns": {
            pattern: {
                "cases": sum(result["pattern"] == pattern for result in ordered),
                "passed": sum(result["pattern"] == pattern and result["passed"] for result in ordered),
            }
            for pattern in PATTERNS
            if any(result["pattern"] == pattern for result in ordered)
        },
        "passed": sum(result["passed"] for result in ordered),
        "total": len(ordered),
        "plan_ms": {
            "p50": round(statistics.median(timings) * 1000, 1),
            "p95": round(timings[min(len(timings) - 1, int(0.95 * len(timings)))] * 1000, 1),
        },
        "failures": [{key: value for key, value in result.items() if key not in ("passed",)} for result in ordered if not result["passed"]],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=Path, default=CASES, help="the cases file (default: requests_cases.yaml beside this script)")
    parser.add_argument("--case", action="append", default=[], metavar="ID", help="run only this case; repeatable")
    parser.add_argument("--pattern", action="append", default=[], choices=PATTERNS, help="run only the cases of this pattern; repeatable")
    options = parser.parse_args(argv)
    cases = load_cases(options.cases)
    unknown = sorted(set(options.case) - {case["id"] for case in cases})
    if unknown:
        parser.error(f"no case with id {', '.join(unknown)}")
    cases = [case for case in cases if (not options.case or case["id"] in options.case) and (not options.pattern or case["pattern"] in options.pattern)]
    if not cases:
        parser.error("no case has that id and pattern")
    report = run(cases)
    print(json.dumps(report, indent=2, ensure_ascii=False))
    return 0 if report["passed"] == report["total"] else 1


if __name__ == "__main__":
    # Measuring is not use: nothing a benchmark plans goes into the user's record of use.
    os.environ.setdefault("TOOLPATH_RECORD", "off")
    sys.exit(main())
