"""Fuzzing the catalog loader: whatever the file holds, the only exception that escapes is
CatalogError, and a catalog that loads renders planned cells that compile."""

import ast
import json
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolpath.catalogs import default_catalog_paths
from toolpath.planner import NoPlanError, StateGraph, plan, render_cell
from toolpath.planner.tasks.cell import KernelView
from toolpath.registry import CatalogError, load_catalogs, load_checked, read_catalog
from toolpath.registry.catalog_documents import parse_document
from toolpath.registry.catalog_yaml import yaml_parser

SHIPPED = default_catalog_paths()[0].read_text()
SHIPPED_DOCUMENT = yaml.safe_load(SHIPPED)
FIELDS = [
    "domain",
    "package",
    "states",
    "tools",
    "token",
    "description",
    "affordances",
    "name",
    "type",
    "state_transition",
    "requires",
    "produces",
    "required_parameters",
    "optional_parameters",
    "return_spec",
    "cost",
    "module",
    "server_name",
    "skills",
    "default",
    "state",
]

scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=12), st.sampled_from(FIELDS))
documents = st.recursive(
    scalars,
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(st.one_of(st.sampled_from(FIELDS), st.text(max_size=6)), children, max_size=5)),
    max_leaves=30,
)

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def directory(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


def compile_every_cell(loaded):
    """Plan each state some tool produces from nothing, render its cell, and compile it."""
    graph = StateGraph(loaded.registry, loaded.states)
    for token in sorted({token for tool in loaded.registry for token in tool.state_transition.produces}):
        try:
            found = plan(graph, [token])
        except NoPlanError:
            continue
        cell = render_cell(found, kernel=KernelView(loaded.registry))
        compile(cell.code, "<cell>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


def load_or_catalog_error(path):
    try:
        read_catalog(path)
    except CatalogError as error:
        assert error.problems and all(problem.path == str(path) for problem in error.problems)
        return
    try:
        loaded = load_catalogs([path])
    except CatalogError:
        return  # a cross-check (two tools sharing one function) refused it
    compile_every_cell(loaded)


@FUZZ
@given(text=st.text(max_size=400), suffix=st.sampled_from([".yaml", ".json"]))
def test_random_text(directory, text, suffix):
    path = directory / f"random{suffix}"
    path.write_text(text, encoding="utf-8")
    load_or_catalog_error(path)


@FUZZ
@given(document=documents, as_json=st.booleans())
def test_random_structures(directory, document, as_json):
    path = directory / ("structure.json" if as_json else "structure.yaml")
    path.write_text(json.dumps(document) if as_json else yaml.safe_dump(document), encoding="utf-8")
    load_or_catalog_error(path)


@FUZZ
@given(
    edits=st.lists(
        st.tuples(st.integers(min_value=0, max_value=len(SHIPPED)), st.integers(min_value=0, max_value=40), st.text(max_size=8)), min_size=1, max_size=6
    )
)
def test_mutated_shipped_catalog(directory, edits):
    text = SHIPPED
    for position, length, replacement in edits:
        position = min(position, len(text))
        text = text[:position] + replacement + text[position + length :]
    path = directory / "mutated.yaml"
    path.write_text(text, encoding="utf-8")
    load_or_catalog_error(path)


@FUZZ
@given(lines=st.permutations(SHIPPED.splitlines()[:60]))
def test_shuffled_lines(directory, lines):
    path = directory / "shuffled.yaml"
    path.write_text("\n".join(lines), encoding="utf-8")
    load_or_catalog_error(path)


#: Scalars whose YAML 1.1 type is easy to get wrong: booleans, nulls, numbers and dates written as text.
TRICKY_TEXTS = ["", *"yes no on off Yes OFF y n True ~ null 0x1f 0o17 1_000 1:30 -.inf .NaN 2024-01-31 2024-01-31T10:00:00Z << =".split()]
yaml_documents = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=12), st.sampled_from(TRICKY_TEXTS)),
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.one_of(st.text(max_size=6), st.sampled_from(TRICKY_TEXTS)), children, max_size=5)
    ),
    max_leaves=30,
)


def _boolean_words(node, key=False):
    """``{(line, column): (text, value)}`` of each unquoted yes/no/on/off value PyYAML composed as a boolean."""
    found = {}
    if isinstance(node, yaml.ScalarNode):
        if not key and node.tag == "tag:yaml.org,2002:bool" and not node.style and node.value.lower() in ("yes", "no", "on", "off"):
            found[(node.start_mark.line + 1, node.start_mark.column + 1)] = (node.value, node.value.lower() in ("yes", "on"))
    elif isinstance(node, yaml.SequenceNode):
        for child in node.value:
            found.update(_boolean_words(child))
    elif isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            found.update(_boolean_words(key_node, key=True) | _boolean_words(value_node))
    return found


