"""Catalog lint: stable rule codes for what makes a catalog wrong or weak.

| code  | severity | finding |
|-------|----------|---------|
| TP001 | error    | a tool requires or produces (or a parameter/return carries, a skill lists, or a state refines) a state no catalog declares |
| TP002 | warning  | a declared state that no tool produces and the user does not give (not ``input: true``) |
| TP003 | warning  | a tool that can never run from the input states (some requirement is unreachable) |
| TP004 | warning  | a tool that produces no state (the planner can never choose it) |
| TP005 | warning  | a tool or state with neither description nor affordances (search cannot find it) |
| TP006 | error    | a parameter or return type string that is not a type expression |
| TP007 | error    | with ``import_modules``: a tool's module or function cannot be imported |
| TP008 | error    | a tool's ``return_spec.state`` is not among the states it produces |
| TP009 | warning  | a tool produces a state a later tool takes values of, but returns no value |
| TP010 | error    | with ``import_modules``: a catalog parameter the tool's function does not take |
| TP011 | error    | with ``import_modules``: a required parameter of the function the catalog does not declare |
| TP012 | error    | with ``import_modules``: a name in a type string that does not resolve |
| TP013 | warning  | states in a cycle no tool or held state starts (every producer of one needs another) |
| TP014 | error    | states whose ``refines`` lead back to themselves (a refines b refines a) |
| TP015 | warning  | a parameter with ``role: output`` that carries a ``state`` (a destination is never wired from a step) |
| TP016 | warning  | a parameter's ``default`` written ``yes``/``no``/``on``/``off`` unquoted (YAML 1.1 reads a boolean) for a type that is not ``bool`` |
| TP017 | error    | ``approval: always`` on a tool that runs in the kernel |
| TP018 | warning  | two tools loaded together that are near-duplicates (:mod:`toolpath.registry.near_duplicates`): the same signature and texts that say the same |
| TP019 | warning  | a ``# TODO:`` comment left for the author (``toolpath catalog draft`` writes one for each decision it could not make) |
| TP100 | error    | the file cannot be read or is not valid YAML/JSON |
| TP101 | error    | a field is missing, unknown or of the wrong type |
| TP102 | error    | a state token declared twice (or differently in two files) |
| TP103 | error    | a tool name used twice within one server |
| TP104 | error    | a tool whose module cannot be resolved (no ``module`` and no ``package``) |
| TP105 | error    | two differently named tools that one module would implement with one function |
| TP106 | error    | a tool names an MCP server its catalog does not declare under ``mcp_servers`` |
| TP108 | error    | an overlay names a tool or state no loaded catalog has (or is linted without catalogs) |
| TP109 | error    | an overlay's prerequisite only the tool itself could reach (a cycle) |
| TP110 | error    | an overlay's vectors or adapter file is missing, of the wrong shape or model, changed since written, or older than its phrasings |
| TP111 | error    | with ``embedding_model``: an overlay learned with another embedding model |
| TP112 | error    | a tool's ``http.api`` names an HTTP API its catalog does not declare under ``http_apis`` |

TP1xx problems stop a catalog from loading; the linter reports them as findings and still checks
every state and tool that did validate, in every file. Codes never change meaning; new rules get new codes.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import difflib
import functools
import importlib
import inspect
import io
import os
import pkgutil
import re
import sys
import typing
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from toolpath.registry.catalog import Catalog, LoadedCatalogs, combine_catalogs, forget_texts, read_source
from toolpath.registry.catalog_documents import garbage_collection_paused
from toolpath.registry.catalog_packages import SkippedCatalog, import_roots, without_missing_modules
from toolpath.registry.catalog_problems import CatalogError, CatalogProblem, boolean_word_advice, did_you_mean
from toolpath.registry.names import function_names
from toolpath.registry.near_duplicates import near_duplicates
from toolpath.registry.tools import ToolDefinition, reachable_states
from toolpath.registry.type_strings import TypeStringError, check_type_string, type_name_suggestion

if typing.TYPE_CHECKING:
    from toolpath.registry.overlays import Overlay

Severity = Literal["error", "warning"]

RULES: dict[str, tuple[Severity, str]] = {
    "TP001": ("error", "undeclared state"),
    "TP002": ("warning", "state no tool produces"),
    "TP003": ("warning", "tool that can never run"),
    "TP004": ("warning", "tool that produces nothing"),
    "TP005": ("warning", "no description or affordances"),
    "TP006": ("error", "unparseable type string"),
    "TP007": ("error", "module or function cannot be imported"),
    "TP008": ("error", "returned state not produced"),
    "TP009": ("warning", "produced state without a returned value"),
    "TP010": ("error", "parameter the function does not take"),
    "TP011": ("error", "function parameter the catalog does not declare"),
    "TP012": ("error", "type name that does not resolve"),
    "TP013": ("warning", "cycle of states nothing starts"),
    "TP014": ("error", "refinement cycle"),
    "TP015": ("warning", "output parameter that carries a state"),
    "TP016": ("warning", "YAML 1.1 boolean word as a default"),
    "TP017": ("error", "approval: always on a tool that runs in the kernel"),
    "TP018": ("warning", "near-duplicate tools"),
    "TP019": ("warning", "decision left for the author"),
    "TP100": ("error", "unreadable catalog"),
    "TP101": ("error", "invalid field"),
    "TP102": ("error", "duplicate state"),
    "TP103": ("error", "duplicate tool name within a server"),
    "TP104": ("error", "tool module cannot be resolved"),
    "TP105": ("error", "two tools share one function"),
    "TP106": ("error", "undeclared MCP server"),
    "TP108": ("error", "overlay names what no catalog has"),
    "TP109": ("error", "overlay prerequisite makes a cycle"),
    "TP110": ("error", "overlay vectors do not match"),
    "TP111": ("error", "overlay learned with another embedding model"),
    "TP112": ("error", "undeclared HTTP API"),
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


def _undeclared(catalog: Catalog, index: int, declared: set[str], dropped: frozenset[str]) -> list[Finding]:
    """TP001 for every state token a tool mentions (transition, parameters, return) that no catalog
    declares (a state left out for a problem of its own is not reported again)."""
    tool = catalog.tools[index]
    findings = []
    for key in ("requires", "produces"):
        for token in sorted(getattr(tool.state_transition, key) - declared - dropped):
            location: list = ["tools", index, "state_transition", key]
            item = catalog.locator.item_index(catalog.file_location(location), token)
            findings.append(
                _finding(
                    catalog,
                    location + ([item] if item is not None else []),
                    "TP001",
                    f"tool {tool.name!r} {key} {token!r}, which no catalog declares;{did_you_mean(token, declared)} declare it under states or fix the token",
                )
            )
    carriers = [(["required_parameters", position], parameter.state) for position, parameter in enumerate(tool.required_parameters)]
    carriers += [(["optional_parameters", position], parameter.state) for position, parameter in enumerate(tool.optional_parameters)]
    if tool.return_spec is not None:
        carriers.append((["return_spec"], tool.return_spec.state))
    for location, token in carriers:
        if token is not None and token not in declared and token not in dropped:
            findings.append(
                _finding(
                    catalog,
                    ["tools", index, *location, "state"],
                    "TP001",
                    f"tool {tool.name!r} says a value carries state {token!r}, which no catalog declares;{did_you_mean(token, declared)} outputs will not be wired to it",
                )
            )
    return findings


@functools.lru_cache(maxsize=4096)
def _type_string_problem(text: str) -> str | None:
    """Why ``text`` is not a type expression, or ``None``; cached, as a large catalog repeats a few types."""
    try:
        check_type_string(text)
    except TypeStringError as error:
        return str(error)
    return None


@dataclass(frozen=True)
class _Facts:
    """What the rules of one catalog need to know of all of them."""

    declared: set[str]
    #: ``{state: the state it refines}`` over every catalog.
    refines: dict[str, str]
    #: Tokens that items left out for a problem of their own declare or produce.
    dropped_states: frozenset[str]
    dropped_produces: frozenset[str]
    #: For the warnings (``None`` when only errors are wanted): states some tool produces or the
    #: user gives (input states), states reachable from the input states, each state of a cycle nothing starts with its cycle, and the
    #: states a tool takes values of (a required parameter that carries the state or no state).
    producible: set[str] | None = None
    reachable: set[str] | None = None
    cycles: dict[str, tuple[str, ...]] | None = None
    taken: set[str] | None = None


def _facts(checked: list[Catalog], warnings: bool) -> _Facts:
    declared = {state.token for catalog in checked for state in catalog.states}
    refines = {state.token: state.refines for catalog in checked for state in catalog.states if state.refines}
    dropped_states = frozenset().union(*(catalog.dropped_states for catalog in checked))
    dropped_produces = frozenset().union(*(catalog.dropped_produces for catalog in checked))
    if not warnings:
        return _Facts(declared, refines, dropped_states, dropped_produces)
    tools = [tool for catalog in checked for tool in catalog.tools]
    given = {state.token for catalog in checked for state in catalog.states if state.input}  # the user holds these
    producible = {token for tool in tools for token in tool.state_transition.produces} | given
    reachable = reachable_states(tools, given)
    # A cycle nothing starts: unreachable states that depend on each other through their producers.
    edges = [(needed, made) for tool in tools for needed in tool.state_transition.requires - reachable for made in tool.state_transition.produces - reachable]
    cycles: dict[str, tuple[str, ...]] = {}
    if edges:  # networkx loads only for a catalog with unreachable states (0.2 s of every command)
        import networkx

        dependencies = networkx.DiGraph(edges)
        for component in networkx.strongly_connected_components(dependencies):
            member = next(iter(component))
            if len(component) > 1 or dependencies.has_edge(member, member):
                cycle = tuple(sorted(component))
                cycles.update(dict.fromkeys(cycle, cycle))
    taken = {
        token for tool in tools for token in tool.state_transition.requires if any(parameter.state in (token, None) for parameter in tool.required_parameters)
    }
    return _Facts(declared, refines, dropped_states, dropped_produces, producible, reachable, cycles, taken)


def _check_catalog(catalog: Catalog, facts: _Facts) -> list[Finding]:
    """Every finding of the TP0xx rules in ``catalog``; the warnings only when ``facts`` has them
    (:func:`load_checked` needs only the errors)."""
    warnings = facts.producible is not None
    findings: list[Finding] = []
    if warnings:
        assert facts.producible is not None and facts.reachable is not None and facts.cycles is not None and facts.taken is not None
        reported_cycles: set[tuple[str, ...]] = set()
        for index, state in enumerate(catalog.states):
            if state.token not in facts.producible and state.token not in facts.dropped_produces:
                findings.append(
                    _finding(
                        catalog,
                        ["states", index, "token"],
                        "TP002",
                        f"no tool produces state {state.token!r}; it can only be held from the start (given as held when planning); if the user gives it, mark it `input: true`",
                    )
                )
            cycle = facts.cycles.get(state.token)
            if cycle is not None and cycle not in reported_cycles:
                reported_cycles.add(cycle)
                findings.append(
                    _finding(
                        catalog,
                        ["states", index, "token"],
                        "TP013",
                        f"states {', '.join(cycle)} form a cycle: every tool producing one needs another first, and no tool that can run or held state starts it; let a tool produce one of them from states that can be reached",
                    )
                )
            if not state.description and not state.affordances:
                findings.append(
                    _finding(catalog, ["states", index], "TP005", f"state {state.token!r} has neither description nor affordances; skill search cannot find it")
                )
    for index, state in enumerate(catalog.states):
        findings.extend(_refinement_findings(catalog, index, state.refines, facts))
    for index, skill in enumerate(catalog.skills):
        for position, token in enumerate(skill.states):
            if token not in facts.declared and token not in facts.dropped_states:
                findings.append(
                    _finding(
                        catalog,
                        ["skills", index, "states", position],
                        "TP001",
                        f"skill {skill.name!r} lists state {token!r}, which no catalog declares;{did_you_mean(token, facts.declared)} declare it under states or fix the token",
                    )
                )
    for index, tool in enumerate(catalog.tools):
        transition = tool.state_transition
        findings.extend(_undeclared(catalog, index, facts.declared, facts.dropped_states))
        if tool.return_spec is not None and tool.return_spec.state is not None and tool.return_spec.state not in transition.produces:
            findings.append(
                _finding(
                    catalog,
                    ["tools", index, "return_spec", "state"],
                    "TP008",
                    f"tool {tool.name!r} returns a value of state {tool.return_spec.state!r} but does not produce that state; add it to state_transition.produces or fix return_spec.state",
                )
            )
        if warnings:
            assert facts.reachable is not None and facts.cycles is not None and facts.taken is not None
            # An undeclared requirement is TP001 already, and one a dropped tool produces is that tool's problem.
            unreachable = sorted(transition.requires - facts.reachable - (transition.requires - facts.declared) - facts.dropped_produces)
            if unreachable:
                in_cycles = [token for token in unreachable if token in facts.cycles]
                why = f" ({', '.join(in_cycles)} in a cycle nothing starts, TP013)" if in_cycles else ""
                findings.append(
                    _finding(
                        catalog,
                        ["tools", index, "state_transition", "requires"],
                        "TP003",
                        f"tool {tool.name!r} can never run from the input states: no tool that can run produces {', '.join(unreachable)}{why}; if the user gives a value for it, mark that state `input: true`",
                    )
                )
            if not transition.produces:
                findings.append(
                    _finding(
                        catalog,
                        ["tools", index, "state_transition"],
                        "TP004",
                        f"tool {tool.name!r} produces no state, so no plan will ever use it; list what it produces under state_transition.produces",
                    )
                )
            elif tool.return_spec is None and (transition.produces & facts.taken) - set(tool.outputs):
                wanted = ", ".join(sorted((transition.produces & facts.taken) - set(tool.outputs)))
                findings.append(
                    _finding(
                        catalog,
                        ["tools", index],
                        "TP009",
                        f"tool {tool.name!r} produces {wanted}, which later tools take values of, but declares no return_spec: its result cannot be passed on, so a plan asks the user for it; add return_spec with the state its value carries (or, for a value inside the result, an `outputs` path)",
                    )
                )
            for key in ("required_parameters", "optional_parameters"):
                for position, parameter in enumerate(getattr(tool, key)):
                    if parameter.role == "output" and parameter.state is not None:
                        findings.append(
                            _finding(
                                catalog,
                                ["tools", index, key, position, "state"],
                                "TP015",
                                f"parameter {parameter.name!r} of tool {tool.name!r} is an output (role: output) and carries state {parameter.state!r}: a destination never takes an earlier step's value or a held artifact (it could be a file the plan reads), so the state is ignored; remove it",
                            )
                        )
            if not tool.description and not tool.affordances:
                findings.append(
                    _finding(catalog, ["tools", index], "TP005", f"tool {tool.name!r} has neither description nor affordances; skill search cannot find it")
                )
        if tool.approval == "always" and tool.binding == "kernel":
            findings.append(
                _finding(
                    catalog,
                    ["tools", index, "approval"],
                    "TP017",
                    f"tool {tool.name!r} asks for approval on every call but runs in the kernel, where the cell's own code can import its module and call it without asking; bind it on the host (`binding: host`) so that no call runs without a yes",
                )
            )
        findings.extend(_boolean_word_defaults(catalog, index))
        for location, text in _typed(tool):
            problem = _type_string_problem(text)
            if problem is not None:
                findings.append(_finding(catalog, ["tools", index, *location, "type"], "TP006", problem))
    return findings


def _near_duplicate_findings(checked: list[Catalog]) -> list[Finding]:
    """TP018 for each pair of near-duplicate tools among every catalog checked together
    (:func:`toolpath.registry.near_duplicates.near_duplicates`), at the later tool of the pair: whichever
    of two catalogs a tool comes from, a task loading both faces the same coin toss."""
    places = [(catalog, index) for catalog in checked for index in range(len(catalog.tools))]
    where = {id(catalog.tools[index]): (catalog, index) for catalog, index in places}
    findings = []
    for pair in near_duplicates([catalog.tools[index] for catalog, index in places]):
        catalog, index = where[id(pair.second)]
        first_catalog, _ = where[id(pair.first)]
        first = repr(pair.first.name) if first_catalog is catalog else f"{pair.first.name!r} (in {first_catalog.path})"
        findings.append(
            _finding(
                catalog,
                ["tools", index],
                "TP018",
                f"tools {first} and {pair.second.name!r} look like near-duplicates: the same requires, produces, parameters, return and effects, "
                f"and texts that say the same (the words of one are all among the other's; {pair.similarity:.2f} alike), so search cannot tell "
                "which one a task means and goal choice between them is a coin toss; merge them into one tool, or make their descriptions say how they differ",
            )
        )
    return findings


_TODO = re.compile(r"^\s*#\s*TODO\b:?\s*(.*?)\s*$")


def _decisions_left(catalog: Catalog) -> list[Finding]:
    """TP019 for each ``# TODO:`` comment line of the catalog's file: a draft's open decisions stay
    visible until the author settles them and deletes the comment (a JSON file has no comments)."""
    try:
        text = Path(catalog.path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []  # it was read a moment ago; a file gone since has nothing left to say
    return [
        Finding(str(catalog.path), number, 1, "TP019", RULES["TP019"][0], "", f"left for the author: {found.group(1) or '(no text)'}")
        for number, line in enumerate(text.splitlines(), start=1)
        if (found := _TODO.match(line))
    ]


def _boolean_word_defaults(catalog: Catalog, index: int) -> list[Finding]:
    """TP016 for each parameter default written ``yes``/``no``/``on``/``off`` unquoted, which YAML
    1.1 reads as a boolean, when the parameter's type does not name ``bool`` (the text was meant)."""
    tool = catalog.tools[index]
    findings = []
    for key in ("required_parameters", "optional_parameters"):
        for position, parameter in enumerate(getattr(tool, key)):
            if not isinstance(parameter.default, bool) or _type_string_problem(parameter.type) is not None or "bool" in _type_names(parameter.type):
                continue
            location = ["tools", index, key, position, "default"]
            for text, value in catalog.locator.boolean_words_at(catalog.file_location(location)):
                findings.append(
                    _finding(
                        catalog,
                        location,
                        "TP016",
                        f"parameter {parameter.name!r} of tool {tool.name!r} has type {parameter.type!r}, but its default {boolean_word_advice(text, value)}",
                    )
                )
    return findings


