"""The bridge's wire format, shared by the host (:mod:`toolpath.kernel.bridge.host`) and the kernel (:mod:`toolpath.kernel.inside.bridge_client`).

A frame is a 4-byte big-endian body length, then the body: one codec byte and a message, a ``dict``
with an ``"op"`` key. The codec is ``J`` (UTF-8 JSON) when the whole message is exactly a JSON value —
dicts with string keys, lists, strings, numbers, booleans, ``None`` — so nothing changes type on the
way (a tuple would come back a list). Otherwise it is ``P``: a 4-byte length, a JSON envelope with
the fields that are JSON (``op`` and ``id`` always are), then a pickle of the other fields. The
envelope lets a receiver that cannot load the pickle (the value's class is not importable there)
still answer the right call.

Messages, kernel → host: ``hello {token, generation}``, ``call {id, target, args, kwargs, cell[, trace]}``
(``trace``: a traced cell's context and the try number, :mod:`toolpath.kernel.inside.call_traces`),
``approve {id, tool, arguments, reason, digest, cell}``, ``cancel {id}``. Host → kernel: ``welcome``, ``refused {reason}``, ``result {id, value}``,
``offloaded {id, result_id, size, type}``, ``error {id, type, message}``, ``closing {reason}``.

Limits: a reader names the largest body it accepts and :func:`read_frame` refuses a longer one as
soon as the 4-byte length arrives, before reading (or buffering) any of it, so a peer cannot make the
other side allocate what it claims. The hello is at most :data:`~toolpath.kernel.inside.protocol.MAX_HELLO_BYTES` and JSON only
(:func:`decode_hello`); later frames are at most :func:`frame_limit` of the host's
``max_result_bytes``. Pickles are loaded only by :func:`decode` with ``accept_pickles=True``.
"""

from __future__ import annotations

import asyncio
import json
import pickle
import re
import struct
from typing import Any

from toolpath.errors import ToolpathError
from toolpath.kernel.inside.protocol import FRAME_OVERHEAD_BYTES, MAX_FRAME_BYTES

_HEADER = struct.Struct(">I")
JSON_CODEC = b"J"
PICKLE_CODEC = b"P"
#: 13,000 bits is about 3,900 decimal digits, under Python's default 4,300-digit conversion limit.
_MAX_JSON_INT_BITS = 13_000
#: Senders write ``op`` and ``id`` first, so a receiver can answer a call whose JSON it cannot parse.
_LEADING_ID = re.compile(rb'^\{"op":"(?:call|cancel)","id":(\d{1,19})[,}]')


def frame_limit(max_result_bytes: int) -> int:
    """Largest frame body (bytes) either end accepts after the hello: ``max_result_bytes + 64 KiB``.

    A host never sends a result frame over ``max_result_bytes`` (it offloads it or raises
    ``ResultTooLarge``), and a cell's call arguments get the same budget.
    """
    return min(max_result_bytes + FRAME_OVERHEAD_BYTES, MAX_FRAME_BYTES)


class WireError(ToolpathError, ValueError):
    """A message that cannot be encoded, or a frame that cannot be decoded; the message says why.

    Attributes:
        envelope: the JSON fields of a frame whose pickled part could not be loaded (``{}`` otherwise).
    """

    def __init__(self, message: str, envelope: dict[str, Any] | None = None):
        super().__init__(message)
        self.envelope = envelope or {}


class FrameTooLarge(WireError):
    """A frame whose announced length is over the reader's limit; nothing of its body was read.

    The stream cannot be resynchronised after it: the reader must close the connection.
    """

    def __init__(self, size: int, limit: int):
        super().__init__(f"a frame of {size:,} bytes was announced, over the limit of {limit:,}")
        self.size, self.limit = size, limit


def is_json_value(value: Any, depth: int = 0) -> bool:
    """True when ``value`` survives a JSON round trip unchanged (same types, same values)."""
    kind = type(value)
    if kind is int:
        # Python refuses to turn an int of over 4,300 digits into text (or back): pickle carries it.
        return value.bit_length() <= _MAX_JSON_INT_BITS
    if kind is str or kind is bool or kind is float or value is None:
        return True
    if depth > 100:  # deeper than json's own recursion comfort: let pickle carry it
        return False
    if kind is list:
        return all(is_json_value(item, depth + 1) for item in value)
    if kind is dict:
        return all(type(key) is str and is_json_value(item, depth + 1) for key, item in value.items())
    return False


