"""The roots of toolpath's errors.

Every error toolpath raises on purpose derives from :class:`ToolpathError`, and its message names
the cause and what to do. :class:`Refusal` is the branch for "refused before anything ran": bad
input, an unknown state, nothing that matches, no plan, a session that is not yours. The command
line prints any ``ToolpathError`` as one line (exit status 2) and the MCP server returns a refusal
as an error result the model reads; any other exception is a bug and keeps its traceback.

Each error also keeps the builtin base its callers may catch (``ValueError``, ``LookupError``,
``TimeoutError``, ``PermissionError``, ``RuntimeError``, ...).
"""


class ToolpathError(Exception):
    """An error toolpath raises on purpose; its message says what went wrong and what to do."""


class Refusal(ToolpathError):
    """toolpath refused before running anything (the input, the catalogs or the caller's rights
    do not allow what was asked)."""


class MissingExtraError(ToolpathError, ImportError):
    """An optional part of toolpath is not installed; the message names the extra that brings it
    (``pip install 'toolpath[pictures]'``)."""
