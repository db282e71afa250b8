"""A person's words about their own data (issue 52): the right tools, the right argument values, the right result — or a question.

Prints one JSON object. Each case of ``words_cases.yaml`` (beside this file; its header describes the
fields) is a request as a data person types it about the small files of ``words_data/`` (a sales
table, a table of region managers, a table of molecules; ``sales.xlsx`` is written from
``sales.csv`` at run time), over the shipped tabular and chemistry catalogs. One
:class:`toolpath.planner.Workspace` is opened and its index warmed before any case is timed. For
each case, in a fresh temporary directory holding copies of the data (the process's working
directory while planning, so the input probe reads the files the words name, as the command line
does):

1. the request is planned with ``plan_task(task, inputs=...)`` (timed: planning only, probe included);
2. the plan is *refused* when planning raises a :class:`toolpath.errors.Refusal`, a part of it is not
   understood (its status is none of ``matched``, ``held``, ``fact``, ``context``), or the cell
   leaves a required parameter unbound (it asks for an input);
3. otherwise the tools (in order) and every argument the case names are compared — the values are
   read from the planned cell's code (its literal assignments and tool calls), a parameter the call
   leaves out has its catalog default;
4. the cell runs in a kernel (one kernel for the whole run, reset and moved into the case's
   directory before each cell), and the case's ``result`` is checked on the last step's value; any
   file the cell wrote that the case did not ask for is an unasked side effect.

Each case ends as one of:

- ``right``: tools, arguments and result as expected; for ``expect: not_understood``, a refusal;
- ``not_understood``: a plan was expected but planning refused, asked for an input or left a part
  not understood;
- ``silently_wrong``: no refusal, and a wrong tool or argument, a wrong result, an unasked file, or
  a plan (run cleanly) for a request the catalogs cannot serve;
- ``wrong_but_refused``: no refusal while planning, but the cell failed when run, so the person sees
  an error rather than a wrong answer (with ``--no-run``, nothing is run and this cannot happen);
- ``error``: the planner or the harness raised something other than a refusal (a bug to report).

Targets (issue 52): right >= 90 %, silently wrong 0; planning p95 <= 250 ms. Exit status 1 when a
target is missed.

``--check-cases`` checks the cases instead of the planner: each expected plan is written as a cell
from the case's tools and arguments alone and run, and its result checked (every case should agree
with the catalogs' implementations; a case whose words leave a required value to the planner cannot
be checked this way and is listed).

Usage: python benchmarks/bench_words.py [--cases FILE] [--case ID ...] [--no-run | --check-cases] [--verbose]
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import math
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
CASES = HERE / "words_cases.yaml"
DATA = HERE / "words_data"

#: What each case is about: the quoted behaviours of issue 52 in its order, then the catalog's coverage.
BULLETS = (
    "parts",  # a later part dropped ("load sales.csv and plot revenue by month"), --step parts, "it"
    "held-goal",  # "how many rows are in sales.xlsx": nothing ran, "the goal is already held"
    "side-effects",  # "sort the table ..." ran write_report; a tool that writes needs a strong match
    "aggregate-words",  # "sum", "total", "per", "average" ... choose the aggregate and the columns
    "conditions",  # "where region is North", "over 1000", "between", "not South", "missing"
    "join",  # two files named in one request
    "file-and-input",  # a file in the words and the same (or another) --input path
    "domain",  # a plain table never goes through chemistry.tabulate_descriptors
    "language",  # a request not in English is refused, saying so
    "counts-and-names",  # "top 5", "first 3 rows", "8 bins", "to summary.md"
    "columns",  # column names from the probed header: select, drop, sort, plot
    "coverage",  # the other tools a data person asks for: describe, pivot, correlation, save ...
    "chemistry",  # molecules in words and in a table
    "cannot-serve",  # requests no shipped tool serves: the right answer is a question or a refusal
)
OUTCOMES = ("right", "not_understood", "silently_wrong", "wrong_but_refused", "error")
#: Part statuses that run or hold something; any other (unmatched, or a newer fate) is "not understood".
UNDERSTOOD_STATUSES = frozenset({"matched", "held", "fact", "context"})
#: File kinds a result may ask for, with the bytes such a file starts with (``None``: text, not checked).
FILE_KINDS: dict[str, bytes | None] = {"png": b"\x89PNG", "xlsx": b"PK", "parquet": b"PAR1", "csv": None, "md": None, "html": None}
RESULT_CHECKS = ("number", "value", "rows", "columns", "has_columns", "first", "row", "file")
#: Absolute tolerance of a number compared without its own ``tolerance``: the data's values are
#: whole numbers or given to two decimals.
DEFAULT_TOLERANCE = 0.01
#: Seconds a planned cell may run (a cell here reads a 30-row file: anything longer is stuck).
CELL_TIMEOUT_S = 120.0
_CASE_ID = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_RESULT_MARKER = "<<words-result>>"

#: Run in the kernel after a case's cell: prints the last step's value as JSON after the marker.
#: A table gives its row count, columns, index labels and its first rows as records (a named index
#: turned into a column, so "region" is a column whether or not the tool kept it as the index).
_DESCRIBE_VALUE = """
import json as _words_json, math as _words_math
def _words_plain(value):
    try:
        import numpy
        if isinstance(value, numpy.generic):
            value = value.item()
    except ImportError:
        pass
    if isinstance(value, float) and _words_math.isnan(value):
        return None
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(key): _words_plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_words_plain(item) for item in value]
    try:
        import pandas
        if value is pandas.NaT or (not isinstance(value, (list, dict)) and pandas.isna(value)):
            return None
    except (ImportError, TypeError, ValueError):
        pass
    return str(value)
