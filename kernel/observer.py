"""What a :class:`toolpath.kernel.CodeMode` reports as it works, for a program that counts it
(``toolpath serve --metrics``: :mod:`toolpath.planner.interfaces.serve_metrics`).

:class:`CodeModeObserver` does nothing with a report; a subclass overrides the methods it wants.
Reports carry kinds, sizes and durations only, never a value a cell or a tool handled: what an
observer records may be read by someone other than the session's user.
"""

from __future__ import annotations


class CodeModeObserver:
    """Told of each cell, host tool call and snapshot of a CodeMode (``CodeMode(observer=...)``).

    Every method is called on CodeMode's own loop thread while the work waits: it must return at
    once and must not raise. Durations are in seconds, from :func:`time.perf_counter`.
    """

    def cell_finished(self, status: str, seconds: float) -> None:
        """A cell ran in a session's kernel and ended with ``status`` after ``seconds`` of execution
        (not counting the kernel's start, nor a cell found ``"busy"``, which did not run): a
        :class:`toolpath.kernel.CellResult` status (``"ok"``, ``"error"``, ``"timeout"``, ``"aborted"``
        or ``"dead"``), or ``"paused"`` for a cell run with ``on_approval="pause"`` that stopped
        before a call waiting for approval."""

    def bridge_call_finished(self, tool: str, outcome: str, seconds: float) -> None:
        """A cell's call of a host tool crossed the bridge and ended after ``seconds``.

        ``tool`` is ``"handle.tool"`` of a tool bound in the kernel, or ``"unknown"`` when the cell
        named none (its text is the cell's, not a tool's name). ``outcome`` is ``"ok"`` (the tool
        returned), ``"error"`` (it raised), ``"unknown_tool"`` or ``"cancelled"`` (its cell was
        interrupted, or its kernel went away)."""

    def snapshot_written(self, size_bytes: int) -> None:
        """A session's snapshot was written: ``size_bytes`` of pickles of the variables that changed
        since the last one (only those are written)."""

    def snapshot_failed(self) -> None:
        """Writing a session's snapshot failed; the previous one is kept (the session's next cell
        says why)."""
