"""The planned cell: Python code that binds the handles of a plan's tools and calls them in order.

Data flow: a parameter takes the return value of the latest earlier step whose return names the same
``state``; failing that, the held artifact of that state (a kernel variable of the session carrying
it); failing that, the return of an earlier step with the same name; failing that, the user input of
the same name. A required parameter with none of these is read from the kernel variable of its name
when the session has one; otherwise it is *unbound*: the cell still refers to it by name (so it
compiles, and runs in a session where the name is defined later) and the instructions list it.
Optional parameters are passed only when an input of that name is given.
"""

from __future__ import annotations

import ast
import keyword
import math
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kernel.bindings import BINDER_FUNCTION, Bindings
from planner.planning import Plan, qualified_name
from registry import ToolDefinition, ToolRegistry
from registry.names import parameter_name, python_identifier



class InputError(ValueError):
    """A user input that cannot become a variable of the cell (bad name, or a value with no literal form)."""


@dataclass(frozen=True)
class UnboundParameter:
    """A required parameter that nothing in the plan or the inputs supplies; the cell reads ``variable``."""

    step: int
    tool: str
    parameter: str
    type: str
    description: str
    variable: str

    def to_dict(self) -> dict:
        return {"step": self.step, "tool": self.tool, "parameter": self.parameter, "type": self.type, "description": self.description, "variable": self.variable}


@dataclass(frozen=True)
class PlannedCell:
    """A rendered cell.

    Attributes:
        code: the whole cell (bindings, inputs, calls, final expression); always valid Python with
            top-level ``await``.
        instructions: text for a model: the bound handles with signatures and states, the states
            the plan reaches, and the unbound parameters.
        handles: ``{handle name: [attribute names]}`` the cell calls through (bound by the cell, or
            by the session that rendered it).
        unbound: required parameters left unbound.
        unused_inputs: inputs that no step takes.
        result_variables: the variables holding the goal states' artifacts, shown at the end.
        catalog_instruction_chars: length of the tool descriptions had every tool of the registry
            been bound instead of the path's (``None`` when rendered without a registry); compare
            with ``len(instructions)`` to see what binding only the path saves.
        step_targets: what each step calls (``handle.attribute``), in plan order; a cell's
            :attr:`kernel.CellResult.tool_calls` says which of them completed.
        step_variables: the variable each step's return is assigned to, in plan order.
        used_artifacts: ``{variable: state}`` of held artifacts the cell reads.
    """

    code: str
    instructions: str
    handles: dict[str, list[str]]
    unbound: tuple[UnboundParameter, ...]
    unused_inputs: tuple[str, ...]
    result_variables: tuple[str, ...]
    catalog_instruction_chars: int | None = None
    step_targets: tuple[str, ...] = ()
    step_variables: tuple[str, ...] = ()
    used_artifacts: dict[str, str] = field(default_factory=dict)

    @property
    def saved_chars(self) -> int | None:
        """Characters the instructions save against describing the whole registry (``None`` without one)."""
        return None if self.catalog_instruction_chars is None else self.catalog_instruction_chars - len(self.instructions)


def check_input_names(inputs: Mapping[str, Any]) -> None:
    """Raise :class:`InputError` for an input name that cannot be a Python variable."""
    for name in inputs:
        if not isinstance(name, str):
            raise InputError(f"input names must be strings, got {name!r}")
        if keyword.iskeyword(name) or keyword.issoftkeyword(name):
            raise InputError(f"input name {name!r} is a Python keyword, so it cannot be a variable; a tool parameter named {name!r} is passed as {parameter_name(name)!r}")
        if not name.isidentifier():
            raise InputError(f"input name {name!r} is not a valid Python name; inputs are passed to tools by parameter name (letters, digits, underscores; not starting with a digit)")


def is_variable_name(name: object) -> bool:
    """Whether ``name`` can be a kernel variable the session tracks: an identifier, not a keyword,
    not starting with ``_`` (IPython's own names)."""
    return isinstance(name, str) and name.isidentifier() and not keyword.iskeyword(name) and not keyword.issoftkeyword(name) and not name.startswith("_")


_LITERAL_TYPES = (str, int, bool, type(None))


def _python_literal(value: Any) -> str:
    """Python source that evaluates to ``value``: JSON-like values only (dict, list, str, finite numbers, bool, None).

    Raises:
        InputError: for other types, NaN or infinite floats, or values nested too deeply.
    """
    stack, seen = [value], 0
    while stack:
        item = stack.pop()
        seen += 1
        if isinstance(item, float):
            if not math.isfinite(item):
                raise InputError(f"input value {item!r} is not a finite number; Python source has no literal for it")
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif not isinstance(item, _LITERAL_TYPES):
            raise InputError(f"input value of type {type(item).__name__} has no literal form; pass JSON values (strings, numbers, lists, objects)")
    try:
        return repr(value)
    except RecursionError:
        raise InputError("input value is nested too deeply to write into a cell") from None


