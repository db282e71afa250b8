"""Agent sessions: one agent's persistent kernel and what it holds, across many tasks and free cells.

``workspace.session("agent-7")`` gives an :class:`AgentSession` on one persistent CodeMode kernel.

Contract:

- **Held states and artifacts.** A state becomes held once the step producing it has completed in the
  session's kernel. The planned cell's tool calls report which of them returned
  (:attr:`toolpath.kernel.CellResult.tool_calls`, sent in the execute reply, not parsed from output), so a
  cell that fails at step 3 leaves steps 1–2's states held and names step 3. A step whose return
  names a state leaves that state's *artifact*: the variable carrying it (``molecule`` →
  ``chemistry.molecule_parsed``). Variables the agent makes itself are declared with
  :meth:`AgentSession.declare`.
- **Follow-ups.** Plans start from the held states, and a step needing a held state reads its
  artifact; search ranks with the held states; new variables never overwrite existing ones.
- **Stable handles.** The first time a task uses a domain (a server), the session binds every tool
  of that domain behind one handle (kernel-bound tools are imported on first call, so unused ones cost
  nothing; host-bound ones run in this process). Names are de-duplicated over the whole registry, so
  they never change within the session, and a fresh kernel gets the same handles.
- **Lost kernels.** A kernel that is restarted, dies or is evicted takes its variables with it. When
  the next kernel restores them from the session's snapshot (CodeMode's ``snapshot=True``, the
  default), the session keeps the held states whose artifacts came back; otherwise it drops its
  held states and artifacts and says so in the next result's ``notice``.
- **Persistence and ownership.** The session's held states, artifacts and domains are saved with
  every kernel snapshot; ``workspace.session(session_id, user_id=...)`` in a later process restores
  them with the kernel's variables. A session belongs to the ``user_id`` that created it: another
  user (or none) is refused with :class:`toolpath.kernel.SessionOwnerError` before any kernel starts.
  After each cell the session reads the kernel's variable names: an artifact whose variable was
  deleted is dropped, and so is its state unless another variable carries it. A variable the agent
  *reassigns* is not detected: :meth:`AgentSession.forget` its state, or declare the new value.
- **Plain data.** :meth:`AgentSession.state` is a :class:`SessionState` (JSON-ready) that
  ``workspace.session(..., state=...)`` restores.

The sync methods work from plain code and from inside a running event loop; each has an async twin.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from toolpath.errors import Refusal
from toolpath.kernel import CellResult, CodeMode, KernelError
from toolpath.kernel.tools.approval_log import RecordedDecision
from toolpath.kernel.tools.approvals import ApprovalDecision, OnApproval
from toolpath.kernel.tools.bindings import Bindings, toolkit_of
from toolpath.planner.planning.graph import kinds_of
from toolpath.planner.planning.plans import DEFAULT_TASK_BUDGET_S, Plan, PlanningCancelled, TaskBudget, qualified_name
from toolpath.planner.search.skills import SkillHit
from toolpath.planner.tasks.cell import PlannedCell, is_variable_name, render_cell
from toolpath.planner.tasks.parts import PartMatch, task_text
from toolpath.planner.tasks.pipeline import TaskContext, TaskRequest, plan_request
from toolpath.planner.tasks.task import TaskPlan, TaskRun, UnboundParametersError, input_options
from toolpath.registry import ToolDefinition

if TYPE_CHECKING:
    from toolpath.planner.tasks.workspace import Workspace

#: Lines of "next steps" in the instructions; the rest are counted.
MAX_NEXT_STEPS = 15


class StalePlanError(Refusal, RuntimeError):
    """A task plan relies on held states or artifacts the session no longer has; plan it again."""


class TaskPausedError(Refusal, RuntimeError):
    """The session has a task paused before a call that needs approval: resume it (approved or
    not) before running another task."""


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
            whose rest :meth:`AgentSession.resume` plans again from the states the session holds.
    """

    task: str | tuple[str, ...]
    inputs: dict[str, Any]
    step: int
    tool: str
    remaining: tuple[str, ...]
    request: dict[str, Any]
    tool_calls: dict[str, int] = field(default_factory=dict)
    task_plan: TaskPlan | None = None

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
        return cls(task, dict(data["inputs"]), data["step"], data["tool"], tuple(data["remaining"]), dict(request), dict(data["tool_calls"]))


