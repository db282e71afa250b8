"""CodeMode kernels: persistent IPython kernels in which every tool is an awaitable handle.

Its sub-packages say where their code runs: ``inside`` in the kernel process (handles, the bridge's
kernel end, setup, snapshots; ``inside.protocol`` holds what both sides agree on), and on the host
``sandbox``, ``kernels`` (the driver and its transports), ``tools``, ``bridge`` and ``codemode``.

The names below load on first use: a kernel imports ``toolpath.kernel.inside.handles`` (and so this package) in its
first cell, and must not pay for the host side (jupyter_client, SQLite, dill: about a second) there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolpath.lazy import lazy_exports

if TYPE_CHECKING:
    from toolpath.kernel.codemode.facade import CodeMode
    from toolpath.kernel.codemode.injection_targets import UnknownInjectionTargetError
    from toolpath.kernel.codemode.options import BridgePolicy, CellPolicy, KernelCapacity, KernelLaunch, SnapshotPolicy
    from toolpath.kernel.codemode.session_pool import SessionOwnerError
    from toolpath.kernel.codemode.snapshot_store import Snapshot, SnapshotStore
    from toolpath.kernel.errors import KernelBusyError, KernelError, SessionHeldError
    from toolpath.kernel.inside.retries import FailureInjection, InjectedFailure
    from toolpath.kernel.inside.tool_calls import ToolExitError, ToolPausedError
    from toolpath.kernel.kernels.ipython_kernel import IPythonKernel
    from toolpath.kernel.kernels.output import CellResult, OutputLimits, format_for_model
    from toolpath.kernel.tools.mcp_connection import MCPConnectionError, MCPToolError
    from toolpath.kernel.tools.mcp_toolkit import MCPToolkit
    from toolpath.kernel.tools.toolkit import Tool, ToolCall, Toolkit

_HOME = {
    "BridgePolicy": "toolpath.kernel.codemode.options",
    "CellPolicy": "toolpath.kernel.codemode.options",
    "KernelCapacity": "toolpath.kernel.codemode.options",
    "KernelLaunch": "toolpath.kernel.codemode.options",
    "SnapshotPolicy": "toolpath.kernel.codemode.options",
    "CodeMode": "toolpath.kernel.codemode.facade",
    "SessionOwnerError": "toolpath.kernel.codemode.session_pool",
    "format_for_model": "toolpath.kernel.kernels.output",
    "FailureInjection": "toolpath.kernel.inside.retries",
    "InjectedFailure": "toolpath.kernel.inside.retries",
    "CellResult": "toolpath.kernel.kernels.output",
    "MCPConnectionError": "toolpath.kernel.tools.mcp_connection",
    "MCPToolError": "toolpath.kernel.tools.mcp_connection",
    "MCPToolkit": "toolpath.kernel.tools.mcp_toolkit",
    "OutputLimits": "toolpath.kernel.kernels.output",
    "KernelBusyError": "toolpath.kernel.errors",
    "KernelError": "toolpath.kernel.errors",
    "SessionHeldError": "toolpath.kernel.errors",
    "IPythonKernel": "toolpath.kernel.kernels.ipython_kernel",
    "Snapshot": "toolpath.kernel.codemode.snapshot_store",
    "SnapshotStore": "toolpath.kernel.codemode.snapshot_store",
    "Tool": "toolpath.kernel.tools.toolkit",
    "ToolCall": "toolpath.kernel.tools.toolkit",
    "ToolExitError": "toolpath.kernel.inside.tool_calls",
    "Toolkit": "toolpath.kernel.tools.toolkit",
    "ToolPausedError": "toolpath.kernel.inside.tool_calls",
    "UnknownInjectionTargetError": "toolpath.kernel.codemode.injection_targets",
}

__all__ = sorted(_HOME)
__getattr__ = lazy_exports(__name__, _HOME, globals())
