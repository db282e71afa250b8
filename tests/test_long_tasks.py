"""Long tasks (issue 30): size caps with a clear refusal, a time budget, and cancellation (shipped catalogs)."""

import asyncio
import itertools
import math
import string
import threading

import pytest

from toolpath.errors import Refusal
from toolpath.planner import PlanningCancelled, PlanningTimeout
from toolpath.planner.search.skills import QueryError
from toolpath.planner.tasks.goals import NoMatchingSkillError
from toolpath.planner.tasks.request import MAX_TASK_CHARS, MAX_TASK_PARTS, MAX_TASK_STEPS

ASPIRIN = "CC(=O)Oc1ccccc1C(=O)O"
LIPINSKI = "check Lipinski's rule of five and "


def tool_names(task_plan):
    return [step.tool.name for step in task_plan.plan.steps]


def test_a_task_over_the_caps_is_refused_with_the_limit_and_its_size(workspace):
    with pytest.raises(
        QueryError, match=rf"the task has {MAX_TASK_PARTS + 1} parts .* more than the {MAX_TASK_PARTS} a task may have; split it into smaller tasks"
    ):
        workspace.plan_task("take a nap, " * (MAX_TASK_PARTS + 1))
    too_long = "x" * (MAX_TASK_CHARS + 1)
    with pytest.raises(QueryError, match=rf"the task is {MAX_TASK_CHARS + 1:,} characters long, more than the {MAX_TASK_CHARS:,} .*split it"):
        workspace.plan_task(too_long)
    with pytest.raises(QueryError, match=rf"the task has {MAX_TASK_STEPS + 1} steps, more than the {MAX_TASK_STEPS} .*split it"):
        workspace.plan_task(["check Lipinski's rule of five"] * (MAX_TASK_STEPS + 1))
    with pytest.raises(QueryError, match="characters long"):
        workspace.plan_task(["x" * (MAX_TASK_CHARS // 2 + 1)] * 2)


def test_a_task_just_under_the_caps_plans(workspace):
    text = LIPINSKI * (MAX_TASK_PARTS - 1) + "compute the descriptors"
    task_plan = workspace.plan_task(text, inputs={"smiles": ASPIRIN})
    # One goal said 99 times is one part, no word dropped; the tool named last is on its plan already, so it joins it.
    assert [(part.status, sorted(part.goal)) for part in task_plan.parts] == [("matched", ["chemistry.descriptors_computed"])]
    assert task_plan.parts[0].text.count("Lipinski") == MAX_TASK_PARTS - 1 and task_plan.parts[0].text.endswith("compute the descriptors")
    assert "'compute the descriptors' joined it: its goal is on that part's plan" in task_plan.parts[0].why
    assert tool_names(task_plan) == ["parse_molecule", "compute_descriptors"]

    steps = workspace.plan_task(
        ["identify the functional groups of this molecule", "check Lipinski's rule of five"] * (MAX_TASK_STEPS // 2), inputs={"smiles": ASPIRIN}
    )
    assert len(steps.parts) == MAX_TASK_STEPS and {part.status for part in steps.parts} == {"matched"}
    assert tool_names(steps) == ["parse_molecule", "identify_functional_groups", "compute_descriptors"]

    # A repeated part that matches nothing is still searched, once, and reported as unmatched.
    with pytest.raises(NoMatchingSkillError, match="take a nap"):
        workspace.plan_task("take a nap, " * MAX_TASK_PARTS)


def test_a_time_budget_too_small_raises_the_timeout_naming_it(workspace):
    with pytest.raises(
        PlanningTimeout, match=r"longer than its time budget of 1e-09 s; split it into smaller tasks, or give it more time \(time_budget_s=SECONDS\)"
    ) as caught:
        workspace.plan_task("identify the functional groups of this molecule and check Lipinski's rule of five", inputs={"smiles": ASPIRIN}, time_budget_s=1e-9)
    assert caught.value.budget_s == 1e-9 and isinstance(caught.value, TimeoutError)
    # The command line and the MCP server pass the message on as a refusal, not a traceback.
    assert isinstance(caught.value, Refusal)
    # No limit, or a generous one, plans as before.
    assert tool_names(workspace.plan_task("check Lipinski's rule of five", inputs={"smiles": ASPIRIN}, time_budget_s=None)) == [
        "parse_molecule",
        "compute_descriptors",
    ]
    for bad in (0, -1.0, math.nan, math.inf, True, "30"):
        with pytest.raises(ValueError, match="time_budget_s must be a positive, finite number"):
            workspace.plan_task("check Lipinski's rule of five", time_budget_s=bad)


def test_a_set_cancellation_stops_planning(workspace):
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(PlanningCancelled, match="cancelled by its caller"):
        workspace.plan_task("check Lipinski's rule of five", inputs={"smiles": ASPIRIN}, cancel=cancel)


def test_cancelling_aplan_task_stops_its_worker_thread(workspace, monkeypatch):
    """The awaiting coroutine is cancelled mid-planning (its client is gone): the worker stops at
    its next check instead of searching every part."""
    searches, started = [], threading.Event()
    search = workspace.index.search

    def slow_search(*args, **kwargs):
        searches.append(args[0])
        started.set()
        threading.Event().wait(0.05)  # every part takes a while, so planning outlives the cancel
        return search(*args, **kwargs)

    monkeypatch.setattr(workspace.index, "search", slow_search)
    names = ("".join(letters) for letters in itertools.product(string.ascii_lowercase, repeat=2))
    text = ", ".join(f"water the plant {name}" for name in itertools.islice(names, MAX_TASK_PARTS))  # no digits: no named values
    with workspace.session("long-tasks", pool_size=0) as session:
        outcome, finished = [], threading.Event()
        plan_task = session.plan_task

        def recorded_plan_task(*args, **kwargs):
            try:
                outcome.append(plan_task(*args, **kwargs))
            except BaseException as error:
                outcome.append(error)
                raise
            finally:
                finished.set()

        monkeypatch.setattr(session, "plan_task", recorded_plan_task)

        async def cancel_midway():
            planning = asyncio.create_task(session.aplan_task(text))
            await asyncio.to_thread(started.wait, 60)
            planning.cancel()
            with pytest.raises(asyncio.CancelledError):
                await planning

        asyncio.run(cancel_midway())
        assert finished.wait(30), "the planning thread did not stop after its coroutine was cancelled"
        assert isinstance(outcome[0], PlanningCancelled)
        assert len(searches) < MAX_TASK_PARTS