def _refinement_findings(catalog: Catalog, index: int, general: str | None, facts: _Facts) -> list[Finding]:
    """TP001 for a state refining an undeclared one; TP014 when following ``refines`` from it comes
    back to it (reported on each state of the cycle)."""
    if general is None:
        return []
    token = catalog.states[index].token
    if general not in facts.declared and general not in facts.dropped_states:
        return [
            _finding(
                catalog,
                ["states", index, "refines"],
                "TP001",
                f"state {token!r} refines {general!r}, which no catalog declares;{did_you_mean(general, facts.declared)} declare it under states or fix the token",
            )
        ]
    seen = [token]
    while general is not None and general not in seen:
        seen.append(general)
        general = facts.refines.get(general)
    if general == token:
        return [
            _finding(
                catalog,
                ["states", index, "refines"],
                "TP014",
                f"state {token!r} refines itself through {' -> '.join(seen[1:])}; a state can only refine a more general one, so break the cycle",
            )
        ]
    return []


def _typed(tool: ToolDefinition) -> list[tuple[list, str]]:
    """``(location within the tool, type string)`` of each parameter and the return."""
    typed = [(["required_parameters", position], parameter.type) for position, parameter in enumerate(tool.required_parameters)]
    typed += [(["optional_parameters", position], parameter.type) for position, parameter in enumerate(tool.optional_parameters)]
    if tool.return_spec is not None:
        typed.append((["return_spec"], tool.return_spec.type))
    return typed


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
        hint = _module_suggestion(error.name) if isinstance(error, ModuleNotFoundError) and error.name and (tool.module or "").startswith(error.name) else ""
        return [
            _finding(
                catalog, ["tools", index], "TP007", f"tool {tool.name!r}: module {tool.module!r} cannot be imported ({type(error).__name__}: {error}){hint}"
            )
        ]
    candidates = function_names(tool.name)
    function = next((getattr(module, candidate) for candidate in candidates if callable(getattr(module, candidate, None))), None)
    if function is None:
        expected = " or ".join(repr(candidate) for candidate in candidates)
        functions = [name for name, value in vars(module).items() if inspect.isfunction(value) and not name.startswith("_")]
        message = f"tool {tool.name!r}: module {tool.module!r} has no function {expected}"
        hint = did_you_mean(candidates[-1], functions)
        if hint:
            message += f";{hint} rename the tool to match its function"
        return [_finding(catalog, ["tools", index], "TP007", message)]
    return [*_check_signature(catalog, index, function), *_check_type_names(catalog, index)]


