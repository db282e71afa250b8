import random

import pytest

from toolpath.catalogs import default_catalog_paths
from toolpath.planner import NoPlanError, StateGraph, UnknownStateError, alternative_plans, plan, plan_to_run
from toolpath.planner.planning.plans import qualified_name
from toolpath.planner.planning.steiner import MOST_GOAL_STATES
from toolpath.registry import ToolDefinition, ToolRegistry, load_catalogs


def graph_of(*tools):
    """tools: (name, requires, produces[, cost])."""
    registry = ToolRegistry(package="demo")
    for name, requires, produces, *cost in tools:
        registry.register_tool(ToolDefinition(name=name, state_transition={"requires": requires, "produces": produces}, cost=cost[0] if cost else 1))
    return StateGraph(registry)


def names(result):
    return [step.tool.name for step in result.steps]


def assert_valid(result, held=()):
    current = set(held)
    for step in result.steps:
        assert step.requires <= current, f"{step.tool.name} runs before its requirements"
        current |= step.produces
    assert result.goal <= current


def test_chemistry_descriptors_plan(chemistry_graph):
    result = plan(chemistry_graph, ["chemistry.descriptors_computed"])
    assert names(result) == ["parse_molecule", "compute_descriptors"]
    assert result.cost == 2 and result.optimal
    assert result.steps[1].satisfied_by == {"chemistry.molecule_parsed": 0}


def test_chemistry_plan_from_held_state_skips_parsing(chemistry_graph):
    result = plan(chemistry_graph, ["chemistry.descriptors_computed"], held=["chemistry.molecule_parsed"])
    assert names(result) == ["compute_descriptors"]
    assert result.steps[0].satisfied_by == {"chemistry.molecule_parsed": None}


def test_two_goals_share_the_fingerprint_step(chemistry_graph):
    result = plan(chemistry_graph, ["chemistry.similarity_computed", "chemistry.molecules_clustered"])
    assert sorted(names(result)) == ["cluster_molecules", "compute_fingerprints", "compute_similarity"]
    assert names(result)[0] == "compute_fingerprints"


def test_diamond_runs_the_shared_step_once():
    graph = graph_of(("root", [], ["s.a"]), ("left", ["s.a"], ["s.b"]), ("right", ["s.a"], ["s.c"]), ("join", ["s.b", "s.c"], ["s.d"]))
    result = plan(graph, ["s.d"])
    assert names(result).count("root") == 1 and len(result.steps) == 4
    assert names(result)[-1] == "join"
    assert_valid(result)


def test_and_requires_both_branches():
    graph = graph_of(("make_a", [], ["s.a"]), ("make_b", [], ["s.b"]), ("join", ["s.a", "s.b"], ["s.goal"]))
    result = plan(graph, ["s.goal"])
    assert set(names(result)) == {"make_a", "make_b", "join"}
    assert_valid(result)


def test_cheapest_plan_wins_over_the_shortest():
    graph = graph_of(("direct", [], ["s.goal"], 10), ("step_one", [], ["s.mid"], 1), ("step_two", ["s.mid"], ["s.goal"], 1))
    result = plan(graph, ["s.goal"])
    assert names(result) == ["step_one", "step_two"] and result.cost == 2


def test_goal_already_held_gives_an_empty_plan():
    graph = graph_of(("make", [], ["s.goal"]))
    result = plan(graph, ["s.goal"], held=["s.goal"])
    assert result.steps == () and result.cost == 0 and result.optimal


def test_unreachable_goal_names_the_missing_state():
    graph = graph_of(("needs_key", ["s.key"], ["s.door_open"]), ("walk", ["s.door_open"], ["s.inside"]))
    with pytest.raises(NoPlanError) as caught:
        plan(graph, ["s.inside"])
    assert caught.value.unreachable == ["s.inside"]
    assert caught.value.missing == {"s.inside": ["s.key"]}
    assert "to reach s.inside you need s.key, and no tool produces s.key" in str(caught.value)


def test_avoiding_the_only_producer_makes_the_goal_unreachable(chemistry_graph):
    with pytest.raises(NoPlanError) as caught:
        plan(chemistry_graph, ["chemistry.molecules_clustered"], avoid=["compute_fingerprints"])
    assert caught.value.missing == {"chemistry.molecules_clustered": ["chemistry.fingerprints_computed"]}
    assert caught.value.avoided == {"chemistry.fingerprints_computed": ["compute_fingerprints"]}
    assert "only avoided tools produce chemistry.fingerprints_computed: compute_fingerprints" in str(caught.value)


