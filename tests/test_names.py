import builtins
import keyword
import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from toolpath.registry.names import KERNEL_RESERVED_NAMES, NameMap, handle_name, python_identifier


def usable(identifier):
    return (
        identifier.isidentifier()
        and not keyword.iskeyword(identifier)
        and not keyword.issoftkeyword(identifier)
        and not hasattr(builtins, identifier)
        and identifier not in KERNEL_RESERVED_NAMES
        and unicodedata.normalize("NFKC", identifier) == identifier
    )


def test_examples_from_real_catalogs():
    assert python_identifier("get-forecast") == "get_forecast"
    assert python_identifier("PDF&URLTool") == "PDF_URLTool"
    assert python_identifier("3d") == "_3d"
    assert python_identifier("") == "_unnamed"
    assert python_identifier("_") == "____"  # "_", "__" and "___" are IPython's output history
    assert python_identifier("café") == "café"
    assert python_identifier("ﬁle") == "_le"  # NFKC would turn the ligature into "fi"
    for reserved in ("lambda", "class", "match", "case", "In", "get_ipython", "print", "list"):
        assert python_identifier(reserved) == reserved + "_"


def test_handle_names_drop_the_tools_suffix():
    assert handle_name("inventory_tools") == "inventory"
    assert handle_name("lambda_tools") == "lambda_"
    assert handle_name("_tools") == "_tools"


def test_collisions_get_deterministic_suffixes_and_valid_names_keep_theirs():
    names = NameMap(["get-forecast", "get_forecast", "get forecast"])
    assert names.python("get_forecast") == "get_forecast"
    assert {names.python("get forecast"), names.python("get-forecast")} == {"get_forecast_2", "get_forecast_3"}
    assert NameMap(["get forecast", "get-forecast", "get_forecast"]).items() == names.items()


def test_taken_names_are_avoided():
    names = NameMap(["chemistry"], taken={"chemistry"})
    assert names.python("chemistry") == "chemistry_2"


@given(st.text(max_size=30))
def test_every_name_maps_to_a_usable_identifier(name):
    assert usable(python_identifier(name))


@given(st.lists(st.text(max_size=12), max_size=12))
def test_name_map_is_a_bijection_of_usable_identifiers(wire_names):
    names = NameMap(wire_names)
    identifiers = [names.python(name) for name in set(wire_names)]
    assert len(set(identifiers)) == len(identifiers)
    assert all(usable(identifier) for identifier in identifiers)
    assert all(names.wire(names.python(name)) == name for name in set(wire_names))
    assert NameMap(reversed(wire_names)).items() == names.items()


@given(st.lists(st.text(max_size=12), max_size=8))
def test_handle_name_maps_are_bijections_too(toolkits):
    names = NameMap(toolkits, base=handle_name)
    assert len({names.python(name) for name in set(toolkits)}) == len(set(toolkits))
    assert all(usable(names.python(name)) for name in set(toolkits))
