"""An agent session's kernel as the session sees it: which kernel holds its states, the cells it runs
there, and the kernel's variable names after each.

A kernel that is restarted, dies or is evicted takes its variables with it: when the next one is not
restored from the session's snapshot, the session's held states go too, and the next result says
so (the contract in :mod:`toolpath.planner.tasks.agent_session`).
"""

from __future__ import annotations

from typing import Any

from toolpath.kernel import CellResult, CodeMode, KernelError
from toolpath.planner.tasks.session_holdings import SessionHoldings


class SessionKernel:
    """The kernel of one session on a :class:`toolpath.kernel.CodeMode`.

    Args:
        code_mode: the CodeMode the session's kernel runs on.
        session_id, user_id: the session, and the user it acts for.
        holdings: what the session holds; cleared when its kernel is gone.

    Attributes:
        kernel_id: the kernel the held states live in (``None`` before the first cell).
    """

    def __init__(self, code_mode: CodeMode, session_id: str, user_id: str | None, holdings: SessionHoldings):
        self.code_mode = code_mode
        self.session_id = session_id
        self.user_id = user_id
        self.holdings = holdings
        self.kernel_id: str | None = None

    def check(self) -> None:
        """Drop held states when the kernel that held them is gone."""
        with self.holdings.lock:
            now = self.code_mode.kernel_id(self.session_id)
            if self.kernel_id is not None and now != self.kernel_id and not (now is not None and self.code_mode.restored(self.session_id)):
                self.holdings.forget_everything("The session's kernel was restarted or shut down")
            # A kernel restored from the snapshot keeps what it held; the variable check after the
            # cell drops artifacts that did not come back.
            self.kernel_id = now

    def require_variable(self, variable: str) -> None:
        """Check that ``variable`` is defined in the session's kernel (noting the kernel's variables).

        Raises:
            ValueError: it is not, or the session has no live kernel.
        """
        self.check()
        variables = self.variables()
        self.holdings.after_cell(variables)
        if variables is None or variable not in variables:
            raise ValueError(f"variable {variable!r} is not defined in session {self.session_id!r}; define it in a cell first")

    def run(self, code: str, **options: Any) -> tuple[CellResult, list[str] | None]:
        """Run ``code`` (:meth:`toolpath.kernel.CodeMode.run` ``options``): its result, and the
        kernel's variable names after it (``None``: unknown)."""
        result = self.code_mode.run(code, self.session_id, self.user_id, report_variables=True, **options)
        self.check()
        return result, list(result.variables) if result.variables is not None else self.variables()

    async def arun(self, code: str, **options: Any) -> tuple[CellResult, list[str] | None]:
        """Async :meth:`run`."""
        result = await self.code_mode.arun(code, self.session_id, self.user_id, report_variables=True, **options)
        self.check()
        return result, list(result.variables) if result.variables is not None else await self.avariables()

    def variables(self) -> list[str] | None:
        """The kernel's variable names, asked for in a cell of their own; ``None`` when the session
        has no live kernel."""
        if self.kernel_id is None:
            return None
        try:
            return self.code_mode.variables(self.session_id, self.user_id)
        except (KeyError, KernelError):  # the kernel went away, or a cell that ignored its interrupt still runs
            return None

    async def avariables(self) -> list[str] | None:
        """Async :meth:`variables`."""
        if self.kernel_id is None:
            return None
        try:
            return await self.code_mode.avariables(self.session_id, self.user_id)
        except (KeyError, KernelError):
            return None

    def restart(self) -> None:
        """Discard the kernel, its variables and its snapshot; the holdings are forgotten without a
        notice (the caller asked for it)."""
        self.code_mode.restart(self.session_id, self.user_id)
        self._forget_kernel()

    async def arestart(self) -> None:
        """Async :meth:`restart`."""
        await self.code_mode.arestart(self.session_id, self.user_id)
        self._forget_kernel()

    def _forget_kernel(self) -> None:
        with self.holdings.lock:
            self.holdings.forget_everything(None)
            self.kernel_id = None

    def stop(self, with_code_mode: bool) -> None:
        """Snapshot and stop the kernel; ``with_code_mode``: shut the whole CodeMode down (the
        session made it)."""
        if with_code_mode:
            self.code_mode.shutdown()
        else:
            self.code_mode.end_session(self.session_id, self.user_id)

    async def astop(self, with_code_mode: bool) -> None:
        """Async :meth:`stop`."""
        if with_code_mode:
            await self.code_mode.ashutdown()
        else:
            await self.code_mode.aend_session(self.session_id, self.user_id)