def _words_describe(value):
    try:
        import pandas
    except ImportError:
        pandas = None
    if pandas is not None and isinstance(value, pandas.Series):
        value = value.to_frame()
    if pandas is not None and isinstance(value, pandas.DataFrame):
        flat = value.copy()
        flat.columns = [" ".join(str(part) for part in label) if isinstance(label, tuple) else str(label) for label in flat.columns]
        named_index = not isinstance(flat.index, pandas.RangeIndex) and any(name is not None for name in flat.index.names)
        records = flat.reset_index() if named_index else flat
        return {"kind": "table", "rows": len(flat), "columns": list(flat.columns), "index": [_words_plain(label) for label in flat.index[:100]],
                "records": [{str(key): _words_plain(item) for key, item in row.items()} for row in records.head(100).to_dict("records")]}
    if isinstance(value, (list, tuple)):
        return {"kind": "list", "rows": len(value), "items": _words_plain(list(value[:100]))}
    return {"kind": type(value).__name__, "value": _words_plain(value)}
print(%(marker)r + _words_json.dumps(_words_describe(%(variable)s), default=str))
"""


# ---------------------------------------------------------------------------------------------- cases


def load_cases(path: Path = CASES) -> list[dict]:
    """The cases of ``path``, each checked for the fields :func:`run_case` reads (not yet against
    the catalogs: see :func:`catalog_problems`).

    Returns:
        The cases in file order, as mappings (``inputs`` defaults to ``{}``, ``expect.arguments``
        and ``expect.result`` to empty).

    Raises:
        ValueError: naming the file, the case's line and id and the field: a case that is not a
            mapping; an id missing, not kebab-case or used before; an unknown bullet; a task that is
            neither a text nor a list of texts; inputs that are not a mapping; an expectation that is
            neither ``not_understood`` nor ``{tools, arguments, result}``; an argument not named
            ``tool.parameter``; an unknown result check or file kind; a ``paraphrase_of`` naming no
            earlier case.
    """
    text = path.read_text(encoding="utf-8")
    document = yaml.compose(text)
    cases = yaml.safe_load(text)
    if document is None or not isinstance(cases, list):
        raise ValueError(f"{path}: the file must be a YAML list of cases")
    seen: set[str] = set()
    for node, case in zip(document.value, cases):
        where = f"{path}:{node.start_mark.line + 1}"

        def refuse(field_name: str, problem: str, where: str = where, case: Any = case) -> ValueError:
            name = case.get("id") if isinstance(case, dict) else None
            return ValueError(f"{where}: case {name or '(no id)'}: {field_name}: {problem}")

        if not isinstance(case, dict):
            raise refuse("case", "must be a mapping with id, bullet, task and expect")
        case_id = case.get("id")
        if not isinstance(case_id, str) or not _CASE_ID.fullmatch(case_id):
            raise refuse("id", "must be kebab-case (lower-case words joined by '-')")
        if case_id in seen:
            raise refuse("id", "is used by an earlier case; give each case its own")
        if case.get("bullet") not in BULLETS:
            raise refuse("bullet", f"must be one of {', '.join(BULLETS)}")
        if "paraphrase_of" in case and case["paraphrase_of"] not in seen:
            raise refuse("paraphrase_of", "must name an earlier case's id")
        seen.add(case_id)
        task = case.get("task")
        is_steps = isinstance(task, list) and task and all(isinstance(step, str) and step.strip() for step in task)
        if not (isinstance(task, str) and task.strip()) and not is_steps:
            raise refuse("task", "must be a non-empty text, or a list of step texts")
        case["inputs"] = case.get("inputs") or {}
        if not isinstance(case["inputs"], dict):
            raise refuse("inputs", "must be a mapping of input names to values")
        expect = case.get("expect")
        if expect == "not_understood":
            continue
        if not isinstance(expect, dict):
            raise refuse("expect", "must be not_understood, or a mapping with tools, arguments and result")
        unknown = sorted(set(expect) - {"tools", "arguments", "result"})
        if unknown:
            raise refuse("expect", f"unknown field {', '.join(unknown)}; the fields are tools, arguments and result")
        if not tool_sequences(expect.get("tools")):
            raise refuse("expect.tools", "must be a non-empty list of tool names, or {any_of: [[names...], ...]}")
        expect["arguments"] = expect.get("arguments") or {}
        if not isinstance(expect["arguments"], dict) or not all(isinstance(name, str) and name.count(".") == 1 for name in expect["arguments"]):
            raise refuse("expect.arguments", "must be a mapping of tool.parameter to the value the words give")
        results = expect.get("result") or []
        expect["result"] = results = results if isinstance(results, list) else [results]
        for number, check in enumerate(results, 1):
            if not isinstance(check, dict) or not check or not set(check) & set(RESULT_CHECKS):
                raise refuse(f"expect.result[{number}]", f"must be a mapping with one of {', '.join(RESULT_CHECKS)}")
            if "file" in check and check["file"] not in FILE_KINDS:
                raise refuse(f"expect.result[{number}].file", f"must be one of {', '.join(FILE_KINDS)}")
    return cases


def tool_sequences(tools: Any) -> list[list[str]]:
    """The tool sequences an expectation accepts: ``[a, b]`` is one, ``{any_of: [[a, b], [a, c]]}``
    several; ``[]`` when ``tools`` is neither (a malformed case)."""
    if isinstance(tools, dict) and set(tools) == {"any_of"} and isinstance(tools["any_of"], list):
        sequences = tools["any_of"]
    else:
        sequences = [tools]
    if sequences and all(isinstance(sequence, list) and sequence and all(isinstance(name, str) for name in sequence) for sequence in sequences):
        return sequences
    return []


def catalog_problems(cases: Sequence[dict], tools: Mapping[str, Any]) -> list[str]:
    """What in ``cases`` the catalogs or the data contradict: a tool that no catalog declares, a
    parameter the tool does not have, an argument of a tool the case does not expect, a file the
    task or an input names that ``words_data`` does not ship (a file the case expects a tool to
    write, given to a ``role: output`` parameter, is not read and need not exist). ``tools`` maps
    tool names to :class:`toolpath.registry.ToolDefinition`. Empty when every case is consistent."""
    problems = []
    shipped = {path.name for path in DATA.iterdir()} | {"sales.xlsx"}
    for case in cases:
        expect = case["expect"]
        written: set[str] = set()
        if expect != "not_understood":
            sequences = tool_sequences(expect["tools"])
            for name in {name for sequence in sequences for name in sequence}:
                if name not in tools:
                    problems.append(f"{case['id']}: no catalog declares the tool {name!r}")
            for qualified, value in expect["arguments"].items():
                tool_name, parameter_name = qualified.split(".")
                parameter = next((item for item in tools[tool_name].parameters if item.name == parameter_name), None) if tool_name in tools else None
                if not any(tool_name in sequence for sequence in sequences):
                    problems.append(f"{case['id']}: argument {qualified}: {tool_name} is not among the expected tools")
                elif tool_name in tools and parameter is None:
                    problems.append(f"{case['id']}: argument {qualified}: {tool_name} has no parameter {parameter_name!r}")
                elif parameter is not None and parameter.role == "output" and isinstance(value, str):
                    written.add(value)
        steps = [case["task"]] if isinstance(case["task"], str) else case["task"]
        named = set(re.findall(r"[\w.-]+\.(?:csv|tsv|xlsx|xls|parquet)\b", " ".join([*steps, *map(str, case["inputs"].values())])))
        for name in sorted(named - shipped - written):
            problems.append(f"{case['id']}: the case names {name}, which words_data does not ship (and no tool of the case writes)")
    return problems


def shipped_tools(workspace: Any) -> dict[str, Any]:
    """``{tool name: ToolDefinition}`` of the workspace's catalogs."""
    return {tool.name: tool for tool in workspace.loaded.registry}


