from enum import Enum

import pytest
from pydantic import ValidationError

from toolpath.registry import AmbiguousToolNameError, ReturnSpec, State, StateTransition, ToolDefinition, ToolNotFoundError, ToolParameter, ToolRegistry


class Stage(str, Enum):  # noqa: UP042 -- catalogs written before StrEnum use this form
    PARSED = "demo.parsed"


def tool(name, server=None, module="demo.module", **fields):
    return ToolDefinition(name=name, server_name=server, module=module, **fields)


def test_state_is_immutable_and_compares_by_token():
    first = State("demo.parsed", "parsed", ["parse"])
    second = State("demo.parsed", "another description")
    assert first == second and hash(first) == hash(second)
    assert len({first, second}) == 1
    with pytest.raises(ValidationError):
        first.token = "other"


def test_state_token_must_not_be_blank_or_spaced():
    with pytest.raises(ValidationError):
        State("")
    with pytest.raises(ValidationError):
        State("demo parsed")


@pytest.mark.parametrize("collection", [list, tuple, set, frozenset])
def test_transition_normalises_states_strings_and_enums(collection):
    transition = StateTransition(requires=collection([State("demo.a"), "demo.b", Stage.PARSED]), produces=collection(["demo.c"]))
    assert transition.requires == frozenset({"demo.a", "demo.b", "demo.parsed"})
    assert transition.model_dump() == {"requires": ["demo.a", "demo.b", "demo.parsed"], "produces": ["demo.c"]}


def test_transition_rejects_a_lone_string_instead_of_splitting_it():
    with pytest.raises(ValidationError, match="single str"):
        StateTransition(requires="demo.a")


def test_register_stores_a_copy_with_sequential_ids():
    registry = ToolRegistry()
    original = tool("parse")
    first = registry.register_tool(original)
    second = registry.register_tool(tool("describe"))
    assert (first, second) == (0, 1)
    assert original.id is None
    stored = registry.get_tool_by_id(0)
    assert stored is not original and stored.id == 0


def test_registered_copy_shares_nothing_the_caller_can_change():
    registry = ToolRegistry()
    original = ToolDefinition(
        name="fetch",
        module="pkg.fetch",
        required_parameters=[ToolParameter(name="urls", type="list[str]", default=["a"])],
        return_spec=ReturnSpec(name="pages", type="list"),
        affordances=["fetch pages"],
    )
    registry.register_tool(original)
    original.required_parameters.append(ToolParameter(name="extra", type="int"))
    original.required_parameters[0].default.append("b")
    original.required_parameters[0].description = "changed"
    original.return_spec.name = "changed"
    original.affordances.append("changed")
    stored = registry.get_tool_by_name("fetch")
    assert [parameter.name for parameter in stored.required_parameters] == ["urls"]
    assert stored.required_parameters[0].default == ["a"] and stored.required_parameters[0].description == ""
    assert stored.return_spec.name == "pages" and stored.affordances == ["fetch pages"]


def test_each_stored_tool_tells_the_fields_it_was_given():
    registry = ToolRegistry()
    registry.register_tool(ToolDefinition(name="parse", module="pkg.parse", description="Parse."))
    registry.register_tool(ToolDefinition(name="describe", module="pkg.describe", description="Describe."))
    registry.register_tool(ToolDefinition(name="bare", module="pkg.bare", cost=2.0))
    parse, describe, bare = (registry.get_tool_by_name(name) for name in ("parse", "describe", "bare"))
    assert parse.model_fields_set == describe.model_fields_set == {"name", "module", "description", "id"}
    assert bare.model_fields_set == {"name", "module", "cost", "id"}
    changed = parse.model_copy(update={"affordances": ["parse text"]})
    assert "affordances" in changed.model_fields_set and "affordances" not in describe.model_fields_set | parse.model_fields_set
    assert describe.model_dump(exclude_unset=True) == {"name": "describe", "module": "pkg.describe", "description": "Describe.", "id": 1}


def test_ids_are_never_reused_after_removal():
    registry = ToolRegistry()
    registry.register_tool(tool("a"))
    registry.remove_tool_by_name("a")
    assert registry.register_tool(tool("a")) == 1
    with pytest.raises(ToolNotFoundError, match="no tool with id 0"):
        registry.get_tool_by_id(0)


def test_module_resolution_order():
    registry = ToolRegistry(package="pkg")
    registry.register_tool(ToolDefinition(name="by_package"))
    registry.register_tool(ToolDefinition(name="by_module", module="explicit.module"))
    registry.register_tool(ToolDefinition(name="by_override", module="explicit.module", module_override="override.module"))
    assert registry.get_tool_by_name("by_package").module == "pkg.by_package"
    assert registry.get_tool_by_name("by_module").module == "explicit.module"
    assert registry.get_tool_by_name("by_override").module == "override.module"


def test_unresolvable_module_says_how_to_fix_it_and_registers_nothing():
    registry = ToolRegistry()
    with pytest.raises(ValueError, match=r"ToolRegistry\(package=...\)"):
        registry.register_tool(ToolDefinition(name="orphan"))
    assert len(registry) == 0
    assert registry.register_tool(tool("next")) == 0


