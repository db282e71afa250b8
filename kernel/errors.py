"""Errors of a kernel's start and of driving it, shared by local kernels
(:mod:`toolpath.kernel.ipython_kernel`) and gateway kernels (:mod:`toolpath.kernel.gateway`).
"""

from toolpath.errors import ToolpathError


class KernelError(ToolpathError, RuntimeError):
    """The kernel could not be started, or died; the message says what to check."""


class KernelBusyError(KernelError):
    """An earlier cell ignored its interrupt and still holds the kernel; see :meth:`IPythonKernel.wait_until_idle`."""
