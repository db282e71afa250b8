"""What a cell sees of a host tool on either side of the bridge: the errors of a call that did not
run (raised by the host's toolkit, raised again in the kernel as the same classes) and the text a
signature shows for what cannot cross as a value. This module runs in the kernel, so it imports
nothing but the standard library and toolpath's root error.
"""

from __future__ import annotations

from toolpath.errors import ToolpathError


class ShownText:
    """Text that shows as written inside a signature: an annotation kept as a string (no quotes),
    or a default that cannot cross to the kernel (shown by its repr)."""

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text


class ToolExitError(ToolpathError, RuntimeError):
    """A tool raised ``SystemExit``, ``KeyboardInterrupt`` or another exception that must not stop the
    host (an argparse-based tool exits on bad arguments); the message names what it raised."""


class ToolPausedError(ToolpathError, RuntimeError):
    """The tool would pause the run (it needs input from the user, or is executed elsewhere).

    Such tools cannot run inside a cell: the model must ask for them as a regular tool call, so the
    agent framework can pause and ask. (A tool that only needs a person's yes asks for it from the
    cell instead: ``requires_approval``.)
    """
