"""Planner speed and optimality on large synthetic catalogs, against pyperplan.

Prints one JSON object. For each catalog size (``--tools``, default 1,000 and 10,000) it builds a
seeded synthetic catalog, times building the registry and the state graph, then plans

* ``--goals`` single-state goals (default 200), the common case: an agent asks for one state;
* ``--multi-goals`` goals of 2–3 states (default 50) and ``--five-goals`` goals of 5 states (default
  20), reported apart: sharing steps between goals makes these a Steiner-tree problem, much harder
  to prove optimal.

Every plan gets ``--time-budget`` milliseconds (default: the planner's own) to prove optimality; a
plan that is not proven carries a certified lower bound, and the report gives the mean gap
(cost − lower bound, absolute and relative to the cost) over those plans.

Each goal is planned twice: *cold* (bounds from the held states recomputed) and *warm* (bounds
cached, as when an agent plans several goals from the same held states). The report gives p50/p95
in ms, the share of plans proven optimal, and plan lengths.

The catalog (``synthetic_catalog``): 3,000 states in 30 layers of 100; layer 0 is held, and
declared as a catalog declares its input states (at 1,000 tools some are required by no tool, and
the planner refuses a held token nothing declares or mentions). Tools are made layer by layer: a
tool of layer j (uniform in 1..29) produces 1–2 states of layer j and requires 1–3 states: one
already producible state of layer j−1 (so a state of layer j needs a chain of j steps) and 0–2
held states. ``--generator merging`` builds ``merging_catalog`` instead,
whose tools also require states that need plans of their own (side chains that merge). Goals are
drawn from the producible states.

pyperplan (GPL, never a toolpath dependency) solves the same instances written as STRIPS PDDL, with
A* and its admissible LM-cut heuristic (optimal; unit costs, like the instances here). It runs in
its own virtual environment, on the first ``--pyperplan-goals`` goals of each kind, each limited to
``--pyperplan-timeout`` seconds:

    python -m venv benchmarks/.venv-pyperplan
    benchmarks/.venv-pyperplan/bin/pip install -r benchmarks/requirements-pyperplan.txt

Its time per instance is grounding (with its relevance analysis) plus search; parsing the domain is
done once and not counted. Speed-ups compare toolpath's *cold* times with it, on instances both
solve. Targets (issue 6): p50 ≤ 5 ms at 10,000 tools, ≥ 50× faster than pyperplan, equal costs
wherever both claim optimality. Timings on shared machines are noisy: compare figures from one run.

Fast Downward (GPL, never a toolpath dependency; ``up-fast-downward`` ships its planner binary) is
the stronger anchor: A* with LM-cut (``astar(lmcut())``, optimal) on the same PDDL, each instance
limited to ``--downward-timeout`` seconds, in its own virtual environment:

    python -m venv benchmarks/.venv-downward
    benchmarks/.venv-downward/bin/pip install -r benchmarks/requirements-downward.txt

Its time per instance is the whole driver run, translation (grounding) included, as for pyperplan;
``search_ms`` is the search component's own total. Speed-ups compare toolpath's cold times with the
driver's wall time, on instances both solve; costs must be equal wherever both prove optimality
(issue 17's targets, at 10,000 tools and 2–3-state goals: p50 ≤ 50 ms, ≥ 95 % proven, ≥ 10× faster).

Usage: python benchmarks/bench_plan.py [--generator layered|merging] [--tools 1000 10000] [--goals 200] [--multi-goals 50]
       [--five-goals 20] [--time-budget MS] [--pyperplan-python PATH] [--pyperplan-goals 20]
       [--pyperplan-timeout 10] [--downward-python PATH] [--downward-goals 20] [--downward-timeout 10]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

DEFAULT_PYPERPLAN_PYTHON = Path(__file__).resolve().parent / ".venv-pyperplan" / "bin" / "python"
DEFAULT_DOWNWARD_PYTHON = Path(__file__).resolve().parent / ".venv-downward" / "bin" / "python"
#: Fast Downward's exit codes for out of time (driver/returncodes.py).
DOWNWARD_TRANSLATE_OUT_OF_TIME, DOWNWARD_SEARCH_OUT_OF_TIME = 21, 23
STATES = 3000
LAYERS = 30
#: Deepest layer a ``merging_catalog`` tool's side requirements come from (deeper ones make plans of hundreds of steps).
SIDE_CHAIN_DEPTH = 2


def synthetic_catalog(tools: int, seed: int, states: int = STATES, layers: int = LAYERS) -> tuple[list[str], list[dict]]:
    """``(held states, tools)``; each tool is ``{"name", "requires", "produces"}`` (see the module doc)."""

    def held_ones(rng: random.Random, layer: list[list[str]], producible: list[list[str]], depth: int) -> set[str]:
        return {rng.choice(layer[0]) for _ in range(rng.randint(0, 2))}

    return _layered_catalog(tools, seed, states, layers, held_ones, most_produced=2)


def merging_catalog(tools: int, seed: int, states: int = STATES, layers: int = LAYERS) -> tuple[list[str], list[dict]]:
    """``(held states, tools)`` from the second generator (``--generator merging``): requirements
    that themselves need plans, where ``synthetic_catalog``'s are one chain plus held states.

    Layer 0 (100 states) is held. A tool of layer j requires 1–3 states: one producible state of
    layer j−1 and 0–2 producible states of a layer uniform in 0..min(SIDE_CHAIN_DEPTH, j−1) (held
    ones at depth 0), so reaching a state often means reaching a few others first, along side
    chains that merge into the main one and that goal states share. It produces 1–3 states of
    layer j. Every tool costs 1, as in ``synthetic_catalog`` (and in the PDDL the anchors solve).
    """

    def side_chains(rng: random.Random, layer: list[list[str]], producible: list[list[str]], depth: int) -> set[str]:
        return {rng.choice(producible[rng.randint(0, min(SIDE_CHAIN_DEPTH, depth - 1))] or layer[0]) for _ in range(rng.randint(0, 2))}

    return _layered_catalog(tools, seed, states, layers, side_chains, most_produced=3)


def _layered_catalog(
    tools: int, seed: int, states: int, layers: int, more_requirements: Callable[..., set[str]], most_produced: int
) -> tuple[list[str], list[dict]]:
    """Tools made layer by layer: each requires one producible state of the layer below its own and
    ``more_requirements(rng, layer, producible, depth)``, and produces 1 to ``most_produced`` states
    of its layer."""
    rng = random.Random(seed)
    per_layer = states // layers
    layer = [[f"s{depth}_{index}" for index in range(per_layer)] for depth in range(layers)]
    producible: list[list[str]] = [list(layer[0])] + [[] for _ in range(layers - 1)]
    made = []
    for number, depth in enumerate(sorted(rng.randint(1, layers - 1) for _ in range(tools))):
        while not producible[depth - 1]:  # no chain reaches the layer below yet: build lower
            depth -= 1
        requires = {rng.choice(producible[depth - 1])} | more_requirements(rng, layer, producible, depth)
        produces = rng.sample(layer[depth], rng.randint(1, most_produced))
        producible[depth].extend(state for state in produces if state not in producible[depth])
        made.append({"name": f"t{number}", "requires": sorted(requires), "produces": sorted(produces)})
    return layer[0], made


GENERATORS = {"layered": synthetic_catalog, "merging": merging_catalog}


def goals_of(held: list[str], tools: list[dict], count: int, sizes: tuple[int, int], seed: int) -> list[list[str]]:
    rng = random.Random(seed)
    reachable = sorted({state for tool in tools for state in tool["produces"]} - set(held))
    return [sorted(rng.sample(reachable, rng.randint(*sizes))) for _ in range(count)]


def summary(times_ms: list[float]) -> dict:
    ordered = sorted(times_ms)
    return {"p50_ms": round(statistics.median(ordered), 3), "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))], 3), "max_ms": round(ordered[-1], 3)}


def measure_toolpath(
    held: list[str], tools: list[dict], goal_sets: dict[str, list[list[str]]], time_budget_ms: float | None
) -> tuple[dict, dict[str, list[dict]]]:
    from toolpath.planner import StateGraph, plan
    from toolpath.registry import State, ToolDefinition, ToolRegistry

    started = time.perf_counter()
    registry = ToolRegistry()
    for tool in tools:
        registry.register_tool(
            ToolDefinition(
                name=tool["name"], module="synthetic", server_name="synthetic", state_transition={"requires": tool["requires"], "produces": tool["produces"]}
            )
        )
    registry_s = time.perf_counter() - started
    started = time.perf_counter()
    # The held states are declared, as a catalog declares its input states: some are required by
    # no tool (merging_catalog's, at 1,000 tools), and the planner refuses a held token that nothing
    # declares or mentions (most likely a typo).
    graph = StateGraph(registry, [State(token=token) for token in held])
    task = graph.delete_free_task
    graph_s = time.perf_counter() - started

    report: dict = {"registry_build_s": round(registry_s, 3), "graph_build_s": round(graph_s, 3)}
    runs: dict[str, list[dict]] = {}
    for kind, goals in goal_sets.items():
        results = []
        for goal in goals:
            task.clear_cache()
            started = time.perf_counter()
            found = plan(graph, goal, held, time_budget_ms=time_budget_ms)
            cold = (time.perf_counter() - started) * 1000
            started = time.perf_counter()
            plan(graph, goal, held, time_budget_ms=time_budget_ms)
            warm = (time.perf_counter() - started) * 1000
            results.append(
                {"cold_ms": cold, "warm_ms": warm, "cost": found.cost, "lower_bound": found.lower_bound, "steps": len(found.steps), "optimal": found.optimal}
            )
        runs[kind] = results
        unproven = [result for result in results if not result["optimal"]]
        report[kind] = {
            "goals": len(results),
            "cold": summary([result["cold_ms"] for result in results]),
            "warm": summary([result["warm_ms"] for result in results]),
            "proven_optimal_share": round(sum(result["optimal"] for result in results) / len(results), 3),
            "mean_gap_where_unproven": round(statistics.mean(result["cost"] - result["lower_bound"] for result in unproven), 3) if unproven else None,
            "mean_relative_gap_where_unproven": round(statistics.mean((result["cost"] - result["lower_bound"]) / result["cost"] for result in unproven), 3)
            if unproven
            else None,
            "plan_steps_median": statistics.median(result["steps"] for result in results),
            "plan_steps_max": max(result["steps"] for result in results),
        }
    return report, runs


def pddl(held: list[str], tools: list[dict], goals: list[list[str]], directory: Path) -> None:
    """Write ``domain.pddl`` and ``problem-N.pddl``: each tool a parameterless action, each state a 0-ary predicate."""
    states = sorted({state for tool in tools for state in tool["requires"] + tool["produces"]} | set(held))
    actions = "\n".join(
        f"(:action {tool['name']} :parameters () :precondition (and {' '.join(f'({state})' for state in tool['requires'])}) "
        f":effect (and {' '.join(f'({state})' for state in tool['produces'])}))"
        for tool in tools
    )
    predicates = " ".join(f"({state})" for state in states)
    (directory / "domain.pddl").write_text(f"(define (domain synthetic) (:requirements :strips)\n(:predicates {predicates})\n{actions})\n")
    initial = " ".join(f"({state})" for state in held)
    for number, goal in enumerate(goals):
        goal_text = " ".join(f"({state})" for state in goal)
        (directory / f"problem-{number}.pddl").write_text(
            f"(define (problem p{number}) (:domain synthetic) (:objects) (:init {initial}) (:goal (and {goal_text})))\n"
        )


def pyperplan_worker(directory: Path, problems: int, timeout: float) -> None:
    """Runs inside pyperplan's environment: solve each problem, print one JSON line per problem."""
    import signal

    from pyperplan import grounding
    from pyperplan.heuristics.lm_cut import LmCutHeuristic
    from pyperplan.pddl.parser import Parser
    from pyperplan.search import astar_search

    class OutOfTime(Exception):
        pass

    def out_of_time(signum, frame):
        raise OutOfTime

    signal.signal(signal.SIGALRM, out_of_time)
    domain = Parser(str(directory / "domain.pddl")).parse_domain()
    for number in range(problems):
        problem = Parser(str(directory / "domain.pddl"), str(directory / f"problem-{number}.pddl")).parse_problem(domain)
        signal.setitimer(signal.ITIMER_REAL, timeout)
        started = time.perf_counter()
        try:
            task = grounding.ground(problem)
            solution = astar_search(task, LmCutHeuristic(task))
            signal.setitimer(signal.ITIMER_REAL, 0)
            elapsed = (time.perf_counter() - started) * 1000
            result = {"solved": solution is not None, "ms": elapsed, "cost": len(solution) if solution is not None else None}
        except OutOfTime:
            result = {"solved": False, "ms": None, "cost": None, "timed_out": True}
        print(json.dumps(result), flush=True)