def prepare_data(directory: Path) -> None:
    """Copy the shipped data files into ``directory`` and write ``sales.xlsx`` from ``sales.csv``
    (written here, not shipped: a binary file in the repository would hide its contents from review)."""
    import pandas

    for path in DATA.iterdir():
        if path.is_file():
            shutil.copy2(path, directory / path.name)
    pandas.read_csv(DATA / "sales.csv").to_excel(directory / "sales.xlsx", index=False)


# ------------------------------------------------------------------------------------- reading plans


@dataclass
class Planned:
    """What planning one case gave: ``refusal`` says why it was refused (empty when it was not);
    ``tools`` and ``arguments`` (``{tool.parameter: value}``, first call of each tool) the plan's."""

    refusal: str = ""
    tools: list[str] = field(default_factory=list)
    arguments: dict[str, Any] = field(default_factory=dict)
    variable: str | None = None
    code: str = ""


def refusal_of(task_plan: Any) -> str:
    """Why a task plan that planning returned is no runnable answer, in words; ``""`` when it is:
    a part not understood (named with its status and problem), or parameters left unbound."""
    reasons = []
    for part in task_plan.parts:
        status = part.to_dict().get("status")
        if status not in UNDERSTOOD_STATUSES:
            reasons.append(f"part {part.text!r} {status}: {part.problem or 'no reason given'}")
    unbound = [f"{parameter.tool}.{parameter.parameter}" for parameter in task_plan.cell.unbound]
    if unbound:
        reasons.append(f"asks for {', '.join(unbound)}")
    return "; ".join(reasons)


