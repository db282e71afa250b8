"""Planning over the state-transition graph: graph, skill search, plans, planned cells, the CLI.

The names below load on first use: ``toolpath plan`` must not pay for skill search (BM25, the
embedding model) or kernels (jupyter_client), nor ``toolpath search`` for kernels.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from planner.cell import PlannedCell, render_cell
    from planner.goals import NoMatchingSkillError, choose_goal
    from planner.graph import StateGraph, UnknownStateError
    from planner.planning import NoPlanError, Plan, PlanningCancelled, PlanningTimeout, PlanStep, alternative_plans, plan, plan_to_run
    from planner.search import SkillHit, SkillIndex
    from planner.session import AgentSession, SessionState, StalePlanError
    from planner.task import TaskPlan, TaskRun, UnboundParametersError
    from planner.workspace import Workspace

_HOME = {
    "AgentSession": "planner.session",
    "NoMatchingSkillError": "planner.goals",
    "NoPlanError": "planner.planning",
    "Plan": "planner.planning",
    "PlanStep": "planner.planning",
    "PlanningCancelled": "planner.planning",
    "PlanningTimeout": "planner.planning",
    "PlannedCell": "planner.cell",
    "SessionState": "planner.session",
    "SkillHit": "planner.search",
    "SkillIndex": "planner.search",
    "StalePlanError": "planner.session",
    "StateGraph": "planner.graph",
    "TaskPlan": "planner.task",
    "TaskRun": "planner.task",
    "UnboundParametersError": "planner.task",
    "UnknownStateError": "planner.graph",
    "Workspace": "planner.workspace",
    "alternative_plans": "planner.planning",
    "choose_goal": "planner.goals",
    "plan": "planner.planning",
    "plan_to_run": "planner.planning",
    "render_cell": "planner.cell",
}

__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module 'planner' has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOME[name]), name)
    globals()[name] = value
    return value
