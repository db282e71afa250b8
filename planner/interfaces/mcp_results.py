"""The structured content of ``toolpath serve``'s tools, as pydantic models: the MCP SDK publishes
each as the tool's ``outputSchema`` (a tool returning ``Annotated[CallToolResult, Model]``) and
validates every result that is not an error against it.

The models follow the ``to_dict`` forms they describe (:class:`toolpath.planner.search.skills.SkillHit`,
:class:`toolpath.planner.tasks.task.TaskPlan`, :class:`toolpath.planner.tasks.task.TaskRun`,
:class:`toolpath.kernel.CellResult`); nested parts a program rarely reads (a plan's steps, the
cell's wiring) are described as JSON objects rather than spelled out field by field.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

JsonObject = dict[str, Any]


class SkillHitOutput(BaseModel):
    """A state or tool that matched a query."""

    kind: Literal["state", "tool"]
    name: str
    server: str | None = Field(description="the MCP server or package that serves a tool")
    score: float = Field(description="the fused ranking score")
    similarity: float | None = Field(description="cosine similarity of query and affordance; null when the index is BM25 only")
    lexical: float = Field(description="BM25 score")
    matched: str = Field(description="the affordance or description that matched")
    states: list[str] = Field(description="the goal states it stands for")
    reachable: bool = Field(description="whether a plan from the session's held states reaches it")
    plan: list[str] | None = Field(description="the tools of that plan, in order; null when unreachable")


class SearchSkillsOutput(BaseModel):
    hits: list[SkillHitOutput]


class CellOutput(BaseModel):
    """What running a cell showed (images come as image content; here only their count)."""

    status: Literal["ok", "error", "timeout", "aborted", "busy", "dead"] = Field(description="how the cell ended")
    stdout: str
    stderr: str
    result: Any = Field(description="the cell's value: itself when plain JSON (result_is_json), else its text")
    result_is_json: bool
    result_text: str | None = Field(description="the value's text (IPython's repr)")
    error: JsonObject | None = Field(description="the exception (ename, evalue, traceback) when the cell raised")
    execution_count: int | None
    images: int = Field(description="PNG images shown, sent as image content")
    truncated: list[str] = Field(description="the outputs cut to fit the limits")
    dropped_images: list[str] = Field(description="why each image not sent was dropped")
    notice: str = Field(description="a note for the model about the session itself (a restarted kernel, lost state)")
    tool_calls: dict[str, int] = Field(description="calls per tool made by the cell")
    pending_approval: JsonObject | None = Field(description="the call a paused task stopped at, waiting for approval (tool, arguments, reason, digest)")


class TaskPlanOutput(BaseModel):
    """A planned task: what each part matched, the plan and the cell that runs it."""

    task: str | None = Field(description="the task in words (null when given as steps)")
    steps: list[str] | None = Field(description="the task as steps (null when given in words)")
    parts: list[JsonObject] = Field(
        description="each part of the task: part, kind (action, fact, context), fate (planned, fact, context, not understood), status (matched, held, unmatched, fact, context), why, matched, goal, must_run, holds, inputs, alternatives, problem, closest (for a part not understood: the closest candidates), overridden (values the words name that an input replaced: input, named, given, used, why)"
    )
    goal: list[str]
    must_run: list[str]
    plan: JsonObject = Field(description="goal, have, steps (tool, requires, produces), cost, optimal, tie_breaks")
    cell: str = Field(description="the Python cell that runs the plan")
    instructions: str
    instructions_saved_chars: int
    wiring: list[JsonObject] = Field(description="per step: its tool, variable and each argument's source")
    unbound: list[JsonObject] = Field(description="required parameters nothing supplies (step, tool, parameter, type, description, variable)")
    unused_inputs: list[str]
    input_advice: dict[str, str]


class TaskRunOutput(TaskPlanOutput):
    """A task planned and run in the session's kernel."""

    result: CellOutput
    variables: dict[str, str | None] = Field(description="the variables the run made, with the state each carries")
    completed_steps: list[int]
    failed_step: JsonObject | None = Field(description="index and tool of the step that failed")
    paused: JsonObject | None = Field(description="with on_approval='pause': the step and call the run waits at for approval (resume_task continues it)")
    route: list[JsonObject] = Field(
        default_factory=list, description="the steps actually taken, over every cell of a replanned run: tool, cell, variable, state, status"
    )
    replans: list[JsonObject] = Field(default_factory=list, description="each replan around a failed step: the failure, why, the old and the new route")
    replan_stopped: str | None = Field(default=None, description="why the run did not replan its last failure")
    made_by: JsonObject = Field(default_factory=dict, description="for each final state, the route step (tool, cell, variable) that made it")


class RestartOutput(BaseModel):
    restarted: bool


class CloseSessionOutput(BaseModel):
    closed: bool


class VariablesOutput(BaseModel):
    variables: list[str]


class ApprovalDecisionOutput(BaseModel):
    tool: str
    reason: str = Field(description="why the call asked")
    digest: str = Field(description="SHA-256 of the call's arguments (the values are not kept)")
    decision: str = Field(description="approved, denied, timeout or failed")
    note: str
    decided_by: str
    decided_at: float = Field(description="seconds since the epoch")


class SessionOverviewOutput(BaseModel):
    held: list[str] = Field(description="the states the session holds")
    artifacts: dict[str, str] = Field(description="variable -> the state it carries")
    outputs: dict[str, dict[str, dict[str, str]]] = Field(
        default_factory=dict, description="variable -> {state -> {path, tool}}: held states at output paths inside a step's return"
    )
    domains: list[str]
    instructions: str = Field(description="the tool handles and what can run next, for a model")
    approvals: list[ApprovalDecisionOutput] = Field(description="the decisions on this session's calls that asked for approval, oldest first")
