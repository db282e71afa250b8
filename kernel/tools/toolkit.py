"""Toolkits: groups of host-side tools with hooks, result caching, pause flags and connections.

A :class:`Toolkit` is toolpath's own small tool protocol (no agent framework needed). CodeMode binds
each toolkit in the kernel as one handle; a call from a cell crosses the bridge and runs here, in the
host process, through :meth:`Toolkit.acall` — the same call path a program uses — so hooks, caching
and the pause flags apply however the tool is reached.

Call path of one call, outermost first:

1. a tool that would pause the run (``requires_user_input``, ``external_execution``) raises
   :class:`ToolPausedError`; its code never runs;
2. the arguments are bound to the function's signature (``TypeError`` when they do not fit);
3. ``pre_hook(call)`` of the toolkit, then of the tool (changing ``call.arguments`` in place changes
   what the tool receives);
4. middleware hooks, the toolkit's then the tool's: ``hook(name, call_next, arguments)`` must call
   ``call_next(**arguments)`` and return a result (it may change either, or skip the call);
5. the result cache, when enabled (keyed by tool name and arguments; a hit skips the function only,
   so hooks still fire once per call);
6. approval, for a tool that asks for it on these arguments (``requires_approval``, decided on the
   arguments the function would receive): the approver's yes is awaited
   (:mod:`toolpath.kernel.tools.approvals`); a no raises ``ApprovalDenied``, no answer in time
   ``ApprovalTimeout``, and the function does not run;
7. the function: async functions are awaited on the caller's loop, sync ones run in a worker thread;
8. ``post_hook(call, result)`` of the tool, then of the toolkit; one that returns something other
   than ``None`` replaces the result.

Sync hooks are supported everywhere: sync layers (sync hooks, a sync function) run in one worker
thread per call, async layers on the caller's loop, and ``call_next`` crosses between them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import importlib
import inspect
import pickle
import queue
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from toolpath.kernel.inside.approval_policy import ApprovalPolicy, approval_reason, policy_of
from toolpath.kernel.inside.tool_calls import ShownText, ToolExitError, ToolPausedError
from toolpath.kernel.option_checks import check_count
from toolpath.kernel.tools.approvals import ApprovalContext, ApprovalGate, approval_spec
from toolpath.observability.tool_spans import asking_approval, note_cache_hit, traced_tool_call
from toolpath.registry.names import function_names
from toolpath.registry.retry_policy import RetryPolicy, effective_retry

if TYPE_CHECKING:
    from toolpath.registry import ToolDefinition

#: A middleware hook: ``hook(name, call_next, arguments) -> result`` (sync or async).
Hook = Callable[..., Any]
#: Tools of one kit listed in a model's instructions: about 10,000 characters at the 200 each a tool's
#: signature and summary line take, as tool-search peers keep a few tools loaded and defer the rest.
DEFAULT_MAX_LISTED_TOOLS = 50

_PAUSE_FLAGS = {
    "requires_user_input": "needs input from the user",
    "external_execution": "is executed outside this process",
}
#: Asked when a call needs approval and the caller gave no gate (a program calling ``acall`` itself).
_NO_APPROVER = ApprovalGate(None, nobody="nobody can approve it here: call it through CodeMode(approver=...), or pass approval= to Toolkit.acall")


def annotation_text(annotation: Any) -> str | None:
    """An annotation as source text (``None`` when there is none); string annotations stay as written."""
    if annotation is inspect.Parameter.empty:
        return None
    return annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)


def signature_text(signature: inspect.Signature) -> str:
    """``(sku: str, warehouse: str = 'main') -> int``, also for postponed (string) annotations."""

    def shown(annotation: Any) -> Any:
        text = annotation_text(annotation)
        return inspect.Parameter.empty if text is None else ShownText(text)

    parameters = [parameter.replace(annotation=shown(parameter.annotation)) for parameter in signature.parameters.values()]
    return str(signature.replace(parameters=parameters, return_annotation=shown(signature.return_annotation)))


@dataclass(frozen=True)
class ToolCall:
    """One call as hooks see it: the toolkit, the tool's real (wire) name and its bound arguments."""

    toolkit: str
    name: str
    arguments: dict[str, Any]


