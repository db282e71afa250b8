"""Errors of a kernel's start and of driving it, shared by local kernels
(:mod:`toolpath.kernel.kernels.ipython_kernel`) and gateway kernels (:mod:`toolpath.kernel.kernels.gateway`).
"""

from toolpath.errors import Refusal, ToolpathError


class KernelError(ToolpathError, RuntimeError):
    """The kernel could not be started, or died; the message says what to check."""


class KernelCapacityError(KernelError):
    """A kernel cap (``max_kernels`` or ``max_kernels_per_user``) is reached and every kernel under it
    is running a cell, so no kernel can be made room for; the message names the cap and its option."""


class KernelBusyError(KernelError):
    """An earlier cell ignored its interrupt and still holds the kernel; see :meth:`IPythonKernel.wait_until_idle`."""


class SessionHeldError(Refusal, RuntimeError):
    """Another process holds the session: it runs the session's kernel, and two processes driving
    one session would overwrite each other's variables. Nothing was started or written; the message
    names the session, the holder (pid, host, since when) and what to do.

    Attributes:
        session_id: the session.
        holder: the process holding it (:class:`toolpath.kernel.codemode.snapshot_store.SessionHolder`).
    """

    def __init__(self, message: str, session_id: str, holder: object):
        super().__init__(message)
        self.session_id = session_id
        self.holder = holder
