"""Tool definitions: parameters, return value, state transition and how to import the tool.

Types are written as strings (``"str"``, ``"list[str]"``, ``"rdkit.Chem.Mol"``) so that loading a
catalog imports nothing and :meth:`ToolDefinition.model_json_schema` describes catalog files exactly.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from toolpath.registry.http_apis import METHOD_EFFECTS, HttpOperation
from toolpath.registry.mcp_servers import MCPServerConfig
from toolpath.registry.names import parameter_name, require_printable
from toolpath.registry.output_paths import parse_output_path
from toolpath.registry.retry_policy import RetryPolicy
from toolpath.registry.states import StateTransition
from toolpath.registry.type_strings import literal_values

#: The kinds of a table's columns, as input probes report them (``toolpath.catalogs.tabular.probe.Kind``).
COLUMN_KINDS = ("number", "text", "date", "bool")


def _output_path(path: str) -> str:
    parse_output_path(path)
    return path


#: An output path, checked where it is written (``tools[0].outputs.tmdb.person_id`` in a problem).
OutputPath = Annotated[str, AfterValidator(_output_path)]

#: A parameter's real name: what catalogs and MCP servers use (``from``, ``repo-path``, ``max.results``).
_PARAMETER_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")


def _printable_fields(**labels: str) -> Any:
    """A field validator refusing control characters in the fields named by ``labels`` (field →
    what to call it in the message): names, tokens and modules end up in generated code."""

    def check(value: str | None, info: ValidationInfo) -> str | None:
        return value if value is None else require_printable(value, labels[info.field_name])

    return field_validator(*labels)(check)


class ToolParameter(BaseModel):
    """One keyword parameter of a tool.

    Attributes:
        name: the parameter's real name, the one an MCP server receives: letters, digits, ``_``,
            ``-`` and ``.``, not starting with a digit. Python code (cells, a module tool's
            function) passes it as :attr:`python_name`: the name itself, or for a Python keyword
            (``from``) or a name with ``-``/``.`` its identifier form (``from_``), the wire name ↔
            Python name rule of tool names.
        type: the type as a string, e.g. ``"list[str]"``; never imported.
        description: what the value means, with units where there are any.
        default: the value used when an optional parameter is not passed (``None`` when unset).
        state: the state whose artifact this parameter carries, e.g. ``"chemistry.molecule_parsed"``;
            the planner feeds it the return value of an earlier step that produced that state.
        role: ``"input"`` (default): a value the tool reads; ``"output"``: a destination the tool
            writes to (a report's or a plot's path). A planned cell never passes an output
            parameter a value the user gave as data or a path a step of the cell reads, and never
            fills it from a kernel variable of its name (see :mod:`toolpath.planner.tasks.cell`).
        meaning: what the value is, so that a task's words can give it
            (:mod:`toolpath.planner.tasks.arguments`): ``"column"`` (one column name of the table
            the task names), ``"columns"`` (a list of them), ``"conditions"`` (a list of
            ``[column, operator, value]`` conditions on rows), ``"count"`` (a whole number: "top
            5", "20 bins"), ``"file"`` (the path of a further file the tool reads; probed like its
            domain's input state that has a probe). ``None``: the words give it only by name.
        choices: for a parameter that takes one of a few values (a ``Literal``), each value and the
            words that ask for it: ``{"sum": ["total", "add up"], "mean": ["average"]}``. The value
            itself is always one of its words; every value a ``Literal`` type allows must be listed.
    """

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    type: str = Field(min_length=1)
    description: str = ""
    default: Any = None
    state: str | None = None
    role: Literal["input", "output"] = "input"
    meaning: Literal["column", "columns", "conditions", "count", "file"] | None = None
    choices: dict[str, list[str]] | None = None

    _names_are_printable = _printable_fields(name="parameter name", state="state token")

    @field_validator("choices")
    @classmethod
    def _choices_have_words(cls, choices: dict[str, list[str]] | None) -> dict[str, list[str]] | None:
        if choices is None:
            return None
        if not choices:
            raise ValueError("choices is empty; list each value the parameter takes with the words that ask for it, or leave it out")
        for value, words in choices.items():
            if not value.strip() or any(not isinstance(word, str) or not word.strip() for word in words):
                raise ValueError(f"choice {value!r}: a value and each of its words must be non-empty text")
        return choices

    @model_validator(mode="after")
    def _choices_match_the_type(self) -> ToolParameter:
        allowed = literal_values(self.type)
        if self.choices is not None and allowed is not None and set(self.choices) != set(allowed):
            raise ValueError(
                f"parameter {self.name!r}: choices name {sorted(self.choices)} but its type {self.type} allows {sorted(allowed)}; list exactly the values the type allows"
            )
        if self.meaning == "count" and self.type not in ("int", "int | None"):
            raise ValueError(f"parameter {self.name!r}: meaning 'count' is a whole number; its type must be int, not {self.type}")
        return self

    @field_validator("name")
    @classmethod
    def _name_has_a_python_form(cls, name: str) -> str:
        if not _PARAMETER_NAME.fullmatch(name):
            raise ValueError(f"parameter name {name!r} is not a parameter name; use letters, digits, '_', '-' and '.', not starting with a digit")
        return name

    @property
    def python_name(self) -> str:
        """The keyword this parameter is passed by in Python (:func:`toolpath.registry.names.parameter_name`):
        ``name`` itself, or for a keyword or a name with ``-``/``.``, its identifier form (``from_``)."""
        return parameter_name(self.name)


class ReturnSpec(BaseModel):
    """The value a tool returns.

    Attributes:
        name: a short noun for the value (``"descriptors"``); the planned cell binds the value to a
            variable of this name.
        type: the type as a string.
        description: what the value holds, with units where there are any.
        state: the state whose artifact this value is; parameters naming the same state receive it.
        adds_columns: for a tool that returns a table, the columns it adds to the table it reads,
            ``{name: kind}`` with the kinds an input probe reports (:data:`COLUMN_KINDS`):
            ``{"molecular_weight": "number", "lipinski_passes": "bool"}``. The planner adds them to
            the probed columns a later step's words may name ("keep the molecules with a molecular
            weight under 200" after tabulating descriptors), and plans through the tool when the words
            name a column only it adds ("a histogram of the molecular weights in molecules.csv").
            ``None``: the tool adds none, or does not say.
    """

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    type: str = Field(min_length=1)
    description: str = ""
    state: str | None = None
    adds_columns: dict[str, str] | None = None

    _names_are_printable = _printable_fields(name="return name", state="state token")

    @field_validator("adds_columns")
    @classmethod
    def _added_columns_have_kinds(cls, columns: dict[str, str] | None) -> dict[str, str] | None:
        if columns is None:
            return None
        if not columns:
            raise ValueError("adds_columns is empty; list each column the tool adds with its kind, or leave it out")
        for name, kind in columns.items():
            if not name.strip():
                raise ValueError("adds_columns: a column name is empty; name each column the tool adds as its table spells it")
            require_printable(name, "column name")
            if kind not in COLUMN_KINDS:
                raise ValueError(f"adds_columns: column {name!r} has kind {kind!r}; a kind is one of {', '.join(COLUMN_KINDS)}")
        return columns


class ToolDefinition(BaseModel):
    """A tool: what it needs, what it yields, and where its implementation lives.

    Attributes:
        name: the tool's wire name, unique within its server.
        description: what the tool does (shown to models in instructions).
        required_parameters / optional_parameters: keyword parameters; names are unique across both.
        return_spec: the returned value, or ``None`` for a tool that returns nothing useful.
        module: dotted module holding a function named ``name``.
        module_override: a module that takes precedence over ``module`` (resolution order:
            ``module_override``, ``module``, ``{package}.{name}``).
        server_name: the server or catalog domain exposing the tool; two servers may share tool names.
        state_transition: the states the tool requires (all of them) and produces.
        affordances: phrases saying what the tool lets an agent do.
        cost: finite, non-negative planning cost of one call (default 1); plans minimise the sum.
        binding: where a kernel runs the tool: ``"kernel"`` (default; the module is imported inside
            the kernel and results stay there as live objects) or ``"host"`` (the call crosses the
            bridge to the host process, where connections, hooks and caching live).
        mcp_server: the MCP server that implements the tool, which is then called by its ``name``
            over MCP instead of being imported: in a catalog file, the name of a server declared
            under ``mcp_servers`` (the catalog loader replaces it with that server's
            :class:`toolpath.registry.mcp_servers.MCPServerConfig`); in code, the config itself. Such a tool
            has no module and runs on the host (``binding`` defaults to ``"host"``).
        http: the HTTP operation that implements the tool (:class:`toolpath.registry.http_apis.HttpOperation`):
            its ``api`` (in a catalog file, the name of an API declared under ``http_apis``, which the
            loader replaces with its :class:`toolpath.registry.http_apis.HttpApiConfig`), method, path
            and where each parameter is sent. Such a tool has no module and runs on the host
            (``binding`` defaults to ``"host"``), where the API's secret is read.
        outputs: ``{state token: output path}``: where the value carrying each state is in the tool's
            result (``{"tmdb.person_id": "results[0].id"}``; paths as
            :func:`toolpath.registry.output_paths.parse_output_path` reads them). A planned cell passes a
            later parameter carrying that state the value at the path, not the whole result. Each
            state must be one the tool produces.
        approval: whether a call waits for a person's yes first (:mod:`toolpath.kernel.tools.approvals`):
            ``"never"`` (default), ``"always"`` (sending mail, paying, deleting), or
            ``"on_overwrite"``: when an output parameter (``role: output``), as passed or by its
            default, names a file that exists, so writing would replace it.
        effects: what a call changes outside the kernel: ``"none"``, ``"writes"`` (files, records) or
            ``"sends"`` (mail, messages, payments). Unset, it is read from the tool
            (:attr:`side_effect`; an HTTP tool's method says it). A tool with effects is chosen for a task only on a clear match
            (:mod:`toolpath.planner.tasks.goals`).
        retry: how a failed call is tried again (:class:`toolpath.registry.retry_policy.RetryPolicy`:
            ``attempts``, ``backoff``, ``max_backoff``, ``on``); ``None``: the default of
            :func:`toolpath.registry.retry_policy.effective_retry` (a read-only tool retries timeouts
            and lost connections, a tool with effects is tried once). Not for an HTTP tool, which
            its API retries (``http_apis.<api>.retries``), nor for a tool that asks for approval
            (each try would ask again).
        id: assigned by :class:`toolpath.registry.ToolRegistry` on registration; ``None`` before.

    Names (of the tool, its parameters and return), state tokens, modules and the server name are
    written into planned cells and import paths, so a control character (Unicode category Cc, tab
    and newline included) in one is a validation error; descriptions may hold any text.

    Definitions are frozen: a registry indexes tools by name, server and id, and an assignment to
    one of those fields behind its back would leave an index stale. Use ``model_copy(update=...)``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    description: str = ""
    required_parameters: list[ToolParameter] = Field(default_factory=list)
    optional_parameters: list[ToolParameter] = Field(default_factory=list)
    return_spec: ReturnSpec | None = None
    module: str | None = None
    module_override: str | None = None
    server_name: str | None = None
    state_transition: StateTransition = Field(default_factory=StateTransition)
    affordances: list[str] = Field(default_factory=list)
    # strict: a quoted "3" or a boolean is a catalog mistake, not a number to coerce.
    cost: float = Field(default=1.0, ge=0, allow_inf_nan=False, strict=True)
    binding: Literal["kernel", "host"] = "kernel"
    mcp_server: str | MCPServerConfig | None = None
    http: HttpOperation | None = None
    outputs: dict[str, OutputPath] = Field(
        default_factory=dict, description="State token -> output path (`results[0].id`): where the value carrying that state is in the result."
    )
    approval: Literal["never", "always", "on_overwrite"] = "never"
    effects: Literal["none", "writes", "sends"] | None = None
    retry: RetryPolicy | None = None
    id: int | None = None

    _names_are_printable = _printable_fields(name="tool name", module="module", module_override="module", server_name="server name")

    @field_validator("mcp_server", mode="before")
    @classmethod
    def _server_name_or_config(cls, server: Any) -> Any:
        # One clear message instead of one per member of the union.
        if server is not None and not isinstance(server, (str, dict, MCPServerConfig)):
            raise ValueError(
                f"mcp_server is the name of a server declared under `mcp_servers` (or a {{command: ...}} / {{url: ...}} mapping), not {type(server).__name__}"
            )
        return server

    @model_validator(mode="before")
    @classmethod
    def _served_over_mcp(cls, data: Any) -> Any:
        if not isinstance(data, dict) or data.get("mcp_server") is None:
            return data
        if data.get("binding", "host") != "host":
            raise ValueError("a tool served by an MCP server runs on the host: remove `binding: kernel` or `mcp_server`")
        if data.get("module") or data.get("module_override"):
            raise ValueError("a tool served by an MCP server is not imported: remove `module`/`module_override` or `mcp_server`")
        return {**data, "binding": "host"}

    @model_validator(mode="before")
    @classmethod
    def _called_over_http(cls, data: Any) -> Any:
        if not isinstance(data, dict) or data.get("http") is None:
            return data
        if data.get("binding", "host") != "host":
            raise ValueError("a tool called over HTTP runs on the host, where the API's secret is read: remove `binding: kernel` or `http`")
        if data.get("module") or data.get("module_override"):
            raise ValueError("a tool called over HTTP is not imported: remove `module`/`module_override` or `http`")
        if data.get("mcp_server") is not None:
            raise ValueError("a tool is served by an MCP server or called over HTTP, not both: remove `mcp_server` or `http`")
        return {**data, "binding": "host"}

    @model_validator(mode="after")
    def _http_parameters_placed(self) -> ToolDefinition:
        if self.http is None:
            return self
        names = {parameter.name for parameter in self.parameters}
        placed = self.http.placed
        unknown = [name for name in placed if name not in names]
        if unknown:
            raise ValueError(
                f"tool {self.name!r} sends {', '.join(map(repr, unknown))} ({', '.join(placed[name] for name in unknown)}) but declares no such parameter; "
                "declare it under required_parameters or optional_parameters, or correct the name"
            )
        unplaced = [name for name in names if name not in placed]
        if unplaced:
            raise ValueError(
                f"tool {self.name!r}: parameter {', '.join(map(repr, sorted(unplaced)))} is not sent; name it in http.path as {{name}} or list it under http.query, http.headers or http.body"
            )
        return self

    @model_validator(mode="after")
    def _outputs_produced(self) -> ToolDefinition:
        for token in self.outputs:
            if token not in self.state_transition.produces:
                raise ValueError(
                    f"tool {self.name!r}: output {token!r} is not a state the tool produces; add it to state_transition.produces or remove it from outputs"
                )
        return self

    @model_validator(mode="after")
    def _parameter_names_unique(self) -> ToolDefinition:
        seen: dict[str, str] = {}  # Python name → real name
        for parameter in (*self.required_parameters, *self.optional_parameters):
            if parameter.name in seen.values():
                raise ValueError(f"tool {self.name!r} declares parameter {parameter.name!r} twice")
            if parameter.python_name in seen:
                raise ValueError(
                    f"tool {self.name!r}: parameters {seen[parameter.python_name]!r} and {parameter.name!r} are both passed as {parameter.python_name!r} in Python; rename one"
                )
            seen[parameter.python_name] = parameter.name
        return self

    @model_validator(mode="after")
    def _overwrites_something(self) -> ToolDefinition:
        if self.approval == "on_overwrite" and not any(parameter.role == "output" for parameter in self.parameters):
            raise ValueError(
                f"tool {self.name!r} asks for approval on_overwrite but has no output parameter: mark the parameter it writes to `role: output`, or use `approval: always`"
            )
        return self

    @model_validator(mode="after")
    def _effects_agree(self) -> ToolDefinition:
        if self.effects == "none" and self.output_parameters:
            names = ", ".join(parameter.name for parameter in self.output_parameters)
            raise ValueError(
                f"tool {self.name!r} says `effects: none` but writes to its output parameter {names}: use `effects: writes`, or drop `role: output`"
            )
        return self

    @model_validator(mode="after")
    def _retried_in_one_place(self) -> ToolDefinition:
        if self.retry is None:
            return self
        if self.http is not None:
            raise ValueError(
                f"tool {self.name!r} is called over HTTP, which its API retries (http_apis.{self.http.api_name}.retries, honouring Retry-After): "
                "remove `retry` from the tool and set `retries` on the API"
            )
        if self.approval != "never":
            raise ValueError(f"tool {self.name!r} asks for approval, and each try would ask a person again: remove `retry`, or `approval`")
        return self

    @property
    def side_effect(self) -> Literal["none", "writes", "sends"]:
        """What a call changes outside the kernel: ``effects`` when the catalog says; for an HTTP
        tool, what its method does (:data:`toolpath.registry.http_apis.METHOD_EFFECTS`: GET and HEAD
        nothing, POST ``"sends"``, PUT, PATCH and DELETE ``"writes"``); else ``"writes"`` for a tool with an output parameter or ``approval: on_overwrite``, ``"sends"``
        for ``approval: always`` (a person must agree first: mail, payments, deletions), and
        ``"none"`` otherwise."""
        if self.effects is not None:
            return self.effects
        if self.http is not None:
            return METHOD_EFFECTS[self.http.method]
        if self.output_parameters or self.approval == "on_overwrite":
            return "writes"
        return "sends" if self.approval == "always" else "none"

    @property
    def output_parameters(self) -> list[ToolParameter]:
        """The parameters naming what the tool writes to (``role: output``)."""
        return [parameter for parameter in self.parameters if parameter.role == "output"]

    @property
    def parameters(self) -> list[ToolParameter]:
        """Required parameters followed by optional ones."""
        return [*self.required_parameters, *self.optional_parameters]

    def signature(self) -> str:
        """A Python-style signature for instructions, e.g. ``parse_molecule(smiles: str) -> dict``."""
        parts = [f"{parameter.python_name}: {parameter.type}" for parameter in self.required_parameters]
        parts += [f"{parameter.python_name}: {parameter.type} = {parameter.default!r}" for parameter in self.optional_parameters]
        returns = self.return_spec.type if self.return_spec else "None"
        return f"{self.name}({', '.join(parts)}) -> {returns}"


def reachable_states(tools: Iterable[ToolDefinition], held: Iterable[str] = ()) -> set[str]:
    """Every state reachable from ``held`` by applying ``tools`` in any order: a forward fixpoint.

    Each tool fires once, when its last missing requirement is reached, so the cost is linear in
    the size of the tools' transitions.
    """
    reached = set(held)
    tools = list(tools)
    missing = [len(tool.state_transition.requires - reached) for tool in tools]
    consumers: dict[str, list[int]] = {}
    for index, tool in enumerate(tools):
        for token in tool.state_transition.requires - reached:
            consumers.setdefault(token, []).append(index)
    ready = [index for index, count in enumerate(missing) if count == 0]
    while ready:
        for token in tools[ready.pop()].state_transition.produces - reached:
            reached.add(token)
            for index in consumers.get(token, ()):
                missing[index] -= 1
                if missing[index] == 0:
                    ready.append(index)
    return reached
