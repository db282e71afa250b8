"""The task-planning benchmark's learned catalogs (``benchmarks/taskplan_catalogs.py``): what the
training requests' gold chains teach a catalog, and nothing they do not. Synthetic requests; no
benchmark data is read."""

import copy
import json

from benchmark_module import load_benchmark

from toolpath.registry.catalog import read_catalog

catalogs = load_benchmark("taskplan_catalogs")


def catalog():
    tools = [
        {
            "name": name,
            "description": f"{name} tool",
            "state_transition": {"requires": [], "produces": [f"demo.result.{name}"]},
            "affordances": [name.replace("_", " ")],
        }
        for name in ("search_train", "train_ticket_booking", "weather_query")
    ]
    states = [{"token": f"demo.result.{tool['name']}", "description": f"The result of {tool['name']}"} for tool in tools]
    return {"domain": "demo", "package": "demo_api", "states": states, "tools": tools}


def request(*steps):
    """A training request whose gold chain calls ``steps`` (tool, words) in order."""
    return {
        "task_steps": [f"Step {number} Call {tool} to {words}." for number, (tool, words) in enumerate(steps, 1)],
        "task_nodes": [{"task": tool} for tool, _ in steps],
        "task_links": [{"source": first[0], "target": second[0]} for first, second in zip(steps, steps[1:])],
    }


def tool(document, name):
    return next(tool for tool in document["tools"] if tool["name"] == name)


def test_a_tool_that_usually_comes_first_becomes_a_prerequisite():
    search, book = ("search_train", "find trains to Shanghai"), ("train_ticket_booking", "book the ticket")
    training = [request(search, book)] * 7 + [request(book)] * 3  # 7 of 10 uses follow a search
    learned = catalogs.learned_catalog(catalog(), training)
    assert tool(learned, "train_ticket_booking")["state_transition"]["requires"] == ["demo.result.search_train"]
    assert tool(learned, "search_train")["state_transition"]["requires"] == []


def test_too_few_or_too_mixed_uses_teach_no_prerequisite():
    search, book = ("search_train", "find trains"), ("train_ticket_booking", "book the ticket")
    few = [request(search, book)] * (catalogs.PREREQUISITE_MIN_USES - 1)
    mixed = [request(search, book)] * 5 + [request(book)] * 5  # half the uses: below the share
    for training in (few, mixed):
        assert tool(catalogs.learned_catalog(catalog(), training), "train_ticket_booking")["state_transition"]["requires"] == []


def test_each_tool_gains_its_distinct_gold_phrasings_up_to_the_cap():
    phrasings = [f"check the weather in city {number}" for number in range(catalogs.LEARNED_PHRASINGS + 3)]
    training = [request(("weather_query", words)) for words in [phrasings[0], *phrasings]]
    learned = catalogs.learned_catalog(catalog(), training)
    assert tool(learned, "weather_query")["affordances"] == ["weather query", *phrasings[: catalogs.LEARNED_PHRASINGS]]
    assert tool(learned, "search_train")["affordances"] == ["search train"]


def test_the_described_catalog_is_untouched_and_the_learned_one_loads(tmp_path):
    described = catalog()
    kept = copy.deepcopy(described)
    search, book = ("search_train", "find trains"), ("train_ticket_booking", "book the ticket")
    learned = catalogs.learned_catalog(described, [request(search, book)] * 10)
    assert described == kept
    path = tmp_path / "demo.catalog.json"
    path.write_text(json.dumps(learned))
    loaded = read_catalog(path)
    booking = next(definition for definition in loaded.tools if definition.name == "train_ticket_booking")
    assert set(booking.state_transition.requires) == {"demo.result.search_train"}
