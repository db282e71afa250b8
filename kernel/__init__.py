"""CodeMode kernels: persistent IPython kernels in which every tool is an awaitable handle.

``kernel.session`` runs on the host; ``kernel.handles`` is imported inside the kernel.
"""

from kernel.session import CellResult, KernelError, KernelSession

__all__ = ["CellResult", "KernelError", "KernelSession"]
