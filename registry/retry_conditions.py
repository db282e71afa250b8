"""Which failures a tool's retry policy tries again after: the words of ``retry.on`` and how an
exception is matched against them.

This module imports only the standard library: the kernel matches a failed call against its tool's
conditions (:mod:`toolpath.kernel.inside.retries`), and the catalog loader checks the words
(:class:`toolpath.registry.retry_policy.RetryPolicy`).

The words:

- ``timeout``: the call timed out: a ``TimeoutError`` (``socket.timeout`` and
  ``asyncio.TimeoutError`` are the same class), or an exception of a class named ``Timeout`` or
  ``TimeoutException`` (requests' and httpx's);
- ``connection``: the call could not reach what it talks to, or lost it: a ``ConnectionError``
  (refused, reset, aborted, a broken pipe; toolpath's ``InjectedFailure`` is one), or an exception
  derived from a class of the HTTP clients' connection errors, which do not derive from the
  built-in: requests' ``ConnectionError`` (so its ``ProxyError`` and ``SSLError`` too), httpx's
  ``ConnectError`` and ``NetworkError``, urllib3's ``NewConnectionError`` and ``ProtocolError``
  (a connection aborted mid-answer), aiohttp's ``ClientConnectionError``; or ``MCPConnectionError``
  (an MCP server that could not be started or reached). Classes are matched by name along the
  exception's class hierarchy (:data:`CONNECTION_NAMES`), so none of those libraries is imported;
- ``status 429``, ``status 503``, ``status 5xx``: an exception carrying that HTTP status in its
  ``status``, ``status_code`` or ``code`` attribute, or its ``response.status_code`` (toolpath's
  ``HttpToolError``, ``urllib.error.HTTPError``, requests' and httpx's status errors);
- an exception's class name (``ValueError``, ``RateLimitError``) or dotted path
  (``openai.RateLimitError``): an exception of that class or one derived from it.

A host tool's exception crosses the bridge by name: one the kernel cannot rebuild arrives as the
built-in type it derives from (``MCPConnectionError``, a ``RuntimeError``, arrives as
``RuntimeError``) or as ``ToolError``, its message starting with its own class name
(``"MCPConnectionError: ..."``); that name is matched too (:func:`crossed_name`). So a built-in
exception raised in the kernel whose message starts with a class name and a colon is read the same way.
A connection or timeout failure whose nearest built-in is ``OSError`` or ``Exception`` (requests'
``ProxyError``, urllib3's ``NewConnectionError``) arrives as a ``ConnectionError`` or
``TimeoutError`` (:func:`failure_kind` says which), which the cell can catch as such: its class
hierarchy stays on the host, where the bridge reads it.
"""

from __future__ import annotations

import builtins
import difflib
import re
from collections.abc import Iterable

TIMEOUT = "timeout"
CONNECTION = "connection"
#: ``status 429``, ``status 5xx``, ``status 50x``: an HTTP status, ``x`` standing for any digit.
_STATUS = re.compile(r"status ([1-5][0-9x]{2})")
#: A Python class name or dotted path.
_CLASS_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
#: Class names of timeout and connection errors: Python's own (named, for an error known only by its
#: name, as a cell's error reports it) and the bases the HTTP clients give theirs, matched along an
#: exception's class hierarchy (requests' ``Timeout`` and ``ConnectionError``; httpx's
#: ``TimeoutException``, ``ConnectError`` and ``NetworkError``; urllib3's ``NewConnectionError`` and
#: ``ProtocolError``, by its dotted path: httpx has a ``ProtocolError`` too, for a server that broke
#: the protocol; aiohttp's ``ClientConnectionError`` and ``ServerTimeoutError``, one of them; MCP's).
#: Read from the exception modules of requests 2.34, urllib3 2.8, httpx (``httpx/_exceptions.py``) and
#: aiohttp (``aiohttp/client_exceptions.py``).
TIMEOUT_NAMES = frozenset({"TimeoutError", "Timeout", "TimeoutException", "ReadTimeout", "ConnectTimeout", "ServerTimeoutError"})
CONNECTION_NAMES = frozenset(
    {
        "ConnectionError",
        "ConnectionRefusedError",
        "ConnectionResetError",
        "ConnectionAbortedError",
        "BrokenPipeError",
        "ConnectError",
        "NetworkError",
        "NewConnectionError",
        "urllib3.exceptions.ProtocolError",
        "ClientConnectionError",
        "MCPConnectionError",
    }
)
#: ``ToolError``'s message: ``"SomeError: what it said"`` (see toolpath.kernel.inside.bridge_client).
CROSSED_NAME = re.compile(r"([A-Za-z_][A-Za-z0-9_]*): ")