def test_two_servers_may_share_a_name_and_bare_lookup_is_ambiguous():
    registry = ToolRegistry()
    registry.register_tool(tool("search", server="web"))
    registry.register_tool(tool("search", server="files"))
    with pytest.raises(AmbiguousToolNameError, match="files, web"):
        registry.get_tool_by_name("search")
    assert registry.get_tool_by_server_and_name("files", "search").id == 1
    registry.remove_tool_by_id(0)
    assert registry.get_tool_by_name("search").server_name == "files"
    assert registry.get_id_by_name("search") == 1
    assert registry.get_name_by_id(1) == "search"


def test_same_server_and_name_is_rejected():
    registry = ToolRegistry()
    registry.register_tool(tool("search", server="web"))
    with pytest.raises(ValueError, match="already has a tool named 'search'"):
        registry.register_tool(tool("search", server="web"))
    assert len(registry) == 1


def test_lookups_that_miss_name_what_was_looked_up():
    registry = ToolRegistry()
    with pytest.raises(ToolNotFoundError, match="'ghost'"):
        registry.get_tool_by_name("ghost")
    with pytest.raises(ToolNotFoundError, match="'ghost' on server 'web'"):
        registry.get_tool_by_server_and_name("web", "ghost")
    with pytest.raises(ToolNotFoundError):
        registry.remove_tool_by_id(7)


def test_tool_definition_validates_parameters_and_exports_json_schema():
    with pytest.raises(ValidationError, match="is not a parameter name"):
        ToolParameter(name="2nd value", type="str")
    assert ToolParameter(name="class", type="str").python_name == "class_"  # a keyword is passed by its Python name
    with pytest.raises(ValidationError, match="'class' and 'class_' are both passed as 'class_' in Python"):
        ToolDefinition(name="t", required_parameters=[{"name": "class", "type": "str"}, {"name": "class_", "type": "str"}])
    with pytest.raises(ValidationError, match="declares parameter 'x' twice"):
        ToolDefinition(name="t", required_parameters=[{"name": "x", "type": "int"}], optional_parameters=[{"name": "x", "type": "int"}])
    with pytest.raises(ValidationError):
        ToolDefinition(name="t", cost=-1)
    schema = ToolDefinition.model_json_schema()
    assert "state_transition" in schema["properties"]
    definition = ToolDefinition(
        name="t",
        required_parameters=[ToolParameter(name="smiles", type="str")],
        optional_parameters=[ToolParameter(name="radius", type="int", default=2)],
        return_spec=ReturnSpec(name="out", type="rdkit.Chem.Mol"),
    )
    assert definition.signature() == "t(smiles: str, radius: int = 2) -> rdkit.Chem.Mol"


def test_choices_must_list_exactly_the_values_a_literal_allows():
    how = ToolParameter(name="how", type="Literal['sum', 'mean']", choices={"sum": ["total"], "mean": ["average"]})
    assert how.choices == {"sum": ["total"], "mean": ["average"]}
    with pytest.raises(ValidationError, match=r"choices name \['sum'\] but its type .* allows \['mean', 'sum'\]"):
        ToolParameter(name="how", type="Literal['sum', 'mean']", choices={"sum": ["total"]})
    with pytest.raises(ValidationError, match="must be non-empty text"):
        ToolParameter(name="how", type="Literal['sum']", choices={"sum": [" "]})
    with pytest.raises(ValidationError, match="choices is empty"):
        ToolParameter(name="how", type="str", choices={})


def test_a_count_is_a_whole_number():
    assert ToolParameter(name="bins", type="int", meaning="count").meaning == "count"
    with pytest.raises(ValidationError, match="meaning 'count' is a whole number; its type must be int, not str"):
        ToolParameter(name="bins", type="str", meaning="count")
    with pytest.raises(ValidationError, match="meaning"):
        ToolParameter(name="x", type="str", meaning="colour")


def test_a_probe_is_a_function_path():
    assert State("tabular.file_given", input=True, probe="toolpath.catalogs.tabular.probe:probe_table").probe.endswith(":probe_table")
    for bad in ("toolpath.catalogs.tabular.probe", "probe_table", "os:system()", "a b:c"):
        with pytest.raises(ValidationError, match="is not a function's path; write 'package.module:function'"):
            State("tabular.file_given", input=True, probe=bad)


def test_a_tools_side_effect_is_read_from_what_it_declares():
    table = ToolParameter(name="table", type="pandas.DataFrame")
    output = ToolParameter(name="path", type="str", role="output")
    assert ToolDefinition(name="count", required_parameters=[table]).side_effect == "none"
    assert ToolDefinition(name="save", required_parameters=[table], optional_parameters=[output]).side_effect == "writes"
    assert ToolDefinition(name="mail", approval="always").side_effect == "sends"
    assert ToolDefinition(name="post", effects="sends").side_effect == "sends"
    with pytest.raises(ValidationError, match="says `effects: none` but writes to its output parameter path"):
        ToolDefinition(name="save", optional_parameters=[output], effects="none")
