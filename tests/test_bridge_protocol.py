"""The host end of the bridge against a hostile or broken peer: raw frames on a real Unix socket.

No kernel is needed: each test starts a :class:`toolpath.kernel.bridge.host.Bridge` on its own event loop and talks
to it the way any local process could, byte by byte.
"""

from __future__ import annotations

import asyncio
import json
import os
import pickle
import struct
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolpath.kernel import Toolkit
from toolpath.kernel.bridge.host import MAX_ERROR_MESSAGE_CHARS, Bridge
from toolpath.kernel.inside import wire
from toolpath.kernel.inside.protocol import MAX_FRAME_BYTES
from toolpath.kernel.inside.result_store import ResultStore

HEADER = struct.Struct(">I")


class CreatesFile:
    """Unpickling this creates a file: proof that the host ran code from a pickle."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def pickled_frame(envelope: dict, pickled: dict) -> bytes:
    envelope_bytes = json.dumps(envelope).encode()
    body = wire.PICKLE_CODEC + HEADER.pack(len(envelope_bytes)) + envelope_bytes + pickle.dumps(pickled)
    return HEADER.pack(len(body)) + body


def json_frame(message) -> bytes:
    body = wire.JSON_CODEC + json.dumps(message).encode()
    return HEADER.pack(len(body)) + body


async def slow(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return "done"


def stock_level(sku: str) -> int:
    return len(sku)


def shout(size: int) -> None:
    raise ValueError("x" * size)


def rows(count: int) -> list:
    return [{"row": index} for index in range(count)]


class Host:
    """A bridge on a private directory, with a toolkit bound as ``inventory``."""

    def __init__(self, **options):
        self.directory = tempfile.mkdtemp(prefix="tp-bridge-")  # short: Unix socket paths are capped at ~100 bytes
        toolkit = Toolkit("inventory", [slow, stock_level, shout, rows])
        targets = {f"inventory.{name}": (toolkit, name) for name in toolkit.functions}
        self.bridge = Bridge(self.directory, 7, targets.get, **{"max_result_bytes": 10_000, **options})

    async def __aenter__(self) -> Host:
        await self.bridge.start()
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self.bridge.close()
        os.rmdir(self.directory)

    async def connect(self, hello: bytes | None = None) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await asyncio.open_unix_connection(self.bridge.path)
        writer.write(hello if hello is not None else json_frame({"op": "hello", "token": self.bridge.token, "generation": 7}))
        return reader, writer

    async def admitted(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await self.connect()
        assert (await receive(reader))["op"] == "welcome"
        return reader, writer


async def receive(reader: asyncio.StreamReader, timeout: float = 5.0) -> dict:
    body = await asyncio.wait_for(wire.read_frame(reader), timeout)
    assert body is not None, "the host closed the connection without answering"
    return wire.decode(body)


async def replies(reader: asyncio.StreamReader, count: int) -> dict:
    """The next ``count`` replies, by call id (``None`` for replies that name no call)."""
    answers: dict = {}
    for _ in range(count):
        message = await receive(reader)
        answers.setdefault(message.get("id"), []).append(message)
    return answers


def answer_then_a_valid_call(frame: bytes, follow_up_id: int, **options) -> tuple[dict, dict]:
    """Send ``frame`` on an admitted connection, then a valid call: both replies, in order."""

    async def scenario():
        async with Host(**options) as host:
            reader, writer = await host.admitted()
            writer.write(frame)
            answer = await receive(reader)
            writer.write(json_frame(call(follow_up_id)))
            after = await receive(reader)
            writer.close()
            return answer, after

    return asyncio.run(scenario())


def call(call_id, target="inventory.stock_level", args=("abc",), **extra) -> dict:
    return {"op": "call", "id": call_id, "target": target, "args": list(args), "kwargs": {}, "cell": "", **extra}


def test_a_pickled_hello_is_refused_without_being_unpickled(tmp_path):
    marker = tmp_path / "host-ran-code"

    async def scenario():
        async with Host() as host:
            token = host.bridge.token
            reader, writer = await host.connect(pickled_frame({"op": "hello"}, {"token": CreatesFile(str(marker)), "generation": 7}))
            answer = await receive(reader)
            writer.close()
            # A hello with the right token, but pickled, is refused too: the hello is JSON only.
            reader, writer = await host.connect(pickled_frame({"op": "hello", "generation": 7}, {"token": token}))
            second = await receive(reader)
            writer.close()
            return answer, second

    answer, second = asyncio.run(scenario())
    assert answer["op"] == "refused" and second["op"] == "refused"
    assert "JSON hello" in answer["reason"]
    assert not marker.exists()


@pytest.mark.parametrize(
    "hello",
    [
        {"op": "hello", "token": "é" * 64, "generation": 7},  # non-ASCII token
        {"op": "hello", "token": 12345, "generation": 7},
        {"op": "hello", "token": "0" * 64, "generation": "7"},
        {"op": "hello", "token": "0" * 64, "generation": 7, "extra": True},
        {"op": "hello", "token": "0" * 64},
        ["hello"],
    ],
    ids=["non-ascii-token", "integer-token", "text-generation", "extra-field", "missing-generation", "a-list"],
)
def test_a_malformed_hello_gets_a_refusal(hello):
    async def scenario():
        async with Host() as host:
            reader, writer = await host.connect(json_frame(hello))
            answer = await receive(reader)
            writer.close()
            return answer

    answer = asyncio.run(scenario())
    assert answer["op"] == "refused"


def test_an_oversized_hello_is_refused_at_once_without_reading_it():
    async def scenario():
        async with Host() as host:
            # Claims 2 GiB and sends none of it: the host must not wait for (or allocate) the body.
            reader, writer = await host.connect(HEADER.pack(2**31))
            answer = await receive(reader, timeout=2.0)
            closed = await asyncio.wait_for(reader.read(), 2.0)
            writer.close()
            return answer, closed

    answer, rest = asyncio.run(scenario())
    assert answer["op"] == "refused" and "too long" in answer["reason"]
    assert rest == b""  # and the connection is closed


def test_a_bogus_length_after_the_hello_closes_only_that_connection_and_answers_its_calls():
    async def scenario():
        async with Host() as host:
            reader, writer = await host.admitted()
            writer.write(json_frame(call(1, "inventory.slow", [0.3])))
            await asyncio.sleep(0.05)  # the slow call is in flight
            writer.write(HEADER.pack(2**32 - 1))
            first = await receive(reader, timeout=2.0)
            second = await receive(reader, timeout=2.0)
            closed = await asyncio.wait_for(reader.read(), 2.0)
            writer.close()
            # The session goes on: a new connection is admitted and served.
            reader, writer = await host.admitted()
            writer.write(json_frame(call(2)))
            later = await receive(reader)
            writer.close()
            return first, second, closed, later

    first, second, closed, later = asyncio.run(scenario())
    assert first["op"] == "closing" and "4,294,967,295 bytes" in first["reason"]
    assert second == {"op": "result", "id": 1, "value": "done"}  # the call in flight still got its reply
    assert closed == b""
    assert later == {"op": "result", "id": 2, "value": 3}


@pytest.mark.parametrize(
    "message, expected",
    [
        (call(["a", "list"]), "call id must be an integer or a string"),
        (call(True), "call id must be an integer or a string"),
        ({"op": "call", "target": "inventory.stock_level", "args": ["a"], "kwargs": {}}, "call id"),
        (call(3, target=["inventory", "stock_level"]), "target must be a string"),
        ({"op": "call", "id": 3, "args": ["a"], "kwargs": {}}, "target must be a string"),
        ({**call(3), "args": "abc"}, "args must be a list"),
        ({**call(3), "kwargs": ["sku"]}, "kwargs must be a mapping"),
        ({**call(3), "cell": 5}, "cell must be a string"),
        ({"op": "launch", "id": 3}, "unknown op 'launch'"),
        ({"op": ["call"], "id": 3}, "unknown op"),
        ({"op": "cancel", "id": {"a": 1}}, "call id must be an integer or a string"),
        ({"id": 3}, "'op' key"),
    ],
    ids=[
        "list-id",
        "bool-id",
        "missing-id",
        "list-target",
        "missing-target",
        "text-args",
        "list-kwargs",
        "integer-cell",
        "unknown-op",
        "list-op",
        "dict-id-cancel",
        "no-op",
    ],
)
def test_a_malformed_message_gets_an_error_reply_and_the_connection_goes_on(message, expected):
    answer, after = answer_then_a_valid_call(json_frame(message), 99)
    assert answer["op"] == "error" and answer["type"] == "BridgeError"
    assert expected in answer["message"]
    assert after == {"op": "result", "id": 99, "value": 3}


def test_a_call_id_already_in_flight_is_refused_and_the_first_call_still_replies():
    async def scenario():
        async with Host() as host:
            reader, writer = await host.admitted()
            writer.write(json_frame(call(5, "inventory.slow", [0.2])))
            writer.write(json_frame(call(5)))
            answers = await replies(reader, 2)
            writer.close()
            return answers[5]

    refusal, result = asyncio.run(scenario())
    assert refusal["op"] == "error" and "already in flight" in refusal["message"]
    assert result == {"op": "result", "id": 5, "value": "done"}


def test_a_json_only_host_refuses_pickled_arguments_without_loading_them(tmp_path):
    marker = tmp_path / "host-ran-code"
    frame = pickled_frame({"op": "call", "id": 1, "target": "inventory.stock_level", "kwargs": {}, "cell": ""}, {"args": [CreatesFile(str(marker))]})
    refusal, accepted = answer_then_a_valid_call(frame, 2, accept_pickles=False)
    assert refusal["id"] == 1 and refusal["type"] == "BridgeError"
    assert Bridge(tempfile.gettempdir(), 7, {}.get, 10_000, accept_pickles=False).spec()["json_only"] is True  # the kernel is told
    assert "accepts JSON only" in refusal["message"] and "stock_level" in refusal["message"]
    assert not marker.exists()
    assert accepted == {"op": "result", "id": 2, "value": 3}


def test_a_huge_exception_message_is_cut_to_fit_the_frame_limit():
    async def scenario():
        async with Host(max_result_bytes=1_000) as host:
            reader, writer = await host.admitted()
            writer.write(json_frame(call(1, "inventory.shout", [2_000_000])))
            body = await asyncio.wait_for(wire.read_frame(reader, wire.frame_limit(1_000)), 5)
            writer.close()
            return wire.decode(body)

    answer = asyncio.run(scenario())
    assert answer["type"] == "ValueError"
    assert len(answer["message"]) <= MAX_ERROR_MESSAGE_CHARS and "characters truncated" in answer["message"]


def test_an_offload_that_fails_is_reported_as_a_store_error_naming_the_file(tmp_path):
    store_file = tmp_path / "toolpath.db"
    store_file.write_bytes(b"this is not a SQLite database" * 100)

    async def scenario():
        async with Host(max_result_bytes=1_000, result_store=ResultStore(store_file)) as host:
            reader, writer = await host.admitted()
            writer.write(json_frame(call(1, "inventory.rows", [1_000])))
            answer = await receive(reader)
            writer.close()
            return answer

    answer = asyncio.run(scenario())
    assert answer["op"] == "error" and answer["type"] == "ResultTooLarge"
    assert str(store_file) in answer["message"] and "offloading it" in answer["message"]


def test_frame_limits_follow_max_result_bytes():
    assert wire.frame_limit(1_000_000) == 1_000_000 + 65_536
    assert wire.frame_limit(2**32) == MAX_FRAME_BYTES


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=10)),
    lambda children: st.one_of(st.lists(children, max_size=3), st.dictionaries(st.text(max_size=8), children, max_size=3)),
    max_leaves=10,
)
messages = st.dictionaries(
    st.sampled_from(["op", "id", "target", "args", "kwargs", "cell", "token", "generation"]),
    st.one_of(json_values, st.sampled_from(["call", "cancel", "hello", "inventory.stock_level", "inventory.missing"])),
    max_size=7,
)
bodies = st.one_of(
    messages.map(lambda message: wire.JSON_CODEC + json.dumps(message).encode()),
    st.binary(max_size=200),
    st.binary(max_size=60).map(lambda data: wire.PICKLE_CODEC + data),
)
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(body=bodies)
def test_fuzzed_hellos_are_refused(body):
    async def scenario():
        async with Host() as host:
            reader, writer = await host.connect(HEADER.pack(len(body)) + body)
            answer = await receive(reader)
            writer.close()
            return answer

    assert asyncio.run(scenario())["op"] == "refused"


@FUZZ
@given(frames=st.lists(bodies, min_size=1, max_size=4))
def test_fuzzed_frames_after_the_hello_never_stop_the_host(frames):
    async def scenario():
        async with Host(accept_pickles=False) as host:
            reader, writer = await host.admitted()
            for body in frames:
                writer.write(HEADER.pack(len(body)) + body)
            writer.write(json_frame(call(10**12)))
            seen = []
            while True:
                answer = await receive(reader)
                if answer.get("id") == 10**12:
                    writer.close()
                    return seen, answer
                seen.append(answer)

    seen, last = asyncio.run(scenario())
    assert last == {"op": "result", "id": 10**12, "value": 3}
    assert all(answer["op"] in ("error", "result") for answer in seen)


def decode_error() -> None:
    b"\xff".decode()


def test_reply_sizes_ids_and_builtin_types_stay_usable():
    Huge = type("E" * 200_000, (LookupError,), {})

    def huge() -> None:
        raise Huge("x")

    async def scenario():
        async with Host(max_result_bytes=1_000) as host:
            toolkit = Toolkit("other", [huge, decode_error])
            targets = {f"other.{name}": (toolkit, name) for name in toolkit.functions}
            host.bridge.lookup = targets.get
            reader, writer = await host.admitted()
            writer.write(json_frame(call(1, "other.huge", [])))
            writer.write(json_frame(call(2, "other.decode_error", [])))
            writer.write(json_frame(call(3, "other." + "\\" * 33_000, [])))  # echoed in its error
            writer.write(json_frame(call("i" * 5_000)))
            answers = {}
            for _ in range(4):
                body = await asyncio.wait_for(wire.read_frame(reader, host.bridge.max_frame_bytes), 5)
                message = wire.decode(body)
                answers[message.get("id")] = message
            writer.close()
            return answers

    answers = asyncio.run(scenario())
    assert answers[1]["builtin"] == "LookupError" and len(answers[1]["type"]) <= 200
    assert answers[2]["type"] == "UnicodeDecodeError" and answers[2]["builtin"] == "UnicodeError"  # a ValueError too
    assert answers[3]["op"] == "error"
    assert "at most 100 characters" in answers[None]["message"]


def test_a_call_whose_json_cannot_be_parsed_is_answered_by_its_id():
    async def scenario():
        async with Host() as host:
            reader, writer = await host.admitted()
            body = wire.JSON_CODEC + b'{"op":"call","id":8,"target":"inventory.stock_level","args":[' + b"9" * 5_000 + b"]}"
            writer.write(HEADER.pack(len(body)) + body)
            answer = await receive(reader)
            writer.close()
            return answer

    answer = asyncio.run(scenario())
    assert answer["id"] == 8 and answer["type"] == "BridgeError"


def test_an_argument_that_exits_when_unpickled_does_not_stop_the_host():
    class Exits:
        def __reduce__(self):
            return (exit, ())

    frame = pickled_frame({"op": "call", "id": 1, "target": "inventory.stock_level", "kwargs": {}, "cell": ""}, {"args": [Exits()]})
    refused, later = answer_then_a_valid_call(frame, 2)
    assert refused["id"] == 1 and "SystemExit" in refused["message"]
    assert later == {"op": "result", "id": 2, "value": 3}


def test_calls_of_a_connection_that_hangs_up_are_cancelled():
    finished = []

    async def side_effect(seconds: float) -> None:
        await asyncio.sleep(seconds)
        finished.append(True)

    async def scenario():
        async with Host() as host:
            toolkit = Toolkit("other", [side_effect])
            host.bridge.lookup = {"other.side_effect": (toolkit, "side_effect")}.get
            reader, writer = await host.admitted()
            writer.write(json_frame(call(1, "other.side_effect", [0.5])))
            await asyncio.sleep(0.1)
            writer.close()  # the kernel died
            await asyncio.sleep(0.8)

    asyncio.run(scenario())
    assert finished == []