def crossed_name(type_name: str, message: str) -> str | None:
    """The class name a host tool's exception had before it crossed the bridge
    (:mod:`toolpath.kernel.inside.bridge_client`), or ``None``.

    Args:
        type_name: the class name of the exception the cell saw.
        message: its message.

    Returns:
        The name ``message`` starts with (``"MCPConnectionError: ..."``) when ``type_name`` is
        ``ToolError`` or a built-in exception type, the types the bridge raises for an exception the
        kernel cannot rebuild, and that name is no built-in's; else ``None``.
    """
    kind = getattr(builtins, type_name, None)
    if type_name != "ToolError" and not (isinstance(kind, type) and issubclass(kind, BaseException)):
        return None
    crossed = CROSSED_NAME.match(message)
    # The bridge rebuilds a built-in exception as itself, never under another's name: a message
    # starting with a built-in's name ("ConnectionError: ...") is the tool's own words, perhaps the
    # user's input quoted, not a crossed class (read as one, a bad input could pass for an outage).
    if crossed is None or isinstance(getattr(builtins, crossed.group(1), None), type):
        return None
    return crossed.group(1)


def check_condition(condition: object) -> str:
    """``condition`` when it is one of the words of ``retry.on`` (module docstring), spaces tidied.

    Raises:
        ValueError: anything else; the message lists the words.
    """
    if not isinstance(condition, str):
        raise ValueError(f"a retry condition is text ('timeout', 'connection', 'status 503', 'status 5xx' or an exception's class name), not {condition!r}")
    text = " ".join(condition.split())
    if text in (TIMEOUT, CONNECTION) or _STATUS.fullmatch(text):
        return text
    # A bare lowercase word is a misspelt condition ('timout'), not a class: read as a class name it
    # would never match, and the tool would silently never be retried. (A lowercase class is named
    # with its module: 'socket.gaierror'.)
    if text.isidentifier() and text.islower():
        close = difflib.get_close_matches(text, (TIMEOUT, CONNECTION), n=1)
        hint = f"did you mean {close[0]!r}? " if close else "a lowercase class is named with its module ('socket.gaierror'); "
        raise ValueError(
            f"{condition!r} is not a retry condition: {hint}use 'timeout', 'connection', 'status 429', 'status 5xx' or an exception's class name such as 'ValueError'"
        )
    if _CLASS_PATH.fullmatch(text):
        return text
    if text.startswith("status"):
        raise ValueError(f"{condition!r} is not an HTTP status condition: write 'status' and three digits, x for any digit ('status 429', 'status 5xx')")
    raise ValueError(
        f"{condition!r} is not a retry condition: use 'timeout', 'connection', 'status 429', 'status 5xx' or an exception's class name such as 'ValueError'"
    )


def _status_of(error: BaseException) -> int | None:
    for holder, attribute in ((error, "status"), (error, "status_code"), (error, "code"), (getattr(error, "response", None), "status_code")):
        value = getattr(holder, attribute, None) if holder is not None else None
        if type(value) is int and 100 <= value <= 599:
            return value
    return None


def _class_names(error: BaseException) -> set[str]:
    """The names and dotted paths of ``error``'s classes, and the class name of the host tool's own
    exception when ``error`` is one that crossed the bridge (:func:`crossed_name`)."""
    names = set()
    for kind in type(error).__mro__:
        names.add(kind.__name__)
        names.add(f"{kind.__module__}.{kind.__qualname__}")
    builtin = type(error).__module__ == "builtins"
    crossed = crossed_name(type(error).__name__, str(error)) if builtin or type(error).__name__ == "ToolError" else None
    if crossed:
        names.add(crossed)
    return names


def failure_kind(error: BaseException) -> str:
    """``"timeout"``, ``"connection"`` or ``""``: which of the two passing failures ``error`` is.

    Read from its class hierarchy, the most specific class first: urllib3's ``NewConnectionError``
    derives from its ``ConnectTimeoutError`` (for callers of old versions) yet says the connection
    was refused, and requests' ``ConnectTimeout`` derives from its ``ConnectionError`` yet says the
    connection timed out. An exception that crossed the bridge is read by its own class name too
    (:func:`crossed_name`).
    """
    for kind in type(error).__mro__:
        names = {kind.__name__, f"{kind.__module__}.{kind.__qualname__}"}
        if kind is TimeoutError or names & TIMEOUT_NAMES:
            return TIMEOUT
        if kind is ConnectionError or names & CONNECTION_NAMES:
            return CONNECTION
    crossed = crossed_name(type(error).__name__, str(error)) if type(error).__module__ == "builtins" or type(error).__name__ == "ToolError" else None
    if crossed in TIMEOUT_NAMES:
        return TIMEOUT
    return CONNECTION if crossed in CONNECTION_NAMES else ""


def matches(conditions: Iterable[str], error: BaseException) -> str:
    """The first of ``conditions`` (checked words) that ``error`` meets, or ``""`` when none does."""
    names = _class_names(error)
    for condition in conditions:
        if condition == TIMEOUT:
            if isinstance(error, TimeoutError) or names & TIMEOUT_NAMES:
                return condition
        elif condition == CONNECTION:
            if isinstance(error, ConnectionError) or names & CONNECTION_NAMES:
                return condition
        elif condition.startswith("status "):
            status = _status_of(error)
            pattern = condition.removeprefix("status ")
            if status is not None and all(want in ("x", have) for want, have in zip(pattern, str(status), strict=True)):
                return condition
        elif condition in names:
            return condition
    return ""
