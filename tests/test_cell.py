import ast

import pytest

from toolpath.planner import plan, render_cell
from toolpath.planner.tasks.cell import InputError, KernelView

ASPIRIN = "CC(=O)Oc1ccccc1C(=O)O"


def compiles(code):
    compile(code, "<cell>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    return True


def test_cell_binds_only_path_handles_and_wires_outputs(chemistry_graph):
    cell = render_cell(plan(chemistry_graph, ["chemistry.descriptors_computed"]), {"smiles": ASPIRIN}, "is aspirin drug-like?")
    assert cell.handles == {"chemistry": ["parse_molecule", "compute_descriptors"]}
    assert "cluster_molecules" not in cell.code
    assert f"smiles = {ASPIRIN!r}" in cell.code
    assert "molecule = await chemistry.parse_molecule(smiles=smiles)" in cell.code
    assert "descriptors = await chemistry.compute_descriptors(molecule=molecule)" in cell.code
    assert cell.code.rstrip().endswith("\ndescriptors")
    assert cell.unbound == () and cell.result_variables == ("descriptors",)
    assert compiles(cell.code)


def test_unbound_required_parameter_is_listed_and_cell_still_compiles(chemistry_graph):
    cell = render_cell(plan(chemistry_graph, ["chemistry.similarity_computed"]), {"smiles_list": ["CCO", "CCN"]})
    assert [parameter.parameter for parameter in cell.unbound] == ["query_smiles"]
    assert "query_smiles: str (parameter query_smiles of compute_similarity)" in cell.instructions
    assert compiles(cell.code)


def test_optional_parameters_take_only_step_qualified_inputs(chemistry_graph):
    goal = ["chemistry.molecules_clustered"]
    plain = render_cell(plan(chemistry_graph, goal), {"smiles_list": ["CCO"]})
    assert "distance_threshold" not in plain.code
    assert plain.arguments[1]["distance_threshold"].label == "default"
    # A plain input fills required parameters only: it is reported unused, with how to pass it.
    unqualified = render_cell(plan(chemistry_graph, goal), {"smiles_list": ["CCO"], "distance_threshold": 0.8})
    assert "distance_threshold" not in unqualified.code and unqualified.unused_inputs == ("distance_threshold",)
    assert "pass cluster_molecules.distance_threshold" in unqualified.advice["distance_threshold"]
    tuned = render_cell(plan(chemistry_graph, goal), {"smiles_list": ["CCO"], "cluster_molecules.distance_threshold": 0.8})
    assert "cluster_molecules_distance_threshold = 0.8" in tuned.code
    assert "cluster_molecules(fingerprints=fingerprints, distance_threshold=cluster_molecules_distance_threshold)" in tuned.code
    assert tuned.arguments[1]["distance_threshold"].label == "input cluster_molecules.distance_threshold"
    assert tuned.arguments[1]["fingerprints"].label == "step 1" and tuned.unused_inputs == ()
    with pytest.raises(InputError, match="cluster_molecules has no parameter 'threshold'"):
        render_cell(plan(chemistry_graph, goal), {"smiles_list": ["CCO"], "cluster_molecules.threshold": 0.8})


def test_unused_inputs_are_reported(chemistry_graph):
    cell = render_cell(plan(chemistry_graph, ["chemistry.descriptors_computed"]), {"smiles": "CCO", "colour": "blue"})
    assert cell.unused_inputs == ("colour",)
    assert "colour" not in cell.code


def test_several_goals_end_with_a_dict_of_results(chemistry_graph):
    cell = render_cell(
        plan(chemistry_graph, ["chemistry.similarity_computed", "chemistry.molecules_clustered"]), {"smiles_list": ["CCO"], "query_smiles": "CCO"}
    )
    assert cell.code.rstrip().splitlines()[-1] == "{'similarities': similarities, 'clusters': clusters}"
    assert compiles(cell.code)


def test_input_named_like_a_step_result_does_not_clobber_it(chemistry_graph):
    cell = render_cell(plan(chemistry_graph, ["chemistry.descriptors_computed"]), {"smiles": "CCO", "molecule": "ignored"})
    assert "molecule_2 = await chemistry.parse_molecule" in cell.code
    assert "compute_descriptors(molecule=molecule_2)" in cell.code


def test_a_tool_whose_name_has_spaces_takes_its_step_qualified_input():
    # TaskBench names tools "Audio Noise Reduction": the input toolpath makes for such a tool's
    # parameter (a fact's value, when parameters of several names carry its state) must be accepted.
    from toolpath.planner import StateGraph
    from toolpath.registry import ToolDefinition, ToolRegistry

    registry = ToolRegistry()
    registry.register_tool(
        ToolDefinition(
            name="Audio Noise Reduction",
            server_name="taskbench",
            module="taskbench_tools",
            required_parameters=[{"name": "audio", "type": "str"}],
            state_transition={"produces": ["taskbench.clean_audio"]},
        )
    )
    goal = plan(StateGraph(registry), ["taskbench.clean_audio"])
    for name in ("taskbench.Audio Noise Reduction.audio", "Audio Noise Reduction.audio"):
        cell = render_cell(goal, {name: "b.wav"})
        assert cell.unbound == () and cell.unused_inputs == () and "'b.wav'" in cell.code and compiles(cell.code)


def test_bad_input_names_are_refused(chemistry_graph):
    result = plan(chemistry_graph, ["chemistry.descriptors_computed"])
    with pytest.raises(InputError, match="not a valid Python name"):
        render_cell(result, {"smiles list": "x"})
    for qualified in (".smiles", "parse\tmolecule.smiles", "parse_molecule.", "parse_molecule.1x"):
        with pytest.raises(InputError, match="TOOL.PARAMETER"):
            render_cell(result, {qualified: "x"})
    with pytest.raises(InputError, match="keyword"):
        render_cell(result, {"class": "x"})
    with pytest.raises(InputError, match="finite"):
        render_cell(result, {"smiles": float("nan")})


def test_an_input_named_like_a_handle_renames_the_handle_not_the_input():
    from toolpath.planner import StateGraph
    from toolpath.registry import ToolDefinition, ToolRegistry

    registry = ToolRegistry()
    registry.register_tool(
        ToolDefinition(
            name="load_text",
            server_name="text",
            module="textkit",
            required_parameters=[{"name": "text", "type": "str"}],
            state_transition={"produces": ["text.loaded"]},
        )
    )
    cell = render_cell(plan(StateGraph(registry), ["text.loaded"]), {"text": "hello"})
    assert "await text_2.load_text(text=text)" in cell.code
    assert cell.unbound == ()
    assert compiles(cell.code)


def test_two_servers_with_colliding_python_names_get_distinct_handles():
    from toolpath.planner import StateGraph
    from toolpath.registry import ToolDefinition, ToolRegistry

    registry = ToolRegistry()
    registry.register_tool(ToolDefinition(name="load", server_name="my-domain", module="a", state_transition={"produces": ["s.a"]}))
    registry.register_tool(ToolDefinition(name="load", server_name="my_domain", module="b", state_transition={"produces": ["s.b"]}))
    cell = render_cell(plan(StateGraph(registry), ["s.a", "s.b"]))
    assert cell.handles == {"my_domain": ["load"], "my_domain_2": ["load"]}
    assert "my_domain_2 = bind_module_tools('my_domain_2', {\n    'load': ('load', 'a', None, {'attempts': 3})" in cell.code


def test_instructions_carry_signatures_and_states(chemistry_graph):
    cell = render_cell(plan(chemistry_graph, ["chemistry.descriptors_computed"]), {"smiles": "CCO"})
    assert "chemistry.parse_molecule(smiles: str) -> dict" in cell.instructions
    assert "States reached by the plan: chemistry.descriptors_computed, chemistry.molecule_parsed" in cell.instructions


def test_empty_plan_renders_a_cell_that_compiles(chemistry_graph):
    cell = render_cell(plan(chemistry_graph, ["chemistry.molecule_parsed"], held=["chemistry.molecule_parsed"]))
    assert "already held" in cell.code and compiles(cell.code)


def test_colliding_tool_names_bind_as_distinct_callable_attributes():
    from toolpath.planner import StateGraph
    from toolpath.registry import ToolDefinition, ToolRegistry

    registry = ToolRegistry()
    for name, token in (("get_forecast", "w.a"), ("get-forecast", "w.b"), ("lambda", "w.c")):
        registry.register_tool(ToolDefinition(name=name, server_name="weather_tools", module="weather", state_transition={"produces": [token]}))
    graph = StateGraph(registry)
    cell = render_cell(plan(graph, ["w.a", "w.b", "w.c"]))
    assert cell.handles == {"weather": ["get_forecast", "get_forecast_2", "lambda_"]}
    assert "await weather.get_forecast_2()" in cell.code and "await weather.lambda_()" in cell.code
    assert "'get_forecast_2': ('get-forecast', 'weather', None, {'attempts': 3})" in cell.code
    assert "weather.get_forecast_2() -> None  (tool 'get-forecast')" in cell.instructions
    assert compiles(cell.code)


def test_reserved_input_names_become_safe_variables_and_keep_their_keyword(chemistry_graph):
    from toolpath.planner import StateGraph
    from toolpath.registry import ToolDefinition, ToolRegistry

    registry = ToolRegistry()
    registry.register_tool(
        ToolDefinition(
            name="show",
            server_name="ui",
            module="ui",
            required_parameters=[{"name": "print", "type": "str"}, {"name": "id", "type": "int"}],
            state_transition={"produces": ["ui.shown"]},
        )
    )
    cell = render_cell(plan(StateGraph(registry), ["ui.shown"]), {"print": "text"})
    assert "print_ = 'text'" in cell.code and "await ui.show(print=print_, id=id_)" in cell.code
    assert [(parameter.parameter, parameter.variable) for parameter in cell.unbound] == [("id", "id_")]
    assert compiles(cell.code)


def test_tool_attribute_names_do_not_depend_on_the_rest_of_the_plan():
    from toolpath.planner import StateGraph
    from toolpath.registry import ToolDefinition, ToolRegistry

    registry = ToolRegistry()
    registry.register_tool(ToolDefinition(name="get_forecast", server_name="weather", module="a", state_transition={"produces": ["w.a"]}))
    registry.register_tool(ToolDefinition(name="get-forecast", server_name="weather", module="b", state_transition={"produces": ["w.b"]}))
    graph = StateGraph(registry)
    alone = render_cell(plan(graph, ["w.b"]), kernel=KernelView(registry))
    together = render_cell(plan(graph, ["w.a", "w.b"]), kernel=KernelView(registry))
    assert "await weather.get_forecast_2()" in alone.code and "await weather.get_forecast_2()" in together.code


def test_instructions_report_what_binding_only_the_path_saves(chemistry_graph):
    goal_plan = plan(chemistry_graph, ["chemistry.descriptors_computed"])
    with_registry = render_cell(goal_plan, {"smiles": "CCO"}, kernel=KernelView(chemistry_graph.registry))
    every_tool = [tool.name for tool in chemistry_graph.registry]
    assert len(every_tool) > len(goal_plan.steps)
    assert with_registry.catalog_instruction_chars > 0 and with_registry.saved_chars == with_registry.catalog_instruction_chars - len(
        with_registry.instructions
    )
    absent = [name for name in every_tool if name not in {step.tool.name for step in goal_plan.steps}]
    assert absent and not any(f".{name}(" in with_registry.instructions for name in absent)
    assert render_cell(goal_plan, {"smiles": "CCO"}).saved_chars is None


def test_a_session_cell_reads_held_artifacts_binds_nothing_and_takes_no_value_from_a_variable_named_like_a_parameter(chemistry_graph):
    from toolpath.kernel.tools.bindings import Bindings

    registry = chemistry_graph.registry
    session_handles = Bindings.of(list(registry), universe=registry)
    held = ["chemistry.molecule_parsed"]
    follow_up = plan(chemistry_graph, ["chemistry.descriptors_computed", "chemistry.similarity_computed"], held=held)
    cell = render_cell(
        follow_up,
        {"smiles_list": ["CCO"]},
        kernel=KernelView(
            bindings=session_handles, artifacts={"molecule": "chemistry.molecule_parsed"}, variables={"molecule", "fingerprints", "query_smiles"}
        ),
    )
    assert "bind_module_tools" not in cell.code and "# Handles are bound by the session." in cell.code
    assert "descriptors = await chemistry.compute_descriptors(molecule=molecule)" in cell.code
    # New variables never overwrite the kernel's; the kernel's query_smiles, left by some earlier
    # cell, is no value given for this task: the parameter stays unbound, under a name of its own.
    assert "fingerprints_2 = await chemistry.compute_fingerprints(smiles_list=smiles_list)" in cell.code
    assert "compute_similarity(query_smiles=query_smiles_2, fingerprints=fingerprints_2)" in cell.code
    assert [(parameter.parameter, parameter.variable) for parameter in cell.unbound] == [("query_smiles", "query_smiles_2")]
    assert cell.used_artifacts == {"molecule": "chemistry.molecule_parsed"}
    assert "Held artifacts the cell reads: molecule (chemistry.molecule_parsed)" in cell.instructions
    assert cell.step_targets == tuple(session_handles.targets[step.tool.id] for step in follow_up.steps)
    assert "fingerprints_2" in cell.step_variables and compiles(cell.code)

    with pytest.raises(ValueError, match="no handle for compute_fingerprints, compute_descriptors"):
        render_cell(follow_up, kernel=KernelView(bindings=Bindings.of([registry.get_tool_by_name("parse_molecule")], universe=registry)))


def test_only_plain_values_reach_a_cell_and_no_callers_repr_runs(chemistry_graph):
    import enum

    import numpy

    class Shape(enum.StrEnum):
        RING = "c1ccccc1"

    class Sneaky(str):
        def __repr__(self):
            return "__import__('os').system('touch pwned')"

    result = plan(chemistry_graph, ["chemistry.descriptors_computed"])
    for value, literal in ((Shape.RING, "'c1ccccc1'"), (Sneaky("CCO"), "'CCO'"), (numpy.str_("CCN"), "'CCN'")):
        cell = render_cell(result, {"smiles": value})
        assert f"smiles = {literal}" in cell.code and "pwned" not in cell.code
    clusters = plan(chemistry_graph, ["chemistry.molecules_clustered"])
    tuned = render_cell(
        clusters, {"smiles_list": ("CCO", "CCN"), "cluster_molecules.distance_threshold": numpy.float64(0.5), "compute_fingerprints.radius": numpy.int64(3)}
    )
    assert "smiles_list = ['CCO', 'CCN']" in tuned.code and "= 0.5\n" in tuned.code and "compute_fingerprints_radius = 3" in tuned.code
    with pytest.raises(InputError, match=r"input 'smiles' holds a value of type numpy.bool"):
        render_cell(result, {"smiles": numpy.bool_(True)})


def test_inputs_nested_deeper_than_a_cell_can_hold_are_refused(chemistry_graph):
    deep: list = []
    for _ in range(150):
        deep = [deep]
    with pytest.raises(InputError, match="input 'smiles_list' is nested more than 100 levels deep"):
        render_cell(plan(chemistry_graph, ["chemistry.candidates_filtered"]), {"smiles_list": deep})
    shallow: list = []
    for _ in range(99):
        shallow = [shallow]
    assert compiles(render_cell(plan(chemistry_graph, ["chemistry.candidates_filtered"]), {"smiles_list": shallow}).code)


def test_a_long_input_literal_is_cut_short_where_the_cell_is_shown_and_whole_where_it_runs(chemistry_graph):
    molecules = [f"C{'C' * (index % 7)}O" for index in range(2000)]
    cell = render_cell(plan(chemistry_graph, ["chemistry.molecules_clustered"]), {"smiles_list": molecules, "compute_fingerprints.radius": 3})
    assert f"smiles_list = {molecules!r}" in cell.code
    shown = next(line for line in cell.display_code.splitlines() if line.startswith("smiles_list = "))
    assert len(shown) < 300 and shown.endswith(f"# {len(repr(molecules)):,} characters, cut short here; the cell runs the whole value")
    # Short literals and every other line are shown as they run.
    assert cell.display_code.replace(shown, f"smiles_list = {molecules!r}") == cell.code
    assert "compute_fingerprints_radius = 3" in cell.display_code
    # The cut line is no valid Python: the shown cell cannot run by mistake with part of the value.
    with pytest.raises(SyntaxError):
        compiles(cell.display_code)
    text = "x" * 5000
    cut = render_cell(plan(chemistry_graph, ["chemistry.molecule_parsed"]), {"smiles": text}).display_code
    assert "characters, cut short here" in cut
    with pytest.raises(SyntaxError):
        compiles(cut)
