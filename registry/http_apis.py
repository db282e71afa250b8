"""HTTP APIs that implement catalog tools: where an API is, how to authenticate, and which operation a tool calls.

A catalog declares its APIs under ``http_apis`` (keyed by name, like ``mcp_servers``) and each tool
names one in its ``http`` block, with the operation's method and path and where each parameter goes::

    http_apis:
      tmdb:
        base_url: "https://api.themoviedb.org/3"
        auth: {scheme: bearer, env: TMDB_API_TOKEN}
    tools:
      - name: search_person
        http: {api: tmdb, method: GET, path: /search/person, query: [query]}
        required_parameters: [{name: query, type: str}]
        outputs: {tmdb.person_id: "results[0].id"}

``${NAME}`` in ``base_url`` reads an environment variable when the tool is called, and ``auth.env``
names the variable holding the secret, read on the host at call time: a catalog, a cell and a
kernel never hold it. Nothing here sends a request; :mod:`toolpath.kernel.tools.http_tools` does.

A tool's ``outputs`` pick values out of its decoded JSON response by path
(:mod:`toolpath.registry.output_paths`).
"""

from __future__ import annotations

import os
import re
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from toolpath.registry.names import require_printable

_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
#: ``{name}`` in an operation's path: OpenAPI's path templating (OpenAPI 3.1, "Path Templating").
PATH_PARAMETER = re.compile(r"\{([^{}/]+)\}")
#: An environment variable's name, as POSIX shells take one.
_ENVIRONMENT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: HTTP methods a tool may use, and what a call of each changes outside the kernel (RFC 9110 §9.2.1:
#: GET and HEAD are safe; PUT, PATCH and DELETE change a stored resource; POST submits data for the
#: server to act on, as sending mail or a payment does).
METHOD_EFFECTS: dict[str, Literal["none", "writes", "sends"]] = {
    "GET": "none",
    "HEAD": "none",
    "POST": "sends",
    "PUT": "writes",
    "PATCH": "writes",
    "DELETE": "writes",
}

#: Seconds a try of a request may take by default, from connecting to the answer's last byte.
DEFAULT_TIMEOUT_SECONDS = 30.0
#: Retries by default of a request answered 429 or 5xx (or not answered at all).
DEFAULT_RETRIES = 3
#: Largest response body read by default, in bytes; a longer one fails the call as soon as it is passed.
DEFAULT_MAX_RESPONSE_BYTES = 10_000_000
#: Longest wait before a retry by default, in seconds: a ``Retry-After`` asking for more fails the call
#: with the API's answer instead of holding the cell for longer.
DEFAULT_MAX_RETRY_WAIT_SECONDS = 30.0


class HttpAuth(BaseModel):
    """How a call authenticates, the secret read from the environment variable ``env`` at call time.

    Attributes:
        scheme: ``bearer`` (``Authorization: Bearer SECRET``), ``api_key`` (the secret in the header or
            query parameter ``name``) or ``basic`` (``env`` holds ``user:password``; RFC 7617).
        env: the environment variable holding the secret, on the host that runs the call.
        in_: ``in`` in a catalog: where an api key goes, ``header`` (default) or ``query``.
        name: the header or query parameter that carries an api key.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    scheme: Literal["bearer", "api_key", "basic"]
    env: str = Field(description="The environment variable holding the secret, read on the host at call time.")
    in_: Literal["header", "query"] | None = Field(default=None, alias="in", description="api_key only: header (default) or query.")
    name: str | None = Field(default=None, min_length=1, description="api_key only: the header or query parameter name.")

    @field_validator("env")
    @classmethod
    def _environment_name(cls, name: str) -> str:
        if not _ENVIRONMENT_NAME.fullmatch(name):
            raise ValueError(
                f"{name!r} is not an environment variable name (letters, digits and '_', not starting with a digit); name the variable, not the secret"
            )
        return name

    @model_validator(mode="after")
    def _api_key_placed(self) -> HttpAuth:
        if self.scheme == "api_key" and self.name is None:
            raise ValueError("an api_key auth needs `name`: the header or query parameter that carries the key")
        if self.scheme != "api_key" and (self.in_ is not None or self.name is not None):
            raise ValueError(f"`in` and `name` place an api key; a {self.scheme} auth takes only `env`")
        return self

    @property
    def placement(self) -> Literal["header", "query"]:
        """Where an api key goes (``header`` unless ``in: query``)."""
        return self.in_ or "header"


class HttpApiConfig(BaseModel):
    """One HTTP API: its base URL, auth and limits.

    Attributes:
        name: the API's name in its catalog's ``http_apis`` (filled in from the key there).
        base_url: the URL operation paths are appended to; ``${NAME}`` reads an environment variable at call time.
        auth: how calls authenticate (:class:`HttpAuth`); ``None``: they do not.
        timeout_seconds: seconds a try may take, from connecting to the answer's last byte.
        retries: further tries of a call answered 429 or 5xx, or not answered (a connection error or a
            timeout); each waits as ``Retry-After`` says, else 0.5 s doubled per try.
        max_retry_wait_seconds: the longest wait before a retry: a ``Retry-After`` asking for more
            fails the call with the API's answer.
        max_response_bytes: the largest response body read; a longer one fails the call.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = ""
    base_url: str = Field(min_length=1, description="The URL operation paths are appended to; ${NAME} reads an environment variable at call time.")
    auth: HttpAuth | None = Field(default=None, description="How calls authenticate; the secret is read from the environment at call time.")
    timeout_seconds: float = Field(default=DEFAULT_TIMEOUT_SECONDS, gt=0, allow_inf_nan=False)
    retries: int = Field(default=DEFAULT_RETRIES, ge=0, le=10, strict=True, description="Further tries of a call answered 429 or 5xx, honouring Retry-After.")
    max_retry_wait_seconds: float = Field(default=DEFAULT_MAX_RETRY_WAIT_SECONDS, ge=0, allow_inf_nan=False)
    max_response_bytes: int = Field(default=DEFAULT_MAX_RESPONSE_BYTES, gt=0, strict=True, description="The largest response body read, in bytes.")

    @field_validator("name")
    @classmethod
    def _printable(cls, value: str) -> str:
        return require_printable(value, "HTTP API name")

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        # A URL built from variables is checked once they are read (see expanded_base_url()).
        if not _VARIABLE.search(url):
            _check_http_url(url)
        return url

    def expanded_base_url(self, environ: dict[str, str] | None = None) -> str:
        """``base_url`` with every ``${NAME}`` replaced by the environment variable ``NAME``, without a trailing ``/``.

        Raises:
            KeyError: a variable that is not set; the message names it and the API.
            ValueError: the URL is not an http(s) address once its variables are read.
        """
        environ = dict(os.environ) if environ is None else environ

        def value(match: re.Match[str]) -> str:
            if match.group(1) not in environ:
                raise KeyError(
                    f"HTTP API {self.name!r} needs the environment variable {match.group(1)} (written ${{{match.group(1)}}} in its base_url); set it"
                )
            return environ[match.group(1)]

        url = _VARIABLE.sub(value, self.base_url)
        _check_http_url(url, self.name)
        return url.rstrip("/")


def _check_http_url(url: str, api: str = "") -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"base_url {url!r}{f' of HTTP API {api!r}' if api else ''} is not an http:// or https:// address")


