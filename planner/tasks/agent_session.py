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
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from toolpath.kernel import CellResult, CodeMode, KernelError
from toolpath.kernel.tools.approval_log import RecordedDecision
from toolpath.kernel.tools.approvals import ApprovalDecision, OnApproval
from toolpath.planner.planning.plans import DEFAULT_TASK_BUDGET_S
from toolpath.planner.search.skills import SkillHit
from toolpath.planner.tasks.cell import HeldOutput, is_variable_name
from toolpath.planner.tasks.continuation import whole_run
from toolpath.planner.tasks.pipeline import TaskContext, plan_request
from toolpath.planner.tasks.recording import recorded_plan, recorded_run, recording_failures, recording_refusals
from toolpath.planner.tasks.replanning import DEFAULT_MAX_REPLANS, OnFailure, Replanning
from toolpath.planner.tasks.session_cells import SessionCells, SessionHandles
from toolpath.planner.tasks.session_holdings import SessionHoldings
from toolpath.planner.tasks.session_kernel import SessionKernel
from toolpath.planner.tasks.session_runs import SessionRuns
from toolpath.planner.tasks.session_state import PausedTask, SessionState
from toolpath.planner.tasks.task import TaskPlan, TaskRun
from toolpath.planner.tasks.task_spans import traced_task

if TYPE_CHECKING:
    from toolpath.planner.tasks.workspace import Workspace


