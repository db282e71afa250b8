"""Data flow of planned cells: does every argument of every planned step get the source it should?

Each case of ``dataflow_cases.yaml`` (beside this file) is a task as a user would give it — words or a
list of step texts, with inputs — and the plan it must get: every step's tool and the source of
EVERY argument of every step, written as :attr:`toolpath.planner.tasks.cell.ArgumentSource.label` (``step 1``,
``held molecule``, ``input path``, ``input write_report.path``, ``default``,
``unbound``; ``TaskPlan.to_dict()["wiring"]`` must say the same). The case is then run for real in
a fresh kernel (or, with ``before:``, in an agent session whose earlier tasks ran first) in a
temporary directory, and the runner checks the cell's
status, that the ``unchanged`` files (the user's data) have the same SHA-256 afterwards, that the
``created`` files exist, and any ``result_contains`` / ``contains`` text. A case with ``refused:
NAME`` passes when planning raises an exception of that class (e.g. ``InputError``).

Case fields (only ``name``, ``task`` and ``steps`` or ``refused`` are required)::

    - name: report-does-not-overwrite-the-csv
      catalogs: shipped            # shipped (chemistry + tabular) or textflow (benchmarks/textflow)
      task: load the table and write a report     # or a YAML list of step texts
      inputs: {path: "{data}/compounds.csv"}     # {data}: this case's copy of the sample data
      held: []                     # held states passed to plan_task
      before: []                   # earlier turns in the same session: {task, inputs} or {code}
      steps:
        - tool: tabular.load_table
          arguments: {path: input path}
        - tool: tabular.write_report
          arguments: {table: step 1, path: default, title: default}
      unchanged: ["{data}/compounds.csv"]
      created: [report.md]         # relative to the case's working directory
      contains: {report.md: "20 rows"}           # file -> text it must contain
      result_contains: ["..."]     # text the cell's result (or stdout) must contain
      status: ok                   # the cell's status: ok, or error (with error_contains);
                                   # unbound: a required parameter has no source, nothing runs
      refused: InputError          # instead of steps/status: planning must raise this

The sample data is copied per case (``catalogs/tabular/data`` for ``shipped``,
``benchmarks/textflow/data`` for ``textflow``) into ``<case dir>/data``; cells run in
``<case dir>/work``. One :class:`toolpath.planner.Workspace` is opened per catalog set and reused. When
``TOOLPATH_HOME`` is not set, a temporary one is used (so the run writes nothing of yours; the
catalogs are then embedded again, about half a minute); set it to keep the embedding cache.

Prints one JSON object: ``cases``, ``passed``, ``failed`` (each with what differed), ``arguments``
(``checked``, ``matching``), ``files`` (``checked``, ``unchanged``) and ``seconds``. Exit status 1
when a case fails.

Usage: python benchmarks/bench_dataflow.py [--cases FILE] [--case NAME ...] [--verbose]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CASES = HERE / "dataflow_cases.yaml"

#: Catalog files and sample data of each catalog set a case may name.
CATALOG_SETS: dict[str, dict[str, Any]] = {
    "shipped": {"catalogs": None, "data": ROOT / "catalogs" / "tabular" / "data"},
    "textflow": {"catalogs": [HERE / "textflow" / "catalog.yaml"], "data": HERE / "textflow" / "data"},
}

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@dataclass
class CaseResult:
    """What one case showed: ``differences`` is empty when it passed."""

    name: str
    differences: list[str] = field(default_factory=list)
    arguments_checked: int = 0
    arguments_matching: int = 0
    files_checked: int = 0
    files_unchanged: int = 0
    planned: list[dict] = field(default_factory=list)
    artifacts: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return not self.differences

    def report(self) -> str:
        """The differences, one per line, then the planned wiring (for assertion messages)."""
        lines = [f"case {self.name}:", *(f"  - {difference}" for difference in self.differences)]
        if self.artifacts:
            lines.append(f"  held artifacts before the task: {self.artifacts}")
        if self.planned:
            lines.append("  planned:")
            lines += [
                f"    {step['step']}. {step['tool']}({', '.join(f'{name}: {label}' for name, label in step['arguments'].items())})" for step in self.planned
            ]
        return "\n".join(lines)


def load_cases(path: Path = CASES) -> list[dict]:
    """The cases of ``path``, checked for the fields the runner needs.

    Raises:
        ValueError: a case without a name, task or expectation, an unknown catalog set, or two
            cases with one name.
    """
    cases = yaml.safe_load(path.read_text(encoding="utf-8"))
    seen: set[str] = set()
    for index, case in enumerate(cases):
        name = case.get("name")
        if not name or name in seen:
            raise ValueError(f"{path}: case {index} has {'no name' if not name else f'the name {name!r} of an earlier case'}")
        seen.add(name)
        if "task" not in case or ("steps" not in case and "refused" not in case):
            raise ValueError(f"{path}: case {name!r} needs `task` and `steps` (or `refused`)")
        if case.get("catalogs", "shipped") not in CATALOG_SETS:
            raise ValueError(f"{path}: case {name!r} names catalogs {case['catalogs']!r}; use one of {', '.join(CATALOG_SETS)}")
    return cases


class Runner:
    """Runs cases, opening one :class:`toolpath.planner.Workspace` per catalog set on first use."""

    def __init__(self) -> None:
        self._workspaces: dict[str, Any] = {}

    def workspace(self, catalogs: str):
        if catalogs not in self._workspaces:
            from toolpath.planner import Workspace

            self._workspaces[catalogs] = Workspace.open(CATALOG_SETS[catalogs]["catalogs"])
        return self._workspaces[catalogs]

    def run(self, case: dict) -> CaseResult:
        """Plan, compare, run and check one case in a temporary directory of its own."""
        started = time.perf_counter()
        result = CaseResult(case["name"])
        catalogs = case.get("catalogs", "shipped")
        with tempfile.TemporaryDirectory(prefix="dataflow-") as directory:
            data, work = Path(directory) / "data", Path(directory) / "work"
            shutil.copytree(CATALOG_SETS[catalogs]["data"], data)
            work.mkdir()
            fill = lambda value: _fill(value, str(data))  # noqa: E731
            unchanged = [Path(path) for path in fill(case.get("unchanged", []))]
            digests = {path: _sha256(path) for path in unchanged}
            try:
                self._plan_and_run(case, result, self.workspace(catalogs), work, fill)
            except Exception as error:  # a case that crashes the runner is a failed case, not a failed run
                result.differences.append(f"unexpected {type(error).__name__}: {error}")
            for path, digest in digests.items():
                result.files_checked += 1
                if _sha256(path) == digest:
                    result.files_unchanged += 1
                else:
                    result.differences.append(f"{path.relative_to(directory)} was changed or removed")
        result.seconds = round(time.perf_counter() - started, 2)
        return result

    def _plan_and_run(self, case: dict, result: CaseResult, workspace, work: Path, fill) -> None:
        task = case["task"]
        inputs = fill(case.get("inputs") or {})
        held = case.get("held") or ()
        before = case.get("before") or []
        if not before:
            task_plan = self._plan(case, result, lambda: workspace.plan_task(task, inputs=inputs, held=held))
            if task_plan is not None:
                self._compare(case, result, task_plan)
                run = workspace.run_task(task_plan, cwd=str(work)) if not task_plan.cell.unbound else None
                self._check_run(case, result, task_plan, run, work)
            return
        with workspace.session(f"dataflow-{case['name']}", cwd=str(work), snapshot=False) as session:
            for number, turn in enumerate(before, 1):
                if "code" in turn:
                    earlier = session.execute(turn["code"])
                else:
                    earlier = session.run_task(turn["task"], fill(turn.get("inputs") or {})).result
                if earlier.status != "ok":
                    result.differences.append(f"earlier turn {number} ended {earlier.status}: {_error_text(earlier)}")
                    return
            result.artifacts = dict(session.artifacts)
            task_plan = self._plan(case, result, lambda: session.plan_task(task, inputs, held=held or None))
            if task_plan is not None:
                self._compare(case, result, task_plan)
                run = session.run_task(task_plan) if not task_plan.cell.unbound else None
                self._check_run(case, result, task_plan, run, work)

    def _plan(self, case: dict, result: CaseResult, plan):
        """The task plan, or ``None`` when planning raised (as the case expects or not)."""
        refused = case.get("refused")
        try:
            task_plan = plan()
        except Exception as error:
            names = [kind.__name__ for kind in type(error).__mro__]
            if refused is None:
                result.differences.append(f"planning raised {type(error).__name__}: {error}")
            elif refused not in names:
                result.differences.append(f"planning raised {type(error).__name__} ({error}), expected {refused}")
            return None
        if refused is not None:
            result.planned = _wiring(task_plan)
            result.differences.append(f"planning was expected to raise {refused}, but planned {len(task_plan.plan.steps)} step(s)")
            return None
        return task_plan

    def _compare(self, case: dict, result: CaseResult, task_plan) -> None:
        """Every step's tool and every argument's source against the case's ``steps``."""
        planned = result.planned = _wiring(task_plan)
        reported = [
            {"step": step["step"], "tool": step["tool"], "arguments": {name: source["label"] for name, source in step["arguments"].items()}}
            for step in task_plan.to_dict().get("wiring") or []
        ]
        if reported != planned:
            result.differences.append(f"to_dict()['wiring'] says {reported}, the cell's arguments say {planned}")
        expected = case["steps"]
        planned_tools = [step["tool"] for step in planned]
        expected_tools = [step["tool"] for step in expected]
        if planned_tools != expected_tools:
            result.differences.append(f"planned tools {planned_tools}, expected {expected_tools}")
        for number, want in enumerate(expected, 1):
            arguments = want.get("arguments") or {}
            result.arguments_checked += len(arguments)
            got = planned[number - 1] if number <= len(planned) else None
            if got is None or got["tool"] != want["tool"]:
                continue  # the tool difference is reported above; its arguments count as not matching
            for name, label in arguments.items():
                actual = got["arguments"].get(name, "(absent)")
                if actual == label:
                    result.arguments_matching += 1
                else:
                    result.differences.append(f"step {number} {want['tool']}: {name} from {actual}, expected {label}")
            unlisted = sorted(set(got["arguments"]) - set(arguments))
            if unlisted:
                result.differences.append(f"step {number} {want['tool']}: arguments {unlisted} are not in the case (list every argument)")

    def _check_run(self, case: dict, result: CaseResult, task_plan, run, work: Path) -> None:
        status = case.get("status", "ok")
        if run is None or status == "unbound":
            if run is not None:
                result.differences.append(f"the cell ran ({run.result.status}), expected unbound parameters and no run")
            elif status != "unbound":
                unbound = ", ".join(f"{parameter.tool}.{parameter.parameter}" for parameter in task_plan.cell.unbound)
                result.differences.append(f"not run: unbound {unbound}")
            return
        cell = run.result
        if cell.status != status:
            result.differences.append(f"cell ended {cell.status}, expected {status}: {_error_text(cell)}")
        if case.get("error_contains") and case["error_contains"] not in _error_text(cell):
            result.differences.append(f"error does not mention {case['error_contains']!r}: {_error_text(cell)}")
        shown = f"{cell.result or ''}\n{cell.stdout}"
        for text in _as_list(case.get("result_contains")):
            if text not in shown:
                result.differences.append(f"result does not contain {text!r}: {shown.strip()[:300]}")
        for name in case.get("created", []):
            if not (work / name).is_file():
                result.differences.append(f"{name} was not created in the working directory")
        for name, text in (case.get("contains") or {}).items():
            path = work / name
            if path.is_file() and text not in path.read_text(encoding="utf-8", errors="replace"):
                result.differences.append(f"{name} does not contain {text!r}")
            elif not path.is_file():
                result.differences.append(f"{name} does not exist, so it cannot contain {text!r}")


