"""Catalog lint: stable rule codes for what makes a catalog wrong or weak.

| code  | severity | finding |
|-------|----------|---------|
| TP001 | error    | a tool requires or produces (or a parameter/return carries) a state no catalog declares |
| TP002 | warning  | a declared state that no tool produces (it can only be held from the start) |
| TP003 | warning  | a tool that can never run from the empty state set (some requirement is unreachable) |
| TP004 | warning  | a tool that produces no state (the planner can never choose it) |
| TP005 | warning  | a tool or state with neither description nor affordances (search cannot find it) |
| TP006 | error    | a parameter or return type string that is not a type expression |
| TP007 | error    | with ``import_modules``: a tool's module or function cannot be imported |
| TP100 | error    | the file cannot be read or is not valid YAML/JSON |
| TP101 | error    | a field is missing, unknown or of the wrong type |
| TP102 | error    | a state token declared twice (or differently in two files) |
| TP103 | error    | a tool name used twice within one server |
| TP104 | error    | a tool whose module cannot be resolved (no ``module`` and no ``package``) |
| TP105 | error    | two differently named tools that one module would implement with one function |
| TP106 | error    | a tool names an MCP server its catalog does not declare under ``mcp_servers`` |

TP1xx problems stop a catalog from loading; the linter reports them as findings and still checks
every state and tool that did validate, in every file. Codes never change meaning; new rules get new codes.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import io
import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from registry.catalog import Catalog, CatalogError, CatalogProblem, LoadedCatalogs, combine_catalogs, garbage_collection_paused, import_roots, read_catalog
from registry.names import function_names
from registry.tools import reachable_states
from registry.type_strings import TypeStringError, check_type_string

Severity = Literal["error", "warning"]

RULES: dict[str, tuple[Severity, str]] = {
    "TP001": ("error", "undeclared state"),
    "TP002": ("warning", "state no tool produces"),
    "TP003": ("warning", "tool that can never run"),
    "TP004": ("warning", "tool that produces nothing"),
    "TP005": ("warning", "no description or affordances"),
    "TP006": ("error", "unparseable type string"),
    "TP007": ("error", "module or function cannot be imported"),
    "TP100": ("error", "unreadable catalog"),
    "TP101": ("error", "invalid field"),
    "TP102": ("error", "duplicate state"),
    "TP103": ("error", "duplicate tool name within a server"),
    "TP104": ("error", "tool module cannot be resolved"),
    "TP105": ("error", "two tools share one function"),
    "TP106": ("error", "undeclared MCP server"),
}


@dataclass(frozen=True)
class Finding:
    """One lint finding; ``line``/``column`` are 1-based or ``None``."""

    path: str
    line: int | None
    column: int | None
    code: str
    severity: Severity
    field: str
    message: str

    def __str__(self) -> str:
        where = self.path + (f":{self.line}:{self.column or 1}" if self.line is not None else "")
        field = f" {self.field}:" if self.field else ""
        return f"{where}: {self.code} {self.severity}:{field} {self.message}"

    def to_dict(self) -> dict:
        return asdict(self)


def _finding(catalog: Catalog, location: list, code: str, message: str) -> Finding:
    problem = catalog.problem(location, message, code)
    return Finding(problem.path, problem.line, problem.column, code, RULES[code][0], problem.field, message)


def _undeclared(catalog: Catalog, index: int, declared: set[str]) -> list[Finding]:
    """TP001 for every state token a tool mentions (transition, parameters, return) that no catalog declares."""
    tool = catalog.tools[index]
    findings = []
    for key in ("requires", "produces"):
        for token in sorted(getattr(tool.state_transition, key) - declared):
            location: list = ["tools", index, "state_transition", key]
            item = catalog.locator.item_index(catalog.file_location(location), token)
            findings.append(_finding(catalog, location + ([item] if item is not None else []), "TP001", f"tool {tool.name!r} {key} {token!r}, which no catalog declares; declare it under states or fix the token"))
    carriers = [(["required_parameters", position], parameter.state) for position, parameter in enumerate(tool.required_parameters)]
    carriers += [(["optional_parameters", position], parameter.state) for position, parameter in enumerate(tool.optional_parameters)]
    if tool.return_spec is not None:
        carriers.append((["return_spec"], tool.return_spec.state))
    for location, token in carriers:
        if token is not None and token not in declared:
            findings.append(_finding(catalog, ["tools", index, *location, "state"], "TP001", f"tool {tool.name!r} says a value carries state {token!r}, which no catalog declares; outputs will not be wired to it"))
    return findings


@functools.lru_cache(maxsize=4096)
def _type_string_problem(text: str) -> str | None:
    """Why ``text`` is not a type expression, or ``None``; cached, as a large catalog repeats a few types."""
    try:
        check_type_string(text)
    except TypeStringError as error:
        return str(error)
    return None


def _check_catalog(catalog: Catalog, declared: set[str], producible: set[str] | None, reachable: set[str] | None) -> list[Finding]:
    """Every finding of the TP0xx rules in ``catalog``; the warnings only when ``producible`` and
    ``reachable`` are given (:func:`load_checked` needs only the errors)."""
    warnings = producible is not None and reachable is not None
    findings: list[Finding] = []
    if warnings:
        for index, state in enumerate(catalog.states):
            if state.token not in producible:
                findings.append(_finding(catalog, ["states", index, "token"], "TP002", f"no tool produces state {state.token!r}; it can only be held from the start (--have)"))
            if not state.description and not state.affordances:
                findings.append(_finding(catalog, ["states", index], "TP005", f"state {state.token!r} has neither description nor affordances; skill search cannot find it"))
    for index, tool in enumerate(catalog.tools):
        transition = tool.state_transition
        findings.extend(_undeclared(catalog, index, declared))
        if warnings:
            unreachable = sorted(transition.requires - reachable)
            if unreachable:
                findings.append(_finding(catalog, ["tools", index, "state_transition", "requires"], "TP003", f"tool {tool.name!r} can never run from an empty start: no tool that can run produces {', '.join(unreachable)}"))
            if not transition.produces:
                findings.append(_finding(catalog, ["tools", index, "state_transition"], "TP004", f"tool {tool.name!r} produces no state, so no plan will ever use it; list what it produces under state_transition.produces"))
            if not tool.description and not tool.affordances:
                findings.append(_finding(catalog, ["tools", index], "TP005", f"tool {tool.name!r} has neither description nor affordances; skill search cannot find it"))
        typed = [(["required_parameters", position], parameter.type) for position, parameter in enumerate(tool.required_parameters)]
        typed += [(["optional_parameters", position], parameter.type) for position, parameter in enumerate(tool.optional_parameters)]
        if tool.return_spec is not None:
            typed.append((["return_spec"], tool.return_spec.type))
        for location, text in typed:
            problem = _type_string_problem(text)
            if problem is not None:
                findings.append(_finding(catalog, ["tools", index, *location, "type"], "TP006", problem))
    return findings


@contextmanager
def _importable(catalogs: list[Catalog]) -> Iterator[None]:
    """Put the catalogs' package roots and the current directory on ``sys.path``, as the kernel has them."""
    added = [root for root in [*import_roots(catalogs), os.getcwd()] if root not in sys.path]
    sys.path[:0] = added
    try:
        yield
    finally:
        for root in added:
            sys.path.remove(root)


