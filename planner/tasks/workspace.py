"""Workspace: the main job as one object — catalogs → graph → search → plan → cell → kernel.

Example::

    from toolpath.planner.tasks.workspace import Workspace

    workspace = Workspace.open()                       # the shipped catalogs
    task = workspace.plan_task("is aspirin drug-like?", inputs={"smiles": "CC(=O)Oc1ccccc1C(=O)O"})
    print(task.cell.code)
    run = workspace.run_task(task)                     # a fresh kernel, shut down afterwards
    print(run.result.result)

Skill search, cells and kernels are imported by the methods that use them, so a workspace that only
plans (``toolpath plan``) loads neither the embedding model nor jupyter_client.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
import threading
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolpath.catalogs import CATALOGS_VARIABLE, default_catalog_paths
from toolpath.planner.planning.budgets import DEFAULT_MAX_REPLANS, DEFAULT_TASK_BUDGET_S
from toolpath.planner.tasks.recording import recorded_plan, recorded_run, recording_failures, recording_refusals
from toolpath.planner.tasks.task_spans import traced_task
from toolpath.registry import CatalogError, CatalogProblem, LoadedCatalogs, ToolDefinition, import_roots, load_checked
from toolpath.registry.catalog_packages import module_paths
from toolpath.registry.catalog_problems import UNREADABLE

if TYPE_CHECKING:
    from toolpath.kernel import CodeMode
    from toolpath.planner.planning.graph import StateGraph
    from toolpath.planner.planning.plans import Plan
    from toolpath.planner.search.embedding import Embedder
    from toolpath.planner.search.learned import LearnedSearch
    from toolpath.planner.search.skills import SkillHit, SkillIndex
    from toolpath.planner.tasks.agent_session import AgentSession
    from toolpath.planner.tasks.cell import PlannedCell
    from toolpath.planner.tasks.record_of_use import Recorder
    from toolpath.planner.tasks.replanning import OnFailure, Replanning
    from toolpath.planner.tasks.session_state import SessionState
    from toolpath.planner.tasks.task import TaskPlan, TaskRun


def resolve_catalog_paths(only: Sequence[str | Path] = (), add: Sequence[str | Path] = ()) -> list[Path]:
    """The catalog files to load: ``only`` when given, else the shipped catalogs and those
    :data:`CATALOGS_VARIABLE` lists; then ``add``.

    Raises:
        CatalogError: a file the variable lists does not exist (TP100, naming the variable).
    """
    if only:
        base = [Path(path) for path in only]
    else:
        listed = [Path(entry) for entry in os.environ.get(CATALOGS_VARIABLE, "").split(os.pathsep) if entry.strip()]
        missing = [
            CatalogProblem(str(path), "", f"cannot read catalog file: it does not exist; fix or remove it in {CATALOGS_VARIABLE}", code=UNREADABLE)
            for path in listed
            if not path.exists()
        ]
        if missing:
            raise CatalogError(missing)
        base = [*default_catalog_paths(), *listed]
    return base + [Path(path) for path in add]


class _ToolsListedOnUse(Sequence[ToolDefinition]):
    """The tools of ``registry`` that ``keep`` keeps (all by default), listed when first used: a
    CodeMode reads them only to check a failure injection or a cell's approval, and a registry read
    from a catalog snapshot reads each definition then (seconds at 100,000 tools)."""

    def __init__(self, registry: Iterable[ToolDefinition], keep: Callable[[ToolDefinition], bool] | None = None):
        self._registry, self._keep = registry, keep

    @functools.cached_property
    def _tools(self) -> list[ToolDefinition]:
        return [tool for tool in self._registry if self._keep is None or self._keep(tool)]

    def __len__(self) -> int:
        return len(self._tools)

    def __getitem__(self, index):  # type: ignore[no-untyped-def]  # Sequence's int and slice overloads
        return self._tools[index]


def _python_recorder() -> Recorder:
    from toolpath.planner.tasks.record_of_use import Recorder

    return Recorder("python")


@dataclass
class Workspace:
    """Loaded catalogs with their state graph and skill index (both built on first use).

    Args:
        loaded: the catalogs, as returned by :func:`toolpath.registry.load_catalogs`.
        embedder: the embedder for skill search; default the embedded all-MiniLM-L6-v2.
        recorder: writes the tasks planned and run (here and in its sessions) into the record of
            use (:mod:`toolpath.planner.tasks.record_of_use`), as the local user's; ``None``: records
            nothing (``TOOLPATH_RECORD=off`` does the same for every workspace).
    """

    loaded: LoadedCatalogs
    embedder: Embedder | None = None
    recorder: Recorder | None = field(default_factory=_python_recorder)
    _index: SkillIndex | None = field(init=False, default=None)
    # One build of the index however many threads ask at once: toolpath serve builds it at start-up
    # while requests that need it arrive (each would otherwise build its own).
    _index_lock: threading.Lock = field(init=False, default_factory=threading.Lock, repr=False, compare=False)

    @functools.cached_property
    def graph(self) -> StateGraph:
        """The catalogs' :class:`toolpath.planner.planning.graph.StateGraph`, built on first use: the
        planner's modules take about 0.15 s to import, and ``toolpath run`` starts its kernel first."""
        from toolpath.planner.planning.graph import StateGraph

        closed = {catalog.domain for catalog in self.loaded.catalogs if catalog.vocabulary == "closed"}
        return StateGraph(self.loaded.registry, self.loaded.states, closed)

    @classmethod
    def open(cls, catalog_paths: Iterable[str | Path] | None = None, embedder: Embedder | None = None) -> Workspace:
        """Load ``catalog_paths`` (one path, or several; default: :func:`resolve_catalog_paths`: the
        shipped catalogs and those ``TOOLPATH_CATALOGS`` lists).

        Raises:
            CatalogError: any load problem or lint error in any file; nothing is loaded.
        """
        if isinstance(catalog_paths, (str, os.PathLike)):
            catalog_paths = [catalog_paths]  # one path, not the characters of one
        paths = list(catalog_paths) if catalog_paths else resolve_catalog_paths()
        return cls(load_checked(paths), embedder)

    @property
    def index(self) -> SkillIndex:
        """The skill index, built on first use, with the phrasings (and query adapter) of the loaded
        overlays when there are any (:meth:`learned_search`).

        Threads that ask while it is being built wait for that build. A build that fails keeps
        nothing: the next caller builds it again, and gets the error itself.

        Raises:
            CatalogError: an overlay learned with another embedding model than the one in use (TP111).
        """
        if self._index is None:
            with self._index_lock:
                if self._index is None:
                    from toolpath.planner.search.skills import SkillIndex

                    self._index = SkillIndex(self.graph, self.embedder, learned=self.learned_search())
        return self._index

    def learned_search(self) -> LearnedSearch | None:
        """The loaded overlays' phrasings as one :class:`toolpath.planner.search.learned.LearnedSearch`
        (their rows in load order; the last overlay's adapter, if any), or ``None`` without overlays.

        Raises:
            CatalogError: an overlay's vectors come from another embedding model than the one in
                use (TP111): they cannot be compared with its query vectors; re-run ``toolpath learn``.
        """
        overlays = self.loaded.overlays
        if not overlays:
            return None
        import numpy as np

        from toolpath.planner.search.embedding import default_embedder
        from toolpath.planner.search.learned import LearnedSearch
        from toolpath.registry.overlays import OTHER_MODEL

        model = getattr(self.embedder if self.embedder is not None else default_embedder(), "model_id", None)
        other = [overlay for overlay in overlays if model is not None and overlay.model != model]
        if other:
            raise CatalogError(
                [
                    overlay.problem(
                        ["overlay", "embedding_model"],
                        f"learned with embedding model {overlay.model!r}, but search uses {model!r}: re-run `toolpath learn` with the model in use, or remove the overlay",
                        OTHER_MODEL,
                    )
                    for overlay in other
                ]
            )
        adapters = [overlay.adapter for overlay in overlays if overlay.adapter is not None]
        # Rows of a catalog skipped for missing modules have no entry to help (the load passed them over).
        known = {("tool", tool.server_name, tool.name) for tool in self.loaded.registry} | {("state", None, token) for token in self.graph.states}
        rows = [
            (entry, vector, phrasing)
            for overlay in overlays
            for entry, vector, phrasing in zip(overlay.entries, overlay.vectors, overlay.phrasings)
            if entry in known
        ]
        if not rows:
            return None
        entries, vectors, phrasings = zip(*rows)
        return LearnedSearch(entries, np.stack(vectors), adapters[-1] if adapters else None, texts=phrasings)

    def search(self, query: str, k: int = 10, **filters: Any) -> list[SkillHit]:
        """:meth:`toolpath.planner.search.skills.SkillIndex.search` (filters: ``held``, ``domain``, ``kind``, ``reachable_only``).

        Examples:
            Over the shipped catalogs (the first search loads the embedding model):

            >>> from toolpath.planner import Workspace
            >>> workspace = Workspace.open()
            >>> best = workspace.search("is this molecule drug-like?", k=3)[0]
            >>> best.kind, best.name, best.reachable
            ('state', 'chemistry.descriptors_computed', True)
            >>> [step.tool.name for step in best.plan.steps]  # how to reach it from nothing held
            ['parse_molecule', 'compute_descriptors']
            >>> [hit.name for hit in workspace.search("plot a histogram of a column", k=2, domain="tabular", kind="tool")]
            ['plot_histogram', 'plot_scatter']
        """
        return self.index.search(query, k=k, **filters)

    def plan(self, goal: Iterable[str], held: Iterable[str] = (), avoid: Collection[str] = ()) -> Plan:
        from toolpath.planner.planning.plans import plan

        return plan(self.graph, goal, held=held, avoid=avoid)

    def plan_goal(self, goal: Iterable[str], inputs: Mapping[str, Any] | None = None, held: Iterable[str] = ()) -> tuple[Plan, PlannedCell]:
        """Plan to explicit goal states and render the cell (no search); input states the inputs give
        are held (:meth:`toolpath.planner.planning.graph.StateGraph.input_states_given`)."""
        from toolpath.planner.tasks.cell import KernelView, render_cell

        goal_plan = self.plan(goal, held=frozenset(held) | self.graph.input_states_given(inputs or {}))
        return goal_plan, render_cell(goal_plan, inputs, kernel=KernelView.of(self.graph))

    def plan_task(
        self,
        task: str | Sequence[str],
        inputs: Mapping[str, Any] | None = None,
        held: Collection[str] = (),
        *,
        time_budget_s: float | None = DEFAULT_TASK_BUDGET_S,
        cancel: threading.Event | None = None,
        output_directory: str | os.PathLike[str] | None = None,
        probe_directory: str | os.PathLike[str] | None = ".",
        meant: Mapping[str, str] | None = None,
    ) -> TaskPlan:
        """Plan a task given in words or as a list of steps (see :mod:`toolpath.planner.tasks.matching`): each part is
        matched by skill search, and the goals of all parts get one joint plan and cell.

        Args:
            time_budget_s: seconds the planning may take (``None``: no limit); the clock starts
                once the task is checked, so loading the embedding model does not count.
            cancel: an event another thread sets to stop the planning (e.g. its client is gone).
            output_directory: a directory (existing when the cell runs) for the files the tools
                write when no input says where: each ``role: output`` parameter that would take its
                default relative path (``histogram.png``) takes it inside this directory, so nothing
                lands in the kernel's working directory (:func:`toolpath.planner.tasks.cell.render_cell`).
            probe_directory: where the files a task names may be read while planning, to match its
                words to what they hold (a table's columns: :mod:`toolpath.planner.tasks.probes`);
                default the working directory, where the kernel reads them too; ``None``: none.
            meant: a person's answers to unclear parts, as :func:`toolpath.planner.tasks.pipeline.plan_request` takes them.

        Raises:
            NoMatchingSkillError, NoPlanError, QueryError, InputError, UnknownStateError: see
            :func:`toolpath.planner.tasks.pipeline.plan_request`; QueryError also for a task over the
            size limits (:data:`toolpath.planner.tasks.request.MAX_TASK_CHARS`,
            :data:`toolpath.planner.tasks.request.MAX_TASK_PARTS`, :data:`toolpath.planner.tasks.request.MAX_TASK_STEPS`).
            PlanningTimeout: planning outlasted ``time_budget_s``. PlanningCancelled: ``cancel`` was set.
            ValueError: ``time_budget_s`` is not a positive number or ``None``.

        Examples:
            Over the shipped catalogs (planning loads the embedding model); nothing runs:

            >>> from toolpath.planner import Workspace
            >>> workspace = Workspace.open()
            >>> task = workspace.plan_task("is aspirin drug-like?", inputs={"smiles": "CC(=O)Oc1ccccc1C(=O)O"})
            >>> [step.tool.name for step in task.plan.steps]
            ['parse_molecule', 'compute_descriptors']
            >>> print(task.cell.code)  # doctest: +ELLIPSIS
            # Task: is aspirin drug-like?
            # Goal: chemistry.descriptors_computed
            ...
            smiles = 'CC(=O)Oc1ccccc1C(=O)O'
            <BLANKLINE>
            molecule = await chemistry.parse_molecule(smiles=smiles)
            descriptors = await chemistry.compute_descriptors(molecule=molecule)
            descriptors
            <BLANKLINE>
        """
        from toolpath.planner.tasks.cell_writers import FreshKernelCells
        from toolpath.planner.tasks.pipeline import TaskContext, plan_request

        # The index is built on first use, so a request refused while checked builds none.
        context = TaskContext(self.graph, lambda: self.index, FreshKernelCells(self.graph, output_directory), probe_directory=probe_directory)
        with recording_refusals(self.recorder, None, task, inputs, None):
            task_plan = plan_request(context, task, inputs, held, time_budget_s=time_budget_s, cancel=cancel, meant=meant)
        return recorded_plan(self.recorder, None, task_plan, None)

    def code_mode(self, timeout: float | None = 300.0, **options: Any) -> CodeMode:
        """A :class:`toolpath.kernel.CodeMode` whose kernels can import every loaded catalog's tools.

        Catalog tools with ``binding: host`` run in this process, so when the catalogs have any, their
        import roots are also appended to ``sys.path`` here.

        Args:
            timeout: seconds before a cell is interrupted.
            options: further :class:`toolpath.kernel.CodeMode` parameters (``pool_size`` defaults to 0 here).

        Raises:
            toolpath.planner.tasks.failure_injections.UnknownInjectionTargetError: an ``inject_failures``
                item naming a tool that no loaded catalog nor ``tools`` item has (the message names
                it and the closest name); and what :class:`toolpath.kernel.CodeMode` raises.
        """
        from toolpath.kernel import CodeMode

        roots = import_roots(self.loaded.catalogs)
        existing = os.environ.get("PYTHONPATH")
        env = dict(options.pop("env", None) or {})
        if roots:
            env["PYTHONPATH"] = os.pathsep.join([*roots, existing] if existing else roots)
        if any(catalog.has_host_tools() for catalog in self.loaded.catalogs):
            sys.path.extend(root for root in roots if root not in sys.path)
        sandbox = options.get("sandbox")
        if sandbox is not None:
            # A sandboxed kernel sees exactly the catalogs' modules, not the rest of their directories.
            options["sandbox"] = dataclasses.replace(sandbox, read_only=(*sandbox.read_only, *module_paths(self.loaded.catalogs)))
        options.setdefault("pool_size", 0)
        if isinstance(options.get("inject_failures"), Iterable) and not isinstance(options["inject_failures"], (str, bytes)):
            options["inject_failures"] = list(options["inject_failures"])
            if isinstance(options.get("tools"), Iterable) and not isinstance(options["tools"], (str, bytes)):
                options["tools"] = list(options["tools"])
            # The kernel matches injections by name alone: one naming no tool would fail nothing.
            from toolpath.planner.tasks.failure_injections import check_injections  # imports the kernel's tool bindings

            check_injections(options["inject_failures"], list(self.loaded.registry), options.get("tools", ()))
        # Planned cells bind the catalogs' tools themselves; those that ask may ask the approver,
        # and failures may be injected into any.
        options.setdefault("approval_tools", _ToolsListedOnUse(self.loaded.registry, lambda tool: tool.approval != "never"))
        options.setdefault("cell_tools", _ToolsListedOnUse(self.loaded.registry))
        return CodeMode(timeout=timeout, env=env, **options)

    def session(
        self,
        session_id: str = "session",
        *,
        code_mode: CodeMode | None = None,
        state: SessionState | Mapping[str, Any] | None = None,
        user_id: str | None = None,
        **code_mode_options: Any,
    ) -> AgentSession:
        """An :class:`toolpath.planner.tasks.agent_session.AgentSession`: one persistent kernel that keeps its held states,
        artifacts and handles across tasks and free cells.

        Args:
            session_id: the CodeMode session id.
            code_mode: a CodeMode shared with other sessions (default: the session makes its own,
                with :meth:`code_mode` and ``code_mode_options``, and shuts it down with itself).
            state: a saved :class:`toolpath.planner.tasks.session_state.SessionState`, or its
                ``to_dict()``, to restore (default: the one saved with the session's last kernel
                snapshot, if any).
            user_id: the user the session acts for; a session is refused to any other
                (:class:`toolpath.kernel.SessionOwnerError`).

        Raises:
            ValueError: a ``state`` mapping with a missing or mistyped field; and what
                :class:`toolpath.planner.tasks.agent_session.AgentSession` raises.
        """
        from toolpath.planner.tasks.agent_session import AgentSession
        from toolpath.planner.tasks.session_state import SessionState

        if isinstance(state, Mapping):
            state = SessionState.from_dict(state)

        return AgentSession(self, session_id, code_mode=code_mode, state=state, user_id=user_id, **code_mode_options)

    def _host_tools(self, task_plan: TaskPlan, replanning: Replanning | None = None) -> list[ToolDefinition]:
        """The tools that run in this process that a cell may call (the planned cell fetches their
        handles): the planned path's, and with ``replanning`` those of every route to its goal and to
        the states of its steps (a step the task asked for, "publish the summary", may make no goal
        state, and a replan may do it through another tool making the same states)."""
        if replanning is not None:
            from toolpath.planner.tasks.replanning import route_host_tools

            made = {state for step in task_plan.plan.steps for state in step.tool.state_transition.produces}
            return route_host_tools(self.graph, {*task_plan.plan.goal, *made})
        return [step.tool for step in task_plan.plan.steps if step.tool.binding == "host"]

    def _check_runnable(self, task_plan: TaskPlan, partial: bool) -> bool:
        """Raise for parts not understood (unless ``partial``), unbound inputs or a session's plan;
        False when there is nothing to run (the goal is already held)."""
        from toolpath.planner.tasks.task import PartsNotUnderstoodError, TaskPlan, UnboundParametersError

        if not isinstance(task_plan, TaskPlan):
            raise TypeError(
                f"run_task runs a TaskPlan, not {type(task_plan).__name__}: plan it first, run_task(plan_task(task, inputs)); "
                "an agent session (workspace.session(...)) also takes the task itself"
            )
        if task_plan.session_id is not None:
            raise ValueError(
                f"this task plan belongs to session {task_plan.session_id!r} (its cell uses that session's handles and variables); run it with that session's run_task"
            )
        if task_plan.unmatched and not partial:
            raise PartsNotUnderstoodError(task_plan)
        if task_plan.cell.unbound:
            raise UnboundParametersError(task_plan.cell.unbound)
        return bool(task_plan.plan.steps)

    @traced_task
    async def arun_task(
        self,
        task_plan: TaskPlan,
        timeout: float | None = 300.0,
        session_id: str = "toolpath-run",
        code_mode: CodeMode | None = None,
        *,
        partial: bool = False,
        on_failure: OnFailure = "stop",
        max_replans: int = DEFAULT_MAX_REPLANS,
        output_directory: str | os.PathLike[str] | None = None,
        **code_mode_options: Any,
    ) -> TaskRun:
        """Execute the planned cell in a fresh CodeMode kernel, then shut the kernel down.

        A plan with no steps (the goal is already held) runs nothing and starts no kernel.
        ``code_mode_options`` are further :class:`toolpath.kernel.CodeMode` options (e.g. ``gateway_url``).

        Args:
            code_mode: run the cell in this CodeMode's session ``session_id`` instead, and leave it
                running: one made by :meth:`code_mode` before planning, whose kernel started
                meanwhile (:meth:`toolpath.kernel.CodeMode.start_soon`). Only for plans whose tools
                all run in the kernel (host tools are bound when a CodeMode is made); its own timeout
                and options apply (``code_mode_options`` are refused with it).
            partial: run the parts understood even when others were not (the plan's ``unmatched``
                parts); by default such a plan is refused.
            on_failure: ``"stop"`` (default): stop at the first step that fails, running exactly the
                cell of ``task_plan``, which its caller made and may have read. ``"replan"``: when a
                step fails in a way another route can help, plan again from the states the kernel
                holds to the same goal and run the new remainder in the same kernel, at most
                ``max_replans`` times, as :meth:`toolpath.planner.tasks.agent_session.AgentSession.run_task`
                does (``toolpath run`` does this). A fresh CodeMode then binds the host tools of every
                route to the goal; a given ``code_mode`` can take only routes of in-kernel tools.
            output_directory: where a replanned cell's tools write the files no input places, as
                ``task_plan`` was planned with (:meth:`plan_task`'s ``output_directory``).

        Raises:
            PartsNotUnderstoodError: a part of the task was not understood and ``partial`` is false
                (nothing is started); the message gives every part's fate.
            UnboundParametersError: the cell needs inputs that were not given (nothing is started).
            ValueError: ``task_plan`` was made by an agent session, or ``code_mode`` cannot run it.
            KernelError: the kernel could not start.
        """
        from toolpath.kernel import CellResult
        from toolpath.planner.tasks.replanning import Replanning
        from toolpath.planner.tasks.task import TaskRun

        with recording_refusals(self.recorder, None, None, None, task_plan):
            runnable = self._check_runnable(task_plan, partial)
            replanning = Replanning.of(self.graph, on_failure, max_replans)
        with recording_failures(self.recorder, None, task_plan):
            if not runnable:
                run = TaskRun(task_plan, CellResult("ok"))
            elif code_mode is not None:
                self._check_given_code_mode(task_plan, code_mode_options)
                run = await self._arun_cells(task_plan, code_mode, session_id, replanning, output_directory, host_allowed=False)
            else:
                async with self.code_mode(timeout, tools=self._host_tools(task_plan, replanning), snapshot=False, **code_mode_options) as fresh:
                    run = await self._arun_cells(task_plan, fresh, session_id, replanning, output_directory, host_allowed=True)
        return recorded_run(self.recorder, None, run, None)

    async def _arun_cells(
        self,
        task_plan: TaskPlan,
        code_mode: CodeMode,
        session_id: str,
        replanning: Replanning | None,
        output_directory: str | os.PathLike[str] | None,
        host_allowed: bool,
    ) -> TaskRun:
        """Run ``task_plan``'s cell in ``code_mode``'s session, then (``replanning``) each cell that
        continues it after a replannable failure; the whole run."""
        from toolpath.planner.tasks.continuation import FreshKernelContinuation, whole_run
        from toolpath.planner.tasks.task import TaskRun

        continuation = FreshKernelContinuation(self.graph, task_plan, output_directory, host_allowed) if replanning is not None else None
        cells: list[TaskRun] = []
        current: TaskPlan | None = task_plan
        while current is not None:
            cells.append(TaskRun(current, await code_mode.arun(current.cell.code, session_id)))
            failed = cells[-1].failed_step is not None
            if continuation is None or replanning is None or not failed:
                break
            current = continuation.next(cells[-1], replanning, await code_mode.avariables(session_id))
        return whole_run(cells, replanning)

    @traced_task
    def run_task(
        self,
        task_plan: TaskPlan,
        timeout: float | None = 300.0,
        session_id: str = "toolpath-run",
        code_mode: CodeMode | None = None,
        *,
        partial: bool = False,
        on_failure: OnFailure = "stop",
        max_replans: int = DEFAULT_MAX_REPLANS,
        output_directory: str | os.PathLike[str] | None = None,
        **code_mode_options: Any,
    ) -> TaskRun:
        """Sync :meth:`arun_task`; works inside a running event loop too."""
        from toolpath.kernel import CellResult
        from toolpath.planner.tasks.replanning import Replanning
        from toolpath.planner.tasks.task import TaskRun

        with recording_refusals(self.recorder, None, None, None, task_plan):
            runnable = self._check_runnable(task_plan, partial)
            replanning = Replanning.of(self.graph, on_failure, max_replans)
        with recording_failures(self.recorder, None, task_plan):
            if not runnable:
                run = TaskRun(task_plan, CellResult("ok"))
            elif code_mode is not None:
                self._check_given_code_mode(task_plan, code_mode_options)
                run = self._run_cells(task_plan, code_mode, session_id, replanning, output_directory, host_allowed=False)
            else:
                with self.code_mode(timeout, tools=self._host_tools(task_plan, replanning), snapshot=False, **code_mode_options) as fresh:
                    run = self._run_cells(task_plan, fresh, session_id, replanning, output_directory, host_allowed=True)
        return recorded_run(self.recorder, None, run, None)

    def _run_cells(
        self,
        task_plan: TaskPlan,
        code_mode: CodeMode,
        session_id: str,
        replanning: Replanning | None,
        output_directory: str | os.PathLike[str] | None,
        host_allowed: bool,
    ) -> TaskRun:
        """Sync :meth:`_arun_cells`."""
        from toolpath.planner.tasks.continuation import FreshKernelContinuation, whole_run
        from toolpath.planner.tasks.task import TaskRun

        continuation = FreshKernelContinuation(self.graph, task_plan, output_directory, host_allowed) if replanning is not None else None
        cells: list[TaskRun] = []
        current: TaskPlan | None = task_plan
        while current is not None:
            cells.append(TaskRun(current, code_mode.run(current.cell.code, session_id)))
            failed = cells[-1].failed_step is not None
            if continuation is None or replanning is None or not failed:
                break
            current = continuation.next(cells[-1], replanning, code_mode.variables(session_id))
        return whole_run(cells, replanning)

    def _check_given_code_mode(self, task_plan: TaskPlan, code_mode_options: Mapping[str, Any]) -> None:
        """Raise ``ValueError`` when a CodeMode given to :meth:`run_task` cannot run ``task_plan`` as asked."""
        if code_mode_options:
            raise ValueError(f"{', '.join(sorted(code_mode_options))}: options of a fresh CodeMode; the CodeMode given runs with its own")
        host = [tool.name for tool in self._host_tools(task_plan)]
        if host:
            raise ValueError(f"the plan calls host tools ({', '.join(host)}), which a CodeMode binds when it is made: run it without code_mode")