class HttpOperation(BaseModel):
    """The HTTP operation a tool calls: which API, the method, the path, and where each parameter goes.

    Attributes:
        api: in a catalog file, the name of an API declared under ``http_apis`` (the loader replaces it
            with that API's :class:`HttpApiConfig`); in code, the config itself.
        method: ``GET``, ``HEAD``, ``POST``, ``PUT``, ``PATCH`` or ``DELETE``.
        path: appended to the API's base URL; each ``{name}`` is filled from the parameter of that name.
        query / headers / body: the parameters sent as query parameters, as headers, and as top-level
            fields of a JSON body. Every parameter of the tool is in exactly one of these or the path
            (checked by :class:`toolpath.registry.tools.ToolDefinition`).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    api: str | HttpApiConfig
    method: Literal["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]
    path: str = Field(min_length=1, description="Appended to the API's base_url; {name} segments are filled from the parameter of that name.")
    query: tuple[str, ...] = Field(default=(), description="Parameters sent as query parameters.")
    headers: tuple[str, ...] = Field(default=(), description="Parameters sent as HTTP headers.")
    body: tuple[str, ...] = Field(default=(), description="Parameters sent as top-level fields of a JSON body.")

    @field_validator("path")
    @classmethod
    def _relative_path(cls, path: str) -> str:
        require_printable(path, "operation path")
        if not path.startswith("/") or "://" in path:
            raise ValueError(f"path {path!r} is the operation's path under the API's base_url and starts with '/', like /search/person")
        return path

    @model_validator(mode="after")
    def _placed_once(self) -> HttpOperation:
        seen: dict[str, str] = {name: "path" for name in self.path_parameters}
        for place in ("query", "headers", "body"):
            for name in getattr(self, place):
                if name in seen:
                    raise ValueError(f"parameter {name!r} is sent in both {seen[name]} and {place}; send it in one")
                seen[name] = place
        if self.body and self.method in ("GET", "HEAD"):
            raise ValueError(f"a {self.method} request has no body; send {', '.join(self.body)} as query parameters instead")
        return self

    @property
    def path_parameters(self) -> list[str]:
        """The names in the path's ``{name}`` segments, in order."""
        return PATH_PARAMETER.findall(self.path)

    @property
    def placed(self) -> dict[str, str]:
        """``{parameter name: "path" | "query" | "headers" | "body"}``."""
        return {
            **{name: "path" for name in self.path_parameters},
            **{name: "query" for name in self.query},
            **{name: "headers" for name in self.headers},
            **{name: "body" for name in self.body},
        }

    @property
    def api_name(self) -> str:
        return self.api if isinstance(self.api, str) else self.api.name
