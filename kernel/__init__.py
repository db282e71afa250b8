"""CodeMode kernels: persistent IPython kernels in which every tool is an awaitable handle.

``kernel.session`` runs on the host; ``kernel.handles`` is imported inside the kernel.

The names below load on first use: a kernel imports ``kernel.handles`` (and so this package) in its
first cell, and must not pay for the host side (jupyter_client, SQLite, dill: about a second) there.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kernel.codemode import CodeMode, SessionOwnerError, format_for_model
    from kernel.mcp_connection import MCPConnectionError, MCPToolError
    from kernel.mcp_toolkit import MCPToolkit
    from kernel.output import CellResult, OutputLimits
    from kernel.session import KernelBusyError, KernelError, KernelSession
    from kernel.snapshot import Snapshot, SnapshotStore
    from kernel.toolkit import Tool, ToolCall, ToolExitError, Toolkit, ToolPausedError

_HOME = {
    "CodeMode": "kernel.codemode",
    "SessionOwnerError": "kernel.codemode",
    "format_for_model": "kernel.codemode",
    "CellResult": "kernel.output",
    "MCPConnectionError": "kernel.mcp_connection",
    "MCPToolError": "kernel.mcp_connection",
    "MCPToolkit": "kernel.mcp_toolkit",
    "OutputLimits": "kernel.output",
    "KernelBusyError": "kernel.session",
    "KernelError": "kernel.session",
    "KernelSession": "kernel.session",
    "Snapshot": "kernel.snapshot",
    "SnapshotStore": "kernel.snapshot",
    "Tool": "kernel.toolkit",
    "ToolCall": "kernel.toolkit",
    "ToolExitError": "kernel.toolkit",
    "Toolkit": "kernel.toolkit",
    "ToolPausedError": "kernel.toolkit",
}

__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module 'kernel' has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOME[name]), name)
    globals()[name] = value
    return value