@dataclass
class Tool:
    """One host-side tool: a sync or async callable and how it may be called.

    Args:
        function: the implementation; its signature and docstring are what the kernel handle shows.
        name: the tool's real (wire) name; default ``function.__name__``. It need not be a Python
            name (``get-forecast`` binds as ``get_forecast``).
        description: default the function's docstring.
        requires_approval: ``True`` (every call asks the session's approver first) or a policy,
            ``policy(arguments) -> reason or ""`` on the call's bound arguments
            (:class:`toolpath.kernel.inside.approval_policy.ApprovalPolicy`): the call asks when it gives a reason.
        requires_user_input / external_execution: pause flags; a flagged tool is refused inside
            cells (see :class:`ToolPausedError`).
        cache_results: cache results by arguments for ``cache_ttl`` seconds.
        pre_hook / post_hook / hooks: this tool's hooks (see the module docstring).
        load_error: set when the function could not be loaded; calling the tool raises it.
        retry: how a call from a cell is tried again when it fails
            (:class:`toolpath.registry.retry_policy.RetryPolicy`, or its fields as a mapping:
            ``{"attempts": 3, "on": ["timeout", "connection"]}``); the kernel runs the tries
            (:mod:`toolpath.kernel.inside.retries`), so hooks and approval see each try as a call.
            ``None`` (default): one try, since nothing says a plain function has no effects; a tool
            made from a catalog's definition takes the catalog's policy or its default
            (:func:`toolpath.registry.retry_policy.effective_retry`).

    Raises:
        ValueError: a ``retry`` that is not a policy (pydantic's message names the field), or a
            ``retry`` on a tool that asks for approval (each try would ask again).
    """

    function: Callable[..., Any] | None
    name: str = ""
    description: str = ""
    requires_approval: bool | ApprovalPolicy = False
    requires_user_input: bool = False
    external_execution: bool = False
    cache_results: bool = False
    cache_ttl: float = 3600.0
    pre_hook: Callable[..., Any] | None = None
    post_hook: Callable[..., Any] | None = None
    hooks: Sequence[Hook] = ()
    load_error: str = ""
    retry: RetryPolicy | Mapping[str, Any] | None = None
    _signature: inspect.Signature | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.function is not None and not callable(self.function):
            raise TypeError(f"a tool must be callable, got {type(self.function).__name__}")
        if not self.name:
            self.name = getattr(self.function, "__name__", "") or ""
        if not self.name:
            raise ValueError("a tool needs a name: pass name=... for a callable without __name__")
        if not self.description and self.function is not None:
            self.description = inspect.getdoc(self.function) or ""
        if self.retry is not None and not isinstance(self.retry, RetryPolicy):
            self.retry = RetryPolicy.model_validate(self.retry)
        if self.retry is not None and self.requires_approval:
            raise ValueError(f"tool {self.name!r} asks for approval, and each try would ask a person again: drop retry= or requires_approval=")
        if self.function is not None and not self.load_error:
            try:
                self._signature = inspect.signature(self.function)
            except (TypeError, ValueError) as error:
                self.load_error = f"its signature cannot be read ({error})"

    @classmethod
    def from_definition(cls, definition: ToolDefinition) -> Tool:
        """A host tool for a registry :class:`ToolDefinition`: its module is imported here, now.

        An import failure does not raise: the tool records it and raises it when called, so one
        broken tool does not stop its toolkit from binding. So does a tool served by an MCP server,
        which has no module: CodeMode calls its server instead (:func:`toolpath.kernel.tools.mcp_toolkit.catalog_tool`).
        """
        if definition.mcp_server is not None:
            error = "it is served by an MCP server, which only CodeMode(tools=[...]) connects (or use kernel.MCPToolkit)"
            return cls(None, name=definition.name, description=definition.description, load_error=error)
        if definition.http is not None:
            error = "it calls an HTTP API, which CodeMode(tools=[...]) binds (or use toolpath.kernel.tools.http_tools.http_tool)"
            return cls(None, name=definition.name, description=definition.description, load_error=error)
        function, error = None, ""
        try:
            module = importlib.import_module(definition.module or "")
            function = next((getattr(module, name) for name in function_names(definition.name) if callable(getattr(module, name, None))), None)
            if function is None:
                error = f"module {definition.module!r} has no function {' or '.join(map(repr, function_names(definition.name)))}"
        except Exception as exception:  # importing runs the module's code: report whatever it raised
            error = f"importing module {definition.module!r} failed ({type(exception).__name__}: {exception})"
        return cls(
            function,
            name=definition.name,
            description=definition.description,
            requires_approval=policy_of(approval_spec(definition)),
            load_error=error,
            retry=effective_retry(definition),
        )

    @property
    def signature(self) -> inspect.Signature | None:
        """The function's signature, or ``None`` when it could not be loaded."""
        return self._signature

    @property
    def pause_reason(self) -> str:
        """Why the tool would pause the run (empty when it would not)."""
        return "; ".join(reason for flag, reason in _PAUSE_FLAGS.items() if getattr(self, flag))

    @property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.function)

    @property
    def asks_approval(self) -> str:
        """When the tool asks for approval, in words ("" when it never does): for instructions."""
        if self.requires_approval is True:
            return "every call asks for approval first"
        return "a call may ask for approval first (its policy decides on the arguments)" if self.requires_approval else ""


