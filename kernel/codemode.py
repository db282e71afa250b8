"""CodeMode: persistent IPython kernels, one per session, for agents that write Python.

A model gets two tools: ``execute(code)`` runs a cell in its session's kernel, ``restart()`` discards
the kernel and its state. Programs get ``run``/``variables``/``value``/``shutdown`` and their async
twins. The session id always comes from the caller (the agent run), never from cell code.

Contract:

- The first cell of a session starts its kernel (taken from a pool of pre-started kernels when one
  is ready); the kernel is reused until it has been idle for ``idle_ttl`` seconds. ``max_kernels``
  caps live session kernels, ``max_kernels_per_user`` those of one owner: a new session evicts the
  least recently used idle one (its owner's own, for the per-user cap).
- Cells of one session run one at a time, in call order; sessions run in parallel.
- A cell over ``timeout`` is interrupted. One that ignores the interrupt returns ``"aborted"``; the
  next cell waits up to ``busy_wait`` seconds for it, then returns ``"busy"`` telling the model to
  retry or restart — or, with ``on_busy_kernel="restart"``, restarts the kernel and runs the cell.
- A kernel that dies is reported with its last output; the next cell starts a fresh kernel and says
  that earlier state is gone.
- Kernels run on this machine (ipykernel on ``python``), from a kernelspec through its provisioner
  (``kernel_name``), or on a Jupyter Kernel/Enterprise Gateway (``gateway_url``). A kernel that may
  be on another host gets the same contract; it reaches host tools over TLS, sends them JSON only by
  default, and its snapshots travel over its Jupyter channels (see the README).
- Tools: registry tools with ``binding="kernel"`` are imported inside the kernel; everything else
  (toolkits, plain functions, host-bound registry tools) runs in this process and is reached over
  the bridge (:mod:`toolpath.kernel.bridge`). A *run* starts with the first cell (or :meth:`CodeMode.open`)
  and ends with :meth:`CodeMode.close`: toolkits that need a connection are connected when it
  starts — an async ``connect()`` on the first cell, on the caller's loop — and closed when it ends;
  kernels outlive runs.

All kernels are driven from one private event loop on a background thread: jupyter_client's async
sockets belong to the loop that made them, and a private loop lets the sync methods work from plain
code and from inside someone else's running loop alike.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import importlib
import inspect
import itertools
import json
import os
import threading
import time
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from toolpath.errors import Refusal
from toolpath.kernel.bindings import HOST_MODULE, Bindings, toolkit_of
from toolpath.kernel.bridge import Bridge, BridgeListener, toolkit_spec
from toolpath.kernel.kernel_snapshot import pack, report_path, unpack
from toolpath.kernel.output import CellResult, OutputLimits
from toolpath.kernel.result_store import ResultStore
from toolpath.kernel.sandbox import limit_notice
from toolpath.kernel.session import INTERRUPT_GRACE, KernelError, KernelSession
from toolpath.kernel.snapshot import SnapshotConflictError, SnapshotStore
from toolpath.kernel.toolkit import Tool, Toolkit, as_toolkits
from toolpath.registry import ToolDefinition
from toolpath.registry.storage import StoreError

if TYPE_CHECKING:
    from toolpath.kernel.mcp_toolkit import MCPConnections
    from toolpath.kernel.sandbox import SandboxPolicy

T = TypeVar("T")

_SETUP_MODULE = "toolpath.kernel.kernel_setup"
_SNAPSHOT_MODULE = "toolpath.kernel.kernel_snapshot"
_EVICTION_MEMORY = 10_000
#: Files in a kernel's private directory through which variables leave and enter it.
_DUMP_FILE = "snapshot-dump"
_RESTORE_FILE = "snapshot-restore"
#: Variables named in a restore notice before the rest are counted.
_NOTICE_NAMES = 20
#: The longest error text a notice carries (a full traceback would flood the model's context).
_NOTICE_ERROR_CHARS = 300
_INTROSPECTION_LIMITS = OutputLimits(max_output_chars=64_000_000)


_EXECUTE_DESCRIPTION = "Run a Python cell in your persistent IPython kernel and get back what it printed, its value, its error and its images. Variables stay for later cells; top-level await works; tool handles are bound."
_RESTART_DESCRIPTION = "Discard the kernel and all its variables; the next cell starts fresh."


class SessionOwnerError(Refusal, PermissionError):
    """A run asked for a session that belongs to another user (or to a user, when it gave none)."""


@dataclass
class _Session:
    """A session's kernel and bookkeeping; ``lock`` serialises its cells."""

    session_id: str
    kernel: KernelSession | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    last_used: float = field(default_factory=time.monotonic)
    notice: str = ""
    starting: bool = False
    #: Registry tools bound in this session only (see CodeMode.bind), by id; names are
    #: de-duplicated over ``universe``.
    tools: dict[int, ToolDefinition] = field(default_factory=dict)
    universe: list[ToolDefinition] = field(default_factory=list)
    tools_version: int = 0
    #: The ``user_id`` of the run that created the session (``None``: nobody's).
    owner: str | None = None
    #: Snapshots: a cell ran since the last one; the debounce timer; the snapshot could not be read,
    #: so it must not be overwritten by this kernel's state; the kernel was restored from one.
    dirty: bool = False
    snapshot_timer: asyncio.TimerHandle | None = None
    keep_snapshot: bool = False
    restored: bool = False
    #: Data saved with each snapshot (see CodeMode.save_with_snapshot), and what the last one held.
    data_provider: Callable[[], Any] | None = None
    saved_data: Any = None
    #: ``{variable: digest of its pickle}`` in the stored snapshot, as far as this kernel knows.
    digests: dict[str, str] = field(default_factory=dict)
    #: Stored variables this kernel could not load (``{name: digest}``): kept in later snapshots
    #: until the kernel defines that name itself, so a module missing for a while loses nothing.
    unrestored: dict[str, str] = field(default_factory=dict)
    #: The session lost a kernel (death, eviction, a stuck cell), so its next kernel's notice says
    #: whether the variables came back.
    lost_kernel: bool = False


