"""Planning over the state-transition graph: graph, skill search, plans, planned cells, the CLI.

The names below load on first use: ``toolpath plan`` must not pay for skill search (BM25, the
embedding model) or kernels (jupyter_client), nor ``toolpath search`` for kernels.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolpath.planner.cell import PlannedCell, render_cell
    from toolpath.planner.goals import NoMatchingSkillError, choose_goal
    from toolpath.planner.graph import StateGraph, UnknownStateError
    from toolpath.planner.planning import NoPlanError, Plan, PlanningCancelled, PlanningTimeout, PlanStep, alternative_plans, plan, plan_to_run
    from toolpath.planner.search import SkillHit, SkillIndex
    from toolpath.planner.session import AgentSession, SessionState, StalePlanError
    from toolpath.planner.task import TaskPlan, TaskRun, UnboundParametersError
    from toolpath.planner.workspace import Workspace

_HOME = {
    "AgentSession": "toolpath.planner.session",
    "NoMatchingSkillError": "toolpath.planner.goals",
    "NoPlanError": "toolpath.planner.planning",
    "Plan": "toolpath.planner.planning",
    "PlanStep": "toolpath.planner.planning",
    "PlanningCancelled": "toolpath.planner.planning",
    "PlanningTimeout": "toolpath.planner.planning",
    "PlannedCell": "toolpath.planner.cell",
    "SessionState": "toolpath.planner.session",
    "SkillHit": "toolpath.planner.search",
    "SkillIndex": "toolpath.planner.search",
    "StalePlanError": "toolpath.planner.session",
    "StateGraph": "toolpath.planner.graph",
    "TaskPlan": "toolpath.planner.task",
    "TaskRun": "toolpath.planner.task",
    "UnboundParametersError": "toolpath.planner.task",
    "UnknownStateError": "toolpath.planner.graph",
    "Workspace": "toolpath.planner.workspace",
    "alternative_plans": "toolpath.planner.planning",
    "choose_goal": "toolpath.planner.goals",
    "plan": "toolpath.planner.planning",
    "plan_to_run": "toolpath.planner.planning",
    "render_cell": "toolpath.planner.cell",
}

__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module 'toolpath.planner' has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOME[name]), name)
    globals()[name] = value
    return value
