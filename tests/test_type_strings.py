"""JSON Schema → type string on schemas an odd MCP server may send: the conversion stays small and
cheap whatever the schema's shape (issue 30, item 3)."""

import json

from toolpath.registry.type_strings import MAX_SCHEMA_DEPTH, MAX_TYPE_CHARS, check_type_string, type_from_json_schema

DEPTH_CAPPED_LIST = "list[" * MAX_SCHEMA_DEPTH + "Any" + "]" * MAX_SCHEMA_DEPTH


def nested(levels, kind):
    schema = {"type": "string"}
    for _ in range(levels):
        schema = {"type": kind, "items": schema}
    return schema


def test_a_30_level_union_of_two_array_types_converts_once_per_level_to_a_depth_capped_list():
    # Each level lists the array type twice; converting `items` once per listed type doubled the work per level (2**30 here).
    schema = nested(30, ["array", "array"])
    assert len(json.dumps(schema, separators=(",", ":"))) < 1100  # about 1 kB, like the 837-byte schema that stalled a host for 22 s
    assert type_from_json_schema(schema) == DEPTH_CAPPED_LIST


def test_a_deep_plain_array_is_followed_to_the_depth_cap_and_no_further():
    assert type_from_json_schema(nested(MAX_SCHEMA_DEPTH - 1, "array")) == "list[" * (MAX_SCHEMA_DEPTH - 1) + "str" + "]" * (MAX_SCHEMA_DEPTH - 1)
    assert type_from_json_schema(nested(30, "array")) == DEPTH_CAPPED_LIST
    check_type_string(DEPTH_CAPPED_LIST)


def test_fan_out_through_anyof_and_shared_sub_schemas_is_bounded():
    shared = {"type": "string"}
    for _ in range(30):
        shared = {"anyOf": [shared] * 10}  # 10**30 paths through one small Python object
    assert type_from_json_schema(shared) == "Any"
    alternatives = {"anyOf": [{"type": "string", "enum": [f"value {index}"]} for index in range(5000)]}
    assert type_from_json_schema(alternatives) == "Any"


def test_a_type_text_over_the_cap_becomes_its_general_type():
    assert type_from_json_schema({"type": "string", "enum": [f"unit {index}" for index in range(1000)]}) == "str"
    wide = {"type": "array", "items": {"anyOf": [{"type": "string", "enum": [f"choice {index}"]} for index in range(100)]}}
    assert type_from_json_schema(wide) == "list[Any]"  # the union over the cap is what becomes general
    assert len(type_from_json_schema({"type": "array", "items": {"type": "string", "enum": ["x" * (MAX_TYPE_CHARS - 20)]}})) <= MAX_TYPE_CHARS


def test_references_are_not_followed_and_non_objects_are_any():
    assert type_from_json_schema({"$ref": "#"}) == "Any"
    assert type_from_json_schema({"type": "array", "items": {"$ref": "#/$defs/node"}, "$defs": {"node": {"$ref": "#/$defs/node"}}}) == "list[Any]"
    assert [type_from_json_schema(value) for value in (True, None, [], "string", 3)] == ["Any"] * 5
    assert type_from_json_schema({"type": ["string", ["array"], {"x": 1}]}) == "Any"


def test_a_type_name_typo_is_answered_with_a_type_name():
    from toolpath.registry.type_strings import type_name_suggestion

    # difflib over every builtin class once answered 'filter' for 'integer'.
    assert [type_name_suggestion(name) for name in ("integer", "String", "boolean", "flaot", "Optinal", "frobnicate")] == [
        "int",
        "str",
        "bool",
        "float",
        "Optional",
        None,
    ]
