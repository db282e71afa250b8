"""What the task-planning benchmark's learned variant learns from (``benchmarks/taskplan_training.py``):
taskplan requests as labelled examples, and our own TMDB development requests. Synthetic requests;
no benchmark data is read."""

from benchmark_module import load_benchmark

from toolpath.planner.learning.examples import read_examples

training = load_benchmark("taskplan_training")


def request(user_request, steps, chain, links=None):
    """A taskplan request: gold steps in words, the gold chain, and its links (default: a straight line)."""
    pairs = links if links is not None else list(zip(chain, chain[1:]))
    return {
        "id": 7,
        "user_request": user_request,
        "task_steps": steps,
        "task_nodes": [{"task": tool} for tool in chain],
        "task_links": [{"source": source, "target": target} for source, target in pairs],
    }


def test_gold_steps_that_call_tools_teach_their_words_and_other_steps_are_left_out():
    example = training.request_example(
        request(
            "Book me a train to Hangzhou tomorrow and remind me an hour before",
            [
                "Step 1 Call search_train to find trains to Hangzhou tomorrow.",
                "Step 2 Pick the earliest one",
                "Step 3: Call train_ticket_booking to book a seat on it",
                "Step 4 Call set_reminder to remind the user an hour before departure",
            ],
            ["search_train", "train_ticket_booking", "set_reminder"],
        ),
        "data.json:7",
    )
    assert example.tools == ("search_train", "train_ticket_booking", "set_reminder")
    assert example.steps == ("find trains to Hangzhou tomorrow", "book a seat on it", "remind the user an hour before departure")
    assert example.request.startswith("Book me a train") and example.identifier == "7"
    assert example.phrasings()[1] == ("book a seat on it", "train_ticket_booking")
    assert example.links == (("search_train", "train_ticket_booking"), ("train_ticket_booking", "set_reminder"))


def test_steps_that_name_other_tools_than_the_gold_chain_teach_no_words():
    example = training.request_example(
        request(
            "Change my hotel booking to Friday",
            ["Step 1 Call hotel_booking_query to find the booking", "Step 2 Call hotel_booking_change to move it to Friday"],
            ["hotel_booking_change"],
            links=[],
        ),
        "data.json:7",
    )
    assert example.tools == ("hotel_booking_change",) and example.steps == ()
    assert example.phrasings() == [("Change my hotel booking to Friday", "hotel_booking_change")]


def test_a_repeated_tool_keeps_the_gold_links_once():
    example = training.request_example(
        request(
            "Look up two postal codes",
            ["Step 1 Call postal_code_search to find the first code", "Step 2 Call postal_code_search again to find the second code"],
            ["postal_code_search", "postal_code_search"],
        ),
        "data.json:7",
    )
    assert example.tools == ("postal_code_search", "postal_code_search")
    assert example.steps == ("find the first code", "find the second code")
    assert example.links == (("postal_code_search", "postal_code_search"),)


def test_our_tmdb_development_requests_read_as_labelled_examples_with_both_request_and_steps():
    examples = read_examples(training.TMDB_DEV_REQUESTS)
    assert len(examples) >= 40
    assert len({example.identifier for example in examples}) == len(examples)
    assert all(example.request and len(example.steps) == len(example.tools) for example in examples)
    assert len({tool for example in examples for tool in example.tools}) >= 40  # the API broadly, not a handful of endpoints


def test_a_development_request_scores_like_a_benchmark_request():
    (example,) = [example for example in read_examples(training.TMDB_DEV_REQUESTS) if len(set(example.tools)) < len(example.tools)]
    as_request = training.as_taskplan_request(example)
    assert [node["task"] for node in as_request["task_nodes"]] == list(example.tools)
    assert as_request["task_links"] == [{"source": "SearchPeople", "target": "GetPersonDetail"}]
    assert as_request["task_steps"][0].startswith("Step 1 Call SearchPeople to ")