def cell_arguments(code: str, steps: Sequence[Any]) -> dict[str, Any]:
    """The value each step's tool is called with, from a planned cell's ``code``: ``{tool.parameter:
    value}`` (catalog parameter names), for the first step of each tool.

    A keyword naming a variable the cell assigns a literal takes that literal; one naming an earlier
    step's variable is ``<step variable NAME>``; anything else is ``<expression TEXT>``. A parameter
    the call leaves out has its catalog default. Tool calls are the cell's ``await SERVER.TOOL(...)``
    expressions, taken in order, one per step of ``steps`` (the plan's).
    """
    tree = ast.parse(code)
    literals: dict[str, Any] = {}
    calls: list[ast.Call] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            # A step's result or an expression is no literal: it is read from the call below.
            with contextlib.suppress(ValueError, SyntaxError, TypeError):
                literals[node.targets[0].id] = ast.literal_eval(node.value)
        if isinstance(node, ast.Await) and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Attribute):
            calls.append(node.value)
    calls.sort(key=lambda call: (call.lineno, call.col_offset))
    arguments: dict[str, Any] = {}
    for step, call in zip(steps, calls):
        tool = step.tool
        by_python_name = {parameter.python_name: parameter for parameter in tool.parameters}
        given: dict[str, Any] = {}
        for keyword in call.keywords:
            if keyword.arg is None:
                continue
            value: Any
            if isinstance(keyword.value, ast.Name):
                name = keyword.value.id
                value = literals[name] if name in literals else f"<step variable {name}>"
            else:
                try:
                    value = ast.literal_eval(keyword.value)
                except (ValueError, SyntaxError, TypeError):
                    value = f"<expression {ast.unparse(keyword.value)}>"
            parameter = by_python_name.get(keyword.arg)
            given[parameter.name if parameter is not None else keyword.arg] = value
        for parameter in tool.parameters:
            key = f"{tool.name}.{parameter.name}"
            if key in arguments:
                continue  # a tool called twice: the first call is the one a case names
            if parameter.name in given:
                arguments[key] = given[parameter.name]
            elif parameter not in tool.required_parameters:
                arguments[key] = parameter.default
            else:
                arguments[key] = "<absent>"
    return arguments


def plan_case(workspace: Any, case: dict, directory: Path) -> tuple[Planned, float]:
    """Plan one case with ``directory`` as the working directory; what came out and the seconds
    planning took. A refusal is a :class:`Planned` with its ``refusal``; any other exception
    propagates (the caller reports it as an error)."""
    from toolpath.errors import Refusal

    task = case["task"] if isinstance(case["task"], str) else list(case["task"])
    with working_directory(directory):
        started = time.perf_counter()
        try:
            task_plan = workspace.plan_task(task, inputs=case["inputs"])
        except Refusal as refusal:
            return Planned(refusal=f"{type(refusal).__name__}: {refusal}"), time.perf_counter() - started
        seconds = time.perf_counter() - started
    steps = task_plan.plan.steps
    planned = Planned(
        refusal=refusal_of(task_plan),
        tools=[step.tool.name for step in steps],
        arguments=cell_arguments(task_plan.cell.code, steps),
        variable=task_plan.cell.step_variables[-1] if steps else None,
        code=task_plan.cell.code,
    )
    return planned, seconds


@contextmanager
def working_directory(directory: Path):
    """Run the block with ``directory`` as the process's working directory (the probe reads the
    files a task names relative to it, as the command line's would)."""
    before = os.getcwd()
    os.chdir(directory)
    try:
        yield
    finally:
        os.chdir(before)


# ----------------------------------------------------------------------------------------- comparing


def values_agree(expected: Any, got: Any, parameter: Any = None) -> bool:
    """Whether an argument ``got`` is the ``expected`` one: ``{any_of: [...]}`` takes any of its
    values; numbers compare as numbers (1000 is 1000.0); a file name compares with the name of the
    path given (``sales.csv`` matches ``/tmp/x/sales.csv``); a ``conditions`` parameter compares its
    conditions order-free (a condition without a value is ``[column, operator]`` or ends in ``None``)."""
    if isinstance(expected, dict) and set(expected) == {"any_of"}:
        return any(values_agree(option, got, parameter) for option in expected["any_of"])
    if parameter is not None and getattr(parameter, "meaning", None) == "conditions":
        if not isinstance(got, (list, tuple)) or not isinstance(expected, list) or len(got) != len(expected):
            return False
        remaining = [_condition(condition) for condition in got]
        for condition in expected:
            match = next((index for index, other in enumerate(remaining) if values_agree(_condition(condition), other)), None)
            if match is None:
                return False
            remaining.pop(match)
        return True
    if isinstance(expected, bool) or isinstance(got, bool):
        return expected == got
    if isinstance(expected, (int, float)) and isinstance(got, (int, float)):
        return math.isclose(expected, got, rel_tol=1e-9, abs_tol=1e-9)
    if isinstance(expected, list) and isinstance(got, (list, tuple)):
        return len(expected) == len(got) and all(values_agree(one, other) for one, other in zip(expected, got))
    if isinstance(expected, str) and isinstance(got, str) and _is_file_name(expected):
        return Path(got).name == expected
    return expected == got