def test_zero_cost_tools_leave_no_redundant_steps():
    graph = graph_of(("free_noise", [], ["s.noise"], 0), ("free", [], ["s.a"], 0), ("finish", ["s.a"], ["s.goal"], 1))
    result = plan(graph, ["s.goal"])
    assert names(result) == ["free", "finish"] and result.cost == 1


def test_a_free_step_needed_only_by_a_dropped_step_is_dropped_too():
    # Found by the oracle property test: "loop" (free, needs s.a) is redundant once "both" runs, and
    # then so is "start", which only fed "loop".
    graph = graph_of(("start", [], ["s.a"], 0), ("both", [], ["s.b", "s.c"], 0.5), ("loop", ["s.a"], ["s.a", "s.b"], 0))
    result = plan(graph, ["s.b", "s.c"])
    assert names(result) == ["both"] and result.cost == 0.5


def test_cycles_in_the_graph_are_handled():
    graph = graph_of(("start", [], ["s.a"]), ("forward", ["s.a"], ["s.b"]), ("back", ["s.b"], ["s.a"]), ("finish", ["s.b"], ["s.goal"]))
    result = plan(graph, ["s.goal"])
    assert names(result) == ["start", "forward", "finish"]


def test_bounds_prove_a_diamond_optimal_without_search():
    graph = graph_of(("root", [], ["s.a"], 0), ("left", ["s.a"], ["s.b"], 0), ("right", ["s.a"], ["s.c"]), ("join", ["s.b", "s.c"], ["s.d"]))
    result = plan(graph, ["s.d"], max_expansions=0)
    assert result.optimal and result.cost == 2
    assert_valid(result)


# Seven tools each produce six of seven goal states: any two reach all seven. LM-cut, the
# conjunctions of two or three goal states and the Steiner-tree bound (which takes six goal states
# at most) all bound the cost by 1 only (one tool holds any six), so proving that 2 is the minimum
# takes A*.
COVERED = [f"s.g{n}" for n in range(1, MOST_GOAL_STATES + 2)]
SET_COVER = tuple((f"without_{n}", [], [state for state in COVERED if state != left_out]) for n, left_out in enumerate(COVERED))


def test_search_proves_what_the_bounds_cannot():
    result = plan(graph_of(*SET_COVER), COVERED)
    assert result.optimal and result.cost == 2
    assert_valid(result)


def test_goal_states_that_pair_up_in_one_tool_but_never_all_three_are_proven_without_search():
    # Each pair of goal states comes from one tool, so h_max and the pair bound say 1; the bound
    # from the three together says 2.
    graph = graph_of(("x", [], ["s.g1", "s.g2"]), ("y", [], ["s.g2", "s.g3"]), ("z", [], ["s.g1", "s.g3"]))
    result = plan(graph, ["s.g1", "s.g2", "s.g3"], max_expansions=0)
    assert result.optimal and result.cost == result.lower_bound == 2
    assert_valid(result)


def test_a_goal_state_on_the_way_to_another_is_passed_rather_than_reached_apart():
    # Two equally cheap ways to s.deep; only the second passes s.side (its first step produces
    # both). h_max's achievers may take the first and then add a step for s.side; the pair bound
    # finds the shared plan and proves it.
    graph = graph_of(
        ("side_alone", [], ["s.side"]),
        ("plain_first", [], ["s.a"]),
        ("plain_second", ["s.a"], ["s.deep"]),
        ("shared_first", [], ["s.b", "s.side"]),
        ("shared_second", ["s.b"], ["s.deep"]),
    )
    result = plan(graph, ["s.deep", "s.side"], max_expansions=0)
    assert names(result) == ["shared_first", "shared_second"]
    assert result.optimal and result.cost == 2


def test_fallback_past_the_search_budget_is_valid_and_says_it_is_not_proven_optimal():
    result = plan(graph_of(*SET_COVER), COVERED, max_expansions=0)
    assert not result.optimal
    assert_valid(result)
    assert len(result.steps) == 2
    # LM-cut proves only that no plan costs less than 1: the gap is certified, not guessed
    assert result.lower_bound == 1 and result.gap == 1
    assert result.to_dict()["lower_bound"] == 1


# Singles cost 0.9 and pairs 1.0 (a ring: g1 with g2, ..., g8 with g1): plans built goal state by
# goal state mix pairs and singles, where the best plan takes four pairs (4). The Steiner-tree
# bound takes six of the eight goal states (3), so only A* proves it.
RING = [f"s.g{n}" for n in range(1, 9)]
PAIRS = (
    *((f"pair{n}", [], [RING[n], RING[(n + 1) % len(RING)]]) for n in range(len(RING))),
    *((f"single{n}", [], [RING[n]], 0.9) for n in range(len(RING))),
)


