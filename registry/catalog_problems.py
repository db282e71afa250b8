"""What is wrong with a catalog: the rule codes of problems that stop one from loading, each problem
(:class:`CatalogProblem`: file, line, column, field path, code) and the error that lists them
(:class:`CatalogError`); and the wording problems share (field paths, "did you mean", YAML 1.1's
boolean words). The linter (:mod:`toolpath.registry.lint`) reports them as findings beside its own.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from toolpath.errors import Refusal

if TYPE_CHECKING:
    from toolpath.registry.catalog import Catalog

#: Rule codes of problems that stop a catalog from loading (the linter adds its own, TP0xx).
UNREADABLE = "TP100"
INVALID_FIELD = "TP101"
DUPLICATE_STATE = "TP102"
DUPLICATE_TOOL = "TP103"
NO_MODULE = "TP104"
SHARED_FUNCTION = "TP105"
UNKNOWN_MCP_SERVER = "TP106"
UNKNOWN_HTTP_API = "TP112"
#: Every catalog of a load was skipped: the modules they need are missing (one skipped is only a warning).
NOTHING_LOADABLE = "TP107"


@dataclass(frozen=True)
class CatalogProblem:
    """One thing wrong with a catalog file; ``line`` and ``column`` are 1-based, or ``None`` if unknown."""

    path: str
    field: str
    message: str
    line: int | None = None
    column: int | None = None
    code: str = INVALID_FIELD

    def __str__(self) -> str:
        where = self.path
        if self.line is not None:
            where += f":{self.line}:{self.column or 1}"
        field_path = f" {self.field}:" if self.field else ""
        return f"{where}: {self.code}{field_path} {self.message}"

    def to_dict(self) -> dict:
        return {
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "code": self.code,
            "severity": "error",
            "field": self.field,
            "message": self.message,
        }


class CatalogError(Refusal, ValueError):
    """A catalog could not be loaded; ``problems`` says where and why. Nothing was registered.

    ``partial`` is the part of a single file that did validate (for the linter's further checks),
    or ``None``.
    """

    def __init__(self, problems: Sequence[CatalogProblem], partial: Catalog | None = None):
        self.problems = list(problems)
        self.partial = partial
        count = len(self.problems)
        files = len({problem.path for problem in self.problems})
        header = f"{count} problem{'s' if count != 1 else ''} in " + ("catalog" if files <= 1 else f"{files} catalogs")
        super().__init__(header + ":\n" + "\n".join(f"  {problem}" for problem in self.problems))


def field_path(location: Sequence[str | int]) -> str:
    """``["tools", 0, "name"]`` → ``"tools[0].name"``."""
    path = ""
    for key in location:
        path += f"[{key}]" if isinstance(key, int) else (f".{key}" if path else str(key))
    return path


def short_repr(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`` did you mean 'x'?`` for the known name closest to ``name`` (difflib's ratio ≥ 0.6), else ``""``."""
    close = difflib.get_close_matches(name, list(known), n=1)
    return f" did you mean {close[0]!r}?" if close else ""


def boolean_word_advice(text: str, value: bool) -> str:
    """Why an unquoted ``yes``/``no``/``on``/``off`` became a boolean, and what to do."""
    return f"`{text}` unquoted is YAML 1.1's boolean {value}, not the text {text!r}: quote it ('{text}')"