@dataclass(frozen=True)
class SessionState:
    """What an :class:`AgentSession` knows, as plain data.

    Attributes:
        session_id: the CodeMode session id.
        held: held states, sorted.
        artifacts: ``{variable: state}``, oldest first: the kernel variable carrying each state's artifact.
        domains: servers whose handles are bound, in order of first use.
        kernel_id: the kernel the held states live in (``None`` before the first cell); restoring
            keeps held states and artifacts only while that kernel is the session's live one.
        paused: the task paused before a call that needs approval (:meth:`PausedTask.to_dict`),
            or ``None``.
    """

    session_id: str
    held: tuple[str, ...] = ()
    artifacts: dict[str, str] = field(default_factory=dict)
    domains: tuple[str, ...] = ()
    kernel_id: str | None = None
    paused: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "held": list(self.held),
            "artifacts": dict(self.artifacts),
            "domains": list(self.domains),
            "kernel_id": self.kernel_id,
            "paused": self.paused,
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
        return cls(session_id, tuple(sorted(data.get("held", []))), dict(artifacts), tuple(data.get("domains", [])), kernel_id, paused)


class AgentSession:
    """One agent's persistent kernel, with the states it holds, their artifacts and its handles.

    Create it with :meth:`toolpath.planner.Workspace.session`. Use it as a context manager, or call
    :meth:`shutdown` when done.

    Args:
        workspace: the loaded catalogs.
        session_id: the CodeMode session id (one kernel per id).
        code_mode: a CodeMode to share with other sessions; by default the session makes its own
            and shuts it down with itself.
        state: a :class:`SessionState` to restore (see the module docstring); by default, the one
            saved with the session's last snapshot, if any.
        user_id: the user this session acts for (given by the program, never by cell code); see
            :meth:`toolpath.kernel.CodeMode.arun`.
        code_mode_options: :meth:`toolpath.planner.Workspace.code_mode` options for the session's own CodeMode.

    Raises:
        UnknownStateError: ``state`` names a state no catalog declares.
        ValueError: ``state`` names a domain no catalog has, or another session id.
        kernel.SessionOwnerError: the session belongs to another user.
    """

    def __init__(
        self,
        workspace: Workspace,
        session_id: str,
        code_mode: CodeMode | None = None,
        state: SessionState | None = None,
        user_id: str | None = None,
        **code_mode_options: Any,
    ):
        if not isinstance(session_id, str) or not session_id.strip():
            raise ValueError(f"session_id must be a non-empty string, got {session_id!r}")
        self.workspace = workspace
        self.session_id = session_id
        self.user_id = user_id
        self._owns_code_mode = code_mode is None
        self.code_mode = code_mode if code_mode is not None else workspace.code_mode(**code_mode_options)
        self._lock = threading.RLock()
        self._held: set[str] = set()
        self._artifacts: dict[str, str] = {}  # variable -> state
        self._domains: list[str] = []
        self._bindings: Bindings | None = None
        self._variables: set[str] = set()  # the kernel's variable names after the last cell
        # Variables of planned cells now running: a task started meanwhile never picks one of them.
        self._running: set[str] = set()
        self._kernel_id: str | None = None
        self._paused: PausedTask | None = None
        self._notice = ""
        self._closed = False
        try:
            saved = self.code_mode.save_with_snapshot(session_id, self._saved_with_snapshot, user_id)
            if state is not None:
                self._restore(state)
            elif saved is not None:
                self._restore_snapshot(SessionState.from_dict(saved))
        except BaseException:
            if self._owns_code_mode:
                self.code_mode.shutdown()
            raise

    def _check_open(self) -> None:
        if self._closed:
            raise KernelError(f"session {self.session_id!r} has been shut down; open a new one with workspace.session()")

    # -- what the session holds -------------------------------------------------------------------

    @property
    def held(self) -> frozenset[str]:
        """The held states."""
        return frozenset(self._held)

    @property
    def artifacts(self) -> dict[str, str]:
        """``{variable: state}``: the kernel variables that carry held states' artifacts, oldest first."""
        return dict(self._artifacts)

    @property
    def domains(self) -> tuple[str, ...]:
        """The servers whose handles are bound, in order of first use."""
        return tuple(self._domains)

    def state(self) -> SessionState:
        """The session's knowledge as plain data (for saving; see :class:`SessionState`)."""
        with self._lock:
            paused = self._paused.to_dict() if self._paused is not None else None
            return SessionState(self.session_id, tuple(sorted(self._held)), dict(self._artifacts), tuple(self._domains), self._kernel_id, paused)

    def _newest_artifact(self, state: str) -> str | None:
        """The newest variable carrying ``state`` or a refinement of it (as a planned cell reads it)."""
        kinds = kinds_of(state, self.workspace.graph.refinements)
        with self._lock:
            return next((variable for variable, carried in reversed(self._artifacts.items()) if carried in kinds), None)

    def _artifact_of(self) -> dict[str, str]:
        """``{state: variable}``, the newest variable for each state."""
        return {state: variable for variable, state in self._artifacts.items()}

    def _restore(self, state: SessionState) -> None:
        if state.session_id != self.session_id:
            raise ValueError(f"the state is of session {state.session_id!r}, not {self.session_id!r}")
        self.workspace.graph.check_states([*state.held, *state.artifacts.values()])
        self.bind_domains(state.domains)
        if state.kernel_id is not None and state.kernel_id == self.code_mode.kernel_id(self.session_id):
            self._held = set(state.held)
            self._artifacts = {
                variable: carried for variable, carried in state.artifacts.items() if is_variable_name(variable) and variable not in self._handle_names()
            }
            self._kernel_id = state.kernel_id
            self._paused = PausedTask.from_dict(state.paused) if state.paused is not None else None
            self._after_cell(self._variables_now())  # artifacts whose variable is gone are dropped
        elif state.held:
            self._notice = f"The session was restored without its kernel, so the states it held are gone: {', '.join(sorted(state.held))}."

    def _saved_with_snapshot(self) -> dict[str, Any]:
        """What CodeMode saves with each kernel snapshot of this session."""
        return self.state().to_dict()

    def _restore_snapshot(self, state: SessionState) -> None:
        """Take back what was saved with the session's last snapshot, start its kernel (restoring the
        variables) and keep the artifacts whose variables came back."""
        known = self.workspace.graph.states
        servers = self._servers()
        # A catalog may have changed since: what it no longer declares is dropped, not raised.
        self.bind_domains([domain for domain in state.domains if domain in servers])
        self.code_mode.start(self.session_id, self.user_id)
        with self._lock:
            self._held = {token for token in state.held if token in known}
            self._artifacts = {
                variable: carried for variable, carried in state.artifacts.items() if carried in self._held and variable not in self._handle_names()
            }
            self._kernel_id = self.code_mode.kernel_id(self.session_id)
            self._paused = PausedTask.from_dict(state.paused) if state.paused is not None else None
        self._after_cell(self._variables_now())

    def _forget_everything(self, why: str | None) -> None:
        """Drop held states, artifacts and known variables; ``why`` (if given) is told in the next notice."""
        if self._held and why is not None:
            self._notice = f"{why}, so the states it held are gone: {', '.join(sorted(self._held))}."
        self._held.clear()
        self._artifacts.clear()
        self._variables.clear()

    def _check_kernel(self) -> None:
        """Drop held states when the kernel that held them is gone."""
        with self._lock:
            now = self.code_mode.kernel_id(self.session_id)
            if self._kernel_id is not None and now != self._kernel_id and not (now is not None and self.code_mode.restored(self.session_id)):
                self._forget_everything("The session's kernel was restarted or shut down")
            # A kernel restored from the snapshot keeps what it held; the variable check after the
            # cell drops artifacts that did not come back.
            self._kernel_id = now

    def _take_notice(self, result: CellResult) -> CellResult:
        with self._lock:
            notice, self._notice = self._notice, ""
        return replace(result, notice=f"{result.notice} {notice}".strip()) if notice else result

    def _after_cell(self, variables: list[str] | None) -> None:
        """Note the kernel's variables after a cell. An artifact whose variable is gone is dropped,
        and its state is no longer held when no other variable carries it."""
        if variables is None:
            return
        with self._lock:
            self._variables = {variable for variable in variables if is_variable_name(variable)}
            gone = {variable: state for variable, state in self._artifacts.items() if variable not in self._variables}
            for variable in gone:
                del self._artifacts[variable]
            lost = set(gone.values()) - set(self._artifacts.values())
            self._held -= lost
            if lost:
                names = ", ".join(f"{variable} ({state})" for variable, state in gone.items())
                self._notice = f"{self._notice} Variables that carried held states are gone: {names}; those states are no longer held.".strip()

    def _variables_now(self) -> list[str] | None:
        """The kernel's variable names, or ``None`` when the session has no live kernel."""
        if self._kernel_id is None:
            return None
        try:
            return self.code_mode.variables(self.session_id, self.user_id)
        except (KeyError, KernelError):  # the kernel went away, or a cell that ignored its interrupt still runs
            return None

    async def _avariables(self) -> list[str] | None:
        if self._kernel_id is None:
            return None
        try:
            return await self.code_mode.avariables(self.session_id, self.user_id)
        except (KeyError, KernelError):
            return None

    def _variables_after(self, result: CellResult) -> list[str] | None:
        """The kernel's variable names after ``result``'s cell: from its execute reply when the cell
        succeeded, else asked for in a cell of their own."""
        return list(result.variables) if result.variables is not None else self._variables_now()

    async def _avariables_after(self, result: CellResult) -> list[str] | None:
        return list(result.variables) if result.variables is not None else await self._avariables()

    def declare(self, state: str, variable: str | None = None) -> None:
        """Declare that the session holds ``state``, carried by kernel variable ``variable`` (one the
        agent made itself) when given; follow-up plans start from it and read the variable.

        Raises:
            UnknownStateError: no catalog declares ``state``.
            ValueError: ``variable`` is not defined in the session's kernel.
        """
        self._check_open()
        if not isinstance(state, str):
            raise TypeError(f"state must be a state token (a string), got {type(state).__name__}")
        self.workspace.graph.check_states([state])
        if variable is not None:
            if not is_variable_name(variable):
                raise ValueError(f"{variable!r} is not a variable name (an identifier, not a keyword, not starting with '_')")
            if variable in self._handle_names():
                raise ValueError(f"{variable!r} is a tool handle of this session, not a variable carrying a state")
            self._check_kernel()
            variables = self._variables_now()
            self._after_cell(variables)
            if variables is None or variable not in variables:
                raise ValueError(f"variable {variable!r} is not defined in session {self.session_id!r}; define it in a cell first")
        with self._lock:
            self._held.add(state)
            if variable is not None:
                self._artifacts.pop(variable, None)
                self._artifacts[variable] = state

    def forget(self, state: str) -> None:
        """Stop treating ``state`` as held (and drop its artifacts); plans then reach it again."""
        with self._lock:
            self._held.discard(state)
            for variable in [variable for variable, carried in self._artifacts.items() if carried == state]:
                del self._artifacts[variable]

    # -- handles ------------------------------------------------------------------------------------

    def _servers(self) -> dict[str, list[ToolDefinition]]:
        servers: dict[str, list[ToolDefinition]] = {}
        for tool in self.workspace.loaded.registry:
            servers.setdefault(toolkit_of(tool), []).append(tool)
        return servers

    def _handle_names(self) -> set[str]:
        if self._bindings is None:
            return set()
        return {*self._bindings.handles, *self._bindings.host_handles}

    def bind_domains(self, domains: str | Iterable[str]) -> None:
        """Bind every tool of each domain (server; one may be passed as a plain string) behind its
        handle in the session's kernel, for free cells that call a domain no task has used yet;
        tasks bind their domains themselves.

        Raises:
            ValueError: a domain no loaded catalog has.
        """
        self._check_open()
        servers = self._servers()
        new = [domain for domain in dict.fromkeys([domains] if isinstance(domains, str) else domains) if domain not in self._domains]
        unknown = [domain for domain in new if domain not in servers]
        if unknown:
            raise ValueError(f"no loaded catalog has the domain(s) {', '.join(unknown)}; domains: {', '.join(sorted(servers))}")
        if not new:
            return
        registry = list(self.workspace.loaded.registry)
        bindings = self.code_mode.bind(self.session_id, [tool for domain in new for tool in servers[domain]], universe=registry, user_id=self.user_id)
        with self._lock:
            self._bindings = bindings
            self._domains.extend(new)

    def _prospective_bindings(self, plan: Plan) -> Bindings:
        """The handles the session would have once ``plan``'s domains are bound (nothing is bound)."""
        servers = self._servers()
        domains = dict.fromkeys([*self._domains, *(toolkit_of(step.tool) for step in plan.steps)])
        return Bindings.of([tool for domain in domains for tool in servers[domain]], universe=self.workspace.loaded.registry)

    # -- search, plan, run --------------------------------------------------------------------------

    def search(self, query: str, k: int = 10, **filters: Any) -> list[SkillHit]:
        """:meth:`toolpath.planner.Workspace.search`, ranked with the session's held states unless ``held`` is given."""
        self._check_open()
        self._check_kernel()
        filters.setdefault("held", self.held)
        return self.workspace.search(query, k=k, **filters)

    async def asearch(self, query: str, k: int = 10, **filters: Any) -> list[SkillHit]:
        """:meth:`search` in a worker thread (the first search loads the embedding model)."""
        return await asyncio.to_thread(self.search, query, k, **filters)

    def _render(self, plan: Plan, inputs: Mapping[str, Any] | None, task: str | None, bindings: Bindings, also_show: Sequence[str] = ()) -> PlannedCell:
        """The session's cell for ``plan`` (``also_show``: held artifacts the final expression shows
        too). Planning promises no variable name: running does (:meth:`_runnable`)."""
        with self._lock:
            graph = self.workspace.graph
            # An input that carries a state is a newer value of it than the artifact held before.
            carried = graph.states_carried(inputs or {})
            artifacts = {variable: state for variable, state in self._artifacts.items() if state in plan.held and state not in carried}
            return render_cell(
                plan,
                inputs,
                task,
                registry=graph.registry,
                bindings=bindings,
                artifacts=artifacts,
                variables=self._variables | self._running,
                also_show=also_show,
                refinements=graph.refinements,
            )

    def plan_task(
        self,
        task: str | Sequence[str],
        inputs: Mapping[str, Any] | None = None,
        held: str | Collection[str] | None = None,
        *,
        time_budget_s: float | None = DEFAULT_TASK_BUDGET_S,
        cancel: threading.Event | None = None,
    ) -> TaskPlan:
        """Plan a task in words or as a list of steps (:meth:`toolpath.planner.Workspace.plan_task`) from the
        held states (or ``held``); the cell reads held artifacts and calls the session's handles.
        Binds the plan's new domains, so the cell also runs when the agent executes it as a free cell.

        ``time_budget_s`` (seconds, ``None``: no limit) and ``cancel`` (an event another thread sets
        to stop) bound the planning, as for :meth:`toolpath.planner.Workspace.plan_task`.

        Raises:
            NoMatchingSkillError, NoPlanError, QueryError, InputError, UnknownStateError,
            PlanningTimeout, PlanningCancelled, ValueError: see :meth:`toolpath.planner.Workspace.plan_task`.
        """
        self._check_open()
        self._check_kernel()
        context = TaskContext(
            self.workspace.graph,
            lambda: self.workspace.index,
            # Held states the caller names stay held; the session's own may be replaced by the inputs.
            session_held=self.held if held is None else frozenset(),
            render_candidate=lambda request, plan: self._render(plan, request.inputs, request.text, self._prospective_bindings(plan)),
            render_chosen=self._render_chosen,
            session_id=self.session_id,
        )
        return plan_request(context, task, inputs, () if held is None else held, time_budget_s=time_budget_s, cancel=cancel)

    def _render_chosen(self, request: TaskRequest, parts: tuple[PartMatch, ...], joint: Plan, budget: TaskBudget) -> PlannedCell:
        """The cell of the task's joint plan, once its domains are bound; it also shows the held
        artifacts of parts whose goal was held already."""
        budget.check()  # a cancelled plan binds no domains
        self.bind_domains(toolkit_of(step.tool) for step in joint.steps)
        bindings = self._bindings if self._bindings is not None else self._prospective_bindings(joint)
        with self._lock:
            artifact_of = self._artifact_of()
        already = [artifact_of[state] for part in parts if part.status == "held" for state in sorted(part.goal) if state in artifact_of]
        return self._render(joint, request.inputs, request.text, bindings, also_show=already)

    async def aplan_task(
        self,
        task: str | Sequence[str],
        inputs: Mapping[str, Any] | None = None,
        held: str | Collection[str] | None = None,
        *,
        time_budget_s: float | None = DEFAULT_TASK_BUDGET_S,
    ) -> TaskPlan:
        """:meth:`plan_task` in a worker thread. Cancelling the awaiting coroutine (its client is
        gone) stops the worker at its next check (:class:`toolpath.planner.planning.plans.TaskBudget`)."""
        cancel = threading.Event()
        try:
            return await asyncio.to_thread(self.plan_task, task, inputs, held, time_budget_s=time_budget_s, cancel=cancel)
        except asyncio.CancelledError:
            cancel.set()
            raise

    def _runnable(
        self,
        task: str | Sequence[str] | TaskPlan,
        inputs: Mapping[str, Any] | None,
        time_budget_s: float | None = DEFAULT_TASK_BUDGET_S,
        cancel: threading.Event | None = None,
        reserved: list[TaskPlan] | None = None,
    ) -> TaskPlan:
        """The task plan to run: planned now for a task text; checked against what the session
        holds; its variables reserved until :meth:`_finish_task` (rendered again with new names
        when the kernel, or a task running meanwhile, has taken one since it was planned).

        ``reserved`` receives the plan once its variables are reserved, and ``cancel`` set before
        that reserves nothing (raising PlanningCancelled): both under the session's lock, so a
        cancelled caller knows exactly what to give back."""
        self._check_open()
        task_plan = task if isinstance(task, TaskPlan) else self.plan_task(task, inputs, time_budget_s=time_budget_s, cancel=cancel)
        if task_plan.session_id != self.session_id:
            made_by = f"session {task_plan.session_id!r}" if task_plan.session_id else "Workspace.plan_task"
            raise ValueError(
                f"this task plan was made by {made_by}; plan it with this session's plan_task, so its cell uses this session's handles and variables"
            )
        if task_plan.cell.unbound:
            options = input_options(task_plan, lambda more: self.plan_task(task_plan.task, more, time_budget_s=time_budget_s, cancel=cancel))
            raise UnboundParametersError(task_plan.cell.unbound, options)
        self._check_kernel()
        with self._lock:
            # Input states the task's own inputs give are held for that task only, never by the session.
            gone = sorted(task_plan.plan.held - self._held - self.workspace.graph.input_states_given(task_plan.inputs))
            lost = sorted(variable for variable, state in task_plan.cell.used_artifacts.items() if self._artifacts.get(variable) != state)
            if gone or lost:
                missing = ", ".join(gone) if gone else ", ".join(lost)
                raise StalePlanError(f"the task was planned with {'held states' if gone else 'artifacts'} the session no longer has ({missing}); plan it again")
            if set(task_plan.cell.step_variables) & (self._variables | self._running):
                shown = [variable for variable in task_plan.cell.result_variables if variable not in task_plan.cell.step_variables]
                bindings = self._bindings if self._bindings is not None else self._prospective_bindings(task_plan.plan)
                task_plan = replace(task_plan, cell=self._render(task_plan.plan, task_plan.inputs, task_text(task_plan.task), bindings, also_show=shown))
            if cancel is not None and cancel.is_set():
                raise PlanningCancelled("running the task was cancelled by its caller")
            self._running.update(task_plan.cell.step_variables)
            if reserved is not None:
                reserved.append(task_plan)
        return task_plan

    def _record(self, task_plan: TaskPlan, run: TaskRun) -> None:
        """Hold the states of the steps that completed, and note their artifacts."""
        steps = task_plan.plan.steps
        with self._lock:
            for index in run.completed_steps:
                tool = steps[index].tool
                self._held.update(tool.state_transition.produces)
                if tool.return_spec is not None and tool.return_spec.state:
                    variable = task_plan.cell.step_variables[index]
                    self._artifacts.pop(variable, None)
                    self._artifacts[variable] = tool.return_spec.state

    @property
    def paused(self) -> PausedTask | None:
        """The task paused before a call that needs approval, if any (see :meth:`resume`)."""
        return self._paused

    def run_task(
        self,
        task: str | Sequence[str] | TaskPlan,
        inputs: Mapping[str, Any] | None = None,
        *,
        time_budget_s: float | None = DEFAULT_TASK_BUDGET_S,
        on_approval: OnApproval = "ask",
    ) -> TaskRun:
        """Plan ``task`` (unless it is already a :class:`TaskPlan` of this session) and run its cell in
        the session's kernel; completed steps' states become held.

        A plan with no steps (its goal is already held) runs nothing. ``time_budget_s`` bounds the
        planning only (:meth:`plan_task`); the kernel's own timeout bounds the cell.

        ``on_approval``: ``"ask"`` (the session's approver decides while the cell waits) or
        ``"pause"``: the run stops before the first call that needs approval, the steps before it
        done, and returns with :attr:`TaskRun.paused` naming that call; :meth:`resume` continues
        from it in the same kernel with the answer.

        Raises:
            TaskPausedError: a task of this session is paused; resume it first.
            UnboundParametersError: the cell needs inputs that were not given (nothing runs); its
                ``options`` name the inputs of each complete plan, cheapest first.
            StalePlanError: ``task`` was planned with held states or artifacts since lost.
            KernelError: the kernel could not start.
            and what :meth:`plan_task` raises.
        """
        self._check_not_paused()
        task_plan = self._runnable(task, inputs, time_budget_s)
        try:
            if not task_plan.plan.steps:
                return TaskRun(task_plan, self._take_notice(CellResult("ok")))
            result = self.code_mode.run(task_plan.cell.code, self.session_id, self.user_id, on_approval=on_approval, report_variables=True)
            self._check_kernel()
            return self._finish_task(task_plan, result, self._variables_after(result))
        finally:
            self._release(task_plan)

    async def arun_task(
        self,
        task: str | Sequence[str] | TaskPlan,
        inputs: Mapping[str, Any] | None = None,
        *,
        time_budget_s: float | None = DEFAULT_TASK_BUDGET_S,
        on_approval: OnApproval = "ask",
    ) -> TaskRun:
        """Async :meth:`run_task`. Cancelling the awaiting coroutine while the task is planned (its
        client is gone) stops the planning thread at its next check, and gives back any variable
        names it reserved."""
        self._check_not_paused()
        cancel = threading.Event()
        reserved: list[TaskPlan] = []
        try:
            task_plan = await asyncio.to_thread(self._runnable, task, inputs, time_budget_s, cancel, reserved)
        except asyncio.CancelledError:
            with self._lock:
                cancel.set()
                for reserved_plan in reserved:
                    self._release(reserved_plan)
            raise
        try:
            if not task_plan.plan.steps:
                return TaskRun(task_plan, self._take_notice(CellResult("ok")))
            result = await self.code_mode.arun(task_plan.cell.code, self.session_id, self.user_id, on_approval=on_approval, report_variables=True)
            self._check_kernel()
            return self._finish_task(task_plan, result, await self._avariables_after(result))
        finally:
            self._release(task_plan)

    def resume(self, approved: bool, note: str = "") -> TaskRun:
        """Continue the paused task from the call it stopped at, in the same kernel: with
        ``approved`` the call runs (and the steps after it, which may pause again); without, it
        raises ``ApprovalDenied`` there and the task ends. The steps before it are not run again.
        The decision, with ``note``, is recorded in the audit log as the session's user's.

        Raises:
            ValueError: no task of this session is paused.
        """
        paused, task_plan, code, answers = self._resumption(approved, note)
        try:
            result = self.code_mode.run(code, self.session_id, self.user_id, on_approval="pause", answers=answers, report_variables=True)
            self._check_kernel()
            return self._finish_task(task_plan, replace(result, tool_calls={**paused.tool_calls, **result.tool_calls}), self._variables_after(result))
        finally:
            self._release(task_plan)

    async def aresume(self, approved: bool, note: str = "") -> TaskRun:
        """Async :meth:`resume`."""
        paused, task_plan, code, answers = await asyncio.to_thread(self._resumption, approved, note)
        try:
            result = await self.code_mode.arun(code, self.session_id, self.user_id, on_approval="pause", answers=answers, report_variables=True)
            self._check_kernel()
            return self._finish_task(task_plan, replace(result, tool_calls={**paused.tool_calls, **result.tool_calls}), await self._avariables_after(result))
        finally:
            self._release(task_plan)

    def _resumption(self, approved: bool, note: str) -> tuple[PausedTask, TaskPlan, str, dict[str, ApprovalDecision]]:
        """The paused task (now taken), its plan, the cell that continues it and the answer it carries.

        A task restored from a snapshot plans its remaining tools again (:attr:`PausedTask.remaining`,
        as steps naming them), reading what the steps that ran made from the states the session
        holds: the answer applies to the same call with the same arguments only; any other call
        that needs approval pauses again.
        """
        self._check_open()
        if not isinstance(approved, bool):
            raise TypeError(f"approved must be True or False, not {type(approved).__name__} {approved!r}")
        with self._lock:
            paused, self._paused = self._paused, None
        if paused is None:
            raise ValueError(f"session {self.session_id!r} has no paused task to resume; run_task(..., on_approval='pause') pauses one")
        decision = ApprovalDecision(approved, note=note, by=self.user_id or "")
        answers = {paused.request["digest"]: decision}
        if paused.task_plan is not None:
            with self._lock:
                self._running.update(paused.task_plan.cell.step_variables)  # _release gives them back
            return paused, paused.task_plan, paused.task_plan.cell.from_step(paused.step), answers
        try:
            task_plan = self._runnable(list(paused.remaining), paused.inputs, DEFAULT_TASK_BUDGET_S)
        except (PlanningCancelled, KernelError):
            with self._lock:
                self._paused = paused  # nothing ran, and it may yet: it stays paused
            raise
        except Exception as error:
            # What the rest needs is gone (a deleted variable, a changed catalog): it can never
            # continue, so it is dropped rather than left to block the session's next task.
            raise RuntimeError(f"the task paused before {paused.request['tool']} cannot continue, so it is dropped: {error}") from error
        return replace(paused, tool_calls={}), task_plan, task_plan.cell.code, answers

    def _check_not_paused(self) -> None:
        if self._paused is not None:
            raise TaskPausedError(
                f"session {self.session_id!r} has a task paused before {self._paused.request['tool']} (it needs approval); resume it with resume(approved=True or False) first"
            )

    def _release(self, task_plan: TaskPlan) -> None:
        """Give back the names :meth:`_runnable` reserved (after the kernel's variables are read,
        so a task starting meanwhile sees them in one or the other)."""
        with self._lock:
            self._running.difference_update(task_plan.cell.step_variables)

    def _finish_task(self, task_plan: TaskPlan, result: CellResult, variables: list[str] | None) -> TaskRun:
        run = TaskRun(task_plan, result)
        if self._kernel_id is not None:  # the kernel that ran the cell still holds its variables
            self._record(task_plan, run)
        failed = run.failed_step
        if result.pending_approval is not None and failed is not None:
            steps = task_plan.plan.steps
            wanted = {source.input for arguments in task_plan.cell.arguments[failed:] for source in arguments.values() if source.kind == "input"}
            paused = PausedTask(
                task_plan.task,
                {name: value for name, value in task_plan.inputs.items() if name in wanted},
                failed,
                steps[failed].tool.name,
                tuple(qualified_name(step.tool) for step in steps[failed:]),
                result.pending_approval,
                dict(result.tool_calls),
                task_plan,
            )
            with self._lock:
                self._paused = paused
        self._after_cell(variables)
        return replace(run, result=self._take_notice(result))

    def approval_decisions(self) -> list[RecordedDecision]:
        """The decisions on this session's calls that asked for approval, oldest first (see
        :meth:`toolpath.kernel.CodeMode.approval_decisions`; the approver is a ``code_mode_options``
        option of :meth:`toolpath.planner.Workspace.session`, ``approver=``)."""
        return self.code_mode.approval_decisions(self.session_id, self.user_id)

    def execute(self, code: str) -> CellResult:
        """Run a free cell in the session's kernel (format it for a model with
        :func:`toolpath.kernel.format_for_model`). Tool calls in free cells do not make states held: declare
        them with :meth:`declare`."""
        self._check_open()
        result = self.code_mode.run(code, self.session_id, self.user_id, report_variables=True)
        self._check_kernel()
        self._after_cell(self._variables_after(result))
        return self._take_notice(result)

    async def aexecute(self, code: str) -> CellResult:
        """Async :meth:`execute`."""
        self._check_open()
        result = await self.code_mode.arun(code, self.session_id, self.user_id, report_variables=True)
        self._check_kernel()
        self._after_cell(await self._avariables_after(result))
        return self._take_notice(result)

    # -- instructions -------------------------------------------------------------------------------

    def instructions(self) -> str:
        """The text a model needs for the whole session: the kernel's rules and limits, every bound
        handle with its signature, the held states with the variables that carry them, and the next
        steps from the held states (tools whose requirements are all held, with the calls that wire
        the held artifacts)."""
        self._check_open()
        self._check_kernel()
        lines = [self.code_mode.instructions(self.session_id).rstrip("\n")]
        with self._lock:
            held, artifact_of = sorted(self._held), self._artifact_of()
        lines.append("Held states (and the variables that carry them):")
        if not held:
            lines.append("  none yet")
        for state in held:
            carrier = artifact_of.get(state)
            lines.append(f"  {state}: {carrier}" if carrier else f"  {state} (no variable carries it)")
        lines.extend(self._next_steps(set(held)))
        return "\n".join(lines) + "\n"

    def _next_steps(self, held: set[str]) -> list[str]:
        targets = self._bindings.targets if self._bindings is not None else {}
        steps = []
        for tool in self.workspace.loaded.registry:
            requires, produces = tool.state_transition.requires, tool.state_transition.produces
            if not requires or not requires <= held or produces <= held:
                continue
            carriers = {
                parameter.python_name: self._newest_artifact(parameter.state)
                for parameter in tool.required_parameters
                if parameter.state and parameter.role != "output"
            }
            arguments = ", ".join(f"{name}={variable}" for name, variable in carriers.items() if variable is not None)
            if tool.id in targets:
                steps.append(f"  {targets[tool.id]}({arguments}) -> {', '.join(sorted(produces - held))}")
            else:
                steps.append(f"  {toolkit_of(tool)}.{tool.name} -> {', '.join(sorted(produces - held))}  (not bound yet: a task that uses it binds its domain)")
        if not steps:
            return ["Next steps from the held states: none yet (tools that need no state can always run; plan a task to reach new states)."]
        shown = steps[:MAX_NEXT_STEPS]
        if len(steps) > MAX_NEXT_STEPS:
            shown.append(f"  ... and {len(steps) - MAX_NEXT_STEPS} more")
        return ["Next steps from the held states (tool -> states it adds):", *shown]

    # -- lifetime -----------------------------------------------------------------------------------

    def restart(self) -> None:
        """Discard the kernel, its variables and its snapshot (held states and artifacts go too;
        handles stay bound)."""
        self._check_open()
        self.code_mode.restart(self.session_id, self.user_id)
        self._restarted()

    async def arestart(self) -> None:
        """Async :meth:`restart`."""
        self._check_open()
        await self.code_mode.arestart(self.session_id, self.user_id)
        self._restarted()

    def _restarted(self) -> None:
        """Forget what the discarded kernel held; the caller asked for it, so no notice."""
        with self._lock:
            self._forget_everything(None)
            self._kernel_id = None
            self._paused = None  # its kernel and the steps it ran are gone

    def shutdown(self) -> None:
        """Snapshot and stop the session's kernel (and its own CodeMode, when it made one); a later
        ``workspace.session`` with this id restores it. Later calls raise :class:`toolpath.kernel.KernelError`.
        Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        if self._owns_code_mode:
            self.code_mode.shutdown()
        else:
            self.code_mode.end_session(self.session_id, self.user_id)

    async def ashutdown(self) -> None:
        """Async :meth:`shutdown`."""
        if self._closed:
            return
        self._closed = True
        if self._owns_code_mode:
            await self.code_mode.ashutdown()
        else:
            await self.code_mode.aend_session(self.session_id, self.user_id)

    def __enter__(self) -> AgentSession:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()

    async def __aenter__(self) -> AgentSession:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.ashutdown()
