"""Short texts CodeMode tells a model or a program about a session: notices and failed housekeeping.

A notice rides on the next cell's result (:attr:`toolpath.kernel.kernels.output.CellResult.notice`), so it
must stay short: a full traceback would flood the model's context.
"""

from __future__ import annotations

from toolpath.kernel.kernels.output import CellResult

#: The longest error text a notice carries.
NOTICE_ERROR_CHARS = 300


def join(first: str, second: str) -> str:
    """Two notices as one (either may be empty)."""
    return f"{first} {second}".strip()


def sentence(text: str) -> str:
    """``text`` capitalised and ended with a full stop; ``""`` stays ``""``."""
    return f"{text[0].upper()}{text[1:]}." if text else ""


def shortened(text: str) -> str:
    """``text`` cut to :data:`NOTICE_ERROR_CHARS` characters."""
    return text if len(text) <= NOTICE_ERROR_CHARS else text[: NOTICE_ERROR_CHARS - 3] + "..."


def exception_line(error: BaseException) -> str:
    """``"Type: message"``, shortened."""
    return shortened(f"{type(error).__name__}: {error}")


def short_error(result: CellResult) -> str:
    """A failed housekeeping cell in one short line (its exception, not the traceback)."""
    if result.error:
        return shortened(f"{result.error.get('ename')}: {result.error.get('evalue')}")
    return result.status


def describe_error(result: CellResult) -> str:
    """A failed setup cell in full (its traceback when there is one), for a ``KernelError``."""
    if result.error:
        return result.error.get("traceback") or f"{result.error.get('ename')}: {result.error.get('evalue')}"
    return result.status


def shown(value: object) -> str:
    """``repr(value)``, cut to 80 characters for messages."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
