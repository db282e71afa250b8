"""CodeMode kernels: persistent IPython kernels in which every tool is an awaitable handle.

``toolpath.kernel.ipython_kernel`` runs on the host; ``toolpath.kernel.handles`` is imported inside the kernel.

The names below load on first use: a kernel imports ``toolpath.kernel.handles`` (and so this package) in its
first cell, and must not pay for the host side (jupyter_client, SQLite, dill: about a second) there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolpath.lazy import lazy_exports

if TYPE_CHECKING:
    from toolpath.kernel.codemode import CodeMode
    from toolpath.kernel.errors import KernelBusyError, KernelError, SessionHeldError
    from toolpath.kernel.ipython_kernel import IPythonKernel
    from toolpath.kernel.mcp_connection import MCPConnectionError, MCPToolError
    from toolpath.kernel.mcp_toolkit import MCPToolkit
    from toolpath.kernel.output import CellResult, OutputLimits, format_for_model
    from toolpath.kernel.session_pool import SessionOwnerError
    from toolpath.kernel.snapshot import Snapshot, SnapshotStore
    from toolpath.kernel.toolkit import Tool, ToolCall, ToolExitError, Toolkit, ToolPausedError

_HOME = {
    "CodeMode": "toolpath.kernel.codemode",
    "SessionOwnerError": "toolpath.kernel.session_pool",
    "format_for_model": "toolpath.kernel.output",
    "CellResult": "toolpath.kernel.output",
    "MCPConnectionError": "toolpath.kernel.mcp_connection",
    "MCPToolError": "toolpath.kernel.mcp_connection",
    "MCPToolkit": "toolpath.kernel.mcp_toolkit",
    "OutputLimits": "toolpath.kernel.output",
    "KernelBusyError": "toolpath.kernel.errors",
    "KernelError": "toolpath.kernel.errors",
    "SessionHeldError": "toolpath.kernel.errors",
    "IPythonKernel": "toolpath.kernel.ipython_kernel",
    "Snapshot": "toolpath.kernel.snapshot",
    "SnapshotStore": "toolpath.kernel.snapshot",
    "Tool": "toolpath.kernel.toolkit",
    "ToolCall": "toolpath.kernel.toolkit",
    "ToolExitError": "toolpath.kernel.toolkit",
    "Toolkit": "toolpath.kernel.toolkit",
    "ToolPausedError": "toolpath.kernel.toolkit",
}

__all__ = sorted(_HOME)
__getattr__ = lazy_exports(__name__, _HOME, globals())