def _check_signature(catalog: Catalog, index: int, function: Callable) -> list[Finding]:
    """TP010 for catalog parameters the function does not take, TP011 for the function's required
    parameters the catalog does not declare."""
    tool = catalog.tools[index]
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):  # a builtin or extension function may not tell
        return []
    keywords = {
        name: parameter
        for name, parameter in signature.parameters.items()
        if parameter.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    }
    takes_any = any(parameter.kind is inspect.Parameter.VAR_KEYWORD for parameter in signature.parameters.values())
    shown = f"{function.__name__}{signature}"
    findings = []
    for kind in ("required_parameters", "optional_parameters"):
        for position, parameter in enumerate(getattr(tool, kind)):
            if parameter.python_name not in keywords and not takes_any:
                findings.append(
                    _finding(
                        catalog,
                        ["tools", index, kind, position, "name"],
                        "TP010",
                        f"tool {tool.name!r}: {shown} has no parameter {parameter.python_name!r};{did_you_mean(parameter.python_name, keywords)} rename the catalog's parameter to match the function (a call would fail with a TypeError)",
                    )
                )
    declared = {parameter.python_name for parameter in tool.parameters}
    for name, parameter in keywords.items():
        if parameter.default is inspect.Parameter.empty and name not in declared:
            findings.append(
                _finding(
                    catalog,
                    ["tools", index],
                    "TP011",
                    f"tool {tool.name!r}: {shown} requires {name!r}, which the catalog does not declare; add it to required_parameters (a planned call would leave it out)",
                )
            )
    return findings


