"""The roots of toolpath's errors.

Every error toolpath raises on purpose derives from :class:`ToolpathError`, and its message names
the cause and what to do. :class:`Refusal` is the branch for "refused before anything ran": bad
input, an unknown state, nothing that matches, no plan, a session that is not yours. The command
line prints any ``ToolpathError`` as one line (exit status 2) and the MCP server returns a refusal
as an error result the model reads; any other exception is a bug and keeps its traceback.

Each error also keeps the builtin base its callers may catch (``ValueError``, ``LookupError``,
``TimeoutError``, ``PermissionError``, ``RuntimeError``, ...).

An error whose advice names an option (load another catalog, give an input state) words
it with the :class:`Vocabulary` of the interface that reports it: ``str(error)`` and
``error.message()`` use :data:`PYTHON`'s argument names; the command line and the MCP server pass
their own to :meth:`ToolpathError.message`, so each user reads options they can actually give.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass

#: ``(input state, the input names that carry it) -> how to give it``.
GivenAdvice = Callable[[str, Sequence[str]], str]


@dataclass(frozen=True)
class Vocabulary:
    """How one interface names what its user can do about an error.

    Attributes:
        load_catalog: how to load a catalog for a domain nothing loaded covers.
        give_state: how to give a missing input state (``input: true``) that the named inputs carry.
    """

    load_catalog: str
    give_state: GivenAdvice


def _give_as_python_input(state: str, names: Sequence[str]) -> str:
    inputs = " or ".join(repr(name) for name in names)
    return f"give it as the input {inputs}, or hold {state}" if inputs else f"hold {state}"


#: The Python API's words: :meth:`toolpath.planner.Workspace.open`'s catalog paths, the
#: ``inputs`` and ``held`` arguments of ``plan_task`` and ``plan``.
PYTHON = Vocabulary(
    load_catalog="open the workspace with a catalog for this domain among its catalog_paths (Workspace.open([..., 'my_catalog.yaml']))",
    give_state=_give_as_python_input,
)


class ToolpathError(Exception):
    """An error toolpath raises on purpose; its message says what went wrong and what to do."""

    def message(self, vocabulary: Vocabulary = PYTHON) -> str:
        """The message with its advice worded in ``vocabulary`` (``str(error)`` is :data:`PYTHON`'s).
        An error whose advice names no option has one message for every interface."""
        return str(self)


class Refusal(ToolpathError):
    """toolpath refused before running anything (the input, the catalogs or the caller's rights
    do not allow what was asked)."""


class MissingExtraError(ToolpathError, ImportError):
    """An optional part of toolpath is not installed; the message names the extra that brings it
    (``pip install 'toolpath[pictures]'``)."""