class Toolkit:
    """A named group of host tools, bound in the kernel as one handle.

    Args:
        name: the toolkit's name; its handle is the name without a trailing ``_tools``, made a usable
            Python name (``inventory_tools`` → ``inventory``).
        tools: callables, :class:`Tool` objects or registry :class:`ToolDefinition` objects.
        hooks / pre_hook / post_hook: hooks applied to every tool of the kit.
        cache_results / cache_ttl: cache every tool's results (a tool's own setting also enables it).
        max_cache_entries: least recently used results are dropped beyond this many.
        requires_connect: CodeMode calls :meth:`connect` when a run starts and :meth:`close` when it
            ends (see :meth:`connect`).
        max_listed_tools: the most tools of the kit a model's instructions list (in the kit's order,
            :data:`DEFAULT_MAX_LISTED_TOOLS` by default); past it they give the total and how to
            find the others in a cell (``handle.search_tools("words")``).

    Raises:
        ValueError: an empty name, or two tools with the same name; a negative ``max_listed_tools``.
        TypeError: a ``max_listed_tools`` that is not a whole number.
    """

    def __init__(
        self,
        name: str,
        tools: Iterable[Callable[..., Any] | Tool | ToolDefinition] = (),
        *,
        hooks: Sequence[Hook] = (),
        pre_hook: Callable[..., Any] | None = None,
        post_hook: Callable[..., Any] | None = None,
        cache_results: bool = False,
        cache_ttl: float = 3600.0,
        max_cache_entries: int = 1024,
        requires_connect: bool = False,
        max_listed_tools: int = DEFAULT_MAX_LISTED_TOOLS,
    ):
        if not isinstance(name, str) or not name.strip():
            raise ValueError("a toolkit needs a non-empty name")
        check_count("max_listed_tools", max_listed_tools)
        self.max_listed_tools = max_listed_tools
        self.name = name
        self.hooks = list(hooks)
        self.pre_hook = pre_hook
        self.post_hook = post_hook
        self.cache_results = cache_results
        self.cache_ttl = cache_ttl
        self.max_cache_entries = max_cache_entries
        self.requires_connect = requires_connect
        #: True while connected; a subclass's ``connect``/``close`` should keep it current, so a
        #: toolkit opened by hand is recognised and left alone.
        self.is_connected = False
        self._tools: dict[str, Tool] = {}
        self._cache: OrderedDict[tuple[str, bytes], tuple[float, Any]] = OrderedDict()
        self._cache_lock = threading.Lock()
        for tool in tools:
            self.register(tool)

    def register(self, tool: Callable[..., Any] | Tool | ToolDefinition, replace: bool = False) -> Tool:
        """Add a tool (also while connecting: CodeMode binds what is registered by then).

        Args:
            tool: the tool.
            replace: replace a tool of the same name (a ``connect()`` that lists a server's tools
                again on every run wants this).

        Raises:
            ValueError: a tool of that name is already registered and ``replace`` is false.
        """
        if is_tool_definition(tool):
            tool = Tool.from_definition(tool)
        elif not isinstance(tool, Tool):
            tool = Tool(tool)
        if tool.name in self._tools and not replace:
            hint = " (give each lambda a name with Tool(function, name=...))" if tool.name == "<lambda>" else "; pass replace=True to replace it"
            raise ValueError(f"toolkit {self.name!r} already has a tool named {tool.name!r}{hint}")
        self._tools[tool.name] = tool
        return tool

    @property
    def functions(self) -> dict[str, Tool]:
        """The tools by real name, in registration order."""
        return dict(self._tools)

    def connect(self) -> Any:
        """Open the toolkit's connections; override (sync or ``async def``) and set ``is_connected``.

        CodeMode calls a sync ``connect`` when a run starts and an async one on the run's first cell,
        on the caller's loop, so transports created here live on the loop that later awaits them.
        """
        self.is_connected = True

    def close(self) -> Any:
        """Close what :meth:`connect` opened; override (sync or ``async def``)."""
        self.is_connected = False

    @traced_tool_call
    async def acall(self, name: str, args: Sequence[Any] = (), kwargs: dict[str, Any] | None = None, approval: ApprovalContext | None = None) -> Any:
        """Call tool ``name`` through the toolkit's call path (hooks, cache, pause flags, approval),
        in a span when tracing is on (:mod:`toolpath.observability.tool_spans`).

        ``approval`` is where a call that needs approval asks, and for which session (CodeMode
        passes its own for calls from cells); without it such a call is denied.

        Raises:
            KeyError: no tool of that name.
            ToolPausedError: the tool would pause the run; its code did not run.
            ApprovalDenied, ApprovalTimeout: the call needed approval and did not get it; its code
                did not run.
            TypeError: arguments that do not fit the function's signature.
            RuntimeError: the tool's function could not be loaded.
            Exception: whatever the tool or a hook raised.
        """
        tool = self._tools.get(name)
        if tool is None:
            raise KeyError(f"toolkit {self.name!r} has no tool {name!r}; its tools: {', '.join(self._tools) or 'none'}")
        if tool.pause_reason:
            raise ToolPausedError(
                f"tool {name!r} of {self.name!r} {tool.pause_reason}, so it cannot run inside a cell; ask for it as a regular tool call instead"
            )
        if tool.function is None or tool.signature is None:
            raise RuntimeError(f"tool {name!r} of {self.name!r} is unavailable: {tool.load_error}")
        arguments = dict(tool.signature.bind(*args, **(kwargs or {})).arguments)
        call = ToolCall(self.name, name, arguments)
        for hook in (self.pre_hook, tool.pre_hook):
            if hook is not None:
                await _maybe_await(hook, call)
        result = await _Chain(self, tool, asyncio.get_running_loop(), approval or ApprovalContext(_NO_APPROVER)).enter(0, arguments)
        for hook in (tool.post_hook, self.post_hook):
            if hook is not None:
                returned = await _maybe_await(hook, call, result)
                if returned is not None:
                    result = returned
        return result

    def _cached(self, tool: Tool, arguments: dict[str, Any]) -> tuple[tuple[str, bytes] | None, Any]:
        """``(key, hit)``: the cache key (``None`` when not caching) and the cached result or ``_MISS``."""
        if not (tool.cache_results or self.cache_results):
            return None, _MISS
        key = self._cache_key(tool, arguments)
        ttl = tool.cache_ttl if tool.cache_results else self.cache_ttl
        with self._cache_lock:
            hit = self._cache.get(key) if key is not None else None
            found = hit is not None and time.monotonic() - hit[0] < ttl
            if found:
                self._cache.move_to_end(key)
        note_cache_hit(found)
        return key, hit[1] if found and hit is not None else _MISS

    def _remember(self, key: tuple[str, bytes] | None, result: Any) -> None:
        if key is None:
            return
        with self._cache_lock:
            self._cache[key] = (time.monotonic(), result)
            while len(self._cache) > self.max_cache_entries:
                self._cache.popitem(last=False)

    @staticmethod
    def _cache_key(tool: Tool, arguments: dict[str, Any]) -> tuple[str, bytes] | None:
        try:
            return tool.name, pickle.dumps(sorted(arguments.items()))
        except Exception:  # arguments that cannot be pickled are simply not cached
            return None

    def __repr__(self) -> str:
        return f"<Toolkit {self.name}: {', '.join(self._tools) or 'no tools'}>"