def _check_type_names(catalog: Catalog, index: int) -> list[Finding]:
    """TP012 for each name in the tool's type strings that is not a builtin, a :mod:`typing` name or
    an importable dotted name (``rdkit.Chem.Mol``)."""
    findings = []
    for location, text in _typed(catalog.tools[index]):
        if _type_string_problem(text) is not None:
            continue  # TP006 says what is wrong with it
        for name in _type_names(text):
            if not _resolves(name):
                suggestion = _type_suggestion(name)
                hint = f" did you mean {suggestion!r}?" if suggestion else ""
                findings.append(
                    _finding(
                        catalog,
                        ["tools", index, *location, "type"],
                        "TP012",
                        f"type {text!r}: {name!r} is not a builtin, a typing name or an importable dotted name;{hint} fix the type or install what provides it",
                    )
                )
    return findings


def _type_suggestion(name: str) -> str | None:
    """The type ``name`` (which does not resolve) was likely meant as: for a plain name, a type
    name (:func:`~toolpath.registry.type_strings.type_name_suggestion`); for a dotted one whose
    module imports, the closest name that module (or the class reached) has."""
    if "." not in name:
        return type_name_suggestion(name)
    parts = name.split(".")
    for split in range(len(parts) - 1, 0, -1):
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                value = importlib.import_module(".".join(parts[:split]))
        except (Exception, SystemExit):  # not a module: try a shorter prefix
            continue
        found = parts[:split]
        for attribute in parts[split:]:
            if not hasattr(value, attribute):
                close = difflib.get_close_matches(attribute, [known for known in dir(value) if not known.startswith("_")], n=1)
                return ".".join([*found, close[0]]) if close else None
            value = getattr(value, attribute)
            found.append(attribute)
        return None
    return None