def _condition(condition: Any) -> Any:
    """A condition with a missing value made explicit: ``[col, 'is missing']`` is ``[col, 'is missing', None]``."""
    if isinstance(condition, (list, tuple)) and len(condition) == 2:
        return [*condition, None]
    return list(condition) if isinstance(condition, tuple) else condition


def _is_file_name(text: str) -> bool:
    return bool(re.fullmatch(r"[\w.-]+\.(csv|tsv|xlsx|xls|parquet|png|md|html)", text))


def plan_differences(case: dict, planned: Planned, tools: Mapping[str, Any]) -> list[str]:
    """How the plan differs from the case's expectation: the tools (in order), then each named argument."""
    expect = case["expect"]
    sequences = tool_sequences(expect["tools"])
    if planned.tools not in sequences:
        wanted = " or ".join(" -> ".join(sequence) for sequence in sequences)
        return [f"tools {' -> '.join(planned.tools) or '(none: nothing ran)'}, expected {wanted}"]
    differences = []
    for qualified, expected in expect["arguments"].items():
        tool_name, parameter_name = qualified.split(".")
        if tool_name not in planned.tools:
            continue  # an argument of a tool this accepted sequence does not use
        parameter = next((item for item in tools[tool_name].parameters if item.name == parameter_name), None)
        got = planned.arguments.get(qualified, "<absent>")
        if not values_agree(expected, got, parameter):
            differences.append(f"{qualified} = {got!r}, expected {expected!r}")
    return differences


def result_differences(checks: Sequence[dict], value: dict | None, new_files: Sequence[Path]) -> list[str]:
    """How the run's last value (:data:`_DESCRIBE_VALUE`'s description) and the files it wrote
    differ from the case's ``result`` checks, and every written file that no ``file`` check asked for."""
    differences = []
    unclaimed = list(new_files)
    for check in checks:
        if "file" in check:
            kind = check["file"]
            wanted = [path for path in unclaimed if path.suffix == f".{kind}" and (not check.get("name") or path.name == check["name"])]
            if not wanted:
                named = f" named {check['name']}" if check.get("name") else ""
                differences.append(f"no {kind} file{named} was written (wrote: {', '.join(path.name for path in new_files) or 'nothing'})")
                continue
            magic = FILE_KINDS[kind]
            if wanted[0].stat().st_size == 0 or (magic is not None and not wanted[0].read_bytes().startswith(magic)):
                differences.append(f"{wanted[0].name} is not a {kind} file")
            unclaimed.remove(wanted[0])
        if set(check) & {"number", "value", "rows", "columns", "has_columns", "first", "row"}:
            differences += _value_differences(check, value)
    differences += [f"wrote {path.name}, which the task did not ask for" for path in unclaimed]
    return differences


def _value_differences(check: dict, value: dict | None) -> list[str]:
    if value is None:
        return ["the run gave no value to check"]
    kind = value.get("kind")
    tolerance = check.get("tolerance", DEFAULT_TOLERANCE)
    differences = []
    if "rows" in check and value.get("rows") != check["rows"]:
        differences.append(f"{value.get('rows', f'a {kind}, not')} rows, expected {check['rows']}")
    if "columns" in check and set(value.get("columns") or ()) != set(check["columns"]):
        differences.append(f"columns {value.get('columns')}, expected {check['columns']}")
    if "has_columns" in check and not set(check["has_columns"]) <= set(value.get("columns") or ()):
        differences.append(f"columns {value.get('columns')}, expected among them {check['has_columns']}")
    records = value.get("records") or ([item for item in value["items"] if isinstance(item, dict)] if kind == "list" else [])
    if "first" in check:
        if not records:
            differences.append(f"no first row in a {kind}")
        else:
            differences += [f"first row: {text}" for text in _record_differences(check["first"], records[0], tolerance)]
    if "row" in check:
        selector = check["row"]
        if "label" in selector:
            labels = value.get("index") or []
            found = records[labels.index(selector["label"])] if selector["label"] in labels and len(records) == len(labels) else None
            described = f"the row labelled {selector['label']!r}"
        else:
            found = next((record for record in records if not _record_differences(selector["where"], record, tolerance)), None)
            described = f"the row where {selector['where']}"
        if found is None:
            differences.append(f"no {described}")
        else:
            differences += [f"{described}: {text}" for text in _record_differences(selector["values"], found, tolerance)]
    if "number" in check or "value" in check:
        got = _scalar(value, check)
        if "number" in check and not (isinstance(got, (int, float)) and not isinstance(got, bool) and abs(got - check["number"]) <= tolerance):
            differences.append(f"value {got!r}, expected {check['number']} (± {tolerance})")
        if "value" in check and not _same_text(check["value"], got):
            differences.append(f"value {got!r}, expected {check['value']!r}")
    return differences


