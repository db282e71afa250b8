"""bench_plan's generators make catalogs the planner plans over (issue 57: the merging one crashed)."""

from benchmark_module import load_benchmark


def test_the_merging_generator_plans_though_some_held_states_are_required_by_no_tool():
    bench_plan = load_benchmark("bench_plan")
    held, tools = bench_plan.merging_catalog(1000, seed=0)
    mentioned = {state for tool in tools for state in tool["requires"] + tool["produces"]}
    assert set(held) - mentioned, "the case that crashed: a held state no tool requires"
    goals = {
        "single_state_goals": bench_plan.goals_of(held, tools, 3, (1, 1), seed=1),
        "multi_state_goals": bench_plan.goals_of(held, tools, 2, (2, 3), seed=2),
    }
    # A small budget: the test asks for plans, not proofs of optimality (bench_plan times those).
    report, runs = bench_plan.measure_toolpath(held, tools, goals, time_budget_ms=50)
    assert {kind: report[kind]["goals"] for kind in goals} == {"single_state_goals": 3, "multi_state_goals": 2}
    assert all(run["steps"] >= 1 for results in runs.values() for run in results)
