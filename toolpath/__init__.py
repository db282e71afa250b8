"""toolpath: workflow planning for LLM agents over a state-transition graph of tools, run as
planned cells in persistent IPython kernels.

The names a newcomer needs, from the sub-packages that hold them (each loads on first use, so
``import toolpath`` costs nothing until one is touched):

- catalogs and the data model (``toolpath.registry``): ``load_catalogs``, ``ToolDefinition``,
  ``State``, ``StateTransition``, ``ToolRegistry``;
- planning (``toolpath.planner``): ``Workspace``, ``AgentSession``, ``StateGraph``, ``plan``;
- kernels (``toolpath.kernel``): ``CodeMode`` and its option groups (``CellPolicy``,
  ``KernelCapacity``, ``KernelLaunch``, ``SnapshotPolicy``, ``BridgePolicy``), ``Toolkit``, ``Tool``,
  ``MCPToolkit``, ``IPythonKernel``, ``CellResult``, ``SandboxPolicy``.

``ToolpathError`` is the root of every error toolpath raises on purpose, and ``Refusal`` the branch
for "refused before anything ran" (:mod:`toolpath.errors`). ``toolpath.catalogs`` holds the
shipped example catalogs (chemistry, tabular).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolpath.errors import Refusal, ToolpathError
from toolpath.lazy import lazy_exports

__version__ = "0.1.0"

if TYPE_CHECKING:
    from toolpath.kernel import (
        BridgePolicy,
        CellPolicy,
        CellResult,
        CodeMode,
        IPythonKernel,
        KernelCapacity,
        KernelLaunch,
        MCPToolkit,
        SnapshotPolicy,
        Tool,
        Toolkit,
    )
    from toolpath.kernel.sandbox.provisioner import SandboxPolicy
    from toolpath.planner import AgentSession, StateGraph, Workspace, plan
    from toolpath.registry import State, StateTransition, ToolDefinition, ToolRegistry, load_catalogs

_HOME = {
    "BridgePolicy": "toolpath.kernel",
    "CellPolicy": "toolpath.kernel",
    "KernelCapacity": "toolpath.kernel",
    "KernelLaunch": "toolpath.kernel",
    "SnapshotPolicy": "toolpath.kernel",
    "AgentSession": "toolpath.planner",
    "CellResult": "toolpath.kernel",
    "CodeMode": "toolpath.kernel",
    "IPythonKernel": "toolpath.kernel",
    "MCPToolkit": "toolpath.kernel",
    "SandboxPolicy": "toolpath.kernel.sandbox.provisioner",
    "State": "toolpath.registry",
    "StateGraph": "toolpath.planner",
    "StateTransition": "toolpath.registry",
    "Tool": "toolpath.kernel",
    "ToolDefinition": "toolpath.registry",
    "ToolRegistry": "toolpath.registry",
    "Toolkit": "toolpath.kernel",
    "Workspace": "toolpath.planner",
    "load_catalogs": "toolpath.registry",
    "plan": "toolpath.planner",
}

__all__ = sorted([*_HOME, "Refusal", "ToolpathError"])
__getattr__ = lazy_exports(__name__, _HOME, globals())
