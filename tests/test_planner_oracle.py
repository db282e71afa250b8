"""The planner against a brute-force oracle on random small catalogs (property tests).

The oracle tries every subset of tools: because no tool removes a state, a subset can run in some
order exactly when every tool in it becomes applicable in the forward fixpoint over the subset, and
it reaches the goal when that fixpoint holds every goal state. The cheapest such subset is optimal.
"""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from toolpath.planner import NoPlanError, StateGraph, alternative_plans, plan
from toolpath.planner.planning.delete_free import DeleteFreeTask
from toolpath.planner.planning.steiner import MOST_GOAL_STATES, SteinerRelaxation
from toolpath.registry import State, ToolDefinition, ToolRegistry

STATES = [f"s{index}" for index in range(7)]


def oracle(tools: list[tuple[frozenset, frozenset, float]], held: frozenset, goal: frozenset, must_run: frozenset[int] = frozenset()) -> float | None:
    """The minimum cost of a plan that reaches ``goal`` and runs every tool of ``must_run`` (indices),
    or ``None`` when no plan exists."""
    best = None
    for size in range(len(tools) + 1):
        for subset in itertools.combinations(range(len(tools)), size):
            if not must_run <= set(subset):
                continue
            reached, pending = set(held), set(subset)
            progress = True
            while progress:
                progress = False
                for index in list(pending):
                    if tools[index][0] <= reached:
                        reached |= tools[index][1]
                        pending.discard(index)
                        progress = True
            if not pending and goal <= reached:
                cost = sum(tools[index][2] for index in subset)
                best = cost if best is None else min(best, cost)
    return best


def runs(steps, held, goal) -> bool:
    """Every step is applicable when it runs, and the goal holds at the end."""
    current = set(held)
    for step in steps:
        if not step.requires <= current:
            return False
        current |= step.produces
    return goal <= current


tool_strategy = st.tuples(
    st.frozensets(st.sampled_from(STATES), max_size=3),
    st.frozensets(st.sampled_from(STATES), min_size=1, max_size=3),
    st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0]),
)


@settings(max_examples=400, deadline=None)
@given(
    tools=st.lists(tool_strategy, min_size=1, max_size=12),
    held=st.frozensets(st.sampled_from(STATES), max_size=2),
    goal=st.frozensets(st.sampled_from(STATES), min_size=1, max_size=len(STATES)),  # past MOST_GOAL_STATES too
    max_expansions=st.sampled_from([50_000, 2, 0]),  # 0: no A*, the bounds alone or the fallback; 2: stopped mid-search
    must_run=st.frozensets(st.integers(0, 11), max_size=2),
)
def test_planner_matches_the_oracle(tools, held, goal, max_expansions, must_run):
    registry = ToolRegistry(package="random_catalog")
    for index, (requires, produces, cost) in enumerate(tools):
        registry.register_tool(ToolDefinition(name=f"t{index}", state_transition={"requires": requires, "produces": produces}, cost=cost))
    graph = StateGraph(registry, [State(token) for token in STATES])
    must_run = frozenset(index for index in must_run if index < len(tools))
    best = oracle(tools, held, goal, must_run)
    try:
        result = plan(graph, goal, held=held, max_expansions=max_expansions, time_budget_ms=None, must_run=[f"t{index}" for index in sorted(must_run)])
    except NoPlanError:
        assert best is None, f"the oracle found a plan of cost {best}"
        return
    assert best is not None, "the planner returned a plan the oracle says cannot exist"
    assert {f"t{index}" for index in must_run} <= {step.tool.name for step in result.steps}
    assert runs(result.steps, held, goal)
    assert result.cost == sum(step.tool.cost for step in result.steps)
    for skipped in range(len(result.steps)):
        if result.steps[skipped].tool.name in {f"t{index}" for index in must_run}:
            continue  # it runs because it must, not for the goal
        rest = result.steps[:skipped] + result.steps[skipped + 1 :]
        assert not runs(rest, held, goal), f"step {result.steps[skipped].tool.name} is redundant"
    if result.optimal:
        assert result.cost == best == result.lower_bound
    else:
        assert result.cost >= best
        assert result.lower_bound <= best + 1e-9, f"the certified lower bound {result.lower_bound} is above the optimum {best}"


@settings(max_examples=200, deadline=None)
@given(
    tools=st.lists(tool_strategy, min_size=1, max_size=10),
    held=st.frozensets(st.sampled_from(STATES), max_size=2),
    goal=st.frozensets(st.sampled_from(STATES), min_size=1, max_size=3),
    k=st.integers(1, 4),
)
def test_alternative_plans_are_distinct_valid_and_ordered(tools, held, goal, k):
    registry = ToolRegistry(package="random_catalog")
    for index, (requires, produces, cost) in enumerate(tools):
        registry.register_tool(ToolDefinition(name=f"t{index}", state_transition={"requires": requires, "produces": produces}, cost=cost))
    graph = StateGraph(registry, [State(token) for token in STATES])
    try:
        plans = alternative_plans(graph, goal, held=held, k=k)
    except NoPlanError:
        assert oracle(tools, held, goal) is None
        return
    assert 1 <= len(plans) <= k
    assert plans[0].cost == plan(graph, goal, held=held).cost
    tool_sets = [frozenset(step.tool.name for step in each.steps) for each in plans]
    assert len(set(tool_sets)) == len(tool_sets)
    assert [each.cost for each in plans] == sorted(each.cost for each in plans)
    for each in plans:
        assert runs(each.steps, held, goal)
        for skipped in range(len(each.steps)):
            assert not runs(each.steps[:skipped] + each.steps[skipped + 1 :], held, goal)


@settings(max_examples=300, deadline=None)
@given(
    tools=st.lists(tool_strategy, min_size=1, max_size=10),
    held=st.frozensets(st.sampled_from(STATES), max_size=2),
    goal=st.frozensets(st.sampled_from(STATES), min_size=1, max_size=MOST_GOAL_STATES),
    one_unheld_requirement=st.booleans(),
)
def test_the_steiner_relaxation_bounds_the_optimum_and_finds_it_when_each_tool_waits_for_one_state(tools, held, goal, one_unheld_requirement):
    if one_unheld_requirement:  # keep the held requirements and the first of the others
        tools = [((requires & held) | set(sorted(requires - held)[:1]), produces, cost) for requires, produces, cost in tools]
    task = DeleteFreeTask(
        [
            ToolDefinition(name=f"t{index}", state_transition={"requires": requires, "produces": produces}, cost=cost)
            for index, (requires, produces, cost) in enumerate(tools)
        ]
    )
    open_goal = goal - held
    if not open_goal or not open_goal <= task.state_index.keys():
        return  # nothing to plan, or a goal state no tool mentions
    relaxation = SteinerRelaxation(task.requires, task.produces, len(task.state_index))
    held_states = task.states(held)
    hmax = task.relaxed_costs(held_states, frozenset())
    tree = relaxation.solve(held_states, sorted(task.states(open_goal)), [True] * len(tools), task.cost, hmax.value, None)
    best = oracle([(frozenset(requires), frozenset(produces), cost) for requires, produces, cost in tools], held, goal)
    if tree is None:
        assert best is None, "the relaxation finds no plan where the task has one"
        return
    if best is not None:
        assert tree.cost <= best + 1e-9, f"the relaxation's optimum {tree.cost} is above the task's {best}"
    if one_unheld_requirement:
        assert best is not None and tree.cost == best
        steps = task.executable_order(sorted(tree.tools), held_states)
        assert task.is_valid(steps, held_states, task.states(open_goal)) and task.plan_cost(steps) == best