def encode(message: dict[str, Any]) -> bytes:
    """The whole frame (header and body) for ``message``.

    Raises:
        WireError: the message is neither JSON nor picklable (the error names the offending type).
    """
    if is_json_value(message):
        body = JSON_CODEC + json.dumps(message, separators=(",", ":")).encode()
    else:
        envelope = {key: value for key, value in message.items() if is_json_value(value)}
        try:
            pickled = pickle.dumps({key: value for key, value in message.items() if key not in envelope}, protocol=pickle.HIGHEST_PROTOCOL)
        except BaseException as error:  # pickling runs the value's own code (__reduce__ may even exit)
            raise WireError(f"the value is not JSON and cannot be pickled ({type(error).__name__}: {error})") from None
        envelope_bytes = json.dumps(envelope, separators=(",", ":")).encode()
        body = PICKLE_CODEC + _HEADER.pack(len(envelope_bytes)) + envelope_bytes + pickled
    if len(body) > MAX_FRAME_BYTES:
        raise WireError(f"the message is {len(body):,} bytes, over the frame limit of {MAX_FRAME_BYTES:,}")
    return _HEADER.pack(len(body)) + body


def decode(body: bytes, accept_pickles: bool = True) -> dict[str, Any]:
    """The message in a frame body.

    Args:
        body: a frame body (without its length header).
        accept_pickles: load the pickled part of a ``P`` frame; ``False`` refuses such a frame
            after reading only its JSON envelope (loading a pickle runs code chosen by its sender).

    Raises:
        WireError: an unknown codec, malformed JSON, a pickle refused by ``accept_pickles=False``,
            or a pickle this process cannot load (for example because the value's class cannot be
            imported here). ``envelope`` holds the frame's JSON fields when they could be read.
    """
    codec = body[:1]
    envelope: dict[str, Any] = {}
    try:
        if codec == JSON_CODEC:
            message = json.loads(body[1:])
        elif codec == PICKLE_CODEC:
            (size,) = _HEADER.unpack_from(body, 1)
            start = 1 + _HEADER.size
            envelope = json.loads(body[start : start + size])
            if not isinstance(envelope, dict):
                raise WireError("the envelope of a pickled frame must be a JSON object")
            if not accept_pickles:
                raise WireError(
                    "pickled values are refused: this host accepts JSON only from this kernel (CodeMode's accept_pickles is off, as it is by default for kernels on other hosts)",
                    envelope,
                )
            message = {**envelope, **pickle.loads(body[start + size :])}
        else:
            raise WireError(f"unknown codec byte {codec!r}")
    except WireError:
        raise
    except BaseException as error:  # unpickling runs arbitrary reconstruction code, which may even exit
        if codec == JSON_CODEC and (leading := _LEADING_ID.match(body[1:])):
            envelope = {"id": int(leading.group(1))}
        raise WireError(
            f"the value cannot be loaded in this process ({type(error).__name__}: {error})", envelope if isinstance(envelope, dict) else None
        ) from None
    if not isinstance(message, dict) or "op" not in message:
        raise WireError("a bridge message must be an object with an 'op' key")
    return message


def decode_hello(body: bytes) -> tuple[str, int] | None:
    """``(token, generation)`` from a hello frame body, or ``None`` when it is not exactly
    ``J{"op": "hello", "token": ASCII text, "generation": integer}``.

    Nothing but JSON is ever decoded here: this runs before the peer is authenticated.
    """
    if body[:1] != JSON_CODEC:
        return None
    try:
        hello = json.loads(body[1:])
    except (ValueError, RecursionError):
        return None
    if not isinstance(hello, dict) or set(hello) != {"op", "token", "generation"} or hello["op"] != "hello":
        return None
    token, generation = hello["token"], hello["generation"]
    if type(token) is not str or not token.isascii() or type(generation) is not int:
        return None
    return token, generation


async def read_frame(reader: asyncio.StreamReader, max_bytes: int = MAX_FRAME_BYTES) -> bytes | None:
    """The next frame body, or ``None`` at a clean end of stream.

    Args:
        reader: the stream.
        max_bytes: largest body accepted; a longer announced length is refused before its body is read.

    Raises:
        FrameTooLarge: the announced length is over ``max_bytes``.
        asyncio.IncompleteReadError: the stream ended inside a frame.
    """
    try:
        header = await reader.readexactly(_HEADER.size)
    except asyncio.IncompleteReadError as error:
        if not error.partial:
            return None
        raise
    (size,) = _HEADER.unpack(header)
    if size > max_bytes:
        raise FrameTooLarge(size, max_bytes)
    return await reader.readexactly(size)
