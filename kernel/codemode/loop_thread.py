"""LoopThread: a private asyncio event loop on a background thread, for CodeMode.

jupyter_client's async sockets belong to the loop that made them, so every kernel of one CodeMode
is driven from one loop. A private loop on its own thread lets CodeMode's sync methods work from
plain code and from inside someone else's running loop alike, and its async methods from any loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from toolpath.kernel.errors import KernelError

T = TypeVar("T")


class LoopThread:
    """An event loop running forever on a daemon thread until :meth:`stop`.

    Attributes:
        closed: set when CodeMode shuts down; from then on every method that runs a coroutine
            raises ``KernelError`` saying so.
    """

    def __init__(self, name: str = "toolpath-codemode"):
        self.loop = asyncio.new_event_loop()
        self.closed = False
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def check_open(self) -> None:
        """Raises ``KernelError`` once CodeMode is shut down (:attr:`closed`)."""
        if self.closed:
            raise KernelError("this CodeMode has been shut down; create a new one")

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coroutine`` on the loop; its future."""
        if self.closed:
            coroutine.close()
            self.check_open()
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the loop and block this thread until it is done.

        Raises:
            RuntimeError: called on the loop's own thread, where blocking would deadlock.
        """
        if self.on_loop_thread():
            coroutine.close()
            raise RuntimeError("a sync CodeMode method was called from CodeMode's own loop; use the async variant")
        return self.submit(coroutine).result()

    async def relay(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the loop and await it from the caller's own loop."""
        return await asyncio.wrap_future(self.submit(coroutine))

    def on_loop_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def stop(self) -> None:
        """Close the async generators still open on the loop, as ``asyncio.run`` does before it
        closes its loop (HTTP tools' shared clients close their connections there), then stop the
        loop and wait (up to 10 s each) for both."""
        self.closed = True
        if self._thread.is_alive() and not self.on_loop_thread():  # on the loop's own thread, waiting would deadlock
            # A generator that does not finish closing must not keep CodeMode from shutting down.
            with contextlib.suppress(TimeoutError):
                asyncio.run_coroutine_threadsafe(self.loop.shutdown_asyncgens(), self.loop).result(timeout=10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)


def running_loop() -> asyncio.AbstractEventLoop | None:
    """The calling thread's running event loop, or ``None`` outside one."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