def test_a_stopped_search_bounds_the_optimum_from_below_and_a_full_one_finds_it():
    stopped = plan(graph_of(*PAIRS), RING, max_expansions=0)
    assert not stopped.optimal and stopped.cost > 4
    assert stopped.lower_bound == pytest.approx(4.0)  # never above the optimum
    full = plan(graph_of(*PAIRS), RING, time_budget_ms=None)
    assert full.optimal and full.cost == full.lower_bound == 4.0


def test_goal_states_that_tools_reach_in_pairs_are_proven_by_the_steiner_tree_bound_without_search():
    # Four goal states of the ring above: h_max, pairs and triples bound the cost by 1 and goal
    # state by goal state builds 2.8; the Steiner tree over subsets of goal states is exact here
    # (no tool requires anything) and proves the two pairs optimal with no A* at all.
    goal = RING[:4]
    tools = [tool for tool in PAIRS if set(tool[2]) <= set(goal)]
    result = plan(graph_of(*tools), goal, max_expansions=0)
    assert result.optimal and result.cost == 2 and names(result) == ["pair0", "pair2"]


def test_a_tool_that_must_run_is_the_goal_of_the_steiner_tree_and_no_other_tool():
    # use_y must run and needs s.y; 'both' gives s.x and s.y for 1.5, where the cheapest achiever
    # of each (x_alone, y_alone) costs 2 together. The tree must end at use_y itself: taking any
    # other tool for it ('first', listed first) would bound the cost by 2 and "prove" the dear plan.
    graph = graph_of(
        ("first", [], ["s.a"]),
        ("x_alone", [], ["s.x"]),
        ("y_alone", [], ["s.y"]),
        ("both", [], ["s.x", "s.y"], 1.5),
        ("use_y", ["s.y"], ["s.done"], 0),
    )
    result = plan(graph, ["s.x"], must_run=["use_y"], max_expansions=0)
    assert result.optimal and result.cost == 1.5 and names(result) == ["both", "use_y"]


def test_a_time_budget_of_zero_stops_the_search_with_a_certified_gap():
    result = plan(graph_of(*SET_COVER), COVERED, time_budget_ms=0)
    assert not result.optimal and result.cost == 2 and result.lower_bound == 1
    assert plan(graph_of(*SET_COVER), COVERED, time_budget_ms=None).optimal


def test_unknown_state_suggests_close_tokens(chemistry_graph):
    with pytest.raises(UnknownStateError, match="did you mean chemistry.molecules_clustered"):
        plan(chemistry_graph, ["chemistry.molecule_clustered"])


def test_empty_goal_is_rejected(chemistry_graph):
    with pytest.raises(ValueError, match="goal is empty"):
        plan(chemistry_graph, [])


def test_graph_queries(chemistry_graph):
    assert [tool.name for tool in chemistry_graph.tools_for("chemistry.molecules_clustered")] == ["cluster_molecules"]
    assert {tool.name for tool in chemistry_graph.next_steps(set())} == {"parse_molecule", "filter_drug_like", "compute_fingerprints"}
    overview = chemistry_graph.overview()
    assert overview["states"] == 10 and overview["tools"] == 8 and overview["undeclared_states"] == []
    exported = chemistry_graph.to_networkx()
    assert exported.has_edge(("state", "chemistry.molecule_parsed"), ("tool", 1))


def test_alternative_plans_offer_the_other_routes_cheapest_first():
    graph = graph_of(("direct", [], ["goal"], 5), ("cheap_a", [], ["mid"], 1), ("cheap_b", ["mid"], ["goal"], 1), ("other", [], ["goal"], 3))
    plans = alternative_plans(graph, ["goal"], k=5)
    assert [names(each) for each in plans] == [["cheap_a", "cheap_b"], ["other"], ["direct"]]
    assert [each.cost for each in plans] == [2, 3, 5]
    with pytest.raises(ValueError):
        alternative_plans(graph, ["goal"], k=0)


def random_catalog_graph(seed, tools=250, states=60, costs=(0, 1, 2, 3.5)):
    """A catalog like a user's generated one: random requires (0-2) and produces (1-2), many free tools."""
    rng = random.Random(seed)
    specs = []
    for number in range(tools):
        requires = rng.sample(range(states), rng.randint(0, 2))
        produces = rng.sample(range(states), rng.randint(1, 2))
        specs.append((f"t{number}", [f"r.s{index}" for index in requires], [f"r.s{index}" for index in produces], rng.choice(costs)))
    return graph_of(*specs), rng