def _module_suggestion(missing: str) -> str:
    """`` did you mean 'pkg.tools'?`` for a missing module ``pkg.tool`` whose package imports and
    has a module of a close name; else ``""``."""
    parent, _, leaf = missing.rpartition(".")
    if not parent:
        return ""
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            package = importlib.import_module(parent)
    except (Exception, SystemExit):
        return ""
    siblings = [module.name for module in pkgutil.iter_modules(getattr(package, "__path__", []))]
    close = difflib.get_close_matches(leaf, siblings, n=1)
    return f"; did you mean {parent + '.' + close[0]!r}?" if close else ""


def _type_names(text: str) -> list[str]:
    """The dotted names a type string uses, outside ``Literal[...]``'s values."""
    names: list[str] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, (ast.Name, ast.Attribute)):
            names.append(ast.unparse(node))
        elif isinstance(node, ast.Subscript):
            visit(node.value)
            if ast.unparse(node.value).split(".")[-1] != "Literal":
                visit(node.slice)
        else:
            for child in ast.iter_child_nodes(node):
                visit(child)

    visit(ast.parse(text.strip(), mode="eval").body)
    return list(dict.fromkeys(names))


@functools.lru_cache(maxsize=1024)
def _resolves(name: str) -> bool:
    if "." not in name:
        return hasattr(builtins, name) or hasattr(typing, name)
    parts = name.split(".")
    for split in range(len(parts) - 1, 0, -1):
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                value = importlib.import_module(".".join(parts[:split]))
        except (Exception, SystemExit):  # not a module (or one that fails to import): try a shorter prefix
            continue
        try:
            for attribute in parts[split:]:
                value = getattr(value, attribute)
        except AttributeError:
            return False
        return True
    return False