class CodeMode:
    """Persistent IPython kernels keyed by session id.

    Args:
        tools: what to bind as awaitable handles in every kernel, one handle per toolkit or server:
            :class:`toolpath.kernel.Toolkit` objects, plain functions and :class:`toolpath.kernel.Tool` objects (one
            toolkit named ``tools``), and registry tools (each needs ``id`` and ``module`` or
            ``mcp_server``, as a :class:`toolpath.registry.ToolRegistry` gives them). Registry tools with
            ``binding="kernel"`` are imported inside the kernel on first use; everything else runs
            in this process and is called over the bridge: ``await inventory.stock_level("A-1")``.
            Registry tools served by an MCP server connect to it on their first call (one
            connection per server configuration) and are disconnected when the run ends.
        allow_restart: offer ``restart`` to the model (see :meth:`model_tools`); ``False`` also makes
            :meth:`restart` raise.
        allow_shell: keep ``%%bash`` and ``!`` shell escapes; ``False`` removes them (this keeps a
            model on Python; it is **not** a security boundary: ``subprocess`` still works).
        on_busy_kernel: ``"wait"`` (report busy after ``busy_wait``) or ``"restart"`` (restart the
            kernel and run the cell).
        busy_wait: seconds a cell waits for an earlier aborted cell to finish.
        idle_ttl: seconds after which an unused session's kernel is shut down.
        timeout: seconds before a cell is interrupted; ``None`` waits forever.
        python: the kernels' interpreter; default the running one.
        cwd: the kernels' working directory; default the current one.
        env: variables laid over the process environment for the kernels.
        startup_code: Python run in every new kernel before its first cell.
        max_output_chars / max_images_per_cell / max_image_bytes: output caps per cell
            (:class:`toolpath.kernel.OutputLimits`).
        max_kernels: cap on live session kernels (pool kernels not included); ``None`` for no cap.
            A new session beyond it evicts the least recently used idle session (snapshotted);
            when every kernel runs a cell for ``busy_wait`` seconds, it gets a ``KernelError``.
        max_kernels_per_user: cap on one owner's live session kernels (sessions created without a
            ``user_id`` count as one owner); ``None`` for no cap. A new session beyond it evicts
            that owner's least recently used idle session, or gets a ``KernelError`` when all of
            theirs run cells for ``busy_wait`` seconds. With this cap, one owner's kernels start
            (and restore) one at a time, so one user opening many sessions at once takes one
            core for it, not every core other users' cells need.
        pool_size: kernels kept started and ready for new sessions; 0 disables the pool.
        interrupt_grace: seconds a timed-out cell gets to stop after the interrupt before it is
            reported ``"aborted"``.
        max_result_bytes: largest host-tool result (encoded) a cell receives; a larger one raises
            ``ResultTooLarge`` in the cell, or is offloaded with ``offload_results``.
        offload_results: keep oversized results in the SQLite file and give the cell an id to read
            them back with ``await results.get(id)``.
        result_store: that SQLite file; default ``$TOOLPATH_HOME/toolpath.db`` (see
            :func:`toolpath.registry.storage.default_database_path`).
        accept_pickles: let cells pass non-JSON arguments (a DataFrame) to host tools as pickles,
            which the host loads. A cell already runs code as this user, so for a local kernel this
            is no new power; ``False`` makes the host accept JSON only, for kernels it should not
            trust (a cell passing other values gets a ``BridgeError`` saying so). Default: pickles
            from plain local kernels, JSON only from sandboxed kernels and kernels on other hosts.
        snapshot: keep each session's variables in ``snapshot_store`` and restore them into its next
            kernel (after this process restarts, an eviction or a death; not after
            :meth:`restart`). ``False`` keeps nothing (owners then live in this process only).
        snapshot_debounce: seconds without a new cell before a session's snapshot is written.
        max_variable_bytes: a variable whose pickle is larger is not snapshotted (and named).
        max_snapshot_bytes: budget of one session's snapshot; the smallest variables are kept first.
        snapshot_store: the SQLite file of snapshots and owners; default ``$TOOLPATH_HOME/toolpath.db``.
            Restoring a snapshot runs its pickles' code: the file is created readable by its owner only.
        kernel_name: start kernels from this kernelspec instead of ipykernel on ``python``: an
            installed one, started through jupyter_client's provisioner machinery (so a
            ``metadata.kernel_provisioner`` such as gateway_provisioners' Kubernetes one decides
            where it runs), or with ``gateway_url`` the gateway's kernelspec (default: its default).
        gateway_url: run every kernel on this Jupyter Kernel Gateway or Enterprise Gateway
            (``http(s)://host:port``), over its REST and WebSocket API.
        gateway_token: the gateway's auth token.
        bridge_address: ``host:port`` through which kernels on other hosts (gateway kernels, or
            kernels a non-local provisioner launched) reach this process's host tools, over TLS;
            default ``127.0.0.1`` and a free port, which only kernels on this machine can reach.
            Port 0 means the port listened on.
        bridge_listen: ``host:port`` the bridge listens on, when it differs from ``bridge_address``
            (``0.0.0.0:7443`` behind a Kubernetes Service named in ``bridge_address``).
        bridge_certificate: ``(certificate file, key file)``, PEM, for the bridge's TLS; default a
            self-signed certificate for ``bridge_address``'s host, made at start. Kernels trust
            exactly this certificate (CodeMode sends it with the bridge's address).
        sandbox: start each local kernel inside bubblewrap with this
            :class:`toolpath.kernel.sandbox.SandboxPolicy`: it sees none of this process's files but the
            Python environment, none of its environment, other sessions' directories, the store or
            (by default) the network, within memory, CPU, process, file and disk limits. Bridges
            then take JSON only unless ``accept_pickles=True``. Not with ``kernel_name`` or
            ``gateway_url``, whose kernels run where they say.

    Raises:
        ValueError: for an unknown ``on_busy_kernel``, a negative number, two toolkits with one name,
            a registry tool without ``id`` or without ``module``/``mcp_server``, a bad gateway URL
            or bridge address, ``python`` with ``kernel_name`` or ``gateway_url``, ``cwd`` or
            ``offload_results`` with ``gateway_url``, or a bridge certificate that cannot be loaded.
        registry.storage.StoreError: ``result_store`` is a directory or cannot be created.
        TypeError: a ``tools`` item that is not a toolkit, tool, callable or registry tool.
    """

    def __init__(
        self,
        tools: Iterable[ToolDefinition | Toolkit | Tool | Callable[..., Any]] = (),
        *,
        allow_restart: bool = True,
        allow_shell: bool = True,
        on_busy_kernel: Literal["wait", "restart"] = "wait",
        busy_wait: float = 5.0,
        idle_ttl: float = 1800.0,
        timeout: float | None = 300.0,
        python: str | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        startup_code: str | None = None,
        max_output_chars: int = 65_536,
        max_images_per_cell: int = 8,
        max_image_bytes: int = 5_000_000,
        max_kernels: int | None = None,
        max_kernels_per_user: int | None = None,
        pool_size: int = 1,
        interrupt_grace: float = INTERRUPT_GRACE,
        max_result_bytes: int = 1_000_000,
        offload_results: bool = False,
        result_store: str | os.PathLike[str] | None = None,
        accept_pickles: bool | None = None,
        snapshot: bool = True,
        snapshot_debounce: float = 1.5,
        max_variable_bytes: int = 2_000_000,
        max_snapshot_bytes: int = 64_000_000,
        snapshot_store: str | os.PathLike[str] | None = None,
        kernel_name: str | None = None,
        gateway_url: str | None = None,
        gateway_token: str | None = None,
        bridge_address: str | None = None,
        bridge_listen: str | None = None,
        bridge_certificate: tuple[str, str] | None = None,
        sandbox: SandboxPolicy | None = None,
    ):
        if on_busy_kernel not in ("wait", "restart"):
            raise ValueError(f"on_busy_kernel must be 'wait' or 'restart', got {on_busy_kernel!r}")
        for name, value in (
            ("interrupt_grace", interrupt_grace),
            ("busy_wait", busy_wait),
            ("idle_ttl", idle_ttl),
            ("pool_size", pool_size),
            ("max_output_chars", max_output_chars),
            ("max_images_per_cell", max_images_per_cell),
            ("max_image_bytes", max_image_bytes),
            ("max_result_bytes", max_result_bytes),
            ("snapshot_debounce", snapshot_debounce),
            ("max_variable_bytes", max_variable_bytes),
            ("max_snapshot_bytes", max_snapshot_bytes),
        ):
            if value < 0:
                raise ValueError(f"{name} must not be negative, got {value}")
        for name, cap in (("max_kernels", max_kernels), ("max_kernels_per_user", max_kernels_per_user)):
            if cap is not None and cap < 1:
                raise ValueError(f"{name} must be at least 1 (or None), got {cap}")
        if timeout is not None and not timeout > 0:
            raise ValueError(f"timeout must be positive (or None), got {timeout}")
        if python is not None and (kernel_name is not None or gateway_url is not None):
            raise ValueError("python cannot be combined with kernel_name or gateway_url: the kernelspec names the kernels' interpreter")
        if gateway_url is None and gateway_token is not None:
            raise ValueError("gateway_token is only used with gateway_url")
        if sandbox is not None and (kernel_name is not None or gateway_url is not None):
            raise ValueError(
                "sandbox applies to kernels this process starts itself, not with kernel_name or gateway_url (their kernels run where the kernelspec or gateway says)"
            )
        if sandbox is not None:
            from toolpath.kernel.sandbox import bwrap_path

            bwrap_path()  # raises SandboxUnavailableError here, not at the first cell
        self.sandbox = sandbox
        self.gateway = None
        if gateway_url is not None:
            from toolpath.kernel.gateway import Gateway  # its HTTP and WebSocket clients only for gateway users

            self.gateway = Gateway(gateway_url, gateway_token, kernel_name)
        if self.gateway is not None and cwd is not None:
            raise ValueError(
                "cwd cannot be set for gateway kernels: the gateway chooses their working directory (Enterprise Gateway reads KERNEL_WORKING_DIR from env)"
            )
        if self.gateway is not None and offload_results:
            raise ValueError(
                f"offload_results needs kernels on this machine: offloaded results are read from the SQLite file, which a kernel on a gateway cannot open; without it, results over max_result_bytes={max_result_bytes:,} raise ResultTooLarge in the cell"
            )
        self.kernel_name = kernel_name
        self.bridge_address = parse_host_port(bridge_address or "127.0.0.1:0", "bridge_address")
        self.bridge_listen = parse_host_port(bridge_listen, "bridge_listen") if bridge_listen is not None else self.bridge_address
        if bridge_certificate is not None and (isinstance(bridge_certificate, (str, bytes)) or len(bridge_certificate) != 2):
            raise ValueError(f"bridge_certificate must be (certificate file, key file), got {bridge_certificate!r}")
        self._bridge_certificate = _bridge_tls().load(*bridge_certificate) if bridge_certificate is not None else None
        self._listener: BridgeListener | None = None
        items = list(tools)
        definitions = [tool for tool in items if isinstance(tool, ToolDefinition)]
        _check_registered(definitions)
        #: Registry tools bound inside the kernel.
        self.tools = [tool for tool in definitions if tool.binding == "kernel"]
        # Connections to the MCP servers of registry tools they serve (made with the first such tool).
        self._mcp_connections: MCPConnections | None = None
        #: Toolkits whose calls run in this process.
        self.toolkits = as_toolkits((tool for tool in items if not (isinstance(tool, ToolDefinition) and tool.binding == "kernel")), load=self._host_tool)
        self.max_result_bytes = max_result_bytes
        if result_store is not None and not offload_results:
            raise ValueError("result_store is only used with offload_results=True")
        self.result_store = ResultStore(result_store) if offload_results else None
        self.accept_pickles = accept_pickles
        if snapshot_store is not None and not snapshot:
            raise ValueError("snapshot_store is only used with snapshot=True")
        self.snapshots = SnapshotStore(snapshot_store) if snapshot else None
        self.snapshot_debounce = snapshot_debounce
        self.max_variable_bytes = max_variable_bytes
        self.max_snapshot_bytes = max_snapshot_bytes
        # Why a toolkit could not be bound (its connect() failed), by toolkit name.
        self._failures: dict[str, str] = {}
        self._toolkit_spec = ""
        self._binding_version = 0
        # Host toolkits of registry tools bound for single sessions (see bind()), by server name.
        self._session_toolkits: dict[str, Toolkit] = {}
        self._rebind()
        self._generations = itertools.count(1)
        self._bridges: dict[KernelSession, Bridge] = {}
        self._bound_version: dict[KernelSession, tuple[int, int]] = {}
        # What each kernel's bridge may call: "handle.attribute" -> (toolkit, tool name).
        self._kernel_targets: dict[KernelSession, dict[str, tuple[Toolkit, str]]] = {}
        # The run: toolkits this CodeMode connected (with the loop they connected on), in order.
        self._connected: list[tuple[Toolkit, asyncio.AbstractEventLoop | None]] = []
        self._connecting: dict[str, concurrent.futures.Future] = {}
        self._connect_lock = threading.Lock()
        self.allow_restart = allow_restart
        self.allow_shell = allow_shell
        self.on_busy_kernel = on_busy_kernel
        self.busy_wait = busy_wait
        self.idle_ttl = idle_ttl
        self.timeout = timeout
        self.python = python
        self.cwd = cwd
        self.env = dict(env or {})
        self.startup_code = startup_code
        self.limits = OutputLimits(max_output_chars, max_images_per_cell, max_image_bytes)
        self.max_kernels = max_kernels
        self.max_kernels_per_user = max_kernels_per_user
        self.pool_size = pool_size
        self.interrupt_grace = interrupt_grace
        self._sessions: dict[str, _Session] = {}
        # Why an evicted session lost its kernel (told to the model on its next cell), and the session,
        # whose bound tools its next kernel binds again.
        self._evicted: dict[str, tuple[str, _Session]] = {}
        self._pool: list[KernelSession] = []
        # With max_kernels_per_user: one kernel start at a time per owner (see the docstring).
        self._owner_starts: dict[str | None, asyncio.Lock] = {}
        # Snapshots the debounce timer started and that are still being written.
        self._snapshotting: set[asyncio.Task] = set()
        self._pool_filling: asyncio.Task | None = None
        self._reaper: asyncio.Task | None = None
        self._closed = False
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="toolpath-codemode", daemon=True)
        self._thread.start()
        self._submit(self._start_background_tasks()).result()

    # -- running coroutines on the private loop -------------------------------------------------

    def _submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        if self._closed:
            coroutine.close()
            raise KernelError("this CodeMode has been shut down; create a new one")
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop)

    def _wait(self, coroutine: Coroutine[Any, Any, T]) -> T:
        if threading.current_thread() is self._thread:
            coroutine.close()
            raise RuntimeError("a sync CodeMode method was called from CodeMode's own loop; use the async variant")
        return self._submit(coroutine).result()

    async def _await(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return await asyncio.wrap_future(self._submit(coroutine))

    async def _start_background_tasks(self) -> None:
        self._reaper = asyncio.create_task(self._reap_idle_sessions())
        self._fill_pool()

    # -- kernels ---------------------------------------------------------------------------------

    async def _new_kernel(self) -> KernelSession:
        kernel = KernelSession(python=self.python, cwd=self.cwd, env=self.env, kernel_name=self.kernel_name, gateway=self.gateway, sandbox=self.sandbox)
        await kernel.start()
        try:
            setup = await kernel.execute(
                f"import {_SETUP_MODULE} as _toolpath_setup\n_toolpath_setup.configure(allow_shell={self.allow_shell!r})\ndel _toolpath_setup",
                timeout=60,
                silent=True,
            )
            if setup.status != "ok":
                raise KernelError(f"setting up the kernel failed: {_describe_error(setup)}")
            await self._bind(kernel, None)
            if self.startup_code:
                startup = await kernel.execute(self.startup_code, timeout=self.timeout, silent=True)
                if startup.status != "ok":
                    raise KernelError(f"startup_code failed: {_describe_error(startup)}")
        except BaseException:
            await self._stop_kernel(kernel)
            raise
        return kernel

    def _version(self, session: _Session | None) -> tuple[int, int]:
        """What a kernel must have bound to serve ``session``: CodeMode's and the session's versions."""
        return (self._binding_version, session.tools_version if session is not None else 0)

    def _session_bindings(self, session: _Session | None) -> Bindings:
        """The handles of CodeMode's own tools plus the tools bound for ``session`` alone."""
        if session is None or not session.tools:
            return self.bindings
        tools = [*self.tools, *session.tools.values()]
        return Bindings.of(tools, universe=[*self.tools, *session.universe], toolkits=self.toolkits, taken={"results"} if self.result_store is not None else ())

    def _toolkit_named(self, name: str) -> Toolkit:
        return next((toolkit for toolkit in self.toolkits if toolkit.name == name), None) or self._session_toolkits[name]

    async def _bind(self, kernel: KernelSession, session: _Session | None) -> None:
        """Bind (or rebind) every handle ``session`` needs in ``kernel``: CodeMode's own (after a
        run's connects changed the toolkits) and the session's (after :meth:`bind`)."""
        version = self._version(session)
        bindings = self._session_bindings(session)
        targets, specs = self._host_binding(bindings)
        self._kernel_targets[kernel] = targets
        bridge = self._bridges.get(kernel)
        if bridge is None and (specs or self.result_store is not None):
            bridge = await self._new_bridge(kernel)
            self._bridges[kernel] = bridge
        code = bindings.code()
        if bridge is not None:
            spec = {**bridge.spec(), "toolkits": specs, "results": str(bridge.result_store.path) if bridge.result_store else None}
            if self.result_store is not None and bridge.result_store is None:
                spec["results_off"] = (
                    "offloaded results are kept in the host's SQLite file, which this kernel on another host cannot open; results over max_result_bytes raise ResultTooLarge instead"
                )
            code = f"import {HOST_MODULE} as _toolpath_bridge\n_toolpath_bridge.install({json.dumps(spec)!r})\ndel _toolpath_bridge\n" + code
            if self.result_store is not None:
                code += f"from {HOST_MODULE} import results_handle as _toolpath_results\nresults = _toolpath_results()\ndel _toolpath_results\n"
        if code:
            names = [*bindings.handles, *bindings.host_handles, *(["results"] if bridge is not None and self.result_store is not None else [])]
            code += f"import {_SETUP_MODULE} as _toolpath_setup\n_toolpath_setup.keep_handles({names!r})\ndel _toolpath_setup\n"
            bound = await kernel.execute(code, timeout=60, silent=True)
            if bound.status != "ok":
                raise KernelError(f"binding the tool handles failed: {_describe_error(bound)}")
        self._bound_version[kernel] = version

    async def _new_bridge(self, kernel: KernelSession) -> Bridge:
        """The bridge of ``kernel``: its own Unix socket when it is local, else the TLS endpoint kernels
        on other hosts share, which accepts JSON only unless ``accept_pickles`` says otherwise."""
        # A kernel that is not trusted with this process's power (remote, sandboxed) sends JSON only.
        accept_pickles = self.accept_pickles if self.accept_pickles is not None else not (kernel.remote or self.sandbox is not None)

        def lookup(target: str) -> tuple[Toolkit, str] | None:  # consulted at call time: later bindings count
            return self._kernel_targets.get(kernel, {}).get(target)

        if kernel.remote:
            bridge = Bridge(None, next(self._generations), lookup, self.max_result_bytes, None, accept_pickles, listener=await self._bridge_listener())
        else:
            bridge = Bridge(kernel.directory, next(self._generations), lookup, self.max_result_bytes, self.result_store, accept_pickles)
        await bridge.start()
        return bridge

    async def _bridge_listener(self) -> BridgeListener:
        """The TLS endpoint of this CodeMode's remote kernels, started on first use."""
        if self._listener is None:
            if self._bridge_certificate is None:
                self._bridge_certificate = await asyncio.to_thread(_bridge_tls().generate, self.bridge_address[0])
            listener = BridgeListener(self.bridge_listen, self.bridge_address, self._bridge_certificate)
            try:
                await listener.start()
            except OSError as error:
                raise KernelError(str(error)) from None
            self._listener = listener
        return self._listener

    def _host_binding(self, bindings: Bindings) -> tuple[dict[str, tuple[Toolkit, str]], dict[str, Any]]:
        """For the host handles of ``bindings``: the bridge's call targets (``"handle.attribute"`` →
        toolkit and tool name) and the specs the kernel binds them from."""
        targets = {}
        specs = {}
        for handle, (name, attributes) in bindings.host_handles.items():
            toolkit = self._toolkit_named(name)
            targets.update({f"{handle}.{attribute}": (toolkit, tool) for attribute, tool in attributes.items()})
            specs[handle] = toolkit_spec(toolkit, attributes, self._failures.get(name, ""))
        return targets, specs

    def _rebind(self) -> None:
        """Name the handles of the tools and toolkits as they are now; bump the version on change."""
        self.bindings = Bindings.of(self.tools, universe=self.tools, toolkits=self.toolkits, taken={"results"} if self.result_store is not None else ())
        spec = json.dumps(self._host_binding(self.bindings)[1], sort_keys=True)
        if spec != self._toolkit_spec:
            self._toolkit_spec = spec
            self._binding_version += 1

    async def _stop_kernel(self, kernel: KernelSession) -> None:
        """Close the kernel's bridge (cancelling its in-flight calls) and shut the kernel down."""
        bridge = self._bridges.pop(kernel, None)
        self._bound_version.pop(kernel, None)
        self._kernel_targets.pop(kernel, None)
        if bridge is not None:
            await bridge.close()
        await kernel.shutdown()

    def _fill_pool(self) -> None:
        if self.pool_size and (self._pool_filling is None or self._pool_filling.done()):
            self._pool_filling = asyncio.create_task(self._refill())

    async def _refill(self) -> None:
        while len(self._pool) < self.pool_size and not self._closed:
            try:
                kernel = await self._new_kernel()
            except KernelError:
                return  # a session that needs a kernel will start one itself and report the error
            if self._closed:
                await self._stop_kernel(kernel)
                return
            self._pool.append(kernel)

    async def _take_kernel(self) -> KernelSession:
        while self._pool:
            kernel = self._pool.pop(0)
            self._fill_pool()
            if await kernel.is_alive():
                return kernel
            await self._stop_kernel(kernel)
        kernel = await self._new_kernel()
        self._fill_pool()
        return kernel

    async def _make_room(self, joining: _Session) -> None:
        """Evict the least recently used idle session when ``joining`` would exceed
        ``max_kernels_per_user`` (one of its owner's sessions) or ``max_kernels`` (anyone's),
        waiting up to ``busy_wait`` seconds for one to become idle.

        Raises:
            KernelError: every kernel under the cap reached is still running a cell after the wait.
        """
        deadline = time.monotonic() + self.busy_wait
        while True:
            live = [session for session in self._sessions.values() if (session.kernel is not None or session.starting) and session is not joining]
            owned = [session for session in live if session.owner == joining.owner]
            if self.max_kernels_per_user is not None and len(owned) >= self.max_kernels_per_user:
                candidates, option, cap, which = owned, "max_kernels_per_user", self.max_kernels_per_user, "the cap on one user's kernels"
            elif self.max_kernels is not None and len(live) >= self.max_kernels:
                candidates, option, cap, which = live, "max_kernels", self.max_kernels, "the cap on all users' kernels together"
            else:
                return
            idle = sorted(
                (session for session in candidates if session.kernel is not None and not session.lock.locked()), key=lambda session: session.last_used
            )
            if idle:
                await self._discard(idle[0], evicted=f"shut down to make room for another session ({option}={cap}, {which})")
                continue
            if time.monotonic() > deadline:
                flag = "--" + option.replace("_", "-")
                raise KernelError(
                    f"{option}={cap} ({which}) is reached and all {len(candidates)} of those kernels are running cells; retry when one finishes, end or restart a session you no longer need, or raise the cap: CodeMode({option}=N), toolpath serve {flag} N"
                )
            await asyncio.sleep(0.05)

    async def _discard(self, session: _Session, evicted: str = "") -> None:
        """Shut the session's kernel down; ``evicted`` (the reason) also forgets the session, after
        writing its pending snapshot (the caller must not hold the session's lock then)."""
        if evicted:
            await self._flush(session)
        kernel, session.kernel = session.kernel, None
        if evicted:
            self._sessions.pop(session.session_id, None)
            self._evicted[session.session_id] = (evicted, session)
            if len(self._evicted) > _EVICTION_MEMORY:  # remember recent evictions only
                del self._evicted[next(iter(self._evicted))]
        if kernel is not None:
            await self._stop_kernel(kernel)

    async def _reap_idle_sessions(self) -> None:
        interval = max(0.05, min(self.idle_ttl / 4, 60.0))
        while True:
            await asyncio.sleep(interval)
            now = time.monotonic()
            for session in list(self._sessions.values()):
                if session.kernel is not None and not session.lock.locked() and now - session.last_used > self.idle_ttl:
                    try:
                        await self._discard(session, evicted=f"shut down after {self.idle_ttl:g} s without use")
                    except Exception as error:  # one kernel that fails to stop must not end eviction for all
                        session.notice = _join(
                            session.notice, f"Stopping this session's idle kernel failed ({_shortened(f'{type(error).__name__}: {error}')})."
                        )

    # -- cells ------------------------------------------------------------------------------------

    async def _run(self, code: str, session_id: str, call_loop: asyncio.AbstractEventLoop | None = None, user_id: str | None = None) -> CellResult:
        session = await self._owned_session(session_id, user_id)
        async with session.lock:
            notice, session.notice = session.notice, ""
            if session.kernel is not None and session.kernel.busy and not await session.kernel.wait_until_idle(self.busy_wait):
                if self.on_busy_kernel == "wait":
                    session.last_used = time.monotonic()
                    evalue = "the environment is still busy with an earlier cell that ignored its interrupt; retry in a moment, or restart to discard the kernel and its state"
                    return CellResult("busy", error={"ename": "Busy", "evalue": evalue, "traceback": ""}, notice=notice)
                await self._discard(session)
                session.lost_kernel = True
                notice = _join(notice, "The kernel was restarted because an earlier cell would not stop; this is a fresh kernel.")
            if session.kernel is None:
                notice = _join(notice, await self._start_kernel(session))
            kernel = session.kernel
            if self._bound_version.get(kernel) != self._version(session):
                await self._bind(kernel, session)
            bridge = self._bridges.get(kernel)
            cell_ids: list[str] = []
            if bridge is not None:
                bridge.call_loop = call_loop
            try:
                result = await kernel.execute(code, timeout=self.timeout, limits=self.limits, interrupt_grace=self.interrupt_grace, on_start=cell_ids.append)
            except (asyncio.CancelledError, Exception):
                if session.kernel is kernel or asyncio.current_task().cancelling():  # type: ignore[union-attr]
                    raise
                # restart() (or an eviction) shut this kernel down under the running cell.
                evalue = "the kernel was restarted while this cell ran; the cell was stopped and earlier variables are gone"
                result = CellResult("dead", error={"ename": "KernelRestarted", "evalue": evalue, "traceback": ""})
            if result.status == "dead" and session.kernel is not kernel:
                # restart() (or an eviction) shut this kernel down under the running cell, and the
                # kernel's end was seen before any error of the closed channels.
                result = CellResult(
                    "dead",
                    error={
                        "ename": "KernelRestarted",
                        "evalue": "the kernel was restarted while this cell ran; the cell was stopped and earlier variables are gone",
                        "traceback": "",
                    },
                )
            session.last_used = time.monotonic()
            if self.sandbox is not None:
                notice = _join(notice, limit_notice(self.sandbox, result.status, result.error))
            if bridge is not None and cell_ids and result.status in ("timeout", "aborted"):
                bridge.cancel_cell(cell_ids[0])
            if result.status == "dead" and session.kernel is kernel:
                await self._discard(session)
                session.lost_kernel = True
                session.notice = _join(session.notice, "The kernel died during the previous cell; this is a fresh kernel.")
            elif result.status in ("ok", "error"):  # a failing cell may have changed variables too
                self._schedule_snapshot(session)
            if notice:
                result = _with_notice(result, notice)
            return result

    async def _start_kernel(self, session: _Session) -> str:
        """Give ``session`` a kernel and restore its snapshot into it; the restore's notice."""
        if self.max_kernels_per_user is None:
            return await self._start_kernel_now(session)
        async with self._owner_starts.setdefault(session.owner, asyncio.Lock()):
            return await self._start_kernel_now(session)

    async def _start_kernel_now(self, session: _Session) -> str:
        session.starting = True  # counts against the caps while its kernel starts
        try:
            await self._make_room(session)
            session.kernel = await self._take_kernel()
        finally:
            session.starting = False
        return await self._restore(session)

    async def _owned_session(self, session_id: str, user_id: str | None) -> _Session:
        """The session ``session_id`` (created, with no kernel yet, when new) if ``user_id`` may use it.

        A new session belongs to ``user_id``; with snapshots, the owner recorded in the store (by
        this or another process) wins over that.

        Raises:
            SessionOwnerError: the session belongs to someone else (nothing is started or shown).
            ValueError: an empty or non-string session id or user id.
            registry.storage.StoreError: the owner cannot be looked up in the store.
        """
        _check_id(session_id, "session_id")
        if user_id is not None:
            _check_id(user_id, "user_id")
        session = self._sessions.get(session_id)
        if session is None:
            reason, evicted = self._evicted.get(session_id, ("", None))
            owner = evicted.owner if evicted is not None else user_id
            if self.snapshots is not None:
                owner = await asyncio.to_thread(self.snapshots.claim, session_id, owner)
            session = self._sessions.get(session_id)  # another task may have created it meanwhile
            if session is None:
                session = self._sessions[session_id] = _Session(session_id, owner=owner)
                if evicted is not None:
                    del self._evicted[session_id]
                    session.tools, session.universe, session.tools_version = evicted.tools, evicted.universe, evicted.tools_version
                    session.data_provider, session.lost_kernel = evicted.data_provider, True
                    session.notice = _join(evicted.notice, f"This session's previous kernel was {reason}; this is a fresh kernel.")
        if session.owner != user_id:
            if user_id is None:
                raise SessionOwnerError(f"session {_shown(session_id)} belongs to a user; pass that user's user_id to use it")
            if session.owner is None:
                raise SessionOwnerError(
                    f"session {_shown(session_id)} was created without a user_id and belongs to no user; use it without user_id, or use another session id"
                )
            raise SessionOwnerError(f"session {_shown(session_id)} belongs to another user, so user {_shown(user_id)} cannot use it; use another session id")
        return session

    # -- snapshots ----------------------------------------------------------------------------------

    async def _restore(self, session: _Session) -> str:
        """Load the session's snapshot into its new kernel; what was restored and skipped, in words.

        Never raises: a snapshot that cannot be read leaves the kernel empty and is protected from
        being overwritten by it (``keep_snapshot``) until :meth:`restart` discards it.
        """
        session.restored = False
        lost, session.lost_kernel = session.lost_kernel, False
        gone = "earlier variables are gone" if lost else ""
        if self.snapshots is None or session.kernel is None:
            return _sentence(gone)
        kernel = session.kernel
        try:
            snapshot = await asyncio.to_thread(self.snapshots.load, session.session_id)
        except StoreError as error:
            session.keep_snapshot = True
            return f"This session's snapshot could not be read ({error}); this kernel starts empty, and its variables will not be saved over that snapshot (restart discards it)."
        if snapshot is None:
            return _sentence(gone and f"{gone}: the session has no snapshot")
        session.saved_data = snapshot.data
        session.digests = dict(snapshot.digests)
        report: dict[str, Any] = {"restored": [], "failed": {}}
        if snapshot.pickles:
            try:
                await kernel.write_file(_RESTORE_FILE, pack(snapshot.pickles))
                loaded = await kernel.execute(
                    f"import {_SNAPSHOT_MODULE} as _toolpath_snapshot\n_toolpath_snapshot.restore({kernel.path(_RESTORE_FILE)!r})\ndel _toolpath_snapshot",
                    timeout=self.timeout,
                    silent=True,
                )
                if loaded.status != "ok":
                    raise KernelError(_short_error(loaded))
                report = json.loads(await kernel.take_file(report_path(_RESTORE_FILE)))
            except (OSError, KernelError, ValueError) as error:
                # Some variables may have loaded before it stopped; keep the snapshot whole.
                session.keep_snapshot = True
                return f"Restoring this session's snapshot stopped ({error}); some variables may be missing, so this kernel's variables will not be saved over that snapshot (restart discards it)."
            # Bind the handles again, over anything the snapshot restored under their names.
            self._bound_version.pop(kernel, None)
        session.restored = True
        session.unrestored = {name: snapshot.digests[name] for name in report["failed"] if name in snapshot.digests}
        return _restore_notice(snapshot.saved, report["restored"], {**snapshot.skipped, **report["failed"]}, kept=sorted(session.unrestored))

    def _schedule_snapshot(self, session: _Session) -> None:
        """Snapshot ``session`` once no cell has run for ``snapshot_debounce`` seconds."""
        if self.snapshots is None or session.keep_snapshot:
            return
        session.dirty = True
        if session.snapshot_timer is not None:
            session.snapshot_timer.cancel()
        session.snapshot_timer = self._loop.call_later(self.snapshot_debounce, self._start_snapshot, session)

    def _start_snapshot(self, session: _Session) -> None:
        session.snapshot_timer = None
        task = self._loop.create_task(self._flush(session, wait=False))
        self._snapshotting.add(task)
        task.add_done_callback(self._snapshotting.discard)

    async def _flush(self, session: _Session, wait: bool = True) -> None:
        """Write the session's pending snapshot. ``wait=False`` (the debounce timer) gives up when a
        cell is running, since that cell schedules the next snapshot; ``wait=True`` waits up to
        ``busy_wait`` seconds for it, then keeps the previous snapshot."""
        if not session.dirty or session.kernel is None:
            return
        if session.lock.locked() and not wait:
            return
        try:
            async with asyncio.timeout(self.busy_wait):
                await session.lock.acquire()
        except TimeoutError:
            return
        try:
            await self._snapshot(session)
        finally:
            session.lock.release()

    async def _snapshot(self, session: _Session) -> None:
        """Write the snapshot of ``session``'s kernel (the caller holds its lock); a failure is told in
        the next notice and keeps the previous snapshot."""
        if session.snapshot_timer is not None:
            session.snapshot_timer.cancel()
            session.snapshot_timer = None
        if not session.dirty or session.kernel is None or self.snapshots is None or session.keep_snapshot:
            return
        session.dirty = False
        try:
            try:
                await self._write_snapshot(session)
            except SnapshotConflictError:  # the stored snapshot changed under us: write every variable
                session.digests = {}
                await self._write_snapshot(session)
        except Exception as error:  # the cell has already returned: tell the model next time, keep the old snapshot
            session.notice = _join(
                session.notice,
                f"Saving this session's snapshot failed ({_shortened(f'{type(error).__name__}: {error}')}); the previous snapshot, if any, is kept.",
            )

    async def _write_snapshot(self, session: _Session) -> None:
        """Pickle the kernel's variables and store those whose pickle changed, in one transaction."""
        assert session.kernel is not None and self.snapshots is not None
        kernel = session.kernel
        dumped = await kernel.execute(
            f"import {_SNAPSHOT_MODULE} as _toolpath_snapshot\n_toolpath_snapshot.dump({kernel.path(_DUMP_FILE)!r}, {self.max_variable_bytes}, {self.max_snapshot_bytes}, {session.digests!r})\ndel _toolpath_snapshot",
            timeout=self.timeout,
            silent=True,
        )
        if dumped.status != "ok":
            raise KernelError(_short_error(dumped))
        report = json.loads(await kernel.take_file(report_path(_DUMP_FILE)))
        changed = unpack(await kernel.take_file(_DUMP_FILE))
        # Variables that could not be loaded stay stored until the kernel defines the name itself.
        session.unrestored = {name: digest for name, digest in session.unrestored.items() if name not in report["saved"] and name not in report["skipped"]}
        saved = {**report["saved"], **session.unrestored}
        data = session.data_provider() if session.data_provider is not None else None
        await asyncio.to_thread(self.snapshots.save, session.session_id, session.owner, saved, changed, report["skipped"], data)
        session.digests, session.saved_data = saved, data

    async def _flush_all(self) -> None:
        """Write every pending snapshot (after any the debounce timer already started)."""
        if self._snapshotting:
            await asyncio.gather(*list(self._snapshotting), return_exceptions=True)
        await asyncio.gather(*(self._flush(session) for session in list(self._sessions.values()) if session.dirty))

    async def _bind_for_session(self, session_id: str, tools: list[ToolDefinition], universe: list[ToolDefinition], user_id: str | None) -> Bindings:
        _check_registered(tools)
        mine = {tool.id for tool in self.tools}
        toolkit_names = {toolkit.name for toolkit in self.toolkits}
        clash = next((tool for tool in tools if tool.binding == "host" and toolkit_of(tool) in toolkit_names), None)
        if clash is not None:
            raise ValueError(
                f"host tool {clash.name!r} belongs to {toolkit_of(clash)!r}, which is one of this CodeMode's own toolkits; pass its tools to CodeMode(tools=...) instead of binding them per session"
            )
        session = await self._owned_session(session_id, user_id)
        new = [tool for tool in tools if tool.id not in mine and tool.id not in session.tools]
        if not new and not universe:
            return self._session_bindings(session)
        trial = replace(session, tools={**session.tools, **{tool.id: tool for tool in new}}, universe=list(universe) or session.universe)
        bindings = self._session_bindings(trial)  # raises on a name clash before anything changes
        for server in sorted({toolkit_of(tool) for tool in new if tool.binding == "host"}):
            # Host tools are loaded (their modules imported) here, once, and shared by every session.
            members = [tool for tool in new if tool.binding == "host" and toolkit_of(tool) == server]
            toolkit = self._session_toolkits.get(server)
            if toolkit is None:
                self._session_toolkits[server] = Toolkit(server, [self._host_tool(tool) for tool in members])
            else:
                for tool in members:
                    if tool.name not in toolkit.functions:
                        toolkit.register(self._host_tool(tool))
        session.tools, session.universe = trial.tools, trial.universe
        if new:
            session.tools_version += 1
        return bindings

    async def _end_session(self, session_id: str, user_id: str | None) -> None:
        if session_id not in self._sessions:
            return
        session = await self._owned_session(session_id, user_id)
        await self._flush(session)
        if self._sessions.get(session_id) is session:
            del self._sessions[session_id]
            await self._discard(session)

    async def _start(self, session_id: str, user_id: str | None) -> None:
        session = await self._owned_session(session_id, user_id)
        async with session.lock:
            if session.kernel is None:
                session.notice = _join(session.notice, await self._start_kernel(session))

    async def _save_with_snapshot(self, session_id: str, provider: Callable[[], Any], user_id: str | None) -> Any:
        session = await self._owned_session(session_id, user_id)
        session.data_provider = provider
        if self.snapshots is not None and session.kernel is None and session.saved_data is None:
            # A damaged store is reported by the kernel's restore, which meets the same damage.
            with contextlib.suppress(StoreError):
                session.saved_data = await asyncio.to_thread(self.snapshots.saved_data, session_id)
        return session.saved_data

    async def _restart(self, session_id: str, user_id: str | None) -> None:
        if not self.allow_restart:
            raise PermissionError("restart is disabled for this CodeMode (allow_restart=False)")
        if (
            session_id not in self._sessions
            and session_id not in self._evicted
            and (self.snapshots is None or not (await asyncio.to_thread(self.snapshots.owner, session_id))[0])
        ):
            return  # nothing to restart, and nobody's session to claim
        session = await self._owned_session(session_id, user_id)
        # No lock: a restart must work while a stuck cell holds the session.
        if session.snapshot_timer is not None:
            session.snapshot_timer.cancel()
            session.snapshot_timer = None
        session.dirty = session.keep_snapshot = session.restored = session.lost_kernel = False
        session.saved_data, session.digests, session.unrestored = None, {}, {}
        if self.snapshots is not None:
            await asyncio.to_thread(self.snapshots.discard, session_id)
        if session.kernel is not None:
            await self._discard(session)
            session.notice = "The kernel was restarted; earlier variables are gone."

    async def _introspect(self, code: str, session_id: str, user_id: str | None) -> Any:
        session = self._sessions.get(session_id)
        if session is not None:
            await self._owned_session(session_id, user_id)
        if session is None or session.kernel is None:
            raise KeyError(f"session {session_id!r} has no kernel; run a cell first")
        async with session.lock:
            # Uncapped: the answer is one JSON line, as long as the names of 10,000 variables.
            result = await session.kernel.execute(code, timeout=30, silent=True, limits=_INTROSPECTION_LIMITS)
        if result.status != "ok":
            raise KernelError(f"inspecting the session failed: {_describe_error(result)}")
        return json.loads(result.stdout.strip().splitlines()[-1])

    async def _shutdown(self) -> None:
        await self._flush_all()
        self._closed = True
        background = [task for task in (self._reaper, self._pool_filling) if task is not None]
        for task in background:
            task.cancel()
        # A kernel being started for the pool stops it itself on cancellation: let it finish that.
        await asyncio.gather(*background, return_exceptions=True)
        kernels = [session.kernel for session in self._sessions.values() if session.kernel is not None] + self._pool
        self._sessions.clear()
        self._pool = []
        await asyncio.gather(*(self._stop_kernel(kernel) for kernel in kernels), return_exceptions=True)
        if self._listener is not None:
            await self._listener.close()
        if self.gateway is not None:
            await self.gateway.aclose()

    # -- runs: connecting and closing toolkits ------------------------------------------------------

    def _host_tool(self, definition: ToolDefinition) -> Tool:
        """The host :class:`Tool` of a registry tool: its module's function, or a call to its MCP server."""
        if definition.mcp_server is None:
            return Tool.from_definition(definition)
        if self._mcp_connections is None:
            self._mcp_connections = _mcp_toolkit().MCPConnections()
        return _mcp_toolkit().catalog_tool(definition, self._mcp_connections)

    def _to_connect(self, asynchronous: bool) -> list[Toolkit]:
        if self._closed:
            raise KernelError("this CodeMode has been shut down; create a new one")
        ours = {toolkit.name for toolkit, _ in self._connected}  # even if connect() forgot is_connected
        return [
            toolkit
            for toolkit in self.toolkits
            if toolkit.requires_connect
            and not toolkit.is_connected
            and toolkit.name not in ours
            and toolkit.name not in self._failures
            and inspect.iscoroutinefunction(toolkit.connect) == asynchronous
        ]

    def _claim(self, toolkit: Toolkit) -> concurrent.futures.Future | None:
        """Take the job of connecting ``toolkit`` (``None``), or get the future of whoever has it."""
        with self._connect_lock:
            if toolkit.name in self._connecting:
                return self._connecting[toolkit.name]
            self._connecting[toolkit.name] = concurrent.futures.Future()
            return None

    def _connected_or_failed(self, toolkit: Toolkit, loop: asyncio.AbstractEventLoop | None, error: BaseException | None) -> None:
        if error is None:
            self._connected.append((toolkit, loop))
        else:
            self._failures[toolkit.name] = f"its connect() failed ({type(error).__name__}: {error}); it is tried again when the next run starts (after close())"
        self._release(toolkit)

    def _release(self, toolkit: Toolkit) -> None:
        """Let whoever waits for ``toolkit``'s connect go on (an interrupted connect is retried later)."""
        with self._connect_lock:
            self._connecting.pop(toolkit.name).set_result(None)

    async def _aconnect(self, asynchronous_too: bool) -> None:
        """Connect the toolkits this run needs, on the running (caller's) loop; then rebind names."""
        pending = self._to_connect(False) + (self._to_connect(True) if asynchronous_too else [])
        for toolkit in pending:
            other = self._claim(toolkit)
            if other is not None:
                await asyncio.wrap_future(other)
                continue
            error = None
            try:
                if inspect.iscoroutinefunction(toolkit.connect):
                    await toolkit.connect()
                else:
                    await asyncio.to_thread(toolkit.connect)
            except Exception as exception:  # a toolkit that cannot connect becomes a failed handle, not a failed run
                error = exception
            except BaseException:  # cancelled or interrupted: neither connected nor failed
                self._release(toolkit)
                raise
            self._connected_or_failed(toolkit, asyncio.get_running_loop(), error)
        if pending:
            self._rebind()

    def _connect(self, asynchronous_too: bool = True) -> None:
        """Sync :meth:`_aconnect`: sync connects here, async ones on CodeMode's own loop."""
        if threading.current_thread() is self._thread:
            raise RuntimeError("a sync CodeMode method was called from CodeMode's own loop; use the async variant")
        pending = self._to_connect(False) + (self._to_connect(True) if asynchronous_too else [])
        for toolkit in pending:
            other = self._claim(toolkit)
            if other is not None:
                other.result()
                continue
            error, loop = None, None
            try:
                if inspect.iscoroutinefunction(toolkit.connect):
                    loop = self._loop
                    self._submit(toolkit.connect()).result()
                else:
                    toolkit.connect()
            except Exception as exception:  # a toolkit that cannot connect becomes a failed handle, not a failed run
                error = exception
            except BaseException:  # interrupted (Ctrl-C): neither connected nor failed
                self._release(toolkit)
                raise
            self._connected_or_failed(toolkit, loop, error)
        if pending:
            self._rebind()

    async def aopen(self) -> None:
        """Start a run now: connect every toolkit that needs it, on the running loop."""
        await self._aconnect(asynchronous_too=True)

    def open(self) -> None:
        """Start a run now: connect the toolkits whose ``connect()`` is sync (async ones connect on the first cell)."""
        self._connect(asynchronous_too=False)

    def _end_run(self) -> list[tuple[Toolkit, asyncio.AbstractEventLoop | None]]:
        """Forget the run's connections and failures; the toolkits to close, newest first."""
        connected, self._connected = self._connected, []
        self._failures.clear()
        return connected[::-1]

    def _closed_run(self, errors: list[str]) -> None:
        self._rebind()
        if errors:
            raise RuntimeError(f"closing toolkits failed: {'; '.join(errors)}")

    async def aclose(self) -> None:
        """End the run: close the toolkits this CodeMode connected (newest first) and write pending
        snapshots; kernels stay.

        Raises:
            RuntimeError: some ``close()`` failed (the others were still closed); the message lists them.
        """
        errors = []
        for toolkit, loop in self._end_run():
            try:
                if not inspect.iscoroutinefunction(toolkit.close):
                    await asyncio.to_thread(toolkit.close)
                elif loop is None or loop is asyncio.get_running_loop() or not loop.is_running():
                    await toolkit.close()
                else:
                    await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(toolkit.close(), loop))
            except Exception as error:  # close the others, then report every failure
                errors.append(f"{toolkit.name}: {type(error).__name__}: {error}")
        if self._mcp_connections is not None:
            errors += await self._mcp_connections.aclose()
        if not self._closed:
            await self._await(self._flush_all())
        self._closed_run(errors)

    def close(self) -> None:
        """Sync :meth:`aclose`. An async ``close()`` runs on the loop its toolkit connected on when that
        loop is still running in another thread, else on CodeMode's own loop.

        Raises:
            RuntimeError: some ``close()`` failed, or an async toolkit must be closed on the calling
                thread's own running loop (use :meth:`aclose` there).
        """
        errors = []
        for toolkit, loop in self._end_run():
            try:
                if not inspect.iscoroutinefunction(toolkit.close):
                    toolkit.close()
                    continue
                if loop is None or loop.is_closed() or not loop.is_running():
                    loop = self._loop
                if _running_loop() is loop:
                    raise RuntimeError("it connected on this thread's running loop; use `await code_mode.aclose()`")
                asyncio.run_coroutine_threadsafe(toolkit.close(), loop).result()
            except Exception as error:  # close the others, then report every failure
                errors.append(f"{toolkit.name}: {type(error).__name__}: {error}")
        if self._mcp_connections is not None:
            if _running_loop() in self._mcp_connections.loops:
                errors.append("MCP servers of registry tools: they connected on this thread's running loop; use `await code_mode.aclose()`")
            else:
                errors += self._wait(self._mcp_connections.aclose())
        if not self._closed:
            self._wait(self._flush_all())
        self._closed_run(errors)

    # -- model-facing tools -----------------------------------------------------------------------

    async def aexecute(self, code: str, session_id: str, user_id: str | None = None) -> str:
        """Run a Python cell in the session's kernel and return what it showed, as text for a model
        (see :meth:`arun` for ``user_id``)."""
        return format_for_model(await self.arun(code, session_id, user_id))

    def execute(self, code: str, session_id: str, user_id: str | None = None) -> str:
        """Sync :meth:`aexecute`."""
        return format_for_model(self.run(code, session_id, user_id))

    async def arestart(self, session_id: str, user_id: str | None = None) -> str:
        """Discard the session's kernel, all its variables and its snapshot; the next cell starts fresh.

        Raises:
            SessionOwnerError: the session belongs to another user.
            PermissionError: ``allow_restart=False``.
        """
        await self._await(self._restart(session_id, user_id))
        return "The kernel was restarted; all variables are gone."

    def restart(self, session_id: str, user_id: str | None = None) -> str:
        """Sync :meth:`arestart`."""
        self._wait(self._restart(session_id, user_id))
        return "The kernel was restarted; all variables are gone."

    def model_tools(self) -> dict[str, Any]:
        """The tools to offer a model: ``execute``, and ``restart`` unless ``allow_restart=False``."""
        tools: dict[str, Any] = {"execute": self.aexecute}
        if self.allow_restart:
            tools["restart"] = self.arestart
        return tools

    def model_tool_schemas(self, api: Literal["openai", "anthropic"] = "openai") -> list[dict[str, Any]]:
        """The JSON declarations of :meth:`model_tools` for a model API, from one source.

        Args:
            api: ``"openai"``: Chat Completions function tools (``{"type": "function", "function":
                {"name", "description", "parameters"}}``); ``"anthropic"``: Messages API tools
                (``{"name", "description", "input_schema"}``). The session id is not a parameter:
                your program binds it.

        Raises:
            ValueError: another ``api``.
        """
        declared = [
            (
                "execute",
                _EXECUTE_DESCRIPTION,
                {
                    "type": "object",
                    "properties": {"code": {"type": "string", "description": "The Python cell to run."}},
                    "required": ["code"],
                    "additionalProperties": False,
                },
            )
        ]
        if self.allow_restart:
            declared.append(("restart", _RESTART_DESCRIPTION, {"type": "object", "properties": {}, "additionalProperties": False}))
        if api == "openai":
            return [
                {"type": "function", "function": {"name": name, "description": description, "parameters": schema}} for name, description, schema in declared
            ]
        if api == "anthropic":
            return [{"name": name, "description": description, "input_schema": schema} for name, description, schema in declared]
        raise ValueError(f"api must be 'openai' or 'anthropic', got {api!r}")

    def instructions(self, session_id: str | None = None) -> str:
        """Text for a model: how the kernel behaves, the tool handles and the limits in force.

        Args:
            session_id: also describe the tools bound for this session alone (see :meth:`bind`).
        """
        lines = [
            "You have a persistent IPython kernel: variables, imports and functions you define stay available to later cells.",
            "Top-level `await` works in cells.",
            "Input from the user (input()) is not available.",
        ]
        session = self._sessions.get(session_id) if session_id is not None else None
        session_tools = list(session.tools.values()) if session is not None else []
        if self.tools or self.toolkits or session_tools:
            lines.append("Tool handles already bound in the kernel (every call is awaitable: `await handle.tool(...)`; gather many with asyncio.gather):")
            lines.extend(self._session_bindings(session).describe([*self.tools, *session_tools]))
            for handle, (toolkit, attributes) in self.bindings.host_handles.items():
                if toolkit in self._failures:
                    lines.append(f"  {handle}: unavailable, {self._failures[toolkit]}")
                elif not attributes and self._toolkit_named(toolkit).requires_connect:
                    # An MCP server's tools are known once it is connected (the first cell, or aopen()).
                    lines.append(f"  {handle}: its tools are listed when it connects, as the first cell starts; evaluate `{handle}` in a cell to see them")
            lines.extend(self.bindings.describe_toolkits(toolkit for toolkit in self.toolkits if toolkit.name not in self._failures))
            lines.append("Do not assign to a handle's name; if you did, `del` it and the handle is bound again from the next cell.")
        if self.result_store is not None:
            lines.append(f"Tool results over {self.max_result_bytes:,} bytes arrive as an offloaded-result id: read them with `await results.get(id)`.")
        if self.allow_shell:
            lines.append("Shell commands: start a cell with %%bash, or prefix a line with !.")
        else:
            lines.append("Shell commands (%%bash, !) are disabled: use Python.")
        timeout = "no time limit" if self.timeout is None else f"{self.timeout:g} seconds"
        lines.append(
            f"Each cell may run for {timeout}; output streams are cut to {self.limits.max_output_chars:,} characters (head and tail kept); at most {self.limits.max_images_per_cell} images of {self.limits.max_image_bytes:,} bytes each are returned."
        )
        if self.allow_restart:
            lines.append("Call restart to discard the kernel and start again with no variables.")
        return "\n".join(lines) + "\n"

    # -- developer surface ------------------------------------------------------------------------

    async def arun(self, code: str, session_id: str, user_id: str | None = None) -> CellResult:
        """Run a cell and return the structured :class:`CellResult`.

        The first cell of a run connects the toolkits that need it; host tools' async functions are
        awaited on the loop this is awaited on. The first cell of a session's kernel restores the
        session's snapshot (if any) and says what it restored in ``notice``.

        Args:
            user_id: the user this run acts for, given by the program (never by cell code). A new
                session belongs to it; a session may only be used with its owner's ``user_id``
                (a session created without one, only without one).

        Raises:
            SessionOwnerError: the session belongs to another user; no kernel is started.
            registry.storage.StoreError: with snapshots on, the owner cannot be looked up.
        """
        await self._aconnect(asynchronous_too=True)
        return await self._await(self._run(code, session_id, asyncio.get_running_loop(), user_id))

    def run(self, code: str, session_id: str, user_id: str | None = None) -> CellResult:
        """Sync :meth:`arun`; host tools' async functions run on CodeMode's own loop (so calling this
        from inside a running loop cannot deadlock)."""
        self._connect()
        return self._wait(self._run(code, session_id, user_id=user_id))

    async def astart(self, session_id: str, user_id: str | None = None) -> None:
        """Give the session its kernel now (restoring its snapshot) instead of at its first cell; what
        was restored is told in the next cell's ``notice``. Raises as :meth:`arun`."""
        await self._await(self._start(session_id, user_id))

    def start(self, session_id: str, user_id: str | None = None) -> None:
        """Sync :meth:`astart`."""
        self._wait(self._start(session_id, user_id))

    def restored(self, session_id: str) -> bool:
        """Whether the session's live kernel was restored from a snapshot (its variables came back)."""
        session = self._sessions.get(session_id)
        return session is not None and session.kernel is not None and session.restored

    async def asave_with_snapshot(self, session_id: str, provider: Callable[[], Any], user_id: str | None = None) -> Any:
        """Save ``provider()`` (JSON-ready data, e.g. a planner session's held states) with every
        snapshot of the session, and return the data saved with its last snapshot (``None`` when
        there is none, or snapshots are off). Raises as :meth:`arun`."""
        return await self._await(self._save_with_snapshot(session_id, provider, user_id))

    def save_with_snapshot(self, session_id: str, provider: Callable[[], Any], user_id: str | None = None) -> Any:
        """Sync :meth:`asave_with_snapshot`."""
        return self._wait(self._save_with_snapshot(session_id, provider, user_id))

    async def avariables(self, session_id: str, user_id: str | None = None) -> list[str]:
        """Names of the user's variables in the session (IPython's ``%who_ls``)."""
        return await self._await(self._introspect(f"import {_SETUP_MODULE} as _s; _s.print_variables(); del _s", session_id, user_id))

    def variables(self, session_id: str, user_id: str | None = None) -> list[str]:
        return self._wait(self._introspect(f"import {_SETUP_MODULE} as _s; _s.print_variables(); del _s", session_id, user_id))

    async def avalue(self, name: str, session_id: str, user_id: str | None = None) -> Any:
        """The value of a JSON-serialisable variable; raises ``KeyError``/``ValueError`` otherwise."""
        return _value_or_raise(await self._await(self._introspect(_value_code(name), session_id, user_id)))

    def value(self, name: str, session_id: str, user_id: str | None = None) -> Any:
        return _value_or_raise(self._wait(self._introspect(_value_code(name), session_id, user_id)))

    async def abind(self, session_id: str, tools: Iterable[ToolDefinition], universe: Iterable[ToolDefinition] = (), user_id: str | None = None) -> Bindings:
        """Bind registry tools as handles in one session only, on top of CodeMode's own tools.

        They are bound before the session's next cell, and again in every kernel the session gets
        later (after a restart, a death or an eviction); handles already bound keep their names.
        A server's kernel-bound and host-bound tools share one handle. Host-bound tools are loaded
        into this process now (their modules imported) and shared by every session that binds them.

        Args:
            session_id: the session (created if new, owned by ``user_id``; see :meth:`arun`).
            tools: registry tools (each with ``id`` and ``module``); tools already bound are skipped.
            universe: every tool the session may ever bind (e.g. a whole registry): handle and
                attribute names are de-duplicated over it, so binding more tools later never renames
                one already bound. Default: the tools bound so far.

        Returns:
            The session's :class:`toolpath.kernel.bindings.Bindings` (CodeMode's own handles included).

        Raises:
            ValueError: a tool without ``id``/``module``, a host tool of one of CodeMode's own
                toolkits, or two tools of one handle bound under one name; nothing is bound then.
        """
        return await self._await(self._bind_for_session(session_id, list(tools), list(universe), user_id))

    def bind(self, session_id: str, tools: Iterable[ToolDefinition], universe: Iterable[ToolDefinition] = (), user_id: str | None = None) -> Bindings:
        """Sync :meth:`abind`."""
        return self._wait(self._bind_for_session(session_id, list(tools), list(universe), user_id))

    async def aend_session(self, session_id: str, user_id: str | None = None) -> None:
        """Write the session's pending snapshot, shut its kernel down and forget it here (its bound
        tools too); its snapshot stays for a later CodeMode. Other sessions and the pool are
        untouched; unknown sessions are ignored."""
        await self._await(self._end_session(session_id, user_id))

    def end_session(self, session_id: str, user_id: str | None = None) -> None:
        """Sync :meth:`aend_session`."""
        self._wait(self._end_session(session_id, user_id))

    def kernel_id(self, session_id: str) -> str | None:
        """The id of the session's live kernel, or ``None`` when it has none (never started, restarted,
        died or evicted). A new kernel has a new id: a caller that remembers what a kernel holds
        compares ids to learn that its variables are gone."""
        session = self._sessions.get(session_id)
        kernel = session.kernel if session is not None else None
        return kernel.kernel_id if kernel is not None else None

    def pool_ready(self) -> int:
        """How many pre-started kernels are waiting for new sessions."""
        return len(self._pool)

    def sessions(self) -> list[str]:
        """Ids of the sessions with a live kernel."""
        return sorted(session.session_id for session in self._sessions.values() if session.kernel is not None)

    async def ashutdown(self) -> None:
        """End the run (:meth:`aclose`), shut down every kernel (sessions and pool) and stop the loop."""
        if not self._closed:
            try:
                await self.aclose()
            finally:
                await self._await(self._shutdown())
                self._stop_loop()

    def shutdown(self) -> None:
        """Sync :meth:`ashutdown`."""
        if not self._closed:
            try:
                self.close()
            finally:
                self._wait(self._shutdown())
                self._stop_loop()

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    def __enter__(self) -> CodeMode:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()

    async def __aenter__(self) -> CodeMode:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.ashutdown()


