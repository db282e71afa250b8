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


def awaitable(function: Callable[..., Any], name: str | None = None, wire_name: str | None = None) -> Callable[..., Any]:
    """Wrap ``function`` so that calling it returns an awaitable, keeping its signature and docstring.

    Args:
        function: a sync or async callable.
        name: the Python name it is bound as (default: its own ``__name__``).
        wire_name: the tool's real name when it differs from ``name``; the docstring records it.
    """
    if inspect.iscoroutinefunction(function):

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await function(*args, **kwargs)

    else:

        async def call(*args: Any, **kwargs: Any) -> Any:
            return function(*args, **kwargs)

    functools.update_wrapper(call, function)
    if name is not None:
        call.__name__ = call.__qualname__ = name
    if wire_name is not None and wire_name != call.__name__:
        call.__doc__ = f"Tool {wire_name!r}, bound as {call.__name__}.\n\n{function.__doc__ or ''}".rstrip()
    return call


class ToolHandle:
    """The handle of one toolkit: attribute ``x`` is the awaitable tool whose Python name is ``x``.

    Args:
        toolkit: the toolkit's name (for messages).
        tools: ``{attribute: (tool wire name, module)}``; the attribute names come from
            :class:`registry.names.NameMap`, and the function named like the tool is looked up in
            the module.
    """

    def __init__(self, toolkit: str, tools: Mapping[str, tuple[str, str]]):
        self._toolkit = toolkit
        self._modules = dict(tools)
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
        bound = awaitable(function, name=attribute, wire_name=name)
        self._bound[attribute] = bound
        return bound

    def __dir__(self) -> list[str]:
        return sorted(self._modules)

    def __repr__(self) -> str:
        return f"<toolpath handle {self._toolkit}: {', '.join(sorted(self._modules))}>"


def bind_module_tools(toolkit: str, tools: Mapping[str, tuple[str, str]]) -> ToolHandle:
    """Create the handle of ``toolkit`` from ``{attribute: (tool name, module)}``; nothing is imported yet."""
    return ToolHandle(toolkit, tools)
