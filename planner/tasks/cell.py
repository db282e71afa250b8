"""The planned cell: Python code that binds the handles of a plan's tools and calls them in order.

**Wiring.** Every argument of every step has one stated source (:class:`ArgumentSource`), the first
of these that exists:

1. ``step``: the most recent earlier step whose return carries the parameter's ``state`` or a
   refinement of it (``State.refines``: filtered rows are a table, so "filter the rows, then plot
   them" plots the filtered rows), or whose ``outputs`` place that state inside its return (an HTTP
   tool's ``{tmdb.person_id: "results[0].id"}``: the cell passes
   ``output_value(search_person_result, "results[0].id", "search_person")``, the id, not the whole
   page; :func:`toolpath.kernel.inside.http_results.output_value` raises ``OutputPathError`` naming
   the path and the tool when it finds nothing); for a parameter that carries no state, the most
   recent earlier step whose return has the parameter's name;
2. ``held``: the newest held artifact (a session's kernel variable) carrying that state or a
   refinement of it; else the newest held return of an earlier task's step whose ``outputs``
   place that state inside it (``output_value(search_person, "results[0].id", "search_person")``);
3. ``input``: a user input meant for the parameter (:func:`toolpath.planner.planning.inputs.input_for`): a plain
   input fills required parameters of its name, a step-qualified one (``write_report.path``) that
   tool's parameter, required or optional;
4. ``default`` for an optional parameter, ``unbound`` for a required one: the cell still refers to
   an unbound one by name (so it compiles, and runs once the name is defined) and the
   instructions list it.

A kernel variable that merely has a parameter's name (``columns``, ``by``: an earlier cell's input,
or the agent's own) binds nothing: what it holds was made for another task, so a plan reading it
would depend on what ran before (and goal choice would prefer the plan whose parameters happen to
share names with leftovers). Only what the session holds (artifacts of held states) and what the
user gives are read.

A parameter with ``role: output`` (a file the tool writes) takes no step's return, no held
artifact, and never a path the user gave as data: a step-qualified input that names the
same file as another input is refused, and so is a plain input that would feed both a parameter the
tool reads and one it writes. Rendered with an ``output_directory``, an output parameter that would
take its default relative path (``histogram.png``) takes that path inside the directory instead, so
the cell writes nothing into the kernel's working directory. New variables never take a name the
kernel or the cell already uses.
"""

from __future__ import annotations

import ast
import keyword
import os
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from toolpath.kernel.inside.protocol import BINDER_FUNCTION
from toolpath.kernel.tools.bindings import Bindings
from toolpath.planner.planning.graph import kinds_of
from toolpath.planner.planning.inputs import InputError, check_input_names, input_for, is_qualified, names_tool, python_literal, split_name
from toolpath.planner.planning.plans import Plan, qualified_name
from toolpath.registry import ToolDefinition, ToolParameter, ToolRegistry
from toolpath.registry.names import python_identifier

if TYPE_CHECKING:
    from toolpath.planner.planning.graph import StateGraph

__all__ = ["ArgumentSource", "InputError", "KernelView", "PlannedCell", "UnboundParameter", "check_input_names", "is_variable_name", "render_cell"]

SourceKind = Literal["step", "held", "input", "default", "unbound"]