class AgentSession:
    """One agent's persistent kernel, with the states it holds, their artifacts and its handles.

    Create it with :meth:`toolpath.planner.Workspace.session`. Use it as a context manager, or call
    :meth:`shutdown` when done.

    Args:
        workspace: the loaded catalogs.
        session_id: the CodeMode session id (one kernel per id).
        code_mode: a CodeMode to share with other sessions; by default the session makes its own
            and shuts it down with itself.
        state: a :class:`toolpath.planner.tasks.session_state.SessionState` to restore (see the
            module docstring); by default, the one saved with the session's last snapshot, if any.
        user_id: the user this session acts for (given by the program, never by cell code); see
            :meth:`toolpath.kernel.CodeMode.arun`. The session's tasks go in this user's record of
            use (the local user's without one), through the workspace's ``recorder``.
        code_mode_options: :meth:`toolpath.planner.Workspace.code_mode` options for the session's own CodeMode.

    Attributes:
        holdings: what the kernel holds (:class:`toolpath.planner.tasks.session_holdings.SessionHoldings`).
        handles: the bound domains and their handles (:class:`toolpath.planner.tasks.session_cells.SessionHandles`).
        kernel: its kernel and the cells run there (:class:`toolpath.planner.tasks.session_kernel.SessionKernel`).
        cells: writes its planned cells (:class:`toolpath.planner.tasks.session_cells.SessionCells`).
        runs: its task runs and paused task (:class:`toolpath.planner.tasks.session_runs.SessionRuns`).

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
        self.holdings = SessionHoldings(workspace.graph.refinements)
        self.handles = SessionHandles(workspace.loaded.registry, self.holdings.lock)
        self.cells = SessionCells(self)
        self.runs = SessionRuns(self)
        self.kernel = SessionKernel(self.code_mode, session_id, user_id, self.holdings)
        self._lock = self.holdings.lock  # one lock for what the kernel holds and the session's own state
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
        return frozenset(self.holdings.held)

    @property
    def artifacts(self) -> dict[str, str]:
        """``{variable: state}``: the kernel variables that carry held states' artifacts, oldest first."""
        return dict(self.holdings.artifacts)

    @property
    def domains(self) -> tuple[str, ...]:
        """The servers whose handles are bound, in order of first use."""
        return tuple(self.handles.domains)

    def state(self) -> SessionState:
        """The session's knowledge as plain data (for saving; see :class:`toolpath.planner.tasks.session_state.SessionState`)."""
        with self._lock:
            paused = self.runs.paused.to_dict() if self.runs.paused is not None else None
            held, artifacts = tuple(sorted(self.holdings.held)), dict(self.holdings.artifacts)
            outputs = {variable: dict(places) for variable, places in self.holdings.outputs.items()}
            return SessionState(self.session_id, held, artifacts, tuple(self.handles.domains), self.kernel.kernel_id, paused, outputs)

    def _restore(self, state: SessionState) -> None:
        if state.session_id != self.session_id:
            raise ValueError(f"the state is of session {state.session_id!r}, not {self.session_id!r}")
        self.workspace.graph.check_states([*state.held, *state.artifacts.values(), *(held for places in state.outputs.values() for held in places)])
        self.bind_domains(state.domains)
        if state.kernel_id is not None and state.kernel_id == self.code_mode.kernel_id(self.session_id):
            artifacts = {variable: carried for variable, carried in state.artifacts.items() if is_variable_name(variable)}
            self._take_back(state, set(state.held), artifacts, state.outputs)
        elif state.held:
            self.holdings.tell(f"The session was restored without its kernel, so the states it held are gone: {', '.join(sorted(state.held))}.")

    def _saved_with_snapshot(self) -> dict[str, Any]:
        """What CodeMode saves with each kernel snapshot of this session."""
        return self.state().to_dict()

    def _restore_snapshot(self, state: SessionState) -> None:
        """Take back what was saved with the session's last snapshot, start its kernel (restoring the
        variables) and keep the artifacts whose variables came back."""
        known = self.workspace.graph.states
        servers = self.handles.servers()
        # A catalog may have changed since: what it no longer declares is dropped, not raised.
        self.bind_domains([domain for domain in state.domains if domain in servers])
        self.code_mode.start(self.session_id, self.user_id)
        held = {token for token in state.held if token in known}
        artifacts = {variable: carried for variable, carried in state.artifacts.items() if carried in held}
        outputs = {variable: {token: place for token, place in places.items() if token in held} for variable, places in state.outputs.items()}
        self._take_back(replace(state, kernel_id=self.code_mode.kernel_id(self.session_id)), held, artifacts, outputs)

    def _take_back(self, state: SessionState, held: set[str], artifacts: dict[str, str], outputs: Mapping[str, Mapping[str, HeldOutput]]) -> None:
        """Hold ``held``, ``artifacts`` and ``outputs`` (but no variable a handle took) in ``state``'s
        kernel, with its paused task; then drop the artifacts whose variable did not come back."""
        handles = self.handles.names()
        with self._lock:
            self.holdings.held = held
            self.holdings.artifacts = {variable: carried for variable, carried in artifacts.items() if variable not in handles}
            self.holdings.outputs = {variable: dict(places) for variable, places in outputs.items() if places and variable not in handles}
            self.kernel.kernel_id = state.kernel_id
            self.runs.paused = PausedTask.from_dict(state.paused) if state.paused is not None else None
        self.holdings.after_cell(self.kernel.variables())

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
            if variable in self.handles.names():
                raise ValueError(f"{variable!r} is a tool handle of this session, not a variable carrying a state")
            self.kernel.require_variable(variable)
        self.holdings.hold(state, variable)

    def forget(self, state: str) -> None:
        """Stop treating ``state`` as held (and drop its artifacts); plans then reach it again."""
        self.holdings.forget(state)

    # -- handles ------------------------------------------------------------------------------------

    def bind_domains(self, domains: str | Iterable[str]) -> None:
        """Bind every tool of each domain (server; one may be passed as a plain string) behind its
        handle in the session's kernel, for free cells that call a domain no task has used yet;
        tasks bind their domains themselves.

        Raises:
            ValueError: a domain no loaded catalog has.
        """
        self._check_open()
        new = self.handles.new_domains(domains)
        if new:
            tools = [tool for domain in new for tool in self.handles.servers()[domain]]
            self.handles.add(new, self.code_mode.bind(self.session_id, tools, universe=list(self.workspace.loaded.registry), user_id=self.user_id))

    # -- search, plan, run --------------------------------------------------------------------------

    def search(self, query: str, k: int = 10, **filters: Any) -> list[SkillHit]:
        """:meth:`toolpath.planner.Workspace.search`, ranked with the session's held states unless ``held`` is given."""
        self._check_open()
        self.kernel.check()
        filters.setdefault("held", self.held)
        return self.workspace.search(query, k=k, **filters)

    async def asearch(self, query: str, k: int = 10, **filters: Any) -> list[SkillHit]:
        """:meth:`search` in a worker thread (the first search loads the embedding model)."""
        return await asyncio.to_thread(self.search, query, k, **filters)

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
        with self._recording_refusals(task, inputs):
            task_plan = self._plan_task(task, inputs, held, time_budget_s=time_budget_s, cancel=cancel)
        return recorded_plan(self.workspace.recorder, self._record_user, task_plan, self.session_id)

    def _plan_task(
        self,
        task: str | Sequence[str],
        inputs: Mapping[str, Any] | None = None,
        held: str | Collection[str] | None = None,
        *,
        time_budget_s: float | None = DEFAULT_TASK_BUDGET_S,
        cancel: threading.Event | None = None,
    ) -> TaskPlan:
        """:meth:`plan_task` without recording it: for the plans a run makes (its entry is the run's)."""
        self._check_open()
        self.kernel.check()
        # Held states the caller names stay held; the session's own may be replaced by the inputs.
        session_held = self.held if held is None else frozenset()
        context = TaskContext(self.workspace.graph, lambda: self.workspace.index, self.cells, session_held, self.session_id)
        return plan_request(context, task, inputs, () if held is None else held, time_budget_s=time_budget_s, cancel=cancel)

    @property
    def _record_user(self) -> str | None:
        """Whose record this session's tasks go in: its user's (``None``: the local user's)."""
        return self.user_id

    def _recording_refusals(self, task: str | Sequence[str] | TaskPlan, inputs: Mapping[str, Any] | None) -> AbstractContextManager[None]:
        planned = task if isinstance(task, TaskPlan) else None
        words = None if planned is not None else task
        return recording_refusals(self.workspace.recorder, self._record_user, words, inputs, planned, self.session_id)

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

    @property
    def paused(self) -> PausedTask | None:
        """The task paused before a call that needs approval, if any (see :meth:`resume`)."""
        return self.runs.paused

    @traced_task
    def run_task(
        self,
        task: str | Sequence[str] | TaskPlan,
        inputs: Mapping[str, Any] | None = None,
        *,
        time_budget_s: float | None = DEFAULT_TASK_BUDGET_S,
        on_approval: OnApproval = "ask",
        partial: bool = False,
        on_failure: OnFailure = "replan",
        max_replans: int = DEFAULT_MAX_REPLANS,
    ) -> TaskRun:
        """Plan ``task`` (unless it is already a :class:`TaskPlan` of this session) and run its cell in
        the session's kernel; completed steps' states become held.

        A plan with no steps (its goal is already held) runs nothing. ``time_budget_s`` bounds the
        planning only (:meth:`plan_task`); the kernel's own timeout bounds the cell.

        ``on_approval``: ``"ask"`` (the session's approver decides while the cell waits) or
        ``"pause"``: the run stops before the first call that needs approval, the steps before it
        done, and returns with :attr:`TaskRun.paused` naming that call; :meth:`resume` continues
        from it in the same kernel with the answer.

        ``partial``: run the parts understood even when others were not; by default such a task is
        refused before anything runs.

        ``on_failure``: ``"replan"`` (default): when a step fails for good (after its retries) in a
        way another route can help (a lost connection, a timeout, a 5xx or 429 answer, an injected
        failure, a tool that cannot be bound, a denied approval), plan again from the states now held
        to the same goal, avoiding the failed tool, and run the new remainder in the same kernel; the
        completed steps' values are kept and never made again; at most ``max_replans`` times
        (:mod:`toolpath.planner.tasks.replanning` gives the rule). Any other failure (a bad input
        value, a tool's own bug) stops the run. ``"stop"``: stop at the first failure. The returned
        run's ``route``, ``replans`` and ``stopped`` say what happened; a run paused for approval
        goes on replanning under the same rules and bound once it is resumed (:meth:`resume`).

        Raises:
            TaskPausedError: a task of this session is paused; resume it first.
            PartsNotUnderstoodError: a part of the task was not understood and ``partial`` is false;
                its message gives every part's fate.
            UnboundParametersError: the cell needs inputs that were not given (nothing runs); its
                ``options`` name the inputs of each complete plan, cheapest first.
            StalePlanError: ``task`` was planned with held states or artifacts since lost.
            KernelError: the kernel could not start.
            and what :meth:`plan_task` raises.
        """
        replanning = Replanning.of(self.workspace.graph, on_failure, max_replans)
        with self._recording_refusals(task, inputs):
            self.runs.check_not_paused()
            self._check_open()
            task_plan = self.runs.runnable(task, inputs, time_budget_s, partial=partial)
        with recording_failures(self.workspace.recorder, self._record_user, task_plan, self.session_id):
            if not task_plan.plan.steps:
                self.holdings.release(task_plan)
                run = TaskRun(task_plan, self.holdings.take_notice(CellResult("ok")))
            else:
                run = self._run_cells(task_plan, task_plan.cell.code, replanning, on_approval)
        return recorded_run(self.workspace.recorder, self._record_user, run, self.session_id)

    def _run_cells(
        self,
        task_plan: TaskPlan,
        code: str,
        replanning: Replanning | None,
        on_approval: OnApproval,
        answers: Mapping[str, ApprovalDecision] | None = None,
        earlier_calls: Mapping[str, int] | None = None,
        earlier: tuple[TaskRun, ...] = (),
    ) -> TaskRun:
        """Run ``code`` (``task_plan``'s cell, or its rest for a resumed task, whose ``answers`` and
        ``earlier_calls`` it carries), then, with ``replanning``, each cell that continues it after a
        failure that is replanned; the whole run, its cells after ``earlier``'s. Each cell's
        variables are released when it ends."""
        cells = list(earlier)
        current: TaskPlan | None = task_plan
        while current is not None:
            try:
                result, variables = self.kernel.run(code, on_approval=on_approval, answers=answers)
                cells.append(self.runs.finish(current, result, variables, earlier_calls, replanning, tuple(cells)))
            finally:
                self.holdings.release(current)
            # The answer was to the paused call; a later cell's calls that ask, ask (or pause) anew.
            answers, earlier_calls = None, None
            current = self.runs.continuation(cells[-1], replanning) if replanning is not None else None
            code = current.cell.code if current is not None else ""
        return whole_run(cells, replanning)

    async def _arun_cells(
        self,
        task_plan: TaskPlan,
        code: str,
        replanning: Replanning | None,
        on_approval: OnApproval,
        answers: Mapping[str, ApprovalDecision] | None = None,
        earlier_calls: Mapping[str, int] | None = None,
        earlier: tuple[TaskRun, ...] = (),
    ) -> TaskRun:
        """Async :meth:`_run_cells`."""
        cells = list(earlier)
        current: TaskPlan | None = task_plan
        while current is not None:
            try:
                result, variables = await self.kernel.arun(code, on_approval=on_approval, answers=answers)
                cells.append(self.runs.finish(current, result, variables, earlier_calls, replanning, tuple(cells)))
            finally:
                self.holdings.release(current)
            answers, earlier_calls = None, None
            current = await asyncio.to_thread(self.runs.continuation, cells[-1], replanning) if replanning is not None else None
            code = current.cell.code if current is not None else ""
        return whole_run(cells, replanning)

    @traced_task
    async def arun_task(
        self,
        task: str | Sequence[str] | TaskPlan,
        inputs: Mapping[str, Any] | None = None,
        *,
        time_budget_s: float | None = DEFAULT_TASK_BUDGET_S,
        on_approval: OnApproval = "ask",
        partial: bool = False,
        on_failure: OnFailure = "replan",
        max_replans: int = DEFAULT_MAX_REPLANS,
    ) -> TaskRun:
        """Async :meth:`run_task` (replanning as it does). Cancelling the awaiting coroutine while the task is planned (its
        client is gone) stops the planning thread at its next check, and gives back any variable
        names it reserved."""
        replanning = Replanning.of(self.workspace.graph, on_failure, max_replans)
        cancel = threading.Event()
        reserved: list[TaskPlan] = []
        with self._recording_refusals(task, inputs):
            self.runs.check_not_paused()
            self._check_open()
            try:
                task_plan = await asyncio.to_thread(self.runs.runnable, task, inputs, time_budget_s, cancel, reserved, partial)
            except asyncio.CancelledError:
                with self._lock:
                    cancel.set()
                    for reserved_plan in reserved:
                        self.holdings.release(reserved_plan)
                raise
        with recording_failures(self.workspace.recorder, self._record_user, task_plan, self.session_id):
            if not task_plan.plan.steps:
                self.holdings.release(task_plan)
                run = TaskRun(task_plan, self.holdings.take_notice(CellResult("ok")))
            else:
                run = await self._arun_cells(task_plan, task_plan.cell.code, replanning, on_approval)
        return recorded_run(self.workspace.recorder, self._record_user, run, self.session_id)

    @traced_task
    def resume(self, approved: bool, note: str = "") -> TaskRun:
        """Continue the paused task from the call it stopped at, in the same kernel: with
        ``approved`` the call runs (and the steps after it, which may pause again); without, it
        raises ``ApprovalDenied`` there. The steps before it are not run again. The decision, with
        ``note``, is recorded in the audit log as the session's user's.

        A task run with ``on_failure="replan"`` goes on replanning as :meth:`run_task` does: a step
        after the pause that fails for good is planned around, keeping every value made, avoiding the
        tools its failures ruled out (before the pause too), and ``max_replans`` counts the replans
        of the whole task, before the pause included. A no is a failure of that call only: the new
        route avoids the tool, and every tool with effects that would not ask; one that asks pauses
        the run again before its call. The returned run's ``replans`` and ``route`` cover the whole
        task (a task restored from a snapshot: its route from the resumed cell on).

        Raises:
            ValueError: no task of this session is paused.
        """
        self._check_open()
        paused, task_plan, code, answers, replanning = self.runs.resumption(approved, note)
        run = self._run_cells(task_plan, code, replanning, "pause", answers, paused.tool_calls, paused.earlier)
        return recorded_run(self.workspace.recorder, self._record_user, run, self.session_id)

    @traced_task
    async def aresume(self, approved: bool, note: str = "") -> TaskRun:
        """Async :meth:`resume`."""
        self._check_open()
        paused, task_plan, code, answers, replanning = await asyncio.to_thread(self.runs.resumption, approved, note)
        run = await self._arun_cells(task_plan, code, replanning, "pause", answers, paused.tool_calls, paused.earlier)
        return recorded_run(self.workspace.recorder, self._record_user, run, self.session_id)

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
        result, variables = self.kernel.run(code)
        self.holdings.after_cell(variables)
        return self.holdings.take_notice(result)

    async def aexecute(self, code: str) -> CellResult:
        """Async :meth:`execute`."""
        self._check_open()
        result, variables = await self.kernel.arun(code)
        self.holdings.after_cell(variables)
        return self.holdings.take_notice(result)

    # -- instructions -------------------------------------------------------------------------------

    def instructions(self) -> str:
        """The text a model needs for the whole session: the kernel's rules and limits, every bound
        handle with its signature, the held states with the variables that carry them, and the next
        steps from the held states (tools whose requirements are all held, with the calls that wire
        the held artifacts)."""
        self._check_open()
        self.kernel.check()
        return self.cells.instructions(self.code_mode.instructions(self.session_id))

    # -- lifetime -----------------------------------------------------------------------------------

    def restart(self) -> None:
        """Discard the kernel, its variables and its snapshot (held states and artifacts go too;
        handles stay bound)."""
        self._check_open()
        self.kernel.restart()
        self.runs.paused = None  # its kernel and the steps it ran are gone

    async def arestart(self) -> None:
        """Async :meth:`restart`."""
        self._check_open()
        await self.kernel.arestart()
        self.runs.paused = None

    def shutdown(self) -> None:
        """Snapshot and stop the session's kernel (and its own CodeMode, when it made one); a later
        ``workspace.session`` with this id restores it. Later calls raise :class:`toolpath.kernel.KernelError`.
        Safe to call twice."""
        if not self._closed:
            self._closed = True
            self.kernel.stop(with_code_mode=self._owns_code_mode)

    async def ashutdown(self) -> None:
        """Async :meth:`shutdown`."""
        if not self._closed:
            self._closed = True
            await self.kernel.astop(with_code_mode=self._owns_code_mode)

    def __enter__(self) -> AgentSession:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()

    async def __aenter__(self) -> AgentSession:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.ashutdown()