def _scalar(value: dict, check: dict) -> Any:
    """The single value a ``number``/``value`` check means: the value itself, its ``key`` (dotted
    path) in a mapping, its ``column`` of the first row of a table, or a 1×1 table's only cell."""
    if "key" in check:
        current = value.get("value")
        for part in str(check["key"]).split("."):
            current = current.get(part) if isinstance(current, dict) else None
        return current
    if value.get("kind") == "table":
        records = value.get("records") or []
        if "column" in check:
            return records[0].get(check["column"]) if records else None
        if len(records) == 1 and len(records[0]) == 1:
            return next(iter(records[0].values()))
        return f"<a table of {value.get('rows')} rows>"
    return value.get("value")


def _record_differences(expected: Mapping[str, Any], record: Mapping[str, Any], tolerance: float) -> list[str]:
    differences = []
    for column, wanted in expected.items():
        got = record.get(column, "<no such column>")
        if isinstance(wanted, (int, float)) and not isinstance(wanted, bool):
            agree = isinstance(got, (int, float)) and not isinstance(got, bool) and abs(got - wanted) <= tolerance
        else:
            agree = _same_text(wanted, got)
        if not agree:
            differences.append(f"{column} = {got!r}, expected {wanted!r}")
    return differences


def _same_text(expected: Any, got: Any) -> bool:
    """Equal, or equal as text once a date's midnight time is dropped (a date column parsed to timestamps)."""
    if expected == got:
        return True
    return isinstance(got, str) and got.removesuffix(" 00:00:00").removesuffix("T00:00:00") == str(expected)


# ------------------------------------------------------------------------------------------- running


@dataclass
class CaseOutcome:
    """One case's outcome (one of :data:`OUTCOMES`), why, and what was planned."""

    id: str
    bullet: str
    outcome: str
    reason: str = ""
    plan_seconds: float | None = None
    expected_refusal: bool = False
    planned: dict[str, Any] = field(default_factory=dict)

    def to_dict(self, verbose: bool = False) -> dict[str, Any]:
        fields = {"id": self.id, "bullet": self.bullet, "outcome": self.outcome, "reason": self.reason}
        if verbose and self.planned:
            fields["planned"] = self.planned
        return fields


class Runner:
    """Plans (and runs) cases over one workspace and, unless ``run`` is false, one kernel."""

    def __init__(self, workspace: Any, root: Path, run: bool = True):
        self.workspace = workspace
        self.tools = shipped_tools(workspace)
        self.root = root
        self.run = run
        self._code_mode = None

    def __enter__(self) -> Runner:
        if self.run:
            self._code_mode = self.workspace.code_mode(CELL_TIMEOUT_S, snapshot=False, cwd=str(self.root))
            self._code_mode.__enter__()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        if self._code_mode is not None:
            self._code_mode.__exit__(*exc_info)

    def warm_up(self) -> None:
        """Load the model and build the index, then plan (and run) one request, so that no case pays for them."""
        directory = self.root / "warm-up"
        directory.mkdir()
        prepare_data(directory)
        planned, _ = plan_case(self.workspace, {"task": "load sales.csv and count its rows", "inputs": {}}, directory)
        if self.run and planned.tools and not planned.refusal:
            self.execute(planned, directory)

    def case(self, case: dict) -> CaseOutcome:
        """Plan, compare, run and check one case in a directory of its own; never raises."""
        directory = self.root / case["id"]
        directory.mkdir()
        prepare_data(directory)
        expected_refusal = case["expect"] == "not_understood"
        outcome = CaseOutcome(case["id"], case["bullet"], "error", expected_refusal=expected_refusal)
        try:
            planned, seconds = plan_case(self.workspace, case, directory)
        except Exception as error:  # a planner bug is this case's outcome, not the end of the run
            outcome.reason = f"planning raised {type(error).__name__}: {error}"
            return outcome
        outcome.plan_seconds = seconds
        outcome.planned = {"tools": planned.tools, "arguments": planned.arguments, "refusal": planned.refusal or None}
        try:
            self._judge(case, planned, directory, outcome)
        except Exception as error:  # e.g. the kernel died: report it with the case
            outcome.outcome, outcome.reason = "error", f"running or checking raised {type(error).__name__}: {error}"
        return outcome

    def _judge(self, case: dict, planned: Planned, directory: Path, outcome: CaseOutcome) -> None:
        if planned.refusal:
            if outcome.expected_refusal:
                outcome.outcome, outcome.reason = "right", f"refused as expected: {planned.refusal[:200]}"
            else:
                outcome.outcome, outcome.reason = "not_understood", planned.refusal[:300]
            return
        if outcome.expected_refusal:
            what = f"planned {' -> '.join(planned.tools) or 'nothing'} for a request the catalogs cannot serve"
            if not self.run or not planned.tools:
                outcome.outcome, outcome.reason = "silently_wrong", what
                return
            status, error, _, new_files = self.execute(planned, directory)
            if status != "ok":
                outcome.outcome, outcome.reason = "wrong_but_refused", f"{what}; the cell failed: {error}"
            else:
                wrote = f"; wrote {', '.join(path.name for path in new_files)}" if new_files else ""
                outcome.outcome, outcome.reason = "silently_wrong", f"{what}; it ran{wrote}"
            return
        differences = plan_differences(case, planned, self.tools)
        if not self.run:
            outcome.outcome = "silently_wrong" if differences else "right"
            outcome.reason = "; ".join(differences)
            return
        if planned.tools:
            status, error, value, new_files = self.execute(planned, directory)
        else:
            status, error, value, new_files = "ok", "", None, []
        if status != "ok":
            outcome.outcome, outcome.reason = "wrong_but_refused", "; ".join([*differences, f"the cell failed: {error}"])
            return
        differences += result_differences(case["expect"]["result"], value, new_files)
        outcome.outcome = "silently_wrong" if differences else "right"
        outcome.reason = "; ".join(differences)

    def execute(self, planned: Planned, directory: Path) -> tuple[str, str, dict | None, list[Path]]:
        """Run a planned cell in the shared kernel inside ``directory``: its status, error text,
        last value's description and the files it created there."""
        before = {path for path in directory.rglob("*")}
        session = "words"
        # A reset empties the namespace (no variable of an earlier case can stand in for a missing
        # one); closing figures keeps one case's plot out of the next case's image.
        prelude = (
            "%reset -f\nimport os as _words_os, sys as _words_sys\n"
            f"_words_os.chdir({str(directory)!r})\n"
            "if 'matplotlib.pyplot' in _words_sys.modules:\n    _words_sys.modules['matplotlib.pyplot'].close('all')\n"
        )
        self._code_mode.run(prelude, session)
        result = self._code_mode.run(planned.code, session)
        error = f"{result.error['ename']}: {result.error['evalue']}"[:300] if result.error else (result.stderr or "")[-300:]
        value = None
        if result.status == "ok" and planned.variable:
            described = self._code_mode.run(_DESCRIBE_VALUE % {"marker": _RESULT_MARKER, "variable": planned.variable}, session)
            line = next((line for line in described.stdout.splitlines() if line.startswith(_RESULT_MARKER)), None)
            value = json.loads(line[len(_RESULT_MARKER) :]) if line else None
        new_files = sorted(path for path in directory.rglob("*") if path.is_file() and path not in before)
        return result.status, error, value, new_files