def measure_pyperplan(python: Path, held: list[str], tools: list[dict], goals: list[list[str]], timeout: float) -> list[dict]:
    with tempfile.TemporaryDirectory(prefix="toolpath-bench-plan-") as directory:
        pddl(held, tools, goals, Path(directory))
        completed = subprocess.run(
            [str(python), __file__, "--pyperplan-worker", directory, str(len(goals)), str(timeout)], capture_output=True, text=True, check=True
        )
    return [json.loads(line) for line in completed.stdout.splitlines() if line.startswith("{")]


def measure_downward(python: Path, held: list[str], tools: list[dict], goals: list[list[str]], timeout: float) -> list[dict]:
    """Fast Downward's ``astar(lmcut())`` on each goal: ``{solved, ms, search_ms, cost, timed_out}``."""
    # Found without importing the package, whose __init__ wants the unified-planning framework.
    locate = "import importlib.util, pathlib; print(pathlib.Path(importlib.util.find_spec('up_fast_downward').origin).parent / 'downward' / 'fast-downward.py')"
    script = subprocess.run([str(python), "-c", locate], capture_output=True, text=True, check=True).stdout.strip()
    results = []
    with tempfile.TemporaryDirectory(prefix="toolpath-bench-downward-") as directory:
        pddl(held, tools, goals, Path(directory))
        for number in range(len(goals)):
            started = time.perf_counter()
            # The driver enforces the limit on its translator and search processes itself (killing
            # only the driver would leave the search running); the subprocess timeout is a backstop.
            completed = subprocess.run(
                [
                    str(python),
                    script,
                    "--overall-time-limit",
                    f"{timeout:g}s",
                    "--plan-file",
                    f"{directory}/plan-{number}",
                    f"{directory}/domain.pddl",
                    f"{directory}/problem-{number}.pddl",
                    "--search",
                    "astar(lmcut())",
                ],
                capture_output=True,
                text=True,
                timeout=timeout + 30,
                cwd=directory,
            )
            elapsed = (time.perf_counter() - started) * 1000
            cost = next((float(line.rsplit(":", 1)[1]) for line in completed.stdout.splitlines() if "] Plan cost:" in line), None)
            if cost is None:
                # The driver's exit codes for running out of time in translation and in search.
                results.append(
                    {
                        "solved": False,
                        "ms": None,
                        "cost": None,
                        "timed_out": completed.returncode in (DOWNWARD_TRANSLATE_OUT_OF_TIME, DOWNWARD_SEARCH_OUT_OF_TIME),
                    }
                )
                continue
            search = next((float(line.rsplit(":", 1)[1].strip().rstrip("s")) * 1000 for line in completed.stdout.splitlines() if "] Total time:" in line), None)
            results.append({"solved": True, "ms": elapsed, "search_ms": search, "cost": cost})
    return results


