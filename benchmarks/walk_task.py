"""How far a request travels through the code before it is planned (issue 51): the walk of ``task``
from :meth:`toolpath.planner.Workspace.plan_task` to the chosen plan.

Prints one JSON object. Each request below is planned once with the tracer off (so the model and the
index are loaded) and once with :func:`sys.setprofile` on. A **stop** is a call of a toolpath function
that is given the request's words: the task itself, a piece of its text of 16 characters or more (a
clause or part), or an object that carries it (an attribute ``task``, ``text`` or ``request`` holding
one); a call whose only argument is ``self`` (a property) is none. The walk is counted once with each
function as one stop where it is first reached, and once call by call. **Files** are the distinct
source files of the stops, and a **return** is a stop in a file the walk had already left. Also per
walk: the parameters of the ``planner/tasks`` functions on it (their sum and the widest). Also
reported: the most parameters of any function in ``planner/tasks/`` (``self`` and ``cls`` not
counted), and the largest modules and classes of ``planner/`` and ``kernel/`` in lines.

Usage: python benchmarks/walk_task.py
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path
from typing import Any

import toolpath
from toolpath.planner import Workspace

ROOT = Path(toolpath.__file__).resolve().parent.parent  # the source tree the import hooks map to
REQUESTS = (
    ("identify the functional groups of this molecule and check Lipinski's rule of five", {"smiles": "CC(=O)Oc1ccccc1C(=O)O"}),
    ("I have a table 'people.csv'. Describe its columns, then plot a histogram of age", None),
)


def _carries(value: Any, task: str) -> bool:
    if isinstance(value, str):
        return len(value) >= 16 and value in task
    if isinstance(value, (list, tuple)) and value and all(isinstance(item, str) for item in value):
        return any(_carries(item, task) for item in value)
    return any(isinstance(getattr(value, name, None), (str, tuple)) and _carries(getattr(value, name), task) for name in ("task", "text", "request"))


def _returns(files: list[str]) -> int:
    """How often ``files`` (in walk order) enters a file it had already left."""
    returns, left, current = 0, set(), None
    for file in files:
        if file != current:
            if current is not None:
                left.add(current)
            returns += file in left
            current = file
    return returns


def walk(workspace: Workspace, task: str, inputs: dict | None) -> dict[str, Any]:
    """The walk of one ``plan_task(task, inputs)``, counted two ways: ``first_reach`` (each function
    once, where the walk first reaches it) and ``calls`` (every call, consecutive calls of one
    function as one), each ``{"stops", "files", "returns"}``; ``parameters``: the parameters of the
    planner/tasks functions on the walk (``self`` not counted), their sum and the widest; ``path``:
    the first-reach stops."""
    calls: list[tuple[str, str]] = []
    widths: dict[tuple[str, str], int] = {}

    def profile(frame: Any, event: str, _argument: Any) -> None:
        if event != "call":
            return
        path = frame.f_code.co_filename
        if not path.startswith(str(ROOT)) or any(folder in path for folder in ("/benchmarks/", "/.venv", "/tests/")):
            return
        code = frame.f_code
        names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)]
        if names in (("self",), ("cls",)):  # a property or a method of no argument reads an object: no stop
            return
        arguments = [frame.f_locals.get(name) for name in names]
        if any(_carries(argument, task) for argument in arguments):
            stop = (str(Path(path).relative_to(ROOT)), code.co_qualname)
            widths[stop] = len([name for name in names if name not in ("self", "cls")])
            if not calls or calls[-1] != stop:
                calls.append(stop)

    sys.setprofile(profile)
    try:
        workspace.plan_task(task, inputs, time_budget_s=None)
    finally:
        sys.setprofile(None)
    first = list(dict.fromkeys(calls))
    stages = {stop: width for stop, width in widths.items() if stop[0].startswith("planner/tasks/")}
    widest = max(stages, key=stages.__getitem__)
    return {
        "first_reach": {"stops": len(first), "files": len({file for file, _ in first}), "returns": _returns([file for file, _ in first])},
        "calls": {"stops": len(calls), "files": len({file for file, _ in calls}), "returns": _returns([file for file, _ in calls])},
        "parameters": {"sum": sum(stages.values()), "widest": stages[widest], "widest_function": ":".join(widest)},
        "path": [f"{file}:{name}" for file, name in first],
    }


def _parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    arguments = node.args
    names = [argument.arg for argument in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)]
    names += [argument.arg for argument in (arguments.vararg, arguments.kwarg) if argument is not None]
    return len([name for name in names if name not in ("self", "cls")])


def sizes() -> dict[str, Any]:
    """The widest signature in planner/tasks and the largest modules and classes of planner/ and kernel/."""
    widest: tuple[int, str] = (0, "")
    modules: list[tuple[int, str]] = []
    classes: list[tuple[int, str]] = []
    for folder in ("planner", "kernel"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            source = path.read_text()
            relative = str(path.relative_to(ROOT))
            modules.append((len(source.splitlines()), relative))
            for node in ast.walk(ast.parse(source)):
                if isinstance(node, ast.ClassDef):
                    classes.append((node.end_lineno - node.lineno + 1, f"{relative}:{node.name}"))
                elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and relative.startswith("planner/tasks/"):
                    widest = max(widest, (_parameters(node), f"{relative}:{node.name}"))
    return {
        "widest_signature_in_planner_tasks": {"parameters": widest[0], "function": widest[1]},
        "largest_modules": [{"lines": lines, "module": name} for lines, name in sorted(modules, reverse=True)[:5]],
        "largest_classes": [{"lines": lines, "class": name} for lines, name in sorted(classes, reverse=True)[:5]],
    }


def main() -> None:
    workspace = Workspace.open()
    walks = {}
    for task, inputs in REQUESTS:
        workspace.plan_task(task, inputs, time_budget_s=None)  # loads the model and builds the index
        walks[task] = walk(workspace, task, inputs)
    print(json.dumps({"walks": walks, **sizes()}, indent=2))


if __name__ == "__main__":
    main()
