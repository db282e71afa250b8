"""Tool handles inside the kernel (this module is imported *in the kernel process*).

A handle is an object whose attributes are the tools of one toolkit, each an ``async`` function with
the tool's real signature and docstring, so a cell writes ``await chemistry.parse_molecule(...)``
and ``help(chemistry.parse_molecule)`` works. This is the *in-kernel* binding: the tool's module is
imported lazily, on first use of the attribute, inside the kernel, and the objects it returns stay
there.

Sync tools are called directly on the kernel's main thread rather than in a worker thread, so
objects that are not thread-safe (RDKit molecules, database connections) never cross threads.

Interrupts: a cell with top-level ``await`` runs as a coroutine, and ipykernel 7 does not stop such a
cell on SIGINT (its own handler only schedules a cancellation on an event loop that a blocked call
never returns to; see ipython/ipykernel#1239). So each tool call installs its own SIGINT handler for
its duration: a sync tool gets Python's default handler (``KeyboardInterrupt`` inside the tool's
code), an async tool has its task cancelled (or, when it blocks its own step with sync code, gets
``KeyboardInterrupt`` where it stands), and all surface as ``KeyboardInterrupt``.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import importlib
import inspect
import signal
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from toolpath.kernel.inside import call_traces
from toolpath.kernel.inside.approval_policy import ApprovalDenied, ApprovalRequest, approval_reason, policy_of
from toolpath.kernel.inside.protocol import TOOL_CALLS_PAYLOAD
from toolpath.kernel.inside.retries import RetrySpec, call_with_retries
from toolpath.registry.names import function_names


@contextmanager
def _sigint_handler(handler: Callable[..., Any]) -> Iterator[None]:
    """Install ``handler`` for SIGINT while the block runs (signals can only be set on the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


class _InterruptibleCalls:
    """The async tool calls in progress and the one SIGINT handler that interrupts them.

    Calls overlap (``asyncio.gather`` of many), so each cannot install and restore its own handler:
    the first call installs the handler and the last one restores the kernel's.
    """

    def __init__(self) -> None:
        self.tasks: dict[asyncio.Task, list[bool]] = {}  # task → [interrupted]
        self.previous: Any = None

    def enter(self, task: asyncio.Task) -> list[bool]:
        if not self.tasks and threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGINT, self.interrupt)
        flag = self.tasks[task] = [False]
        return flag

    def leave(self, task: asyncio.Task) -> None:
        self.tasks.pop(task, None)
        if not self.tasks and self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)
            self.previous = None

    def interrupt(self, signum: int, frame: Any) -> None:
        running = None
        for task, flag in list(self.tasks.items()):
            flag[0] = True
            loop = task.get_loop()
            if asyncio.current_task(loop) is task:
                running = task
            else:
                loop.call_soon_threadsafe(task.cancel)
        if running is not None:
            # The tool is blocking inside its own step (sync code in an async def): the loop cannot
            # run a cancellation, so interrupt the code where it stands (see _call_async for which).
            if running is _cells.task:
                raise KeyboardInterrupt("tool call was interrupted")
            raise asyncio.CancelledError()


_calls = _InterruptibleCalls()