@FUZZ
@given(document=yaml_documents, flow=st.sampled_from([None, True, False]), unquote=st.booleans())
def test_yaml_reads_as_pyyaml_reads_it(document, flow, unquote):
    text = yaml.safe_dump(document, default_flow_style=flow, sort_keys=False)
    if unquote:  # written bare, these are YAML 1.1 booleans and dates
        text = re.sub(r"'(yes|no|on|off|Yes|OFF|2024-01-31)'", r"\1", text)
    try:
        found, locator = parse_document(Path("document.yaml"), text)
    except CatalogError as error:
        # Refused where PyYAML takes the last of two equal keys or a boolean as a key: only for those.
        assert all("duplicate key" in problem.message or "quote it" in problem.message for problem in error.problems), error
        return
    assert found == yaml.safe_load(text)
    assert locator.boolean_words == _boolean_words(yaml.compose(text))


@FUZZ
@given(document=yaml_documents, flow=st.sampled_from([None, True, False]), as_json=st.booleans())
def test_every_field_is_located_where_pyyaml_composes_it(document, flow, as_json):
    text = json.dumps(document, indent=1) if as_json else yaml.safe_dump(document, default_flow_style=flow, sort_keys=False)
    if as_json and "Infinity" in text:
        return  # not JSON
    _, locator = parse_document(Path("document.json" if as_json else "document.yaml"), text)
    try:  # with the parser the reader uses (libyaml refuses some escapes that JSON allows)
        composed = yaml.compose(text.replace("\t", " ") if as_json else text, Loader=yaml.CSafeLoader if yaml_parser() == "libyaml" else yaml.SafeLoader)
    except yaml.YAMLError:
        composed = None
    assert composed is not None or locator.position([]) == (None, None)
    stack = [([], composed)] if composed is not None else []
    checked = 0
    while stack:  # every path that names one node (a mapping's first key of each text)
        location, node = stack.pop()
        assert locator.position(location) == (node.start_mark.line + 1, node.start_mark.column + 1), location
        checked += 1
        if isinstance(node, yaml.SequenceNode):
            stack.extend(([*location, index], child) for index, child in enumerate(node.value))
            for child in node.value:
                if isinstance(child, yaml.ScalarNode):
                    index = next(index for index, other in enumerate(node.value) if isinstance(other, yaml.ScalarNode) and other.value == child.value)
                    assert locator.item_index(location, child.value) == index
        elif isinstance(node, yaml.MappingNode):
            first = {}
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode):
                    first.setdefault(key.value, value)
            stack.extend(([*location, key], value) for key, value in first.items())


def test_yaml_with_anchors_reads_as_without():
    plain = "tools:\n  - name: a\n    flags: {x: yes, y: 3, z: 2024-01-31}\n  - name: b\n    flags: {x: yes, y: 3, z: 2024-01-31}\n"
    anchored = "tools:\n  - name: a\n    flags: &f {x: yes, y: 3, z: 2024-01-31}\n  - name: b\n    flags: *f\n"
    plain_document, plain_locator = parse_document(Path("plain.yaml"), plain)
    anchored_document, anchored_locator = parse_document(Path("anchored.yaml"), anchored)
    assert plain_document == anchored_document == yaml.safe_load(plain)
    assert plain_locator.boolean_words == {(3, 16): ("yes", True), (5, 16): ("yes", True)}
    assert anchored_locator.boolean_words == {(3, 19): ("yes", True)}


def test_invalid_bytes_are_a_catalog_error(directory):
    path = directory / "binary.yaml"
    path.write_bytes(b"\xff\xfe\x00domain")
    with pytest.raises(CatalogError, match="cannot read"):
        read_catalog(path)


def string_leaves(document, location=()):
    """Paths to every string in ``document`` (names, tokens, descriptions, types...)."""
    if isinstance(document, str):
        yield location
    elif isinstance(document, dict):
        for key, value in document.items():
            yield from string_leaves(value, (*location, key))
    elif isinstance(document, list):
        for index, value in enumerate(document):
            yield from string_leaves(value, (*location, index))


LEAVES = list(string_leaves(SHIPPED_DOCUMENT))
# Names and tokens in the shipped text, as written: `token: x`, `name: x`, list items `chemistry.x`.
NAMES_IN_TEXT = [match.span() for match in re.finditer(r"(?<=token: )[\w.]+|(?<=name: )\w+|chemistry\.\w+", SHIPPED)]
unprintable = st.characters(categories=["Cc", "Cs"])
# Integers Python refuses to read or print (over 4,300 decimal digits), in each way YAML writes
# integers: (prefix, repeated part, fewest and most repetitions), each count past the limit.
INTEGER_FORMS = {
    "decimal": ("", "7", 4_301, 6_000),
    "negative": ("-", "7", 4_301, 6_000),
    "hexadecimal": ("0x", "f", 3_600, 5_000),  # 16**3600 has 4,335 decimal digits
    "binary": ("0b", "1", 14_300, 20_000),  # 2**14300 has 4,305
    "sexagesimal": ("1", ":30", 1_500, 3_000),  # written longer than 4,300 characters
}
huge_integers = st.sampled_from(sorted(INTEGER_FORMS)).flatmap(
    lambda form: st.integers(INTEGER_FORMS[form][2], INTEGER_FORMS[form][3]).map(lambda count: INTEGER_FORMS[form][0] + INTEGER_FORMS[form][1] * count)
)