def _unique_name(base: str, taken: set[str]) -> str:
    name = python_identifier(base)
    candidate, counter = name, 2
    while candidate in taken:
        candidate = f"{name}_{counter}"
        counter += 1
    taken.add(candidate)
    return candidate


def render_cell(
    plan: Plan,
    inputs: Mapping[str, Any] | None = None,
    task: str | None = None,
    registry: ToolRegistry | None = None,
    *,
    bindings: Bindings | None = None,
    artifacts: Mapping[str, str] | None = None,
    variables: Collection[str] = (),
    also_show: Iterable[str] = (),
) -> PlannedCell:
    """Render ``plan`` as a cell that runs in a toolpath kernel session.

    Parameters:
        plan: the plan to render.
        inputs: user inputs by parameter name (JSON-like values). Each becomes a variable named
            like the input, unless that name is reserved (``print`` → ``print_``) or taken.
        task: the task text, quoted in the cell's header comment.
        registry: the registry the plan's tools come from; with it, a tool's attribute name is the
            same in every cell (names are de-duplicated over the whole server, not just the plan).
        bindings: handles a session has already bound in its kernel: the cell calls tools through
            them and binds nothing itself.
        artifacts: ``{state: variable}`` for held states whose artifact a kernel variable carries;
            steps needing such a state read that variable.
        variables: names already defined in the kernel: new variables never take them, and a
            required parameter nothing else supplies is read from the variable of its name.
        also_show: kernel variables the final expression shows too (the artifacts of parts of the
            task that were already held), after the plan's own results.

    Returns:
        A :class:`PlannedCell`.

    Raises:
        InputError: an input name that is not a Python name, a value without a literal form, or an
            artifact or variable name that is not a plain identifier.
        ValueError: ``bindings`` given without a handle for one of the plan's tools.
    """
    inputs = dict(inputs or {})
    artifacts = dict(artifacts or {})
    check_input_names(inputs)
    also_show = list(also_show)
    bad = next((variable for variable in [*artifacts.values(), *variables, *also_show] if not is_variable_name(variable)), None)
    if bad is not None:
        raise InputError(f"{bad!r} cannot be a kernel variable of the cell (not an identifier, a keyword, or starting with '_')")
    if bindings is None:
        # Handles must not take a name the cell uses for an input or a parameter (`text.load(text=text)`).
        parameter_names = {parameter.python_name for step in plan.steps for parameter in step.tool.parameters}
        bindings = Bindings.of([step.tool for step in plan.steps], taken=parameter_names | set(inputs) | set(variables), universe=registry or ())
        binding_code = bindings.code().rstrip("\n")
    else:
        unbound_tools = [step.tool.name for step in plan.steps if step.tool.id not in bindings.targets]
        if unbound_tools:
            raise ValueError(f"the session has no handle for {', '.join(unbound_tools)}; bind their domains first")
        binding_code = "# Handles are bound by the session."
    handles = {name: list(attributes) for name, attributes in bindings.handles.items()}
    for name, (_, attributes) in bindings.host_handles.items():
        handles.setdefault(name, []).extend(attribute for attribute in attributes if attribute not in handles[name])

    taken = set(handles) | {BINDER_FUNCTION} | set(variables) | set(artifacts.values())
    # A variable must not shadow a builtin or IPython's names in the persistent kernel.
    input_variables = {name: _unique_name(name, taken) for name in inputs}
    unbound_variables: dict[str, str] = {}
    used_inputs: set[str] = set()
    used_artifacts: dict[str, str] = {}
    unbound: list[UnboundParameter] = []
    by_state: dict[str, str] = {}
    by_name: dict[str, str] = {}
    call_lines: list[str] = []
    step_variables: list[str] = []
    for index, step in enumerate(plan.steps):
        tool = step.tool
        arguments = []
        for parameter in tool.parameters:
            required = parameter in tool.required_parameters
            name = parameter.python_name  # inputs, variables and keywords are Python names
            source = by_state.get(parameter.state) if parameter.state else None
            if source is None and parameter.state and parameter.state in artifacts:
                source = artifacts[parameter.state]
                used_artifacts[source] = parameter.state
            source = source or by_name.get(name)
            if source is None and name in inputs:
                source = input_variables[name]
                used_inputs.add(name)
            if source is None and required and name in variables:
                source = name
            if source is None and required:
                if name not in unbound_variables:
                    unbound_variables[name] = _unique_name(name, taken)
                source = unbound_variables[name]
                unbound.append(UnboundParameter(index, tool.name, name, parameter.type, parameter.description, source))
            if source is not None:
                arguments.append(f"{name}={source}")
        variable = _unique_name(tool.return_spec.name if tool.return_spec else f"{tool.name}_result", taken)
        step_variables.append(variable)
        call_lines.append(f"{variable} = await {bindings.targets[tool.id]}({', '.join(arguments)})")
        if tool.return_spec is not None:
            if tool.return_spec.state:
                by_state[tool.return_spec.state] = variable
            by_name[tool.return_spec.name] = variable

    result_variables = tuple(
        dict.fromkeys(
            [
                *(variable for step, variable in zip(plan.steps, step_variables) if step.produces & plan.goal or qualified_name(step.tool) in plan.must_run),
                *(also_show if plan.steps else ()),
            ]
        )
    )
    lines = []
    if task:
        lines.append("# Task: " + " ".join(task.split()))
    lines.append(f"# Goal: {', '.join([*sorted(plan.goal), *(f'run {tool}' for tool in sorted(plan.must_run))])}")
    if not plan.steps:
        lines.append("# Every goal state is already held: there is nothing to run.")
    elif binding_code:
        lines.append(binding_code)
    given = [name for name in inputs if name in used_inputs]
    if given:
        lines.append("")
        lines.extend(f"{input_variables[name]} = {_python_literal(inputs[name])}" for name in given)
    if call_lines:
        lines.append("")
        lines.extend(call_lines)
    if len(result_variables) == 1:
        lines.append(result_variables[0])
    elif result_variables:
        lines.append("{" + ", ".join(f"{variable!r}: {variable}" for variable in result_variables) + "}")
    code = "\n".join(lines) + "\n"
    # The promise is that a planned cell always compiles; check it here rather than in the kernel.
    compile(code, "<planned cell>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)

    return PlannedCell(
        code=code,
        instructions=_instructions(plan, unbound, bindings, used_artifacts),
        handles=handles,
        unbound=tuple(unbound),
        unused_inputs=tuple(name for name in inputs if name not in used_inputs),
        result_variables=result_variables,
        catalog_instruction_chars=_catalog_instruction_chars(registry) if registry is not None else None,
        step_targets=tuple(bindings.targets[step.tool.id] for step in plan.steps),
        step_variables=tuple(step_variables),
        used_artifacts=used_artifacts,
    )


#: ``{ids of the tool objects: (the tools, kept so their ids stay theirs, and the length)}``: every
#: candidate cell of a task reports this figure for the same registry, so it is computed once.
_DESCRIBED: dict[tuple[int, ...], tuple[tuple[ToolDefinition, ...], int]] = {}
_DESCRIBED_KEPT = 8


def _catalog_instruction_chars(registry: Iterable[ToolDefinition]) -> int:
    """Length of the handle lines that binding every tool of ``registry`` would put in the instructions."""
    tools = tuple(registry)
    key = tuple(id(tool) for tool in tools)
    if key not in _DESCRIBED:
        if len(_DESCRIBED) >= _DESCRIBED_KEPT:
            del _DESCRIBED[next(iter(_DESCRIBED))]
        _DESCRIBED[key] = (tools, len("\n".join(Bindings.of(tools, universe=tools).describe(tools))))
    return _DESCRIBED[key][1]


def _instructions(plan: Plan, unbound: list[UnboundParameter], bindings: Bindings, used_artifacts: Mapping[str, str]) -> str:
    lines = [
        "You have a persistent IPython kernel; variables survive between cells.",
        "Bound tool handles (every call is awaitable: `await handle.tool(...)`):",
    ]
    if not plan.steps:
        lines.append("  (none: the goal is already held)")
    lines.extend(bindings.describe(step.tool for step in plan.steps))
    if used_artifacts:
        lines.append("Held artifacts the cell reads: " + ", ".join(f"{variable} ({state})" for variable, state in used_artifacts.items()))
    lines.append(f"States reached by the plan: {', '.join(sorted(plan.reached)) or 'none'}")
    if unbound:
        lines.append("Required parameters left unbound (define these variables before running the cell):")
        for parameter in unbound:
            note = f" — {parameter.description}" if parameter.description else ""
            lines.append(f"  {parameter.variable}: {parameter.type} (parameter {parameter.parameter} of {parameter.tool}){note}")
    return "\n".join(lines) + "\n"