def expected_cell(case: dict, tools: Mapping[str, Any]) -> Planned:
    """The cell a case expects, written from its expectation alone (for ``--check-cases``): the
    first accepted tool sequence called in order with the case's arguments (the first of an
    ``any_of``), each step's state-carrying parameter given the previous step's value, the first
    step's file from the inputs or the first data file the task names.

    Raises:
        ValueError: a required parameter the case gives no value for (its words leave it to the
            planner, so the case cannot be checked this way).
    """
    sequence = tool_sequences(case["expect"]["tools"])[0]
    arguments = {
        name: value["any_of"][0] if isinstance(value, dict) and set(value) == {"any_of"} else value for name, value in case["expect"]["arguments"].items()
    }
    steps_text = " ".join([case["task"]] if isinstance(case["task"], str) else case["task"])
    named_file = next(iter(re.findall(r"[\w.-]+\.(?:csv|xlsx)\b", steps_text)), None)
    lines, previous = [], None
    for number, name in enumerate(sequence, 1):
        tool = tools[name]
        lines.append(f"from {tool.module_override or tool.module} import {name} as _expected_tool_{number}")
        keywords = []
        for parameter in tool.parameters:
            qualified = f"{name}.{parameter.name}"
            if qualified in arguments:
                keywords.append(f"{parameter.python_name}={arguments[qualified]!r}")
            elif parameter.state and previous is not None:
                keywords.append(f"{parameter.python_name}={previous}")
            elif parameter.state == "tabular.file_given" and (parameter.name in case["inputs"] or named_file):
                keywords.append(f"{parameter.python_name}={case['inputs'].get(parameter.name, named_file)!r}")
            elif parameter in tool.required_parameters:
                raise ValueError(f"the case gives no value for {qualified}")
        previous = f"step_{number}"
        lines.append(f"{previous} = _expected_tool_{number}({', '.join(keywords)})")
    return Planned(tools=list(sequence), arguments=arguments, variable=previous, code="\n".join(lines))


def check_cases(cases: Sequence[dict]) -> dict[str, Any]:
    """Run each case's expected cell (:func:`expected_cell`) and check its result: whether the
    case file agrees with the catalogs' implementations (every expected-plan case should)."""
    from toolpath.planner import Workspace

    workspace = Workspace.open()
    tools = shipped_tools(workspace)
    disagreeing, skipped, agreeing = [], [], 0
    with tempfile.TemporaryDirectory(prefix="bench-words-check-") as root, Runner(workspace, Path(root)) as runner:
        for case in cases:
            if case["expect"] == "not_understood":
                continue
            directory = Path(root) / case["id"]
            directory.mkdir()
            prepare_data(directory)
            try:
                planned = expected_cell(case, tools)
            except ValueError as error:
                skipped.append({"id": case["id"], "reason": str(error)})
                continue
            status, error, value, new_files = runner.execute(planned, directory)
            differences = [f"the cell failed: {error}"] if status != "ok" else result_differences(case["expect"]["result"], value, new_files)
            if differences:
                disagreeing.append({"id": case["id"], "reason": "; ".join(differences)})
            else:
                agreeing += 1
    return {"checked": agreeing + len(disagreeing), "agree": agreeing, "disagree": disagreeing, "not_checkable": skipped}


