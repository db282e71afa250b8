"""Planning over the state-transition graph: graph, skill search, plans, planned cells, the CLI."""

from planner.cell import PlannedCell, render_cell
from planner.goals import NoMatchingSkillError, choose_goal
from planner.graph import StateGraph, UnknownStateError
from planner.planning import NoPlanError, Plan, PlanStep, alternative_plans, plan, plan_to_run
from planner.search import SkillHit, SkillIndex
from planner.session import AgentSession, SessionState, StalePlanError
from planner.task import TaskPlan, TaskRun, UnboundParametersError
from planner.workspace import Workspace

__all__ = [
    "AgentSession",
    "NoMatchingSkillError",
    "NoPlanError",
    "Plan",
    "PlanStep",
    "PlannedCell",
    "SkillHit",
    "SessionState",
    "SkillIndex",
    "StalePlanError",
    "StateGraph",
    "TaskPlan",
    "TaskRun",
    "UnboundParametersError",
    "UnknownStateError",
    "Workspace",
    "alternative_plans",
    "choose_goal",
    "plan",
    "plan_to_run",
    "render_cell",
]