def _check_import(catalog: Catalog, index: int) -> list[Finding]:
    tool = catalog.tools[index]
    # Modules run their own code on import: keep what they print out of our (possibly JSON) output,
    # and make sys.exit() a finding rather than the end of the linter.
    captured = io.StringIO()
    try:
        with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured):
            module = importlib.import_module(tool.module or "")
    except (Exception, SystemExit) as error:
        return [_finding(catalog, ["tools", index], "TP007", f"tool {tool.name!r}: module {tool.module!r} cannot be imported ({type(error).__name__}: {error})")]
    candidates = function_names(tool.name)
    if not any(callable(getattr(module, candidate, None)) for candidate in candidates):
        expected = " or ".join(repr(candidate) for candidate in candidates)
        return [_finding(catalog, ["tools", index], "TP007", f"tool {tool.name!r}: module {tool.module!r} has no function {expected}")]
    return []


def _as_finding(problem: CatalogProblem) -> Finding:
    return Finding(problem.path, problem.line, problem.column, problem.code, "error", problem.field, problem.message)


@garbage_collection_paused()
def _lint(paths: Iterable[str | Path], import_modules: bool, max_bytes: int | None, warnings: bool = True) -> tuple[list[Finding], LoadedCatalogs | None]:
    """Findings sorted by file and position, and the files that loaded, combined (``None`` when
    none did or they do not combine). ``warnings=False`` skips the warning rules."""
    findings: list[Finding] = []
    catalogs: list[Catalog] = []
    loaded = None
    # Files that failed to load are still checked for what did validate, so fixing one problem
    # does not reveal a second round of findings.
    checked: list[Catalog] = []
    for path in paths:
        try:
            catalogs.append(read_catalog(path, max_bytes=max_bytes))
        except CatalogError as error:
            findings.extend(_as_finding(problem) for problem in error.problems)
            if error.partial is not None:
                checked.append(error.partial)
    if catalogs:
        try:
            loaded = combine_catalogs(catalogs)
        except CatalogError as error:
            findings.extend(_as_finding(problem) for problem in error.problems)
    checked = catalogs + checked
    declared = {state.token for catalog in checked for state in catalog.states}
    producible = reachable = None
    if warnings:
        tools = [tool for catalog in checked for tool in catalog.tools]
        producible = {token for tool in tools for token in tool.state_transition.produces}
        reachable = reachable_states(tools)
    for catalog in checked:
        findings.extend(_check_catalog(catalog, declared, producible, reachable))
    if import_modules:
        with _importable(catalogs):
            for catalog in catalogs:
                for index, tool in enumerate(catalog.tools):
                    if tool.mcp_server is None:  # a tool served over MCP is not imported
                        findings.extend(_check_import(catalog, index))
    findings.sort(key=lambda finding: (finding.path, finding.line or 0, finding.column or 0, finding.code))
    return findings, loaded