class _CellTracker:
    """Which cell is running: its task, and (in a context variable) its Jupyter message id; and which
    tool calls each cell completed.

    A ``KeyboardInterrupt`` may only be raised in the cell's own task: IPython catches it there and
    reports the interrupt, but asyncio re-raises one that escapes any other task (a call started by
    ``asyncio.gather``) out of the event loop, which ends the kernel. Other tasks are cancelled.

    Completed calls are reported in the cell's execute reply as a payload (``{"source":
    TOOL_CALLS_PAYLOAD, "tool_calls": {"handle.attribute": count}}``): ipykernel sends payloads
    whatever the cell's outcome, so a cell that fails at its third call still says the first two
    returned, with no extra round trip and nothing parsed from the cell's output. The same payload
    counts the cell's retries (``"retries"``) and injected failures (``"injected_failures"``) by
    tool (:mod:`toolpath.kernel.inside.retries`), names the kind of each call that failed for
    good from a timeout or a lost connection (``"failure_kinds"``: ``{"handle.attribute":
    "timeout" or "connection"}``), which its class hierarchy says and the cell's error does not,
    and records a traced cell's calls of tools bound in the kernel (``"traced_calls"``,
    :mod:`toolpath.kernel.inside.call_traces`).
    """

    def __init__(self) -> None:
        self.task: asyncio.Task | None = None
        self.cell_id: contextvars.ContextVar[str] = contextvars.ContextVar("toolpath_cell", default="")
        self.registered = False
        self.running = ""  # the Jupyter message id of the cell now running
        self.completed: dict[str, int] = {}  # target -> calls of the running cell that returned
        self.retried: dict[str, int] = {}  # target -> retries in the running cell
        self.injected: dict[str, int] = {}  # target -> failures injected in the running cell
        self.failed: dict[str, str] = {}  # target -> kind of its call's last failure, timeout or connection

    def start(self) -> None:
        """Follow cells from now on (idempotent); the cell running now counts as the current one."""
        if self.registered:
            return
        from IPython import get_ipython

        shell = get_ipython()
        if shell is None:
            return
        shell.events.register("pre_run_cell", self.mark)
        shell.events.register("post_run_cell", self.report)
        self.registered = True
        self.mark(None)

    def mark(self, info: Any) -> None:
        """IPython ``pre_run_cell`` hook: remember the cell's task and Jupyter request."""
        try:
            self.task = asyncio.current_task()
        except RuntimeError:  # no running loop: a cell run outside ipykernel's loop
            self.task = None
        self.running = _request_id()
        self.completed, self.retried, self.injected, self.failed = {}, {}, {}, {}
        self.cell_id.set(self.running)
        call_traces.cell_started(_request().get("metadata"))

    def record(self, target: str) -> None:
        """Count a call of ``target`` that returned, for the cell that made it (calls that tasks of an
        earlier cell finish now belong to that cell, which has already reported)."""
        if self.cell_id.get() == self.running:
            self.completed[target] = self.completed.get(target, 0) + 1

    def count(self, target: str, kind: str) -> None:
        """Count a retry (``kind`` ``"retry"``) or an injected failure (``"injected"``) of ``target``
        for the cell that made the call, like :meth:`record`."""
        if self.cell_id.get() == self.running:
            counts = self.retried if kind == "retry" else self.injected
            counts[target] = counts.get(target, 0) + 1

    def fail(self, target: str, kind: str) -> None:
        """Note that a call of ``target`` failed for good with a ``kind`` failure (``"timeout"`` or
        ``"connection"``), for the cell that made the call, like :meth:`record`."""
        if self.cell_id.get() == self.running:
            self.failed[target] = kind

    def report(self, result: Any) -> None:
        """IPython ``post_run_cell`` hook: put the cell's completed calls in its execute reply."""
        from IPython import get_ipython

        completed, retried, injected, failed = self.completed, self.retried, self.injected, self.failed
        self.completed, self.retried, self.injected, self.failed = {}, {}, {}, {}
        traced = call_traces.cell_records()
        shell = get_ipython()
        if (completed or retried or injected or failed or traced) and shell is not None and _request_id() == self.running:
            payload: dict[str, Any] = {"source": TOOL_CALLS_PAYLOAD, "tool_calls": completed}
            payload.update(
                {
                    key: counts
                    for key, counts in (("retries", retried), ("injected_failures", injected), ("failure_kinds", failed), ("traced_calls", traced))
                    if counts
                }
            )
            shell.payload_manager.write_payload(payload)


def _request_id() -> str:
    """The Jupyter message id of the request the kernel is handling now (``""`` outside a kernel)."""
    return _request().get("header", {}).get("msg_id", "")


def _request() -> dict:
    """The Jupyter request the kernel is handling now (``{}`` outside a kernel)."""
    from IPython import get_ipython

    kernel = getattr(get_ipython(), "kernel", None)
    return kernel.get_parent() if kernel is not None else {}


_cells = _CellTracker()


def current_cell() -> str:
    """The Jupyter message id of the cell that started the running code (inherited by its tasks)."""
    return _cells.cell_id.get()


def track_cells() -> None:
    """Start following cells; called by every binding so interrupts and call attribution work."""
    _cells.start()


async def _call_async(function: Callable[..., Any], name: str, args: tuple, kwargs: dict) -> Any:
    __tracebackhide__ = True
    task = asyncio.current_task()
    if task is None:
        return await function(*args, **kwargs)
    interrupted = _calls.enter(task)
    try:
        return await function(*args, **kwargs)
    except asyncio.CancelledError:
        if not interrupted[0] or task is not _cells.task:
            raise
        task.uncancel()
        raise KeyboardInterrupt(f"tool {name} was interrupted") from None
    finally:
        _calls.leave(task)


