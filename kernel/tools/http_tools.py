"""Catalog tools that call HTTP APIs (``http:`` in a catalog), as host tools.

:func:`http_tool` turns a registry :class:`ToolDefinition` whose ``http`` is set into a host
:class:`Tool`; a cell's call crosses the bridge like an MCP tool's and :func:`call_operation` sends
the request here, on the host, with ``httpx2`` (the MCP SDK's async HTTP client, a dependency already):

- the URL is the API's ``base_url`` (``${NAME}`` read from the environment now) and the operation's
  path, each ``{name}`` filled from that parameter (percent-encoded); ``query``, ``headers`` and
  ``body`` parameters go where the catalog says; a parameter left out (``None``) is not sent, so the
  API applies its own default;
- auth (``auth`` of the API) reads its secret from the host's environment at call time, so no cell,
  kernel, snapshot or log holds it; the secret is also masked (``[redacted: NAME]``) wherever an
  answer or an error message would repeat it (some APIs echo what they were sent);
- a call answered 429, or 5xx for a method that may be repeated (GET, HEAD, PUT, DELETE: idempotent
  per RFC 9110 §9.2.2; a POST or PATCH answered 5xx may have taken effect), or not answered (a
  connection error, a timeout), is tried again up to ``retries`` times, after the wait
  ``Retry-After`` asks (RFC 9110 §10.2.3: seconds or an HTTP date), else 0.5 s doubled per try;
  a wait longer than ``max_retry_wait_seconds`` is not made: the call fails with the API's answer;
- the body is read streamed and the call fails as soon as it passes ``max_response_bytes`` (counted
  decompressed); each try, from connecting to the last byte, takes at most ``timeout_seconds``;
- a value that would leave its place is refused: a path parameter ``''``, ``.`` or ``..`` (a path
  step, not a segment), a header parameter with a line break (a second header);
- a redirect to another host (or from https to http) is followed without the credentials;
- calls to one API on one event loop share a client, so a chain of calls reuses its connections
  (:func:`_shared_client`); cookies an API sets are not kept, as the client serves every session of
  the process;
- a JSON answer (``application/json`` or ``+json``) is decoded, any other is returned as text, an
  empty one as ``None``;
- a failure raises :class:`toolpath.kernel.inside.http_results.HttpToolError` with the tool, the
  method and path, the status and the API's own message, never a client traceback.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import email.utils
import json
import os
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from dataclasses import dataclass
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import Any
from urllib.parse import quote

import httpx2

from toolpath.kernel.inside.approval_policy import policy_of
from toolpath.kernel.inside.http_results import HttpToolError
from toolpath.kernel.tools.approvals import approval_spec
from toolpath.kernel.tools.toolkit import Tool, catalog_signature
from toolpath.registry import ToolDefinition
from toolpath.registry.http_apis import PATH_PARAMETER, HttpApiConfig, HttpOperation

#: Statuses worth a retry: too many requests (RFC 6585 §4) and the server's errors (RFC 9110 §15.6).
RETRIED_STATUSES = frozenset({429, 500, 502, 503, 504})
#: Methods a retry after a 5xx or a lost answer cannot repeat an effect of (RFC 9110 §9.2.2).
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "PUT", "DELETE"})
#: First wait before a retry when the API gives no Retry-After, in seconds; doubled per try.
FIRST_BACKOFF_SECONDS = 0.5
#: Characters of an API's error message kept in an error.
MAX_API_MESSAGE_CHARS = 500
#: Connections one API's shared client opens at once (httpx's default); a burst of calls beyond it
#: waits for a free one, within each try's ``timeout_seconds``.
MAX_CONNECTIONS_PER_API = 100
#: Idle connections one API's shared client keeps for the next call (httpx's default).
MAX_IDLE_CONNECTIONS_PER_API = 20
#: Seconds an idle connection is kept: under the 5 s after which uvicorn, Node.js and Apache close
#: one, so a call seldom sends on a connection the server is closing at that moment.
IDLE_CONNECTION_SECONDS = 4.0
#: Shared clients one event loop keeps; past it the least recently used idle one is closed.
MAX_CLIENTS_PER_LOOP = 32
#: Fields APIs put their error message in (TMDB: status_message; RFC 9457 problem details: title, detail).
_MESSAGE_FIELDS = ("status_message", "message", "error_description", "error", "detail", "title", "errors")


def http_tool(definition: ToolDefinition, environ: Mapping[str, str] | None = None) -> Tool:
    """The host :class:`Tool` of a registry tool called over HTTP (``http`` set, its ``api`` resolved
    to an :class:`HttpApiConfig`, as the catalog loader does). Its signature is the catalog's
    (required parameters first); its approval policy the catalog's ``approval``, so a call asks
    the session's approver first (:mod:`toolpath.kernel.tools.approvals`). ``environ``: where
    ``${NAME}`` and secrets are read (default ``os.environ``, at each call).

    Raises:
        ValueError: ``definition`` has no ``http``.
    """
    operation = definition.http
    if operation is None:
        raise ValueError(f"tool {definition.name!r} is not called over HTTP; use Tool.from_definition")
    if isinstance(operation.api, str):
        error = f"its HTTP API {operation.api!r} is only a name: load the tool from a catalog that declares it under `http_apis`, or give an HttpApiConfig"
        return Tool(None, name=definition.name, description=definition.description, load_error=error)
    wire_names = {parameter.python_name: parameter.name for parameter in definition.parameters}
    name = definition.name

    async def call(**arguments: Any) -> Any:
        return await call_operation(name, operation, {wire_names[key]: value for key, value in arguments.items()}, environ)

    call.__signature__ = catalog_signature(definition)  # type: ignore[attr-defined]
    call.__name__ = call.__qualname__ = name
    return Tool(call, name=name, description=definition.description, requires_approval=policy_of(approval_spec(definition)))


async def call_operation(tool: str, operation: HttpOperation, arguments: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> Any:
    """Send ``operation`` with ``arguments`` (``{parameter's real name: value}``) and return the
    decoded answer (module docstring).

    Raises:
        HttpToolError: the API answered an error status (after the retries), could not be reached,
            answered more than ``max_response_bytes``, or answered JSON that does not decode; or an
            environment variable the call needs is not set.
    """
    api = operation.api
    if not isinstance(api, HttpApiConfig):
        raise HttpToolError(f"{tool}: its HTTP API {api!r} is only a name; load the tool from a catalog that declares it under `http_apis`")
    environ = os.environ if environ is None else environ
    secret = _secret(tool, api, environ)
    try:
        base_url = api.expanded_base_url(dict(environ))
    except (KeyError, ValueError) as error:
        raise HttpToolError(f"{tool}: {error.args[0] if isinstance(error, KeyError) else error}") from None
    path = _filled_path(tool, operation, arguments)
    shown = f"{operation.method} {path}"
    given = {name: value for name, value in arguments.items() if value is not None}
    params = {name: _query_value(given[name]) for name in operation.query if name in given}
    headers = {name: _header_value(tool, shown, name, given[name]) for name in operation.headers if name in given}
    body = {name: given[name] for name in operation.body if name in given} if operation.body else None
    auth = None
    if api.auth is not None and secret is not None:
        if api.auth.scheme == "bearer":
            headers["Authorization"] = f"Bearer {secret}"
        elif api.auth.scheme == "basic":
            user, _, password = secret.partition(":")
            auth = httpx2.BasicAuth(user, password)
        elif api.auth.placement == "header":
            headers[api.auth.name or ""] = secret
        else:
            params[api.auth.name or ""] = secret
    # A basic secret also travels base64-encoded (RFC 7617 §2), which an echoing API repeats.
    secrets = [secret, base64.b64encode(secret.encode()).decode()] if secret is not None and auth is not None else [secret] if secret else []
    redact = _redactor(secrets, api.auth.env if api.auth is not None else "")
    timeout = httpx2.Timeout(api.timeout_seconds)
    credential_headers = {"authorization"} | ({api.auth.name.lower()} if api.auth is not None and api.auth.placement == "header" and api.auth.name else set())
    async with _shared_client(api.name, base_url, frozenset(credential_headers)) as client:
        for attempt in range(api.retries + 1):
            last = attempt == api.retries
            try:
                # httpx's timeout bounds each read; this bounds the whole try, so an answer dripping
                # a byte just inside each read's timeout cannot hold the cell for ever.
                async with (
                    asyncio.timeout(api.timeout_seconds),
                    client.stream(operation.method, base_url + path, params=params, headers=headers, json=body, auth=auth, timeout=timeout) as response,
                ):
                    wait = None  # seconds before the next try, waited outside the try's timeout
                    if response.status_code in RETRIED_STATUSES and not last and (response.status_code == 429 or operation.method in IDEMPOTENT_METHODS):
                        asked = _retry_wait(response.headers.get("Retry-After"), attempt)
                        wait = asked if asked <= api.max_retry_wait_seconds else None
                    if wait is None:
                        content = await _read_capped(response, api.max_response_bytes, tool, shown)
                        if response.status_code >= 400:
                            message = redact(_api_message(content))
                            reason = f" {response.reason_phrase}" if response.reason_phrase else ""
                            raise HttpToolError(f"{tool}: {shown} answered {response.status_code}{reason}: {message}", response.status_code)
                        try:
                            return redact(_decoded(content, response.headers.get("Content-Type", ""), response.encoding, tool, shown, response.status_code))
                        except RecursionError:  # decoding or masking the secret in it went past Python's stack
                            raise HttpToolError(f"{tool}: {shown} answered JSON nested too deeply to read", response.status_code) from None
            except httpx2.TooManyRedirects:
                raise HttpToolError(f"{tool}: {shown} redirected more than {client.max_redirects} times; the API is redirecting in a loop") from None
            except httpx2.DecodingError as error:  # an answer, but not one its own Content-Encoding decodes
                raise HttpToolError(f"{tool}: {shown} answered a body its Content-Encoding does not decode ({redact(str(error))})") from None
            except (httpx2.TransportError, TimeoutError) as error:  # no answer: refused, reset, timed out, unreadable
                why = f"{type(error).__name__}{f': {error}' if str(error) else ''}"
                if isinstance(error, TimeoutError):
                    why = f"the whole answer took longer than timeout_seconds ({api.timeout_seconds:g} s)"
                if last or operation.method not in IDEMPOTENT_METHODS:
                    tries = f" after {attempt + 1} tries" if attempt else ""
                    raise HttpToolError(f"{tool}: {shown} got no answer{tries} ({redact(why)})") from None
                wait = _retry_wait(None, attempt)
            await asyncio.sleep(wait)
    raise AssertionError("the last try either returns or raises")  # pragma: no cover


@dataclass
class _SharedClient:
    client: httpx2.AsyncClient
    calls: int = 0  # calls using it now: a client is closed only when none is


@dataclass
class _LoopClients:
    """The shared clients of one event loop, by ``(API name, base URL, credential headers)``, least
    recently used first; ``closer`` closes them when the loop shuts down its async generators."""

    clients: OrderedDict[tuple[str, str, frozenset[str]], _SharedClient]
    closer: AsyncGenerator[None] | None = None


# A client's connections belong to the loop that opened them, so each loop has its own clients. A
# plain dict, not weak keys: the connections hold their loop, so a weak key would never be dropped.
# An entry leaves when its loop shuts down its async generators (asyncio.run, asyncio.Runner and
# CodeMode's loop do), its clients closed; a loop closed without that is dropped at the next call on
# any loop (its connections can no longer be closed on it; the sockets close when collected).
_loop_clients: dict[asyncio.AbstractEventLoop, _LoopClients] = {}
_loop_clients_lock = threading.Lock()  # CodeMode's loop and a caller's loop run in different threads


@contextlib.asynccontextmanager
async def _shared_client(api: str, base_url: str, credential_headers: frozenset[str]) -> AsyncIterator[httpx2.AsyncClient]:
    """The running loop's client for ``api`` at ``base_url`` (made on first use), whose request hook
    strips ``credential_headers`` from a request leaving ``base_url``'s host (the key holds everything
    the hook uses, so one API's hook never judges another's requests)."""
    loop = asyncio.get_running_loop()
    with _loop_clients_lock:
        for closed in [other for other in _loop_clients if other.is_closed()]:
            del _loop_clients[closed]
        pool = _loop_clients.get(loop)
        if pool is None:
            pool = _loop_clients[loop] = _LoopClients(OrderedDict())
    if pool.closer is None:
        # Started here, the generator is one the loop closes in shutdown_asyncgens(); its finally
        # closes the clients there, on their own loop.
        pool.closer = _closed_with_the_loop(pool)
        await pool.closer.asend(None)
    key = (api, base_url, credential_headers)
    if key not in pool.clients:
        await _close_idle_past_the_bound(pool)
    shared = pool.clients.get(key)  # another call on this loop may have made it while a client closed
    if shared is None:
        shared = pool.clients[key] = _SharedClient(_new_client(httpx2.URL(base_url), credential_headers))
    pool.clients.move_to_end(key)
    shared.calls += 1
    try:
        yield shared.client
    finally:
        shared.calls -= 1


def _new_client(origin: httpx2.URL, credential_headers: frozenset[str]) -> httpx2.AsyncClient:
    limits = httpx2.Limits(
        max_connections=MAX_CONNECTIONS_PER_API, max_keepalive_connections=MAX_IDLE_CONNECTIONS_PER_API, keepalive_expiry=IDLE_CONNECTION_SECONDS
    )
    # A cookie kept by a client every session shares would carry one user's state into another's call.
    no_cookies = CookieJar(policy=DefaultCookiePolicy(allowed_domains=[]))
    hooks = {"request": [_credentials_kept_home(origin, credential_headers)]}
    return httpx2.AsyncClient(follow_redirects=True, limits=limits, cookies=no_cookies, event_hooks=hooks)


async def _close_idle_past_the_bound(pool: _LoopClients) -> None:
    """Close the least recently used idle clients until a new one fits in :data:`MAX_CLIENTS_PER_LOOP`
    (none is closed while a call uses it: then the pool grows with the calls in flight)."""
    while len(pool.clients) >= MAX_CLIENTS_PER_LOOP:
        idle = next((key for key, shared in pool.clients.items() if shared.calls == 0), None)
        if idle is None:
            return
        await pool.clients.pop(idle).client.aclose()


async def _closed_with_the_loop(pool: _LoopClients) -> AsyncGenerator[None]:
    try:
        yield
    finally:
        with _loop_clients_lock:
            loop = asyncio.get_running_loop()
            if _loop_clients.get(loop) is pool:
                del _loop_clients[loop]
        clients = [shared.client for shared in pool.clients.values()]
        pool.clients.clear()
        for client in clients:
            await client.aclose()


def _secret(tool: str, api: HttpApiConfig, environ: Mapping[str, str]) -> str | None:
    if api.auth is None:
        return None
    secret = environ.get(api.auth.env)
    if not secret:
        raise HttpToolError(
            f"{tool}: HTTP API {api.name!r} authenticates with the environment variable {api.auth.env} (auth.env), which is not set on the host; set it"
        )
    return secret


def _header_value(tool: str, shown: str, name: str, value: Any) -> str:
    """``value`` as a header: a line break or NUL would end the header and start one the caller
    never declared (header injection, RFC 9110 §5.5 forbids them in a field value), so it is refused."""
    text = str(value)
    if any(character in text for character in "\r\n\0"):
        raise HttpToolError(f"{tool}: {shown}: the header parameter {name!r} holds a line break or NUL character, which a header cannot carry; pass one line")
    return text


def _credentials_kept_home(origin: httpx2.URL, credential_headers: set[str]) -> Any:
    """A request hook removing ``credential_headers`` from a request to a host other than
    ``origin``'s (or from https to http): a redirect elsewhere gets no credentials, as curl does without
    ``--location-trusted``. httpx drops only ``Authorization`` itself; an api key header would follow."""

    async def strip(request: httpx2.Request) -> None:
        home = request.url.host == origin.host and request.url.port == origin.port and (origin.scheme, request.url.scheme) != ("https", "http")
        if not home:
            for name in credential_headers:
                request.headers.pop(name, None)

    return strip


def _filled_path(tool: str, operation: HttpOperation, arguments: Mapping[str, Any]) -> str:
    def value(match: Any) -> str:
        given = arguments.get(match.group(1))
        if given is None:
            raise HttpToolError(f"{tool}: {operation.method} {operation.path} needs a value for the path parameter {match.group(1)!r}; none was given")
        text = str(given).lower() if isinstance(given, bool) else str(given)
        # '.' and '..' would be resolved as path steps (RFC 3986 §5.2.4: /users/../admin is /admin), '' would drop a segment.
        if text in ("", ".", ".."):
            raise HttpToolError(
                f"{tool}: {operation.method} {operation.path}: the path parameter {match.group(1)!r} is {text!r}, which is no path segment; pass an id or a name"
            )
        # safe="": a value with '/' or '?' stays one path segment.
        return quote(text, safe="")

    return PATH_PARAMETER.sub(value, operation.path)


def _query_value(value: Any) -> Any:
    """A value as a query parameter: booleans as ``true``/``false`` (JSON's words, which OpenAPI
    query parameters use), lists as repeated parameters (OpenAPI's default ``form``, ``explode``)."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return [_query_value(item) for item in value]
    return value


def _retry_wait(retry_after: str | None, attempt: int) -> float:
    """Seconds to wait before try ``attempt + 2``: what ``Retry-After`` says (seconds or an HTTP
    date), else :data:`FIRST_BACKOFF_SECONDS` doubled per try."""
    if retry_after:
        text = retry_after.strip()
        if text.isdigit():
            return float(text)
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError):
            when = None
        if when is not None:
            return max(0.0, when.timestamp() - time.time())
    return FIRST_BACKOFF_SECONDS * 2**attempt


async def _read_capped(response: httpx2.Response, limit: int, tool: str, shown: str) -> bytes:
    """The body, read in chunks; past ``limit`` bytes the read stops and the call fails."""
    declared = response.headers.get("Content-Length", "")
    too_large = f"{tool}: {shown} answered more than max_response_bytes ({limit:,} bytes) of its HTTP API; ask for less (a page, fewer fields) or raise it"
    if declared.isdigit() and int(declared) > limit:
        raise HttpToolError(f"{too_large} (Content-Length {int(declared):,})")
    chunks, size = [], 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > limit:
            raise HttpToolError(too_large)
        chunks.append(chunk)
    return b"".join(chunks)


def _is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


def _decoded(content: bytes, content_type: str, encoding: str | None, tool: str, shown: str, status: int) -> Any:
    if not content.strip():
        return None
    if _is_json(content_type):
        try:
            return json.loads(content)
        except ValueError as error:
            raise HttpToolError(f"{tool}: {shown} answered {status} with a body that says it is JSON but is not ({error})", status) from None
    return content.decode(encoding or "utf-8", errors="replace")


def _api_message(content: bytes) -> str:
    """The API's own words for an error: a message field of a JSON body, else the body's text."""
    text = content.decode("utf-8", errors="replace").strip()
    try:
        document = json.loads(text)
    except ValueError:
        document = None
    if isinstance(document, dict):
        found = next((document[key] for key in _MESSAGE_FIELDS if document.get(key)), None)
        if found is not None:
            text = found if isinstance(found, str) else json.dumps(found)
    text = " ".join(text.split()) or "(no message)"
    return text if len(text) <= MAX_API_MESSAGE_CHARS else text[:MAX_API_MESSAGE_CHARS] + "…"


def _redactor(secrets: list[str], variable: str) -> Any:
    """A function masking each of ``secrets`` in text and in decoded JSON (keys and values)."""
    mask = f"[redacted: {variable}]"

    def redact(value: Any) -> Any:
        if not secrets:
            return value
        if isinstance(value, str):
            for secret in secrets:
                value = value.replace(secret, mask)
            return value
        if isinstance(value, list):
            return [redact(item) for item in value]
        if isinstance(value, dict):
            return {redact(key): redact(item) for key, item in value.items()}
        return value

    return redact