def lint_catalogs(paths: Iterable[str | Path], import_modules: bool = False, *, max_bytes: int | None = None) -> list[Finding]:
    """Lint catalog files together (a token declared in one file counts for all).

    Args:
        paths: catalog files.
        import_modules: also import each tool's module and check the function exists (runs their
            import-time code, with the catalogs' package roots and the current directory on the
            import path, as a kernel would have them).
        max_bytes: the largest catalog file read, as in :func:`registry.read_catalog` (a larger one
            is a TP100 finding).

    Returns:
        Findings sorted by file, line and code; empty when the catalogs are clean.
    """
    return _lint(paths, import_modules, max_bytes)[0]


def load_checked(paths: Iterable[str | Path], *, max_bytes: int | None = None) -> LoadedCatalogs:
    """Load catalogs for use: like :func:`registry.load_catalogs`, but lint *errors* (an undeclared
    state, an unparseable type) also refuse the whole set; warnings do not. ``max_bytes`` limits
    the size of each file, as in :func:`registry.read_catalog`.

    Raises:
        CatalogError: listing every error finding. Nothing is registered.
        ValueError: ``max_bytes`` is not a positive integer.
    """
    findings, loaded = _lint(paths, import_modules=False, max_bytes=max_bytes, warnings=False)
    errors = [finding for finding in findings if finding.severity == "error"]
    if errors:
        raise CatalogError([CatalogProblem(finding.path, finding.field, finding.message, finding.line, finding.column, finding.code) for finding in errors])
    assert loaded is not None  # every file loaded and combined, or there would be errors
    return loaded
