"""Fuzzing the catalog loader: whatever the file holds, the only exception that escapes is CatalogError."""

import json

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from catalogs import default_catalog_paths
from registry import CatalogError, read_catalog

SHIPPED = default_catalog_paths()[0].read_text()
FIELDS = ["domain", "package", "states", "tools", "token", "description", "affordances", "name", "type", "state_transition", "requires", "produces", "required_parameters", "optional_parameters", "return_spec", "cost", "module", "server_name", "skills", "default", "state"]

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


def load_or_catalog_error(path):
    try:
        read_catalog(path)
    except CatalogError as error:
        assert error.problems and all(problem.path == str(path) for problem in error.problems)


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
@given(edits=st.lists(st.tuples(st.integers(min_value=0, max_value=len(SHIPPED)), st.integers(min_value=0, max_value=40), st.text(max_size=8)), min_size=1, max_size=6))
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


def test_invalid_bytes_are_a_catalog_error(directory):
    path = directory / "binary.yaml"
    path.write_bytes(b"\xff\xfe\x00domain")
    with pytest.raises(CatalogError, match="cannot read"):
        read_catalog(path)
