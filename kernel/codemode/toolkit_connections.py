"""A run's toolkit connections: connect the toolkits that need it when a run starts, close them when it ends.

A *run* starts with CodeMode's first cell (or ``open``) and ends with ``close``. A toolkit whose
``connect()`` fails becomes a failed handle (the cell that uses it is told why), not a failed run;
it is tried again in the next run. An async ``connect()`` runs on the loop the run started on, and
its ``close()`` runs on that same loop when it still runs, since an async client (an MCP session)
belongs to the loop that opened it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import threading

from toolpath.kernel.codemode.handle_binding import HandleBinder
from toolpath.kernel.tools.toolkit import Toolkit


class ToolkitConnections:
    """The connections of one CodeMode's toolkits (those of ``binder``), run by run.

    Args:
        binder: holds the toolkits, records failed connects, and renames handles after a run's
            connects changed what the toolkits offer.
    """

    def __init__(self, binder: HandleBinder):
        self._binder = binder
        # Toolkits this run connected, with the loop they connected on, in order.
        self._connected: list[tuple[Toolkit, asyncio.AbstractEventLoop]] = []
        # Toolkit name -> done when whoever connects it has finished (connects may race from threads).
        self._connecting: dict[str, concurrent.futures.Future] = {}
        self._lock = threading.Lock()

    def pending(self, asynchronous_too: bool) -> bool:
        """Whether :meth:`connect` has anything to do (checked first: most cells have nothing to connect)."""
        return bool(self._to_connect(asynchronous_too))

    def _to_connect(self, asynchronous_too: bool) -> list[Toolkit]:
        ours = {toolkit.name for toolkit, _ in self._connected}  # even if connect() forgot is_connected
        return [
            toolkit
            for toolkit in self._binder.toolkits
            if toolkit.requires_connect
            and not toolkit.is_connected
            and toolkit.name not in ours
            and toolkit.name not in self._binder.failures
            and (asynchronous_too or not inspect.iscoroutinefunction(toolkit.connect))
        ]

    def _claim(self, toolkit: Toolkit) -> concurrent.futures.Future | None:
        """Take the job of connecting ``toolkit`` (``None``), or get the future of whoever has it."""
        with self._lock:
            if toolkit.name in self._connecting:
                return self._connecting[toolkit.name]
            self._connecting[toolkit.name] = concurrent.futures.Future()
            return None

    def _release(self, toolkit: Toolkit) -> None:
        """Let whoever waits for ``toolkit``'s connect go on (an interrupted connect is retried later)."""
        with self._lock:
            self._connecting.pop(toolkit.name).set_result(None)

    async def connect(self, asynchronous_too: bool) -> None:
        """Connect the toolkits this run still needs, on the running loop (a sync ``connect()`` in a
        worker thread); ``asynchronous_too=False`` leaves those with an async ``connect()`` for later.
        Then name the handles as the connected toolkits offer them."""
        pending = self._to_connect(asynchronous_too)
        for toolkit in pending:
            other = self._claim(toolkit)
            if other is not None:
                await asyncio.wrap_future(other)
                continue
            try:
                if inspect.iscoroutinefunction(toolkit.connect):
                    await toolkit.connect()
                else:
                    await asyncio.to_thread(toolkit.connect)
            except Exception as error:  # a toolkit that cannot connect becomes a failed handle, not a failed run
                self._binder.failures[toolkit.name] = (
                    f"its connect() failed ({type(error).__name__}: {error}); it is tried again when the next run starts (after close())"
                )
            except BaseException:  # cancelled or interrupted: neither connected nor failed
                self._release(toolkit)
                raise
            else:
                self._connected.append((toolkit, asyncio.get_running_loop()))
            self._release(toolkit)
        if pending:
            self._binder.rebind()

    async def close(self, waiting_loop: asyncio.AbstractEventLoop | None) -> list[str]:
        """End the run: close what it connected, newest first, and the MCP servers of registry tools.

        Args:
            waiting_loop: a loop blocked until this returns (a sync caller's): what must close on it
                cannot, and is reported instead.

        Returns:
            One line per ``close()`` that failed (the others were still closed).
        """
        connected, self._connected = self._connected, []
        self._binder.failures.clear()
        errors = []
        for toolkit, loop in connected[::-1]:
            try:
                if not inspect.iscoroutinefunction(toolkit.close):
                    await asyncio.to_thread(toolkit.close)
                elif loop is waiting_loop and loop.is_running():
                    raise RuntimeError("it connected on this thread's running loop; use `await code_mode.aclose()`")
                elif loop is asyncio.get_running_loop() or not loop.is_running():
                    await toolkit.close()
                else:
                    await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(toolkit.close(), loop))
            except Exception as error:  # close the others, then report every failure
                errors.append(f"{toolkit.name}: {type(error).__name__}: {error}")
        connections = self._binder.mcp_connections
        if connections is not None:
            if waiting_loop is not None and waiting_loop in connections.loops:
                errors.append("MCP servers of registry tools: they connected on this thread's running loop; use `await code_mode.aclose()`")
            else:
                errors += await connections.aclose()
        self._binder.rebind()
        return errors