@pytest.mark.parametrize("seed", range(3))
def test_many_zero_cost_tools_still_give_proven_optimal_plans_and_ordered_alternatives(seed):
    graph, rng = random_catalog_graph(seed)
    reachable = sorted(graph.reachable(()))
    for _ in range(5):
        goal = rng.sample(reachable, 4)
        # Proven, not proven in time: a generous budget, so a loaded machine cannot fail the test (bench_plan times it).
        found = alternative_plans(graph, goal, k=5, time_budget_ms=10_000)
        assert found[0].optimal, "a 250-tool catalog with free tools should be solved exactly"
        assert [alternative.cost for alternative in found] == sorted(alternative.cost for alternative in found)
        for alternative in found:
            assert_valid(alternative)


def test_a_single_token_may_be_passed_as_a_plain_string(chemistry_graph):
    as_string = plan(chemistry_graph, "chemistry.descriptors_computed", avoid="filter_drug_like")
    as_list = plan(chemistry_graph, ["chemistry.descriptors_computed"], avoid=["filter_drug_like"])
    assert names(as_string) == names(as_list) and as_string.cost == as_list.cost


def test_plan_to_run_ends_with_the_tool_after_a_plan_to_its_requirements():
    graph = graph_of(("start", [], ["s.a"]), ("middle", ["s.a"], ["s.b"]), ("finish", ["s.b"], ["s.goal"]), ("side", [], ["s.c"]))
    result = plan_to_run(graph, "finish")
    assert names(result) == ["start", "middle", "finish"] and result.cost == 3 and result.optimal
    assert result.goal == {"s.goal"}
    assert names(plan_to_run(graph, "middle", held=["s.a"])) == ["middle"]
    with pytest.raises(NoPlanError):
        plan_to_run(graph, "finish", avoid=["start"])


def test_a_goal_behind_a_cycle_nothing_starts_names_the_cycle():
    graph = graph_of(("make_x", ["s.y"], ["s.x"]), ("make_y", ["s.x"], ["s.y"]))
    with pytest.raises(NoPlanError) as caught:
        plan(graph, ["s.x"])
    assert caught.value.missing == {"s.x": []} and caught.value.circular == {"s.x": ["s.x", "s.y"]}
    assert "a cycle no tool or held state starts" in str(caught.value)
    assert names(plan(graph, ["s.x"], held=["s.y"])) == ["make_x"]


def sheets_and_lab_graph():
    """A chart from a file, its table loaded by a sheets tool or, at the same cost, by a lab tool
    registered first (what the search would otherwise take) that also tabulates measurements."""
    registry = ToolRegistry(package="demo")
    for name, server, requires, produces in [
        ("tabulate_measurements", "lab", ["sheets.file_given"], ["sheets.table_loaded", "lab.measurements_tabulated"]),
        ("read_table", "sheets", ["sheets.file_given"], ["sheets.table_loaded"]),
        ("draw_chart", "sheets", ["sheets.table_loaded"], ["sheets.chart_drawn"]),
    ]:
        registry.register_tool(ToolDefinition(name=name, server_name=server, state_transition={"requires": requires, "produces": produces}))
    return StateGraph(registry)


def test_at_equal_cost_the_plan_stays_in_the_goals_domain_and_lists_the_other_route():
    # Registered first, the bridge from another domain is what the search would otherwise take.
    graph = sheets_and_lab_graph()
    chosen = plan(graph, ["sheets.chart_drawn"], held=["sheets.file_given"])
    assert names(chosen) == ["read_table", "draw_chart"]
    assert [(tie.chosen, tie.over) for tie in chosen.tie_breaks] == [("sheets.read_table", ("lab.tabulate_measurements",))]
    assert "lab.measurements_tabulated" in chosen.tie_breaks[0].because
    # The other route is still there, at the same cost; and when the goal is the other domain's, it wins.
    assert [names(each) for each in alternative_plans(graph, ["sheets.chart_drawn"], held=["sheets.file_given"], k=2)] == [
        ["read_table", "draw_chart"],
        ["tabulate_measurements", "draw_chart"],
    ]
    assert names(plan(graph, ["sheets.chart_drawn", "lab.measurements_tabulated"], held=["sheets.file_given"])) == ["tabulate_measurements", "draw_chart"]


@pytest.fixture(scope="module")
def shipped_graph():
    """The shipped catalogs: chemistry's tabulate_descriptors also loads a table (from a SMILES column)."""
    loaded = load_catalogs(default_catalog_paths())
    return StateGraph(loaded.registry, loaded.states)