def _overlay_findings(overlays: list[Overlay], with_catalogs: bool, embedding_model: str | None) -> list[Finding]:
    """TP108 for overlays linted without any catalog (their names cannot be checked), TP111 for
    overlays learned with another embedding model than ``embedding_model``."""
    findings = []
    for overlay in overlays:
        if not with_catalogs:
            message = "an overlay refines catalogs: lint it together with them (toolpath validate CATALOG... OVERLAY) so that its names can be checked"
            findings.append(_as_finding(overlay.problem(["overlay"], message, "TP108")))
        if embedding_model is not None and overlay.model != embedding_model:
            message = f"learned with embedding model {overlay.model!r}, but search uses {embedding_model!r}: its vectors cannot be compared; re-run `toolpath learn` with the model in use"
            findings.append(_as_finding(overlay.problem(["overlay", "embedding_model"], message, "TP111")))
    return findings


def _as_finding(problem: CatalogProblem) -> Finding:
    return Finding(problem.path, problem.line, problem.column, problem.code, "error", problem.field, problem.message)


@garbage_collection_paused()
def _lint(
    paths: Iterable[str | Path],
    import_modules: bool,
    max_bytes: int | None,
    warnings: bool = True,
    skip_missing_modules: bool = False,
    embedding_model: str | None = None,
) -> tuple[list[Finding], LoadedCatalogs | None]:
    """Findings sorted by file and position, and the files that loaded, combined (``None`` when
    none did or they do not combine). ``warnings=False`` skips the warning rules;
    ``skip_missing_modules`` leaves out the catalogs whose required modules are missing
    (:func:`toolpath.registry.catalog_packages.without_missing_modules`); ``embedding_model``, when
    given, is the model whose vectors overlays must hold (TP111)."""
    findings: list[Finding] = []
    catalogs: list[Catalog] = []
    overlays: list[Overlay] = []
    loaded = None
    # Files that failed to load are still checked for what did validate, so fixing one problem
    # does not reveal a second round of findings.
    checked: list[Catalog] = []
    for path in paths:
        try:
            source = read_source(path, max_bytes=max_bytes)
        except CatalogError as error:
            findings.extend(_as_finding(problem) for problem in error.problems)
            if error.partial is not None:
                checked.append(error.partial)
            continue
        (catalogs if isinstance(source, Catalog) else overlays).append(source)
    findings.extend(_overlay_findings(overlays, bool(catalogs or checked), embedding_model))
    skipped: list[SkippedCatalog] = []
    if skip_missing_modules:
        try:
            catalogs, skipped = without_missing_modules(catalogs)
        except CatalogError as error:
            findings.extend(_as_finding(problem) for problem in error.problems)
            catalogs = []
    if catalogs:
        try:
            loaded = combine_catalogs(catalogs, overlays, skipped)
        except CatalogError as error:
            findings.extend(_as_finding(problem) for problem in error.problems)
    checked = catalogs + checked
    facts = _facts(checked, warnings)
    for catalog in checked:
        findings.extend(_check_catalog(catalog, facts))
    if warnings:
        findings.extend(_near_duplicate_findings(checked))
        for catalog in checked:
            findings.extend(_decisions_left(catalog))
    if import_modules:
        with _importable(catalogs):
            for catalog in catalogs:
                for index, tool in enumerate(catalog.tools):
                    if tool.mcp_server is None and tool.http is None:  # a tool served over MCP or HTTP is not imported
                        findings.extend(_check_import(catalog, index))
    findings.sort(key=lambda finding: (finding.path, finding.line or 0, finding.column or 0, finding.code))
    return findings, loaded


