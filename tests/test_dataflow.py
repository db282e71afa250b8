"""Data flow of planned cells, end to end: every case of ``benchmarks/dataflow_cases.yaml`` is planned
(each step's tool and the source of every argument checked), run in a real kernel in a temporary
directory, and the user's files checked unchanged afterwards (see ``benchmarks/bench_dataflow.py``)."""

import pytest
from benchmark_module import load_benchmark

bench_dataflow = load_benchmark("bench_dataflow")
CASES = bench_dataflow.load_cases()


@pytest.fixture(scope="module")
def runner():
    """One runner for the module: one Workspace (and skill index) per catalog set."""
    return bench_dataflow.Runner()


def test_every_case_lists_every_argument_of_every_step():
    """The expectations name real tools and all of their parameters, required and optional."""
    from toolpath.planner import Workspace

    assert len(CASES) >= 30
    registries = {name: Workspace.open(catalogs["catalogs"]).loaded.registry for name, catalogs in bench_dataflow.CATALOG_SETS.items()}
    for case in CASES:
        registry = registries[case.get("catalogs", "shipped")]
        for step in case.get("steps", []):
            server, name = step["tool"].split(".", 1)
            tool = registry.get_tool_by_server_and_name(server, name)
            parameters = {parameter.python_name for parameter in tool.parameters}
            assert set(step.get("arguments") or {}) == parameters, f"{case['name']}: {step['tool']} has parameters {sorted(parameters)}"


@pytest.mark.integration
@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_case(runner, case):
    result = runner.run(case)
    assert result.passed, result.report()
