"""MCP servers that implement catalog tools: how to reach one, over stdio or Streamable HTTP.

A catalog declares its servers under ``mcp_servers`` (keyed by name, the shape MCP clients use in
their own configuration files) and a tool names the one that serves it::

    mcp_servers:
      time: {command: uvx, args: [mcp-server-time]}
      search: {url: "https://search.example/mcp", headers: {Authorization: "Bearer ${SEARCH_TOKEN}"}}
    tools:
      - name: get_current_time
        mcp_server: time

A value in ``args``, ``env``, ``url`` or ``headers`` may name an environment variable as
``${NAME}``: it is read when the server is connected, so a catalog never has to hold a secret.
``type`` (``stdio``, ``http`` or ``streamable-http``), as MCP clients' own configuration files
write it, may be given and must agree with ``command``/``url``. Nothing here connects to anything;
:mod:`toolpath.kernel.tools.mcp_connection` does.
"""

from __future__ import annotations

import os
import re
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from toolpath.registry.names import require_printable

_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class MCPServerConfig(BaseModel):
    """How to reach one MCP server: a command to start (stdio) or a URL (Streamable HTTP).

    Attributes:
        name: the server's name in its catalog's ``mcp_servers`` (filled in from the key there);
            it names the server in error messages.
        command / args / env / cwd: start the server as a subprocess and talk over its stdin and
            stdout. ``env`` is added to a minimal inherited environment (the MCP SDK's default:
            ``PATH``, ``HOME``, ``USER``... not the whole host environment).
        url / headers: a Streamable HTTP endpoint and the HTTP headers sent with every request.
        connect_timeout: seconds to start (or reach) the server and list its tools.
        call_timeout: seconds one tool call may take before it fails; ``None`` leaves it to the
            cell's own timeout.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = ""
    type: Literal["stdio", "http", "streamable-http"] | None = Field(
        default=None, description="The transport, as MCP clients' configuration files name it; implied by `command` or `url`."
    )
    command: str | None = Field(default=None, min_length=1, description="Executable that starts the server (stdio).")
    args: tuple[str, ...] = Field(default=(), description="Arguments of the command.")
    env: dict[str, str] = Field(default_factory=dict, description="Environment variables for the server process; ${NAME} reads one of the host's.")
    cwd: str | None = Field(default=None, description="Working directory of the server process.")
    url: str | None = Field(default=None, description="Streamable HTTP endpoint, e.g. https://host/mcp.")
    headers: dict[str, str] = Field(default_factory=dict, description="HTTP headers sent with every request; ${NAME} reads an environment variable.")
    connect_timeout: float = Field(default=30.0, gt=0, allow_inf_nan=False)
    call_timeout: float | None = Field(default=None, gt=0, allow_inf_nan=False)

    @field_validator("name", "command")
    @classmethod
    def _printable(cls, value: str | None) -> str | None:
        return value if value is None else require_printable(value, "MCP server name or command")

    @field_validator("type", mode="before")
    @classmethod
    def _known_transport(cls, transport: Any) -> Any:
        if transport == "sse":
            raise ValueError("the SSE transport is deprecated in MCP and not supported; use the server's Streamable HTTP endpoint (`url`)")
        return transport

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str | None) -> str | None:
        # A URL built from variables is checked once they are read (see expanded()).
        if url is not None and not _VARIABLE.search(url) and (urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).netloc):
            raise ValueError(f"url {url!r} is not an http:// or https:// address")
        return url

    @model_validator(mode="after")
    def _one_transport(self) -> MCPServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("an MCP server needs exactly one of `command` (started over stdio) and `url` (Streamable HTTP)")
        if self.url is not None and (self.args or self.env or self.cwd):
            raise ValueError("`args`, `env` and `cwd` start a server process; a server reached by `url` takes `headers` instead")
        if self.command is not None and self.headers:
            raise ValueError("`headers` are sent to a server reached by `url`; a server started by `command` takes `env` instead")
        if self.type is not None and (self.type == "stdio") != (self.command is not None):
            raise ValueError(
                f"`type: {self.type}` disagrees with {'`command`' if self.command is not None else '`url`'}; `stdio` goes with `command`, `http` with `url` (or leave `type` out)"
            )
        return self

    @classmethod
    def checked(cls, **fields: Any) -> MCPServerConfig:
        """A config from keyword ``fields``, for callers outside catalogs (which report problems by
        line): an invalid one raises ``ValueError`` with every problem on one line, ``field: message``.
        """
        try:
            return cls(**fields)
        except ValidationError as error:
            problems = (
                f"{'.'.join(map(str, problem['loc']))}: " * bool(problem["loc"]) + problem["msg"].removeprefix("Value error, ") for problem in error.errors()
            )
            raise ValueError("; ".join(problems)) from None

    @property
    def label(self) -> str:
        """The server as people know it: its name, else its command line or URL."""
        return self.name or (self.url if self.url is not None else " ".join([self.command or "", *self.args]))

    def expanded(self, environ: dict[str, str] | None = None) -> MCPServerConfig:
        """A copy with every ``${NAME}`` replaced by the environment variable ``NAME``.

        Raises:
            KeyError: a variable that is not set; the message names it and the server.
            ValueError: the URL is not an http(s) address once its variables are read.
        """
        environ = dict(os.environ) if environ is None else environ

        def expand(text: str) -> str:
            def value(match: re.Match[str]) -> str:
                if match.group(1) not in environ:
                    raise KeyError(
                        f"MCP server {self.label!r} needs the environment variable {match.group(1)} (written ${{{match.group(1)}}} in its configuration); set it"
                    )
                return environ[match.group(1)]

            return _VARIABLE.sub(value, text)

        update: dict[str, Any] = {
            "args": tuple(expand(argument) for argument in self.args),
            "env": {key: expand(value) for key, value in self.env.items()},
            "headers": {key: expand(value) for key, value in self.headers.items()},
        }
        if self.url is not None:
            update["url"] = expand(self.url)
        return type(self).model_validate({**self.model_dump(), **update})

    def key(self) -> str:
        """A text that is equal for equal configurations (connections are shared by it)."""
        return self.model_dump_json()