def report(outcomes: Sequence[CaseOutcome], seconds: float, ran: bool, verbose: bool = False) -> dict[str, Any]:
    """The JSON report of the module docstring."""
    total = len(outcomes)
    counts = {name: sum(outcome.outcome == name for outcome in outcomes) for name in OUTCOMES}
    timings = sorted(outcome.plan_seconds for outcome in outcomes if outcome.plan_seconds is not None)
    percent = {name: round(100 * count / total, 1) if total else 0.0 for name, count in counts.items()}
    p95 = timings[min(len(timings) - 1, math.ceil(0.95 * len(timings)) - 1)] * 1000 if timings else None
    return {
        "python": sys.version.split()[0],
        "cases": total,
        "ran_cells": ran,
        "outcomes": counts,
        "percent": percent,
        "refusals": {
            "expected_and_refused": sum(outcome.expected_refusal and outcome.outcome == "right" for outcome in outcomes),
            "expected_but_planned": sum(outcome.expected_refusal and outcome.outcome != "right" for outcome in outcomes),
            "unexpected": counts["not_understood"],
        },
        "bullets": {
            bullet: {"cases": sum(o.bullet == bullet for o in outcomes), "right": sum(o.bullet == bullet and o.outcome == "right" for o in outcomes)}
            for bullet in BULLETS
            if any(o.bullet == bullet for o in outcomes)
        },
        "plan_ms": {
            "p50": round(statistics.median(timings) * 1000, 1) if timings else None,
            "p95": round(p95, 1) if p95 is not None else None,
            "max": round(timings[-1] * 1000, 1) if timings else None,
        },
        "targets": {
            "right_percent_at_least": 90,
            "silently_wrong": 0,
            "plan_p95_ms_at_most": 250,
            "met": percent["right"] >= 90 and counts["silently_wrong"] == 0 and (p95 is None or p95 <= 250),
        },
        "seconds": round(seconds, 1),
        "not_right": [outcome.to_dict(verbose) for outcome in outcomes if outcome.outcome != "right"],
    }


def run(cases: Sequence[dict], execute: bool = True, verbose: bool = False) -> dict[str, Any]:
    """Plan (and run) every case; the report. Refuses a cases file the catalogs contradict."""
    from toolpath.planner import Workspace

    started = time.perf_counter()
    workspace = Workspace.open()
    problems = catalog_problems(cases, shipped_tools(workspace))
    if problems:
        raise ValueError("the cases disagree with the catalogs:\n  " + "\n  ".join(problems))
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="bench-words-") as root, Runner(workspace, Path(root), run=execute) as runner:
        runner.warm_up()
        for case in cases:
            outcome = runner.case(case)
            outcomes.append(outcome)
            if verbose:
                print(f"{outcome.outcome:18} {case['id']}: {outcome.reason[:200]}", file=sys.stderr)
    return report(outcomes, time.perf_counter() - started, execute, verbose)


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=Path, default=CASES, help="the cases file (default: words_cases.yaml beside this script)")
    parser.add_argument("--case", action="append", default=[], metavar="ID", help="run only this case; repeatable")
    parser.add_argument("--no-run", action="store_true", help="plan and compare tools and arguments only; run no cell")
    parser.add_argument(
        "--check-cases",
        action="store_true",
        help="run each case's expected tools with its expected arguments and check its result (the cases against the tools; no planning)",
    )
    parser.add_argument("--verbose", action="store_true", help="print each case's outcome on stderr as it ends, and the plans of the cases not right")
    options = parser.parse_args(None if argv is None else list(argv))
    cases = load_cases(options.cases)
    unknown = sorted(set(options.case) - {case["id"] for case in cases})
    if unknown:
        parser.error(f"no case with id {', '.join(unknown)}")
    cases = [case for case in cases if not options.case or case["id"] in options.case]
    with tempfile.TemporaryDirectory(prefix="bench-words-home-") as home:
        # The embedding cache goes to a temporary home unless the caller keeps one (then the
        # catalogs are embedded once and reused, saving about half a minute per run).
        os.environ.setdefault("TOOLPATH_HOME", home)
        if options.check_cases:
            checked = check_cases(cases)
            print(json.dumps(checked, indent=2, ensure_ascii=False))
            return 1 if checked["disagree"] else 0
        result = run(cases, execute=not options.no_run, verbose=options.verbose)
    print(json.dumps(result, indent=2, ensure_ascii=False))
    return 0 if result["targets"]["met"] else 1


if __name__ == "__main__":
    # Measuring is not use: nothing a benchmark plans goes into the user's record of use.
    os.environ.setdefault("TOOLPATH_RECORD", "off")
    sys.exit(main())
