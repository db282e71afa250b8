"""The task pipeline that Workspace and AgentSession share (planner/tasks/pipeline.py)."""

import pytest

from toolpath.planner.planning.graph import UnknownStateError
from toolpath.planner.planning.inputs import InputError
from toolpath.planner.search.skills import QueryError
from toolpath.planner.tasks.cell_writers import FreshKernelCells
from toolpath.planner.tasks.pipeline import TaskContext, plan_request

ASPIRIN = "CC(=O)Oc1ccccc1C(=O)O"


def test_a_request_refused_while_checked_never_asks_for_the_skill_index(chemistry_graph):
    def no_index():
        raise AssertionError("the skill index was asked for before the request was checked")

    context = TaskContext(chemistry_graph, no_index, FreshKernelCells(chemistry_graph))
    with pytest.raises(QueryError, match="the task is empty"):
        plan_request(context, "   ")
    with pytest.raises(InputError, match="'two words' is not a valid Python name"):
        plan_request(context, "parse this molecule", {"two words": ASPIRIN})
    with pytest.raises(UnknownStateError, match="chemistry.no_such_state"):
        plan_request(context, "parse this molecule", held="chemistry.no_such_state")
    with pytest.raises(InputError, match="inputs are a mapping of input names to values"):
        plan_request(context, "parse this molecule", ["smiles", ASPIRIN])
    with pytest.raises(TypeError, match=r"held states are state tokens \(strings\), one or a list of them; got \[1\]"):
        plan_request(context, "parse this molecule", held=[1])
    with pytest.raises(ValueError, match="time_budget_s must be a positive"):
        plan_request(context, "parse this molecule", time_budget_s=0)


def test_the_context_writes_the_chosen_cell_and_its_session_owns_the_plan(workspace):
    seen = []

    class Recording(FreshKernelCells):
        def chosen(self, request, parts, joint, budget):
            seen.append((request.task, request.text, [part.status for part in parts]))
            return super().chosen(request, parts, joint, budget)

    context = TaskContext(workspace.graph, lambda: workspace.index, Recording(workspace.graph), session_id="agent-7")
    task_plan = plan_request(context, ["parse the molecule", "compute its descriptors"], {"smiles": ASPIRIN})
    assert seen == [(("parse the molecule", "compute its descriptors"), "parse the molecule; compute its descriptors", ["matched", "matched"])]
    assert task_plan.session_id == "agent-7"
    assert task_plan.cell == workspace.plan_task(["parse the molecule", "compute its descriptors"], {"smiles": ASPIRIN}).cell


def test_a_task_missing_inputs_lists_the_inputs_of_its_cheapest_complete_plan_first(workspace):
    from toolpath.planner.tasks.task import UnboundParametersError, input_options

    task = "is aspirin drug-like? check Lipinski's rule of five"
    # Without inputs both readings of "drug-like" stay in the plan, each leaving its input unbound.
    task_plan = workspace.plan_task(task)
    assert [parameter.parameter for parameter in task_plan.cell.unbound] == ["smiles_list", "smiles"]
    options = input_options(task_plan, lambda inputs: workspace.plan_task(task, inputs))
    assert [(option.names, option.tools, option.plan.cost) for option in options] == [
        (("smiles",), "parse_molecule -> compute_descriptors", 2),
        (("smiles_list", "smiles"), "filter_drug_like -> parse_molecule -> compute_descriptors", 3),
    ]
    assert options[0].parameters == {"smiles": ("str", "parse_molecule")}
    message = str(UnboundParametersError(task_plan.cell.unbound, options))
    assert message == (
        "the plan needs inputs that were not given: give the inputs {'smiles': ...} for the plan parse_molecule -> compute_descriptors (cost 2); "
        "or, for the plan filter_drug_like -> parse_molecule -> compute_descriptors (cost 3), give the inputs {'smiles_list': ..., 'smiles': ...}"
    )
    # With the cheapest option's input the task gets that plan, complete.
    assert [step.tool.name for step in workspace.plan_task(task, {"smiles": ASPIRIN}).plan.steps] == ["parse_molecule", "compute_descriptors"]


def test_a_workspace_takes_one_catalog_path_and_says_what_run_task_runs(tmp_path):
    from toolpath.planner import Workspace
    from toolpath.planner.tasks.workspace import resolve_catalog_paths

    chemistry = next(path for path in resolve_catalog_paths() if path.parent.name == "chemistry")
    one = Workspace.open(str(chemistry))  # one path, not the characters of one
    assert {tool.server_name for tool in one.graph.registry} == {"chemistry"}
    with pytest.raises(TypeError, match=r"run_task runs a TaskPlan, not str: plan it first"):
        one.run_task("check Lipinski's rule of five")
    with pytest.raises(ValueError, match="session state field 'held' must be a list of strings"):
        one.session("agent-1", state={"session_id": "agent-1", "held": "chemistry.molecule_parsed"})
