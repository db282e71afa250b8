"""The ``Examples`` sections of the public entry points outside ``registry/`` run as doctests.

pytest collects the doctests of ``registry/`` itself (``--doctest-modules``); ``planner/`` and
``kernel/`` are not collected whole, which would import every one of their modules (servers,
gateways, the CLI) to find a handful of examples. Each entry point's examples run here instead, in
a namespace of their own (so an example imports what it uses, as a reader copying it would), with
this directory's fixtures: a temporary ``TOOLPATH_HOME`` and the test run's embedding model.
"""

from __future__ import annotations

import doctest

import pytest

from toolpath.kernel import CodeMode
from toolpath.planner import Workspace, plan

#: The entry points whose examples run, by the name a failure reports.
ENTRY_POINTS = {
    "toolpath.planner.plan": plan,
    "toolpath.planner.Workspace.search": Workspace.search,
    "toolpath.planner.Workspace.plan_task": Workspace.plan_task,
    "toolpath.kernel.CodeMode.run": CodeMode.run,
}

#: Entry points whose examples load the embedding model or start a kernel.
INTEGRATION = {"toolpath.planner.Workspace.search", "toolpath.planner.Workspace.plan_task", "toolpath.kernel.CodeMode.run"}


@pytest.mark.parametrize("name", [pytest.param(name, marks=[pytest.mark.integration] if name in INTEGRATION else []) for name in ENTRY_POINTS])
def test_examples_run_as_shown(name):
    tests = doctest.DocTestFinder(recurse=False).find(ENTRY_POINTS[name], name, globs={})
    assert sum(len(test.examples) for test in tests) > 0, f"{name} has no examples in its docstring"
    runner = doctest.DocTestRunner()
    report: list[str] = []
    for test in tests:
        runner.run(test, out=report.append)
    if runner.failures:
        pytest.fail("".join(report), pytrace=False)  # doctest's report says which example, where, expected and got