def replaced(document, location, value):
    """A copy of ``document`` with the leaf at ``location`` replaced by ``value(old leaf)``."""
    document = json.loads(json.dumps(document))
    parent = document
    for key in location[:-1]:
        parent = parent[key]
    parent[location[-1]] = value(parent[location[-1]])
    return document


@FUZZ
@given(location=st.sampled_from(LEAVES), character=unprintable, offset=st.integers(min_value=0, max_value=40), as_json=st.booleans())
def test_unprintable_characters_in_any_string(directory, location, character, offset, as_json):
    """A control character or lone surrogate in a name or token is refused; in a description or a
    type it loads, and the cells still compile."""
    document = replaced(SHIPPED_DOCUMENT, location, lambda text: text[: offset % (len(text) + 1)] + character + text[offset % (len(text) + 1) :])
    path = directory / ("unprintable.json" if as_json else "unprintable.yaml")
    # Both writers escape what they cannot write raw: JSON as \u escapes (four hex digits), YAML in a double-quoted scalar.
    path.write_text(json.dumps(document) if as_json else yaml.safe_dump(document), encoding="utf-8")
    load_or_catalog_error(path)
    in_a_token_list = len(location) > 1 and location[-2] in ("requires", "produces")
    if location[-1] in ("token", "name", "domain", "package", "state") or in_a_token_list:
        with pytest.raises(CatalogError):
            read_catalog(path)


@FUZZ
@given(span=st.sampled_from(NAMES_IN_TEXT), character=unprintable, offset=st.integers(min_value=0, max_value=40))
def test_unprintable_escape_in_a_shipped_name_or_token(directory, span, character, offset):
    start, end = span
    name = SHIPPED[start:end]
    cut = offset % (len(name) + 1)
    escape = f"\\x{ord(character):02x}" if ord(character) < 0x100 else f"\\u{ord(character):04x}"
    path = directory / "escaped.yaml"
    path.write_text(SHIPPED[:start] + '"' + name[:cut] + escape + name[cut:] + '"' + SHIPPED[end:], encoding="utf-8")
    with pytest.raises(CatalogError) as caught:
        read_catalog(path)
    assert all(problem.line is not None for problem in caught.value.problems)


@FUZZ
@given(location=st.sampled_from(LEAVES), number=huge_integers, as_json=st.booleans())
def test_huge_integers_anywhere(directory, location, number, as_json):
    document = replaced(SHIPPED_DOCUMENT, location, lambda text: "@HUGE@")
    if as_json:
        if not number.lstrip("-").isdigit():
            return  # JSON writes integers in decimal only
        text, path = json.dumps(document, indent=1), directory / "huge.json"
    else:
        text, path = yaml.safe_dump(document), directory / "huge.yaml"
    path.write_text(text.replace('"@HUGE@"', number).replace("'@HUGE@'", number).replace("@HUGE@", number), encoding="utf-8")
    with pytest.raises(CatalogError) as caught:
        read_catalog(path)
    (problem,) = caught.value.problems
    assert problem.code == "TP100" and problem.line is not None and "4,300 digits" in problem.message
    line = path.read_text().splitlines()[problem.line - 1]
    assert line[problem.column - 1 :].startswith(number[:20])


def test_control_characters_in_descriptions_and_types_still_give_cells_that_compile(tmp_path):
    """Descriptions may hold newlines, tabs and NULs; types are only checked by lint. Neither may
    reach the cell's code as raw text."""
    document = json.loads(json.dumps(SHIPPED_DOCUMENT))
    for tool in document["tools"]:
        tool["description"] = "first line\nsecond\rthird\x00\t# not code\x1b[31m"
        for parameter in tool.get("required_parameters", []) + tool.get("optional_parameters", []):
            parameter["type"] += "\r\nimport os\x00"
            parameter["description"] = "value\r\nos.system('x')"
    for state in document["states"]:
        state["description"] = "held\n\x00"
    path = tmp_path / "descriptions.json"
    path.write_text(json.dumps(document))
    compile_every_cell(load_catalogs([path]))
    with pytest.raises(CatalogError) as caught:  # what `toolpath cell` and `run` load with
        load_checked([path])
    assert {problem.code for problem in caught.value.problems} == {"TP006"}