def lint_catalogs(
    paths: Iterable[str | Path], import_modules: bool = False, *, max_bytes: int | None = None, embedding_model: str | None = None
) -> list[Finding]:
    """Lint catalog files together (a token declared in one file counts for all).

    Args:
        paths: catalog files, and overlays (:mod:`toolpath.registry.overlays`) checked against them.
        import_modules: also import each tool's module and check the function exists (runs their
            import-time code, with the catalogs' package roots and the current directory on the
            import path, as a kernel would have them).
        max_bytes: the largest catalog file read, as in :func:`toolpath.registry.read_catalog` (a larger one
            is a TP100 finding).
        embedding_model: the id of the embedding model search uses (``embedder.model_id``); an
            overlay whose vectors come from another is a TP111 finding. ``None``: not checked.

    Returns:
        Findings sorted by file, line and code; empty when the catalogs are clean.
    """
    return _lint(paths, import_modules, max_bytes, embedding_model=embedding_model)[0]


def load_checked(paths: Iterable[str | Path], *, max_bytes: int | None = None) -> LoadedCatalogs:
    """Load catalogs for use: like :func:`toolpath.registry.load_catalogs` (catalogs whose required
    modules are missing are skipped, with a warning), but lint *errors* (an undeclared state, an
    unparseable type) also refuse the whole set; warnings do not. ``max_bytes`` limits
    the size of each file, as in :func:`toolpath.registry.read_catalog`. The catalogs' texts are
    not kept (:func:`toolpath.registry.catalog.forget_texts`). Large catalogs are read from their
    snapshot when one is stored, and stored for later loads when not
    (:mod:`toolpath.registry.catalog_snapshot`): their tools' definitions are then read as used.

    Raises:
        CatalogError: listing every error finding. Nothing is registered.
        ValueError: ``max_bytes`` is not a positive integer.
    """
    from toolpath.registry.catalog_snapshot import load_through_snapshot

    paths = [Path(path) for path in paths]

    def load() -> LoadedCatalogs:
        findings, loaded = _lint(paths, import_modules=False, max_bytes=max_bytes, warnings=False, skip_missing_modules=True)
        errors = [finding for finding in findings if finding.severity == "error"]
        if errors:
            raise CatalogError([CatalogProblem(finding.path, finding.field, finding.message, finding.line, finding.column, finding.code) for finding in errors])
        assert loaded is not None  # every file loaded and combined, or there would be errors
        forget_texts(loaded)
        return loaded

    return load_through_snapshot(paths, max_bytes, load)