def awaitable(
    function: Callable[..., Any],
    name: str | None = None,
    wire_name: str | None = None,
    target: str | None = None,
    approval: Callable[[tuple, dict], Awaitable[None]] | None = None,
    retry: Mapping[str, Any] | None = None,
    server: str | None = None,
) -> Callable[..., Any]:
    """Wrap ``function`` so that calling it returns an awaitable, keeping its signature and docstring.

    Args:
        function: a sync or async callable.
        name: the Python name it is bound as (default: its own ``__name__``).
        wire_name: the tool's real name when it differs from ``name``; the docstring records it.
        target: ``handle.attribute``; each call that returns (does not raise) is reported under it
            in the cell's execute reply (see :class:`_CellTracker`).
        approval: ``approval(args, kwargs)`` is awaited before each call and raises when the call
            must not run (an in-kernel tool that asks for approval, see :class:`ToolHandle`); it is
            asked once per call, never again for a retry.
        retry: the tool's retry policy (:meth:`toolpath.registry.retry_policy.RetryPolicy.to_spec`);
            ``None``: one try. Tries run as :func:`toolpath.kernel.inside.retries.call_with_retries` says.
        server: the server or toolkit the tool belongs to, a name failures may be injected by
            (``server.tool``) besides ``target``'s handle and the tool's own name.
    """
    label = name or getattr(function, "__name__", "tool")
    shown = target or label
    policy = RetrySpec.of(retry)
    tool = wire_name or label
    handle = target.rsplit(".", 1)[0] if target else None
    names = [f"{prefix}.{tool}" for prefix in (handle, server) if prefix] + [tool]

    def counted(kind: str) -> None:
        call_traces.note(kind)
        if target is not None:
            _cells.count(target, kind)

    def failed(kind: str) -> None:
        if target is not None:
            _cells.fail(target, kind)

    async def interruptible_sleep(seconds: float) -> None:
        await _call_async(asyncio.sleep, label, (seconds,), {})

    if inspect.iscoroutinefunction(function):

        async def call(*args: Any, **kwargs: Any) -> Any:
            __tracebackhide__ = True  # IPython leaves this wrapper out of tracebacks
            if approval is not None:
                await _call_async(approval, label, (args, kwargs), {})

            async def once() -> Any:
                return await _call_async(function, label, args, kwargs)

            value = await call_with_retries(once, shown, policy, names, interruptible_sleep, counted, failed)
            if target is not None:
                _cells.record(target)
            return value

    else:

        async def call(*args: Any, **kwargs: Any) -> Any:
            __tracebackhide__ = True  # IPython leaves this wrapper out of tracebacks
            if approval is not None:
                await _call_async(approval, label, (args, kwargs), {})

            async def once() -> Any:
                with _sigint_handler(signal.default_int_handler):
                    return function(*args, **kwargs)

            value = await call_with_retries(once, shown, policy, names, interruptible_sleep, counted, failed)
            if target is not None:
                _cells.record(target)
            return value

    functools.update_wrapper(call, function)
    if name is not None:
        call.__name__ = call.__qualname__ = name
    if wire_name is not None and wire_name != call.__name__:
        call.__doc__ = f"Tool {wire_name!r}, bound as {call.__name__}.\n\n{function.__doc__ or ''}".rstrip()
    return call


