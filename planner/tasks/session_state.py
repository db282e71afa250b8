"""What an agent session knows, as plain data: its held states, artifacts, domains and paused task.

:class:`SessionState` is saved with every kernel snapshot of the session and restores it
(:meth:`toolpath.planner.tasks.agent_session.AgentSession.state`); :class:`PausedTask` is a task
stopped before a call that needs approval. Both are JSON-ready and check what they are given back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from toolpath.planner.planning.plans import qualified_name
from toolpath.planner.tasks.cell import HeldOutput, is_variable_name
from toolpath.planner.tasks.replanning import Replanning, checked_saved_replanning
from toolpath.registry.output_paths import parse_output_path

if TYPE_CHECKING:  # annotations only: reading a saved state (``toolpath sessions``) loads no task planning
    from toolpath.planner.tasks.task import TaskPlan, TaskRun


@dataclass(frozen=True)
class PausedTask:
    """A task whose run stopped before a call that needs approval (``run_task(...,
    on_approval="pause")``); the steps before it ran, and their variables are in the kernel.

    Attributes:
        task: the task as asked (words or steps).
        inputs: the inputs the waiting step and the ones after it take (an input a step before it
            took would make a restored task, planned again, redo that step).
        step / tool: the index and name of the step whose call waits.
        remaining: the qualified names of the tools of that step and the ones after it: what a
            restored paused task plans again when it resumes.
        request: the waiting call: ``tool``, ``arguments`` (as shown), ``reason``, ``digest``.
        tool_calls: the calls that completed before it (``{"handle.attribute": count}``).
        task_plan: the task as planned; ``None`` for a paused task restored from a snapshot,
            whose rest :meth:`toolpath.planner.tasks.agent_session.AgentSession.resume` plans again from the states the session holds.
        replanning: for a run with ``on_failure="replan"``, what it had replanned when it paused
            (:meth:`toolpath.planner.tasks.replanning.Replanning.to_dict`: ``max_replans``, the
            replans made, the tools avoided and those completed), so that its resumed run replans
            under the same rules and bound; ``None`` for ``on_failure="stop"``.
        earlier: the runs of the cells before the paused one (each ended by a replanned failure),
            for the resumed run's route; not saved with snapshots (a restored task's route starts
            at the resumed cell; its ``replans`` still list the earlier ones).
    """

    task: str | tuple[str, ...]
    inputs: dict[str, Any]
    step: int
    tool: str
    remaining: tuple[str, ...]
    request: dict[str, Any]
    tool_calls: dict[str, int] = field(default_factory=dict)
    task_plan: TaskPlan | None = None
    replanning: dict[str, Any] | None = None
    earlier: tuple[TaskRun, ...] = ()

    @classmethod
    def of_run(cls, run: TaskRun, replanning: Replanning | None = None, earlier: tuple[TaskRun, ...] = ()) -> PausedTask | None:
        """The task ``run`` paused, when it stopped before a call that needs approval, else ``None``
        (``replanning``: the replanning of the run, ``None`` for ``on_failure="stop"``; ``earlier``:
        the runs of its cells before ``run``'s)."""
        task_plan, result, failed = run.task_plan, run.result, run.failed_step
        if result.pending_approval is None or failed is None:
            return None
        steps = task_plan.plan.steps
        wanted = {source.input for arguments in task_plan.cell.arguments[failed:] for source in arguments.values() if source.kind == "input"}
        return cls(
            task_plan.task,
            {name: value for name, value in task_plan.inputs.items() if name in wanted},
            failed,
            steps[failed].tool.name,
            tuple(qualified_name(step.tool) for step in steps[failed:]),
            result.pending_approval,
            dict(result.tool_calls),
            task_plan,
            replanning.to_dict() if replanning is not None else None,
            earlier,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, saved with the session's snapshots (without ``task_plan``)."""
        task = self.task if isinstance(self.task, str) else list(self.task)
        return {
            "task": task,
            "inputs": dict(self.inputs),
            "step": self.step,
            "tool": self.tool,
            "remaining": list(self.remaining),
            "request": dict(self.request),
            "tool_calls": dict(self.tool_calls),
            "replanning": self.replanning,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PausedTask:
        """The inverse of :meth:`to_dict`.

        Raises:
            ValueError: a missing or mistyped field, named in the message.
        """
        task = data.get("task")
        if not (isinstance(task, str) or (isinstance(task, list) and all(isinstance(step, str) for step in task))):
            raise ValueError("paused task field 'task' must be a string or a list of strings")
        request = data.get("request")
        if not isinstance(request, Mapping) or not all(isinstance(request.get(name), str) for name in ("tool", "reason", "digest")):
            raise ValueError("paused task field 'request' must hold the strings tool, reason and digest")
        for name, kind in (("inputs", Mapping), ("tool_calls", Mapping), ("step", int), ("tool", str), ("remaining", list)):
            if not isinstance(data.get(name), kind):
                raise ValueError(f"paused task field {name!r} is missing or of the wrong type")
        if not data["remaining"] or not all(isinstance(tool, str) for tool in data["remaining"]):
            raise ValueError("paused task field 'remaining' must list the qualified names of the tools left to run")
        task = task if isinstance(task, str) else tuple(task)
        # A pause saved before replanning was kept with it has no such field: its run stops at a failure.
        replanning = data.get("replanning")
        replanning = checked_saved_replanning(replanning) if replanning is not None else None
        return cls(task, dict(data["inputs"]), data["step"], data["tool"], tuple(data["remaining"]), dict(request), dict(data["tool_calls"]), None, replanning)


@dataclass(frozen=True)
class SessionState:
    """What an :class:`toolpath.planner.tasks.agent_session.AgentSession` knows, as plain data.

    Attributes:
        session_id: the CodeMode session id.
        held: held states, sorted.
        artifacts: ``{variable: state}``, oldest first: the kernel variable carrying each state's artifact.
        domains: servers whose handles are bound, in order of first use.
        kernel_id: the kernel the held states live in (``None`` before the first cell); restoring
            keeps held states and artifacts only while that kernel is the session's live one.
        paused: the task paused before a call that needs approval (:meth:`PausedTask.to_dict`),
            or ``None``.
        outputs: ``{variable: {state: {"path": output path, "tool": tool name}}}``, oldest first:
            the kernel variables holding a step's return with held states at output paths
            (:attr:`toolpath.planner.tasks.session_holdings.SessionHoldings.outputs`).
    """

    session_id: str
    held: tuple[str, ...] = ()
    artifacts: dict[str, str] = field(default_factory=dict)
    domains: tuple[str, ...] = ()
    kernel_id: str | None = None
    paused: dict[str, Any] | None = None
    outputs: dict[str, dict[str, HeldOutput]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "held": list(self.held),
            "artifacts": dict(self.artifacts),
            "domains": list(self.domains),
            "kernel_id": self.kernel_id,
            "paused": self.paused,
            "outputs": {variable: {state: place._asdict() for state, place in places.items()} for variable, places in self.outputs.items()},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SessionState:
        """The inverse of :meth:`to_dict`.

        Raises:
            ValueError: a missing or mistyped field, named in the message.
        """
        if not isinstance(data, Mapping):
            raise ValueError(f"a session state must be a JSON object, got {type(data).__name__}")
        session_id = data.get("session_id")
        if not isinstance(session_id, str) or not session_id:
            raise ValueError("session state field 'session_id' must be a non-empty string")
        for name in ("held", "domains"):
            if not isinstance(data.get(name, []), list) or not all(isinstance(item, str) for item in data.get(name, [])):
                raise ValueError(f"session state field {name!r} must be a list of strings")
        artifacts = data.get("artifacts", {})
        if not isinstance(artifacts, Mapping) or not all(isinstance(key, str) and isinstance(value, str) for key, value in artifacts.items()):
            raise ValueError("session state field 'artifacts' must map variable names to state tokens")
        bad = next((name for name in artifacts if not is_variable_name(name)), None)
        if bad is not None:
            raise ValueError(f"session state field 'artifacts' has {bad!r}, which is not a Python variable name")
        kernel_id = data.get("kernel_id")
        if kernel_id is not None and not isinstance(kernel_id, str):
            raise ValueError("session state field 'kernel_id' must be a string or null")
        paused = data.get("paused")
        if paused is not None and not isinstance(paused, Mapping):
            raise ValueError("session state field 'paused' must be an object or null")
        if paused is not None:
            paused = PausedTask.from_dict(paused).to_dict()
        outputs = _outputs(data.get("outputs", {}))
        return cls(session_id, tuple(sorted(data.get("held", []))), dict(artifacts), tuple(data.get("domains", [])), kernel_id, paused, outputs)


def _outputs(data: Any) -> dict[str, dict[str, HeldOutput]]:
    """The ``outputs`` field of a saved session state (see :class:`SessionState`), checked.

    Raises:
        ValueError: not that shape, or a key that is no variable name, or a path that is no output path.
    """
    shape = "session state field 'outputs' must map variable names to {state: {path, tool}}"
    if not isinstance(data, Mapping):
        raise ValueError(shape)
    outputs: dict[str, dict[str, HeldOutput]] = {}
    for variable, places in data.items():
        if not is_variable_name(variable) or not isinstance(places, Mapping):
            raise ValueError(f"{shape}; {variable!r} is not a variable name with a mapping")
        outputs[variable] = {}
        for state, place in places.items():
            if not isinstance(state, str) or not isinstance(place, Mapping) or not all(isinstance(place.get(key), str) for key in HeldOutput._fields):
                raise ValueError(f"{shape}; {variable}.{state} is not {{path, tool}} strings")
            try:
                parse_output_path(place["path"])
            except ValueError as error:
                raise ValueError(f"session state field 'outputs', {variable}.{state}: {error}") from None
            outputs[variable][state] = HeldOutput(place["path"], place["tool"])
    return outputs