async def contained(call: Awaitable[Any]) -> Any:
    """Await a tool call, turning exceptions that would stop an event loop into :class:`ToolExitError`.

    An async tool runs inside an asyncio task: ``SystemExit``/``KeyboardInterrupt`` escaping a task
    stop the whole event loop, and a ``CancelledError`` the tool raised itself would look like the
    call being cancelled.
    """
    try:
        return await call
    except asyncio.CancelledError:
        if asyncio.current_task().cancelling():  # type: ignore[union-attr]
            raise
        raise ToolExitError("the tool raised CancelledError") from None
    except Exception:
        raise
    except BaseException as error:
        raise ToolExitError(f"the tool raised {type(error).__name__}: {error}") from None


async def _maybe_await(function: Callable[..., Any], *args: Any) -> Any:
    result = function(*args)
    return await result if inspect.isawaitable(result) else result


_MISS = object()


class _Workers:
    """The worker threads sync tools and sync hooks run in, with completions handed back in batches.

    ``asyncio.to_thread`` wakes the loop once per finished call; with a thousand concurrent calls
    from one cell those wake-ups (and the GIL hand-offs around them) cost more than the calls. Here
    a finished call joins a per-loop batch, and the loop is woken once per batch.

    Up to ``eager`` threads start as soon as calls queue up; beyond that a thread is added only when
    a call had to wait ``patience`` seconds for one (tools that block on I/O), up to ``size``: many
    threads contending for the GIL would slow down the quick calls that make up most bursts.
    """

    def __init__(self, size: int, eager: int = 8, patience: float = 0.002):
        self.size, self.eager, self.patience = size, eager, patience
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.lock = threading.Lock()
        self.threads = 0
        self.idle = 0
        self.queued = 0
        self.done: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future, bool, Any]]] = {}

    def run(self, function: Callable[..., Any], *args: Any) -> asyncio.Future:
        """Run ``function(*args)`` in a worker thread (in a copy of the current context)."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self.jobs.put((loop, future, contextvars.copy_context(), function, args, time.monotonic()))
        with self.lock:
            self.queued += 1
            start = self.queued > self.idle and self.threads < self.eager
        if start:
            self._start()
        return future

    def _start(self) -> None:
        with self.lock:
            if self.threads >= self.size:
                return
            self.threads += 1
        threading.Thread(target=self._work, name="toolpath-tool-worker", daemon=True).start()

    def _work(self) -> None:
        while True:
            with self.lock:
                self.idle += 1
            loop, future, context, function, args, queued_at = self.jobs.get()
            with self.lock:
                self.idle -= 1
                self.queued -= 1
                waited = self.queued > 0 and time.monotonic() - queued_at > self.patience
            if waited:
                self._start()
            if future.cancelled():  # the call was interrupted while it waited for a thread
                continue
            try:
                outcome: tuple[bool, Any] = (True, context.run(function, *args))
            except Exception as error:  # handed to the awaiting coroutine, which re-raises it
                outcome = (False, error)
            except BaseException as error:
                # SystemExit (argparse!), KeyboardInterrupt, StopIteration ... would stop whoever
                # re-raises them, or cannot enter a future at all: they become a plain error.
                outcome = (False, ToolExitError(f"the tool raised {type(error).__name__}: {error}"))
            with self.lock:
                batch = self.done.setdefault(loop, [])
                batch.append((future, *outcome))
                first = len(batch) == 1
            if first:
                try:
                    loop.call_soon_threadsafe(self._deliver, loop)
                except RuntimeError:  # the loop was closed: nobody awaits these results any more
                    with self.lock:
                        self.done.pop(loop, None)

    def _deliver(self, loop: asyncio.AbstractEventLoop) -> None:
        with self.lock:
            batch = self.done.pop(loop, [])
        for future, succeeded, value in batch:
            if future.done():
                continue
            if succeeded:
                future.set_result(value)
            elif isinstance(value, StopIteration):  # a future refuses StopIteration
                future.set_exception(ToolExitError(f"the tool raised StopIteration: {value}"))
            else:
                future.set_exception(value)


#: Host tools mostly wait on I/O, so the pool is sized for waiting, not for the CPU count.
_workers = _Workers(32)


class _Chain:
    """The middleware hooks and the function of one call, run layer by layer.

    ``enter`` runs on the caller's loop, ``enter_sync`` in a worker thread. A call takes at most one
    worker thread (its *home*): the first sync layer starts it, and every later sync layer — even
    one inside an async hook — is sent back to it, while async layers run on the loop. So a
    thousand concurrent calls through sync hooks never wait on each other for threads (two threads
    per call could exhaust the pool with each call holding one and waiting for another).
    """

    def __init__(self, toolkit: Toolkit, tool: Tool, loop: asyncio.AbstractEventLoop, approval: ApprovalContext):
        self.toolkit, self.tool, self.loop, self.approval = toolkit, tool, loop, approval
        self.layers = [*toolkit.hooks, *tool.hooks]
        self.home: queue.SimpleQueue | None = None
        self.waiting: list[concurrent.futures.Future] = []  # async layers a sync layer waits for
        self.cancelled = False

    async def enter(self, index: int, arguments: dict[str, Any]) -> Any:
        if index < len(self.layers) and inspect.iscoroutinefunction(self.layers[index]):
            return await self.layers[index](self.tool.name, self._next(index + 1), arguments)
        if index == len(self.layers) and self.tool.is_async:
            key, hit = self.toolkit._cached(self.tool, arguments)
            if hit is not _MISS:
                return hit
            await self._approved(arguments)
            bound = inspect.BoundArguments(self.tool.signature, arguments)  # type: ignore[arg-type]
            result = await self.tool.function(*bound.args, **bound.kwargs)  # type: ignore[misc]
            self.toolkit._remember(key, result)
            return result
        if self.home is None:
            try:
                return await _workers.run(self._start_home, index, arguments)
            except asyncio.CancelledError:
                # A thread cannot be cancelled, but the async layers it waits for can, and no layer
                # starts after this: the call stops as soon as its sync code returns to us.
                self.cancelled = True
                for waiting in self.waiting:
                    waiting.cancel()
                raise
        done: concurrent.futures.Future = concurrent.futures.Future()
        self.home.put((index, arguments, done))
        return await asyncio.wrap_future(done)

    def enter_sync(self, index: int, arguments: dict[str, Any]) -> Any:
        if self.cancelled:
            raise concurrent.futures.CancelledError()
        at_function = index == len(self.layers)
        if (at_function and self.tool.is_async) or (not at_function and inspect.iscoroutinefunction(self.layers[index])):
            return self._wait(self.enter(index, arguments))
        if not at_function:
            return self.layers[index](self.tool.name, self._next_sync(index + 1), arguments)
        key, hit = self.toolkit._cached(self.tool, arguments)
        if hit is not _MISS:
            return hit
        if self.tool.requires_approval:
            self._wait(self._approved(arguments))
        bound = inspect.BoundArguments(self.tool.signature, arguments)  # type: ignore[arg-type]
        result = self.tool.function(*bound.args, **bound.kwargs)  # type: ignore[misc]
        if inspect.isawaitable(result):  # a sync function that returns a coroutine (a partial of one)
            result = self._wait(_awaited(result))
        self.toolkit._remember(key, result)
        return result

    async def _approved(self, arguments: dict[str, Any]) -> None:
        """Return once the call may run: at once when the tool's policy does not ask about these
        arguments, else after the approver's yes (raises ``ApprovalDenied``/``ApprovalTimeout``)."""
        reason = approval_reason(self.tool.requires_approval, arguments)
        if reason:
            with asking_approval():
                await self.approval.ask(f"{self.toolkit.name}.{self.tool.name}", arguments, reason)

    def _start_home(self, index: int, arguments: dict[str, Any]) -> Any:
        self.home = queue.SimpleQueue()
        try:
            return self.enter_sync(index, arguments)
        finally:
            self.home = None

    def _wait(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        """In the home thread: run ``coroutine`` on the loop, serving the sync layers it sends back."""
        assert self.home is not None
        home = self.home
        future = asyncio.run_coroutine_threadsafe(contained(coroutine), self.loop)
        self.waiting.append(future)
        # Waits nest strictly (an outer coroutine cannot finish while an inner layer runs here), so
        # the next ``None`` always belongs to the innermost wait.
        future.add_done_callback(lambda _: home.put(None))
        while (item := home.get()) is not None:
            index, arguments, done = item
            try:
                done.set_result(self.enter_sync(index, arguments))
            except BaseException as error:  # handed back to the awaiting layer on the loop
                done.set_exception(error)
        return future.result()

    # ``call_next`` takes the tool's arguments as keywords; a closure (not a partial) keeps any
    # argument name, ``index`` or ``self`` included, from clashing with ours.
    def _next(self, index: int) -> Callable[..., Awaitable[Any]]:
        def call_next(**arguments: Any) -> Awaitable[Any]:
            return self.enter(index, arguments)

        return call_next

    def _next_sync(self, index: int) -> Callable[..., Any]:
        def call_next(**arguments: Any) -> Any:
            return self.enter_sync(index, arguments)

        return call_next


async def _awaited(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


def is_tool_definition(value: object) -> bool:
    """Whether ``value`` is a registry :class:`ToolDefinition`, without importing the registry's
    pydantic models when no module has (then no definition exists): kernels import this module for
    its errors, and the models would cost each kernel's start about 0.1 s."""
    tools_module = sys.modules.get("toolpath.registry.tools")
    return tools_module is not None and isinstance(value, tools_module.ToolDefinition)


def catalog_signature(definition: ToolDefinition) -> inspect.Signature:
    """The signature a host tool built from a catalog definition shows (a tool served over MCP or
    HTTP has no function of its own to take it from): the required parameters, keyword-only, then
    the optional ones with their catalog defaults, each annotated with its type string; the
    return's type."""
    parameters = [
        inspect.Parameter(parameter.python_name, inspect.Parameter.KEYWORD_ONLY, annotation=ShownText(parameter.type))
        for parameter in definition.required_parameters
    ]
    parameters += [
        inspect.Parameter(parameter.python_name, inspect.Parameter.KEYWORD_ONLY, default=parameter.default, annotation=ShownText(parameter.type))
        for parameter in definition.optional_parameters
    ]
    return inspect.Signature(parameters, return_annotation=ShownText(definition.return_spec.type) if definition.return_spec else inspect.Signature.empty)


def as_toolkits(tools: Iterable[Any], default_name: str = "tools", load: Callable[[ToolDefinition], Tool] = Tool.from_definition) -> list[Toolkit]:
    """Group what was passed to ``CodeMode(tools=...)`` into toolkits.

    Toolkits stay as they are; callables and :class:`Tool` objects join one toolkit named
    ``default_name``; host-bound registry tools join one toolkit per server, each made a
    :class:`Tool` by ``load``.

    Raises:
        TypeError: an item that is none of these.
        ValueError: two toolkits with the same name.
    """
    toolkits: dict[str, Toolkit] = {}
    loose: dict[str, list[Any]] = {}
    for tool in tools:
        if isinstance(tool, Toolkit):
            if tool.name in toolkits:
                raise ValueError(f"two toolkits are named {tool.name!r}; give each a distinct name")
            toolkits[tool.name] = tool
        elif is_tool_definition(tool):
            loose.setdefault(tool.server_name or default_name, []).append(load(tool))
        elif isinstance(tool, Tool) or callable(tool):
            loose.setdefault(default_name, []).append(tool)
        else:
            raise TypeError(f"tools must be Toolkits, callables, Tools or ToolDefinitions, got {type(tool).__name__}")
    for name, members in loose.items():
        if name in toolkits:
            raise ValueError(f"a toolkit named {name!r} was passed and loose tools would form another of that name; put them in the toolkit")
        toolkits[name] = Toolkit(name, members)
    return list(toolkits.values())
