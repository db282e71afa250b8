"""CodeMode kernels: persistent IPython kernels in which every tool is an awaitable handle.

``kernel.session`` runs on the host; ``kernel.handles`` is imported inside the kernel.
"""

from kernel.codemode import CodeMode, SessionOwnerError, format_for_model
from kernel.output import CellResult, OutputLimits
from kernel.session import KernelBusyError, KernelError, KernelSession
from kernel.snapshot import Snapshot, SnapshotStore
from kernel.toolkit import Tool, ToolCall, ToolExitError, Toolkit, ToolPausedError

__all__ = ["CellResult", "CodeMode", "KernelBusyError", "KernelError", "KernelSession", "OutputLimits", "SessionOwnerError", "Snapshot", "SnapshotStore", "Tool", "ToolCall", "ToolExitError", "ToolPausedError", "Toolkit", "format_for_model"]