class ToolHandle:
    """The handle of one toolkit: attribute ``x`` is the awaitable tool whose Python name is ``x``.

    Args:
        toolkit: the handle's name (for messages, and calls are reported as ``toolkit.attribute``).
        tools: ``{attribute: (tool wire name, module)}``; the attribute names come from
            :class:`toolpath.registry.names.NameMap`, and the function named like the tool is looked up in
            the module. A fourth item, when there is one, is the tool's retry policy
            (:meth:`toolpath.registry.retry_policy.RetryPolicy.to_spec`). A third item is the tool's approval spec (or ``None``)
            (:func:`toolpath.kernel.tools.approvals.approval_spec`): each call checks its policy here, in
            the kernel, where the files it would write are, and a call that asks waits for the
            host's approver over the bridge. (A cell can still import the module and call the
            function itself: for approvals a cell cannot get around, bind the tool on the host.)
        host: the host handle of the same domain's host-bound tools (see
            :mod:`toolpath.kernel.inside.bridge_client`), whose attributes this handle also offers: a domain is one
            handle wherever its tools run.
        server: the catalog server of a handle named otherwise (:func:`bind_module_tools`).
    """

    def __init__(self, toolkit: str, tools: Mapping[str, tuple], host: Any = None, server: str | None = None):
        self._toolkit = toolkit
        self._server = server
        self._modules = dict(tools)
        self._host = host
        self._bound: dict[str, Callable[..., Any]] = {}

    def __getattr__(self, attribute: str) -> Callable[..., Any]:
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        if attribute in self._bound:
            return self._bound[attribute]
        if attribute not in self._modules:
            if self._host is not None:
                try:  # a host handle that could not be bound raises its own reason here
                    return getattr(self._host, attribute)
                except AttributeError:
                    pass
            available = ", ".join(sorted(dir(self))) or "none"
            raise AttributeError(f"{self._toolkit} has no tool {attribute!r}; bound tools: {available}")
        name, module_name, *spec = self._modules[attribute]
        approval_spec, retry = (spec + [None, None])[:2]
        try:
            # Importing runs module code that may be slow; keep it interruptible like a tool call.
            with _sigint_handler(signal.default_int_handler):
                module = importlib.import_module(module_name)
        except Exception as error:  # importing runs the module's code: report whatever it raised
            raise RuntimeError(
                f"tool {self._toolkit}.{name} cannot be bound: importing module {module_name!r} failed ({type(error).__name__}: {error}); check the tool's module in its catalog"
            ) from None
        function = next((getattr(module, candidate) for candidate in function_names(name) if callable(getattr(module, candidate, None))), None)
        if function is None:
            expected = " or ".join(repr(candidate) for candidate in function_names(name))
            raise RuntimeError(f"tool {self._toolkit}.{name} cannot be bound: module {module_name!r} has no function {expected}")
        policy = policy_of(approval_spec)
        approval = _asking(f"{self._toolkit}.{name}", function, policy) if policy else None
        bound = awaitable(function, name=attribute, wire_name=name, target=f"{self._toolkit}.{attribute}", approval=approval, retry=retry, server=self._server)
        bound = call_traces.traced(bound, f"{self._toolkit}.{attribute}", name, self._server or self._toolkit)
        self._bound[attribute] = bound
        return bound

    def __dir__(self) -> list[str]:
        return sorted({*self._modules, *(dir(self._host) if self._host is not None else ())})

    def __repr__(self) -> str:
        return f"<toolpath handle {self._toolkit}: {', '.join(dir(self))}>"


def _asking(tool: str, function: Callable[..., Any], policy: Any) -> Callable[[tuple, dict], Awaitable[None]]:
    """The approval check of an in-kernel tool: its policy on the call's arguments (bound to the
    function's signature), then, when it asks, the host's approver's yes."""
    signature = inspect.signature(function)

    async def approved(args: tuple, kwargs: dict) -> None:
        __tracebackhide__ = True
        arguments = signature.bind_partial(*args, **kwargs).arguments
        reason = approval_reason(policy, arguments)
        if not reason:
            return
        call_traces.note("asked")
        if _ask_host is None:
            raise ApprovalDenied(f"{tool} needs approval ({reason}), but nobody can approve calls in this kernel: give its CodeMode an approver")
        await _ask_host(ApprovalRequest.of(tool, arguments, reason))

    return approved


#: How an in-kernel tool's call asks the host's approver (the bridge's, set when it is installed).
_ask_host: Callable[[ApprovalRequest], Awaitable[None]] | None = None


def ask_host_with(ask: Callable[[ApprovalRequest], Awaitable[None]]) -> None:
    """Send in-kernel tools' approval requests through ``ask`` (``ask(request)`` returns on a yes,
    raises ``ApprovalDenied``/``ApprovalTimeout`` otherwise): the bridge client's."""
    global _ask_host
    _ask_host = ask


def bind_module_tools(toolkit: str, tools: Mapping[str, tuple], host: Any = None, server: str | None = None) -> ToolHandle:
    """Create the handle of ``toolkit`` from ``{attribute: (tool name, module[, approval spec])}``,
    offering also the attributes of ``host`` (the domain's host-bound tools); nothing is imported yet.
    ``server``: the catalog server of a handle named otherwise (``records_3``), by which failures
    may be injected (``records.fetch_archive``) as well as by the handle's name."""
    track_cells()
    return ToolHandle(toolkit, tools, host, server)