def _wiring(task_plan) -> list[dict]:
    """``[{step, tool, arguments: {parameter: label}}]`` of a task plan (``cell.arguments``)."""
    return [
        {"step": number, "tool": f"{step.tool.server_name}.{step.tool.name}", "arguments": {name: source.label for name, source in sources.items()}}
        for number, (step, sources) in enumerate(zip(task_plan.plan.steps, task_plan.cell.arguments), 1)
    ]


def _fill(value: Any, data: str) -> Any:
    """``value`` with ``{data}`` replaced by the case's data directory in every string."""
    if isinstance(value, str):
        return value.replace("{data}", data)
    if isinstance(value, list):
        return [_fill(item, data) for item in value]
    if isinstance(value, dict):
        return {key: _fill(item, data) for key, item in value.items()}
    return value


def _as_list(value: Any) -> list:
    return [] if value is None else value if isinstance(value, list) else [value]


def _sha256(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def _error_text(cell) -> str:
    return f"{cell.error['ename']}: {cell.error['evalue']}" if cell.error else (cell.stderr.strip()[-300:] or "no error")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=Path, default=CASES, help="the cases file (default: dataflow_cases.yaml beside this script)")
    parser.add_argument("--case", action="append", default=[], metavar="NAME", help="run only this case; repeatable")
    parser.add_argument("--verbose", action="store_true", help="print each case's outcome on stderr as it finishes")
    options = parser.parse_args(argv)

    cases = load_cases(options.cases)
    if options.case:
        unknown = sorted(set(options.case) - {case["name"] for case in cases})
        if unknown:
            parser.error(f"no case named {', '.join(unknown)}")
        cases = [case for case in cases if case["name"] in options.case]
    with tempfile.TemporaryDirectory(prefix="dataflow-home-") as home:
        os.environ.setdefault("TOOLPATH_HOME", home)
        started = time.perf_counter()
        runner = Runner()
        results = []
        for case in cases:
            results.append(runner.run(case))
            if options.verbose:
                print(
                    f"{'pass' if results[-1].passed else 'FAIL'} {results[-1].report() if not results[-1].passed else case['name']} ({results[-1].seconds} s)",
                    file=sys.stderr,
                )
        seconds = time.perf_counter() - started
    failed = [result for result in results if not result.passed]
    print(
        json.dumps(
            {
                "cases": len(results),
                "passed": len(results) - len(failed),
                "failed": [
                    {
                        "name": result.name,
                        "differences": result.differences,
                        "planned": result.planned,
                        **({"held_artifacts": result.artifacts} if result.artifacts else {}),
                    }
                    for result in failed
                ],
                "arguments": {"checked": sum(result.arguments_checked for result in results), "matching": sum(result.arguments_matching for result in results)},
                "files": {"checked": sum(result.files_checked for result in results), "unchanged": sum(result.files_unchanged for result in results)},
                "seconds": round(seconds, 1),
            },
            indent=2,
        )
    )
    return 1 if failed else 0


if __name__ == "__main__":
    # Measuring is not use: nothing a benchmark plans goes into the user's record of use.
    os.environ.setdefault("TOOLPATH_RECORD", "off")
    sys.exit(main())