def _names(names: Iterable[str]) -> str:
    names = list(names)
    shown = ", ".join(names[:_NOTICE_NAMES])
    return shown + (f" and {len(names) - _NOTICE_NAMES} more" if len(names) > _NOTICE_NAMES else "")


def _check_id(value: object, what: str) -> None:
    """A session or user id: a string with a non-blank character that SQLite can store (UTF-8).

    Raises:
        ValueError: anything else.
    """
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{what} must be a non-blank string given by the program, got {_shown(value)}")
    try:
        value.encode()
    except UnicodeEncodeError as error:
        raise ValueError(f"{what} {_shown(value)} is not valid Unicode text (it has a lone surrogate at position {error.start})") from error


def _shown(value: object) -> str:
    """``repr(value)``, cut to 80 characters for messages."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _sentence(text: str) -> str:
    return f"{text[0].upper()}{text[1:]}." if text else ""


def _shortened(text: str) -> str:
    return text if len(text) <= _NOTICE_ERROR_CHARS else text[: _NOTICE_ERROR_CHARS - 3] + "..."


def _short_error(result: CellResult) -> str:
    """A failed housekeeping cell in one short line (its exception, not the traceback)."""
    if result.error:
        return _shortened(f"{result.error.get('ename')}: {result.error.get('evalue')}")
    return result.status


def _restore_notice(saved: float, restored: list[str], not_restored: dict[str, str], kept: list[str] = ()) -> str:
    """What a restore brought back and what it did not, for the model (nothing for an empty snapshot)."""
    if not restored and not not_restored:
        return ""
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(saved))
    text = f"Restored {len(restored)} variable(s) from this session's snapshot of {when}" + (f": {_names(restored)}." if restored else ".")
    if not_restored:
        reasons = [f"{name} ({reason})" for name, reason in sorted(not_restored.items())]
        text += f" Not restored: {_names(reasons)}."
    if kept:
        text += f" The snapshot keeps {_names(kept)} for a later kernel that can load them (define the name, or restart, to drop them)."
    return text


def _check_registered(tools: Iterable[ToolDefinition]) -> None:
    """Registry tools must come from a :class:`toolpath.registry.ToolRegistry`: with an id, and a module or an MCP server."""
    missing = [tool.name for tool in tools if tool.id is None or (not tool.module and tool.mcp_server is None)]
    if missing:
        raise ValueError(f"tools {', '.join(missing)} have no id, or neither a module nor an MCP server; register them in a ToolRegistry first")


def parse_host_port(text: str, what: str) -> tuple[str, int]:
    """``(host, port)`` from ``"host:port"`` (``"[::1]:7443"`` for IPv6).

    Raises:
        ValueError: no port, or a port outside 0–65535; the message names the option.
    """
    host, _, port = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not host or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"{what} must be 'host:port' (port 0 for a free one), like 127.0.0.1:0 or [::1]:7443, got {text!r}")
    return host, int(port)


def _bridge_tls() -> Any:
    """:mod:`toolpath.kernel.bridge_tls`, imported when a remote kernel first needs the bridge's TLS: the
    cryptography package is not needed by local kernels."""
    return importlib.import_module("toolpath.kernel.bridge_tls")


def _mcp_toolkit() -> Any:
    """:mod:`toolpath.kernel.mcp_toolkit`, imported on first use: the MCP SDK takes about a second to import,
    which only CodeModes with tools served over MCP should pay."""
    return importlib.import_module("toolpath.kernel.mcp_toolkit")


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _value_code(name: str) -> str:
    return f"import {_SETUP_MODULE} as _s; _s.print_value({name!r}); del _s"


def _value_or_raise(answer: dict) -> Any:
    if "error" in answer:
        raise (KeyError if answer["error"].startswith("no variable") else ValueError)(answer["error"])
    return answer["value"]


def _join(first: str, second: str) -> str:
    return f"{first} {second}".strip()


def _with_notice(result: CellResult, notice: str) -> CellResult:
    return replace(result, notice=_join(notice, result.notice))


def _describe_error(result: CellResult) -> str:
    if result.error:
        return result.error.get("traceback") or f"{result.error.get('ename')}: {result.error.get('evalue')}"
    return result.status


def format_for_model(result: CellResult) -> str:
    """One text block for a model: notice, stdout, stderr, ``Out``, error, truncation and images."""
    parts = []
    if result.notice:
        parts.append(f"[{result.notice}]")
    if result.stdout:
        parts.append(result.stdout.rstrip("\n"))
    if result.stderr:
        parts.append("[stderr]\n" + result.stderr.rstrip("\n"))
    if result.result is not None:
        parts.append(f"Out[{result.execution_count}]: {result.result}" if result.execution_count else result.result)
    if result.error:
        parts.append(result.error.get("traceback") or f"{result.error.get('ename')}: {result.error.get('evalue')}")
        if result.error.get("traceback") and result.status in ("timeout", "aborted"):
            parts.append(f"{result.error.get('ename')}: {result.error.get('evalue')}")
    if result.truncated:
        parts.append(f"[output truncated: {', '.join(result.truncated)}]")
    if result.images:
        parts.append(f"[{len(result.images)} image(s) attached]")
    parts.extend(f"[{line}]" for line in result.dropped_images)
    return "\n".join(parts) if parts else "[no output]"