def compare(toolpath_runs: list[dict], anchor_runs: list[dict], anchor: str = "pyperplan") -> dict:
    both = [(ours, theirs) for ours, theirs in zip(toolpath_runs, anchor_runs) if theirs["solved"]]
    report: dict = {"instances": len(anchor_runs), f"{anchor}_solved": len(both), f"{anchor}_timed_out": sum(bool(run.get("timed_out")) for run in anchor_runs)}
    if both:
        ours = statistics.median(pair[0]["cold_ms"] for pair in both)
        theirs = statistics.median(pair[1]["ms"] for pair in both)
        optimal_pairs = [pair for pair in both if pair[0]["optimal"]]
        if all(pair[1].get("search_ms") is not None for pair in both):
            report[f"{anchor}_search_only_p50_ms"] = round(statistics.median(pair[1]["search_ms"] for pair in both), 2)
        report |= {
            f"{anchor}_p50_ms": round(theirs, 2),
            "toolpath_cold_p50_ms_same_instances": round(ours, 3),
            "speedup_p50": round(theirs / ours, 1),
            "speedup_min": round(min(pair[1]["ms"] / pair[0]["cold_ms"] for pair in both), 1),
            "both_optimal": len(optimal_pairs),
            "equal_costs_where_both_optimal": all(pair[0]["cost"] == pair[1]["cost"] for pair in optimal_pairs),
        }
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tools", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--goals", type=int, default=200)
    parser.add_argument("--multi-goals", type=int, default=50)
    parser.add_argument("--five-goals", type=int, default=20)
    parser.add_argument(
        "--time-budget", type=float, default=None, metavar="MS", help="milliseconds per plan to prove optimality (default: the planner's default)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--generator",
        choices=sorted(GENERATORS),
        default="layered",
        help="synthetic catalog: layered (one chain plus held states per tool, unit costs) or merging (requirements that need plans of their own)",
    )
    parser.add_argument("--pyperplan-python", type=Path, default=DEFAULT_PYPERPLAN_PYTHON)
    parser.add_argument("--pyperplan-goals", type=int, default=20, help="goals of each kind pyperplan gets (it is slow)")
    parser.add_argument("--pyperplan-timeout", type=float, default=10.0, help="seconds per pyperplan instance")
    parser.add_argument("--pyperplan-worker", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--downward-python", type=Path, default=DEFAULT_DOWNWARD_PYTHON)
    parser.add_argument("--downward-goals", type=int, default=20, help="goals of each kind Fast Downward gets")
    parser.add_argument("--downward-timeout", type=float, default=10.0, help="seconds per Fast Downward instance")
    args = parser.parse_args()
    if args.pyperplan_worker:
        directory, problems, timeout = args.pyperplan_worker
        pyperplan_worker(Path(directory), int(problems), float(timeout))
        return

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from toolpath.planner.planning.plans import DEFAULT_TIME_BUDGET_MS

    time_budget_ms = args.time_budget if args.time_budget is not None else DEFAULT_TIME_BUDGET_MS
    report: dict = {"generator": args.generator, "states": STATES, "layers": LAYERS, "seed": args.seed, "time_budget_ms": time_budget_ms, "sizes": {}}
    for size in args.tools:
        held, tools = GENERATORS[args.generator](size, args.seed)
        goal_sets = {
            "single_state_goals": goals_of(held, tools, args.goals, (1, 1), args.seed + 1),
            "multi_state_goals": goals_of(held, tools, args.multi_goals, (2, 3), args.seed + 2),
            "five_state_goals": goals_of(held, tools, args.five_goals, (5, 5), args.seed + 3),
        }
        goal_sets = {kind: goals for kind, goals in goal_sets.items() if goals}
        measured, runs = measure_toolpath(held, tools, goal_sets, time_budget_ms)
        measured["tools"] = size
        if args.pyperplan_python.exists() and args.pyperplan_goals > 0:
            for kind, goals in goal_sets.items():
                sample = goals[: args.pyperplan_goals]
                theirs = measure_pyperplan(args.pyperplan_python, held, tools, sample, args.pyperplan_timeout)
                measured[kind]["vs_pyperplan"] = compare(runs[kind][: len(sample)], theirs)
        else:
            measured["vs_pyperplan"] = f"skipped: --pyperplan-goals 0, or no pyperplan environment at {args.pyperplan_python} (see this script's docstring)"
        if args.downward_python.exists() and args.downward_goals > 0:
            for kind, goals in goal_sets.items():
                sample = goals[: args.downward_goals]
                theirs = measure_downward(args.downward_python, held, tools, sample, args.downward_timeout)
                measured[kind]["vs_fast_downward"] = compare(runs[kind][: len(sample)], theirs, "fast_downward")
        else:
            measured["vs_fast_downward"] = (
                f"skipped: --downward-goals 0, or no Fast Downward environment at {args.downward_python} (see this script's docstring)"
            )
        report["sizes"][str(size)] = measured
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
