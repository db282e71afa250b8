"""Planning over the state-transition graph: graph, skill search, plans, planned cells, the CLI.

The names below load on first use: ``toolpath plan`` must not pay for skill search (BM25, the
embedding model) or kernels (jupyter_client), nor ``toolpath search`` for kernels.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolpath.lazy import lazy_exports

if TYPE_CHECKING:
    from toolpath.planner.learning.evaluation import EvaluationReport, evaluate_learning
    from toolpath.planner.learning.examples import LabelledExample, read_examples
    from toolpath.planner.learning.overlay_learning import LearnReport, learn
    from toolpath.planner.planning.graph import StateGraph, UnknownStateError
    from toolpath.planner.planning.plans import NoPlanError, Plan, PlanningCancelled, PlanningTimeout, PlanStep, alternative_plans, plan, plan_to_run
    from toolpath.planner.search.skills import SkillHit, SkillIndex
    from toolpath.planner.tasks.agent_session import AgentSession
    from toolpath.planner.tasks.cell import PlannedCell, render_cell
    from toolpath.planner.tasks.goals import GoalSearch, NoMatchingSkillError, choose_goal
    from toolpath.planner.tasks.language import NotEnglishError
    from toolpath.planner.tasks.session_holdings import StalePlanError
    from toolpath.planner.tasks.session_state import SessionState
    from toolpath.planner.tasks.task import PartsNotUnderstoodError, TaskPlan, TaskRun, UnboundParametersError
    from toolpath.planner.tasks.workspace import Workspace

_HOME = {
    "AgentSession": "toolpath.planner.tasks.agent_session",
    "EvaluationReport": "toolpath.planner.learning.evaluation",
    "GoalSearch": "toolpath.planner.tasks.goals",
    "LabelledExample": "toolpath.planner.learning.examples",
    "LearnReport": "toolpath.planner.learning.overlay_learning",
    "NoMatchingSkillError": "toolpath.planner.tasks.goals",
    "NoPlanError": "toolpath.planner.planning.plans",
    "NotEnglishError": "toolpath.planner.tasks.language",
    "PartsNotUnderstoodError": "toolpath.planner.tasks.task",
    "Plan": "toolpath.planner.planning.plans",
    "PlanStep": "toolpath.planner.planning.plans",
    "PlanningCancelled": "toolpath.planner.planning.plans",
    "PlanningTimeout": "toolpath.planner.planning.plans",
    "PlannedCell": "toolpath.planner.tasks.cell",
    "SessionState": "toolpath.planner.tasks.session_state",
    "SkillHit": "toolpath.planner.search.skills",
    "SkillIndex": "toolpath.planner.search.skills",
    "StalePlanError": "toolpath.planner.tasks.session_holdings",
    "StateGraph": "toolpath.planner.planning.graph",
    "TaskPlan": "toolpath.planner.tasks.task",
    "TaskRun": "toolpath.planner.tasks.task",
    "UnboundParametersError": "toolpath.planner.tasks.task",
    "UnknownStateError": "toolpath.planner.planning.graph",
    "Workspace": "toolpath.planner.tasks.workspace",
    "alternative_plans": "toolpath.planner.planning.plans",
    "choose_goal": "toolpath.planner.tasks.goals",
    "evaluate_learning": "toolpath.planner.learning.evaluation",
    "learn": "toolpath.planner.learning.overlay_learning",
    "plan": "toolpath.planner.planning.plans",
    "plan_to_run": "toolpath.planner.planning.plans",
    "read_examples": "toolpath.planner.learning.examples",
    "render_cell": "toolpath.planner.tasks.cell",
}

__all__ = sorted(_HOME)
__getattr__ = lazy_exports(__name__, _HOME, globals())
