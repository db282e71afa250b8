"""Tool handles inside the kernel (this module is imported *in the kernel process*).

A handle is an object whose attributes are the tools of one toolkit, each an ``async`` function with
the tool's real signature and docstring, so a cell writes ``await chemistry.parse_molecule(...)``
and ``help(chemistry.parse_molecule)`` works. This is the *in-kernel* binding: the tool's module is
imported lazily, on first use of the attribute, inside the kernel, and the objects it returns stay
there.

Sync tools are called directly on the kernel's main thread rather than in a worker thread: a kernel
interrupt (SIGINT) then reaches the tool's own code, and objects that are not thread-safe (RDKit
molecules, database connections) never cross threads.
"""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from registry.names import python_identifier


def awaitable(function: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap ``function`` so that calling it returns an awaitable, keeping its signature and docstring."""
    if inspect.iscoroutinefunction(function):
        return function

    @functools.wraps(function)
    async def call(*args: Any, **kwargs: Any) -> Any:
        return function(*args, **kwargs)

    return call


class ToolHandle:
    """The handle of one toolkit: attribute ``x`` is the awaitable tool whose Python name is ``x``.

    Args:
        toolkit: the toolkit's name (for messages).
        modules: ``{tool wire name: module}``; the function ``tool`` is looked up in ``module``.
    """

    def __init__(self, toolkit: str, modules: Mapping[str, str]):
        self._toolkit = toolkit
        self._modules = {python_identifier(name): (name, module) for name, module in modules.items()}
        self._bound: dict[str, Callable[..., Any]] = {}

    def __getattr__(self, attribute: str) -> Callable[..., Any]:
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        if attribute in self._bound:
            return self._bound[attribute]
        if attribute not in self._modules:
            available = ", ".join(sorted(self._modules)) or "none"
            raise AttributeError(f"{self._toolkit} has no tool {attribute!r}; bound tools: {available}")
        name, module_name = self._modules[attribute]
        try:
            module = importlib.import_module(module_name)
            function = getattr(module, name)
        except (ImportError, AttributeError) as error:
            raise RuntimeError(f"tool {self._toolkit}.{name} cannot be bound: {module_name}.{name} failed to import ({error}); check the tool's module in its catalog") from error
        bound = awaitable(function)
        self._bound[attribute] = bound
        return bound

    def __dir__(self) -> list[str]:
        return sorted(self._modules)

    def __repr__(self) -> str:
        return f"<toolpath handle {self._toolkit}: {', '.join(sorted(self._modules))}>"


def bind_module_tools(toolkit: str, modules: Mapping[str, str]) -> ToolHandle:
    """Create the handle of ``toolkit`` from ``{tool name: module}``; nothing is imported yet."""
    return ToolHandle(toolkit, modules)