@dataclass(frozen=True)
class ArgumentSource:
    """Where one argument of a planned step comes from (see the module docstring for the order).

    Attributes:
        kind: ``"step"``, ``"held"``, ``"input"``, ``"default"`` or ``"unbound"``.
        variable: the cell variable passed (``None`` for ``default``).
        step: for ``step``, the index (0-based) of the step whose return it is.
        input: for ``input``, the input's name (``path`` or ``write_report.path``).
        state: for ``step`` and ``held``, the state the value carries.
        path: for ``step`` and ``held``, the output path (``results[0].id``) of the value inside
            the return, when the tool's ``outputs`` place the state there; ``None``: the return itself.
        tool: for ``held`` with a ``path``, the tool whose return the variable holds (named when the
            path finds nothing).
    """

    kind: SourceKind
    variable: str | None = None
    step: int | None = None
    input: str | None = None
    state: str | None = None
    path: str | None = None
    tool: str | None = None

    @property
    def label(self) -> str:
        """Short form: ``step 1`` (1-based), ``held molecule``, ``input path``, ``default``, ``unbound``."""
        if self.kind == "step":
            return f"step {self.step + 1}"  # type: ignore[operator]
        if self.kind == "input":
            return f"input {self.input}"
        if self.kind == "held":
            return f"{self.kind} {self.variable}"
        return self.kind

    def to_dict(self) -> dict[str, Any]:
        step = None if self.step is None else self.step + 1
        fields = {"variable": self.variable, "step": step, "input": self.input, "state": self.state, "path": self.path, "tool": self.tool}
        return {"source": self.kind, "label": self.label, **{name: value for name, value in fields.items() if value is not None}}


@dataclass(frozen=True)
class UnboundParameter:
    """A required parameter that nothing in the plan or the inputs supplies; the cell reads ``variable``.
    ``why``: why the task's words did not give it either (:mod:`toolpath.planner.tasks.arguments`), or ``""``."""

    step: int
    tool: str
    parameter: str
    type: str
    description: str
    variable: str
    why: str = ""

    def to_dict(self) -> dict:
        return {
            "step": self.step,
            "tool": self.tool,
            "parameter": self.parameter,
            "type": self.type,
            "description": self.description,
            "variable": self.variable,
            "why": self.why or None,
        }