def test_a_histogram_of_a_plain_table_is_not_planned_through_the_chemistry_catalog(shipped_graph):
    held = ["tabular.file_given"]
    chosen = plan(shipped_graph, ["tabular.histogram_plotted"], held=held)
    assert [qualified_name(step.tool) for step in chosen.steps] == ["tabular.load_table", "tabular.plot_histogram"]
    others = alternative_plans(shipped_graph, ["tabular.histogram_plotted"], held=held, k=2)
    assert [qualified_name(step.tool) for step in others[1].steps] == ["chemistry.tabulate_descriptors", "tabular.plot_histogram"]
    assert others[1].cost == chosen.cost


def test_the_tie_break_search_shares_the_plans_time_budget(monkeypatch):
    # One plan, one budget: the search for a plan that stays in the goal's domain gets what the
    # first search left, and none when it used it all (it had a budget of its own, doubling the
    # time of plans that reach their budget). The clock is made to jump past the budget during the
    # first search.
    import time

    from toolpath.planner.planning import plans

    graph = sheets_and_lab_graph()
    assert names(plan(graph, ["sheets.chart_drawn"], held=["sheets.file_given"])) == ["read_table", "draw_chart"]  # the tie-break search ran

    skipped = {"seconds": 0.0}

    class Clock:
        @staticmethod
        def perf_counter():
            return time.perf_counter() + skipped["seconds"]

    searches = []
    searched = plans._cheapest

    def slow_search(*arguments):
        searches.append(arguments)
        found = searched(*arguments)
        skipped["seconds"] += 1.0  # this search took a second: the 250 ms budget is spent
        return found

    monkeypatch.setattr(plans, "time", Clock)
    monkeypatch.setattr(plans, "_cheapest", slow_search)
    chosen = plan(graph, ["sheets.chart_drawn"], held=["sheets.file_given"], time_budget_ms=250)
    assert len(searches) == 1
    assert names(chosen) == ["tabulate_measurements", "draw_chart"] and chosen.tie_breaks == ()


def test_a_dearer_plan_in_the_goals_domain_never_wins():
    registry = ToolRegistry(package="demo")
    registry.register_tool(
        ToolDefinition(name="bridge", server_name="lab", state_transition={"requires": [], "produces": ["sheets.table_loaded", "lab.x"]}, cost=1)
    )
    registry.register_tool(
        ToolDefinition(name="read", server_name="sheets", state_transition={"requires": [], "produces": ["sheets.table_loaded"]}, cost=1.001)
    )
    chosen = plan(StateGraph(registry), ["sheets.table_loaded"])
    assert names(chosen) == ["bridge"] and chosen.tie_breaks == ()


def trip_graph() -> StateGraph:
    """A user-given request that three tools read, through parameters named two ways."""
    from toolpath.registry import State

    registry = ToolRegistry(package="trip")
    for name, parameter, produces in [
        ("search_flights", "request", "trip.flights_found"),
        ("search_trains", "from", "trip.trains_found"),
        ("search_hotels", "request", "trip.hotels_found"),
    ]:
        registry.register_tool(
            ToolDefinition(
                name=name,
                required_parameters=[{"name": parameter, "type": "str", "state": "trip.request_given"}],
                state_transition={"requires": ["trip.request_given"], "produces": [produces]},
            )
        )
    states = [State(token="trip.request_given", description="The traveller's request is known.", input=True), State(token="trip.budget_given", input=True)]
    return StateGraph(registry, states)


def test_a_missing_input_state_names_every_parameter_that_carries_it_once():
    graph = trip_graph()
    for goal in ("trip.flights_found", "trip.hotels_found"):  # the second explanation reads what the first built
        with pytest.raises(NoPlanError) as caught:
            plan(graph, [goal])
        assert caught.value.given_by == {"trip.request_given": ["from_", "request"]}
        assert str(caught.value) == (
            f"no plan reaches the goal: to reach {goal} you need trip.request_given, and trip.request_given is given by the user: "
            "give it as the input 'from_' or 'request', or hold trip.request_given"
        )
    assert graph.parameters_carrying("trip.budget_given") == []


def test_holding_a_declared_state_no_tool_uses_is_harmless_and_an_unknown_one_is_refused():
    graph = trip_graph()
    assert [step.tool.name for step in plan(graph, ["trip.flights_found"], held=["trip.request_given", "trip.budget_given"]).steps] == ["search_flights"]
    with pytest.raises(UnknownStateError, match="unknown state 'trip.budget_gven'.*did you mean trip.budget_given"):
        plan(graph, ["trip.flights_found"], held=["trip.request_given", "trip.budget_gven"])