@dataclass(frozen=True)
class PlannedCell:
    """A rendered cell.

    Attributes:
        code: the whole cell (bindings, inputs, calls, final expression); always valid Python with
            top-level ``await``.
        display_code: ``code`` as shown to a person or a model: an input literal longer than
            :data:`SHOWN_LITERAL_CHARS` characters is cut short, with a comment saying so (the cut
            line is no valid Python, so the shown cell cannot run by mistake without its values).
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
            :attr:`toolpath.kernel.CellResult.tool_calls` says which of them completed.
        step_variables: the variable each step's return is assigned to, in plan order.
        used_artifacts: ``{variable: state}`` of held artifacts the cell reads (for a held return
            read at an output path, the state found there).
        arguments: per step, in plan order, ``{parameter's Python name: ArgumentSource}`` for
            every parameter of its tool.
        advice: ``{input name: how to pass it}`` for inputs that went unused although an optional
            parameter of their name is on the plan (such a parameter takes only ``TOOL.PARAMETER``).
        setup_code / step_lines / result_line: ``code`` in its parts: the bindings and inputs, each
            step's call line (plan order) and the final expression (see :meth:`from_step`).
    """

    code: str
    display_code: str
    instructions: str
    handles: dict[str, list[str]]
    unbound: tuple[UnboundParameter, ...]
    unused_inputs: tuple[str, ...]
    result_variables: tuple[str, ...]
    catalog_instruction_chars: int | None = None
    step_targets: tuple[str, ...] = ()
    step_variables: tuple[str, ...] = ()
    used_artifacts: dict[str, str] = field(default_factory=dict)
    arguments: tuple[dict[str, ArgumentSource], ...] = ()
    setup_code: str = ""
    step_lines: tuple[str, ...] = ()
    result_line: str = ""

    def from_step(self, index: int) -> str:
        """The cell that runs the steps from ``index`` on, in the kernel where the steps before it
        ran (their results are read from :attr:`step_variables`): how a paused task continues
        without running anything twice. ``from_step(0)`` is :attr:`code`.

        Raises:
            IndexError: ``index`` is not a step of the plan.
        """
        if not 0 <= index < len(self.step_lines):
            raise IndexError(f"step {index} is not one of the plan's {len(self.step_lines)} steps")
        return "\n".join([self.setup_code, "", *self.step_lines[index:], *([self.result_line] if self.result_line else [])]) + "\n"

    advice: dict[str, str] = field(default_factory=dict)

    @property
    def saved_chars(self) -> int | None:
        """Characters the instructions save against describing the whole registry (``None`` without one)."""
        return None if self.catalog_instruction_chars is None else self.catalog_instruction_chars - len(self.instructions)

    def wiring(self, plan: Plan) -> list[dict[str, Any]]:
        """Per step of ``plan`` (the plan this cell was rendered from): its number (1-based), tool
        (``server.name``) and each argument's source, as JSON-ready dicts."""
        return [
            {
                "step": number,
                "tool": qualified_name(step.tool),
                "variable": variable,
                "arguments": {name: source.to_dict() for name, source in arguments.items()},
            }
            for number, (step, variable, arguments) in enumerate(zip(plan.steps, self.step_variables, self.arguments), 1)
        ]

    def input_names(self, plan: Plan) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The inputs this cell (rendered from ``plan``) takes: ``(required, optional)``.

        ``required`` holds the plain names of required parameters that no step or held artifact
        supplies (``smiles``); ``optional`` the ``TOOL.PARAMETER`` names of optional parameters
        (``compute_fingerprints.radius``), the only form such a parameter takes. Both in plan order.
        """
        required: dict[str, None] = {}
        optional: dict[str, None] = {}
        for step, sources in zip(plan.steps, self.arguments):
            optional_names = {parameter.python_name for parameter in step.tool.parameters if parameter not in step.tool.required_parameters}
            for name, source in sources.items():
                if name in optional_names and source.kind in ("default", "input"):
                    optional[f"{step.tool.name}.{name}"] = None
                elif name not in optional_names and source.kind in ("input", "unbound"):
                    required[name] = None
        return tuple(required), tuple(optional)


def is_variable_name(name: object) -> bool:
    """Whether ``name`` can be a kernel variable the session tracks: an identifier, not a keyword,
    not starting with ``_`` (IPython's own names)."""
    return isinstance(name, str) and name.isidentifier() and not keyword.iskeyword(name) and not keyword.issoftkeyword(name) and not name.startswith("_")


def _unique_name(base: str, taken: set[str]) -> str:
    name = python_identifier(base)
    candidate, counter = name, 2
    while candidate in taken:
        candidate = f"{name}_{counter}"
        counter += 1
    taken.add(candidate)
    return candidate


def _same_file(first: Any, second: Any) -> bool:
    """Whether two input values name the same file (strings only; ``~``, ``..`` and symbolic links
    resolved; two hard links to one file are the same file)."""
    if not isinstance(first, str) or not isinstance(second, str) or not first.strip() or not second.strip():
        return False
    try:
        paths = [os.path.realpath(os.path.expanduser(value)) for value in (first, second)]
        return paths[0] == paths[1] or (os.path.exists(paths[0]) and os.path.exists(paths[1]) and os.path.samefile(*paths))
    except (ValueError, OSError):  # a NUL byte, or a path the OS refuses: no file to clash with
        return False


class HeldOutput(NamedTuple):
    """Where a held state's value is inside a kernel variable: the output ``path`` in the return of
    ``tool`` (a tool's ``outputs``, :mod:`toolpath.registry.output_paths`)."""

    path: str
    tool: str


@dataclass(frozen=True)
class KernelView:
    """What the kernel a cell runs in already has, as the cell's writer knows it (a fresh kernel:
    the defaults, or :meth:`of` a graph).

    Attributes:
        registry: the registry the plan's tools come from; with it, a tool's attribute name is the
            same in every cell (names are de-duplicated over the whole server, not just the plan).
        refinements: ``{state: the state it refines}`` (:attr:`toolpath.planner.planning.graph.StateGraph.refinements`).
        bindings: handles a session has already bound in its kernel: the cell calls tools through
            them and binds nothing itself; ``None``: the cell binds its own.
        artifacts: ``{variable: state}``, oldest first: kernel variables carrying held states'
            artifacts; a step needing such a state (or one it refines) reads the newest.
        outputs: ``{variable: {state: HeldOutput}}``, oldest first: kernel variables holding an
            earlier step's return whose ``outputs`` place held states inside it; read when no
            artifact carries the state.
        variables: names already defined in the kernel: new variables never take them (a
            required parameter nothing else supplies is unbound even when one has its name).
    """

    registry: ToolRegistry | None = None
    refinements: Mapping[str, str] = field(default_factory=dict)
    bindings: Bindings | None = None
    artifacts: Mapping[str, str] = field(default_factory=dict)
    variables: Collection[str] = ()
    outputs: Mapping[str, Mapping[str, HeldOutput]] = field(default_factory=dict)

    @classmethod
    def of(cls, graph: StateGraph) -> KernelView:
        """A fresh kernel for plans over ``graph``: its registry and refinements, nothing held."""
        return cls(graph.registry, graph.refinements)


def render_cell(
    plan: Plan,
    inputs: Mapping[str, Any] | None = None,
    task: str | None = None,
    kernel: KernelView | None = None,
    *,
    also_show: Iterable[str] = (),
    output_directory: str | os.PathLike[str] | None = None,
) -> PlannedCell:
    """Render ``plan`` as a cell that runs in a toolpath kernel session (wiring: module docstring).

    Parameters:
        plan: the plan to render.
        inputs: user inputs by parameter name, or ``TOOL.PARAMETER`` (:mod:`toolpath.planner.planning.inputs`),
            JSON-like values. Each used one becomes a variable named like the input (``path``;
            ``write_report_path``), unless that name is reserved (``print`` → ``print_``) or taken.
        task: the task text, quoted in the cell's header comment.
        kernel: what the cell's kernel has (:class:`KernelView`); ``None``: a fresh kernel and no
            registry (handle attributes are named over the plan's tools only).
        also_show: kernel variables the final expression shows too (the artifacts of parts of the
            task that were already held), after the plan's own results.
        output_directory: where the files tools write go unless an input says otherwise: each
            ``role: output`` parameter on the plan that would take its default relative path takes
            that path inside this directory, as the step-qualified input ``SERVER.TOOL.PARAMETER``
            (labelled so in the wiring). The directory must exist when the cell runs.

    Returns:
        A :class:`PlannedCell`.

    Raises:
        InputError: an input name that is not a parameter name, a value without a literal form,
            an artifact or variable name that is not a plain identifier, a step-qualified input
            naming a parameter its tool does not have, or an input that would go where it is not
            meant (an output parameter given a file the user gave as data; one plain input feeding
            parameters a tool reads and parameters a tool writes).
        ValueError: ``bindings`` given without a handle for one of the plan's tools.
    """
    kernel = kernel if kernel is not None else KernelView()
    inputs = dict(inputs or {})
    registry, bindings, artifacts, variables = kernel.registry, kernel.bindings, dict(kernel.artifacts), kernel.variables
    check_input_names(inputs)
    _check_qualified_inputs(plan, inputs)
    if output_directory is not None:
        inputs.update(_destinations_in(Path(output_directory), plan, inputs))
    also_show = list(also_show)
    bad = next((variable for variable in [*artifacts, *kernel.outputs, *variables, *also_show] if not is_variable_name(variable)), None)
    if bad is not None:
        raise InputError(f"{bad!r} cannot be a kernel variable of the cell (not an identifier, a keyword, or starting with '_')")
    if bindings is None:
        # Handles must not take a name the cell uses for an input or a parameter (`text.load(text=text)`).
        parameter_names = {parameter.python_name for step in plan.steps for parameter in step.tool.parameters}
        input_names = {python_identifier(name.replace(".", "_")) for name in inputs}
        bindings = Bindings.of([step.tool for step in plan.steps], taken=parameter_names | input_names | set(variables), universe=registry or ())
        binding_code = bindings.code().rstrip("\n")
    else:
        unbound_tools = [step.tool.name for step in plan.steps if step.tool.id not in bindings.targets]
        if unbound_tools:
            raise ValueError(f"the session has no handle for {', '.join(unbound_tools)}; bind their domains first")
        binding_code = "# Handles are bound by the session."
    handles = {name: list(attributes) for name, attributes in bindings.handles.items()}
    for name, (_, attributes) in bindings.host_handles.items():
        handles.setdefault(name, []).extend(attribute for attribute in attributes if attribute not in handles[name])

    taken = set(handles) | {BINDER_FUNCTION} | set(variables) | set(artifacts) | set(kernel.outputs)
    if kernel.outputs or any(step.tool.outputs for step in plan.steps):
        taken.add(OUTPUT_FUNCTION)
    # A variable must not shadow a builtin or IPython's names in the persistent kernel.
    input_variables = {name: _unique_name(name.replace(".", "_"), taken) for name in inputs}
    unbound_variables: dict[str, str] = {}
    unbound: list[UnboundParameter] = []
    used_artifacts: dict[str, str] = {}
    fed: dict[str, list[tuple[int, ToolDefinition, ToolParameter]]] = {}  # input name -> the parameters it feeds
    returns: list[_Return] = []  # what earlier steps returned, oldest first
    call_lines: list[str] = []
    step_variables: list[str] = []
    step_arguments: list[dict[str, ArgumentSource]] = []
    for index, step in enumerate(plan.steps):
        tool = step.tool
        sources: dict[str, ArgumentSource] = {}
        for parameter in tool.parameters:
            name = parameter.python_name  # inputs, variables and keywords are Python names
            source = _source(tool, parameter, returns, kernel, inputs, input_variables)
            if source.kind == "held":
                used_artifacts[source.variable] = source.state  # type: ignore[index,assignment]
            elif source.kind == "input":
                fed.setdefault(source.input, []).append((index, tool, parameter))  # type: ignore[arg-type]
            elif source.kind == "unbound":
                if name not in unbound_variables:
                    unbound_variables[name] = _unique_name(name, taken)
                source = ArgumentSource("unbound", unbound_variables[name])
                unbound.append(UnboundParameter(index, tool.name, name, parameter.type, parameter.description, unbound_variables[name]))
            sources[name] = source
        step_arguments.append(sources)
        variable = _unique_name(tool.return_spec.name if tool.return_spec else f"{tool.name}_result", taken)
        step_variables.append(variable)
        arguments = ", ".join(f"{name}={_argument(source, plan)}" for name, source in sources.items() if source.kind != "default")
        call_lines.append(f"{variable} = await {bindings.targets[tool.id]}({arguments})")
        returns.append(_Return(index, variable, tool.return_spec.state, tool.return_spec.name) if tool.return_spec else _Return(index, variable))
        returns.extend(_Return(index, variable, state, path=path) for state, path in tool.outputs.items())
    _check_destinations(inputs, fed)

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
    if plan.steps and any(source.path for sources in step_arguments for source in sources.values()):
        lines.append(f"from {OUTPUT_MODULE} import {OUTPUT_FUNCTION}")
    literals = {name: python_literal(inputs[name], name) for name in inputs if name in fed}
    input_lines = [f"{input_variables[name]} = {literal}" for name, literal in literals.items()]
    shown_input_lines = [f"{input_variables[name]} = {_shown_literal(literal)}" for name, literal in literals.items()]
    calls = ["", *call_lines] if call_lines else []
    result_line = ""
    if len(result_variables) == 1:
        result_line = result_variables[0]
    elif result_variables:
        result_line = "{" + ", ".join(f"{variable!r}: {variable}" for variable in result_variables) + "}"
    calls += [result_line] if result_line else []
    setup_code = "\n".join([*lines, *([""] + input_lines if fed else [])])
    code = "\n".join([setup_code, *calls]) + "\n"
    display_code = "\n".join([*lines, *([""] + shown_input_lines if fed else []), *calls]) + "\n"
    # The promise is that a planned cell always compiles; check it here rather than in the kernel.
    compile(code, "<planned cell>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)

    unused = tuple(name for name in inputs if name not in fed)
    return PlannedCell(
        code=code,
        display_code=display_code,
        instructions=_instructions(plan, unbound, bindings, used_artifacts),
        handles=handles,
        unbound=tuple(unbound),
        unused_inputs=unused,
        result_variables=result_variables,
        catalog_instruction_chars=_catalog_instruction_chars(registry) if registry is not None else None,
        step_targets=tuple(bindings.targets[step.tool.id] for step in plan.steps),
        step_variables=tuple(step_variables),
        used_artifacts=used_artifacts,
        arguments=tuple(step_arguments),
        advice=_advice(plan, unused, step_arguments),
        setup_code=setup_code,
        step_lines=tuple(call_lines),
        result_line=result_line,
    )


#: Input literals longer than this many characters are cut short in :attr:`PlannedCell.display_code`
#: (a list of a few hundred SMILES would bury the cell); the cut keeps :data:`SHOWN_LITERAL_START`.
SHOWN_LITERAL_CHARS = 400
SHOWN_LITERAL_START = 160


def _shown_literal(literal: str) -> str:
    """``literal`` as shown, cut short when long. A cut list, dict or string literal lacks its
    closing bracket or quote, so the shown line is a syntax error rather than another value."""
    if len(literal) <= SHOWN_LITERAL_CHARS:
        return literal
    return f"{literal[:SHOWN_LITERAL_START]}...  # {len(literal):,} characters, cut short here; the cell runs the whole value"


#: The kernel function a planned cell picks a value out of a step's return with, and its module.
OUTPUT_MODULE, OUTPUT_FUNCTION = "toolpath.kernel.inside.http_results", "output_value"


@dataclass(frozen=True)
class _Return:
    """What an earlier step returned: its ``variable``, and the ``state`` the value carries, the
    return's ``name``, or for one of the tool's ``outputs``, the ``path`` of the value inside it."""

    step: int
    variable: str
    state: str | None = None
    name: str | None = None
    path: str | None = None


def _argument(source: ArgumentSource, plan: Plan) -> str | None:
    """The expression a call passes for ``source``: its variable, or the value at its output path."""
    if source.path is None:
        return source.variable
    tool = source.tool if source.step is None else plan.steps[source.step].tool.name
    return f"{OUTPUT_FUNCTION}({source.variable}, {source.path!r}, {tool!r})"


def _source(
    tool: ToolDefinition,
    parameter: ToolParameter,
    returns: list[_Return],
    kernel: KernelView,
    inputs: Mapping[str, Any],
    input_variables: Mapping[str, str],
) -> ArgumentSource:
    """Where ``parameter`` of ``tool`` takes its value from (the order of the module docstring).

    ``returns`` holds what each earlier step returned; an ``unbound`` source comes back without its
    variable (the caller names it)."""
    name, output = parameter.python_name, parameter.role == "output"
    # A destination takes nothing a step returned or the session holds: that may be a file read.
    if not output:
        kinds = kinds_of(parameter.state, kernel.refinements) if parameter.state else frozenset()
        for returned in reversed(returns):
            if (returned.state in kinds) if parameter.state else (returned.name == name and returned.path is None):
                return ArgumentSource("step", returned.variable, step=returned.step, state=returned.state, path=returned.path)
        held = next((variable for variable, state in reversed(kernel.artifacts.items()) if state in kinds), None)
        if held is not None:
            return ArgumentSource("held", held, state=kernel.artifacts[held])
        for variable, places in reversed(kernel.outputs.items()):
            state = next((state for state in places if state in kinds), None)
            if state is not None:
                return ArgumentSource("held", variable, state=state, path=places[state].path, tool=places[state].tool)
    meant = input_for(tool, parameter, inputs)
    if meant is not None:
        return ArgumentSource("input", input_variables[meant], input=meant)
    if parameter not in tool.required_parameters:
        return ArgumentSource("default")
    return ArgumentSource("unbound")


def _destinations_in(directory: Path, plan: Plan, inputs: Mapping[str, Any]) -> dict[str, str]:
    """``{SERVER.TOOL.PARAMETER: path in directory}`` for each ``role: output`` parameter on the plan
    that no input is meant for and whose default is a relative path."""
    destinations: dict[str, str] = {}
    for step in plan.steps:
        for parameter in step.tool.optional_parameters:
            default = parameter.default
            if parameter.role != "output" or not isinstance(default, str) or not default.strip() or os.path.isabs(os.path.expanduser(default)):
                continue
            if input_for(step.tool, parameter, {**inputs, **destinations}) is None:
                destinations[f"{qualified_name(step.tool)}.{parameter.python_name}"] = str(directory / default)
    return destinations


def _check_qualified_inputs(plan: Plan, inputs: Mapping[str, Any]) -> None:
    """Refuse a step-qualified input naming a parameter its tool (on the plan) does not have."""
    for name in inputs:
        qualifier, parameter = split_name(name)
        if qualifier is None:
            continue
        for step in plan.steps:
            tool = step.tool
            if names_tool(qualifier, tool) and not any(parameter in (known.python_name, known.name) for known in tool.parameters):
                offered = ", ".join(known.python_name for known in tool.parameters) or "none"
                raise InputError(f"input {name!r}: {tool.name} has no parameter {parameter!r} (its parameters: {offered})")


def _check_destinations(inputs: Mapping[str, Any], fed: Mapping[str, list[tuple[int, ToolDefinition, ToolParameter]]]) -> None:
    """Refuse inputs that would make a tool write where the user's data is (see the module docstring)."""
    # The user's data: what inputs feed to parameters tools read, and unused inputs naming a file.
    data = [name for name, uses in fed.items() if any(parameter.role != "output" for _, _, parameter in uses)]
    data += [name for name in inputs if name not in fed and isinstance(inputs[name], str) and os.path.lexists(os.path.expanduser(inputs[name]))]
    for name, uses in fed.items():
        reads = [(index, tool, parameter) for index, tool, parameter in uses if parameter.role != "output"]
        writes = [(index, tool, parameter) for index, tool, parameter in uses if parameter.role == "output"]
        if reads and writes:
            described = "; ".join(
                f"step {index + 1} {tool.name}.{parameter.python_name} {'writes to' if parameter.role == 'output' else 'reads'} it"
                for index, tool, parameter in uses
            )
            _, tool, parameter = writes[0]
            raise InputError(
                f"input {name!r} would be both read as data and written over ({described}); give the destination its own input, e.g. {tool.name}.{parameter.python_name}=FILE"
            )
        if writes:
            clash = next((other for other in data if other != name and _same_file(inputs[name], inputs[other])), None)
            if clash is not None:
                _, tool, parameter = writes[0]
                raise InputError(
                    f"input {name!r} names the file {inputs[name]!r}, which input {clash!r} gives as data; {tool.name} would write over it ({parameter.python_name} is where it writes): choose another file"
                )


def _advice(plan: Plan, unused: Iterable[str], arguments: list[dict[str, ArgumentSource]]) -> dict[str, str]:
    """For each unused plain input named like an optional parameter on the plan: how to pass it."""
    advice = {}
    for name in unused:
        targets = [
            f"{step.tool.name}.{name}"
            for step, sources in zip(plan.steps, arguments)
            if not is_qualified(name) and name in sources and sources[name].kind == "default"
        ]
        if targets:
            advice[name] = (
                f"input {name!r} was not used: a plain input fills only required parameters; to set the optional parameter, pass {' or '.join(dict.fromkeys(targets))}"
            )
    return advice


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
