"""``toolpath serve``: the planner and persistent kernels as an MCP server, for agents.

The embedding model, the indexes and the kernels load once, in this process; every tool call is
then a round trip, not a new process. Tools (named and described for a model):

- ``search_skills(query, k, session_id)``: states and tools by affordance, ranked with the
  session's held states;
- ``plan_task(task, inputs, session_id)``: a task in words, or a list of steps, becomes one planned
  cell (the parts it matched, the plan, the cell and its instructions); nothing runs;
- ``run_task(task, inputs, session_id)``: plan and run it in the session's kernel;
- ``execute(code, session_id)``: a free cell; PNG images come back as MCP image content;
- ``restart(session_id)``, ``list_variables(session_id)``, ``session_overview(session_id)``.

Resources: ``toolpath://graph`` (the state graph as Mermaid text) and ``toolpath://catalogs/N``
(each loaded catalog file).

Every result carries structured content (JSON) and a short text. A tool that fails on bad input
(an unknown state, a task nothing matches) returns an error result with the reason; the server
keeps serving.

Users: over stdio (and over HTTP with ``--no-auth``, loopback only) the local user; over HTTP, the
user a bearer token maps to in the tokens file. Sessions: each user's ``session_id`` is one
:class:`planner.session.AgentSession` of theirs (one persistent kernel, snapshotted), created on
first use; ``"main"`` when none is given. Session ids are per user: two users' ``"lab"`` are two
sessions, and no id reaches another user's session or tells whether it exists (see
:func:`kernel_session_id`).
"""

from __future__ import annotations

import asyncio
import base64
import functools
import getpass
import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import yaml
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken, TokenVerifier
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, ImageContent, TextContent

from kernel import CellResult, CodeMode, SessionOwnerError, format_for_model
from planner.cli import is_refusal
from planner.embedding import default_embedder
from planner.http_serving import HttpLimits, connection_cap, host_check, serve_http
from planner.session import AgentSession, StalePlanError
from planner.workspace import Workspace
from registry.storage import StoreError

#: The session a tool uses when the caller names none.
DEFAULT_SESSION = "main"
#: Errors besides the CLI's refusals that mean "this request cannot be served as asked": the model gets the reason.
_REFUSALS = (SessionOwnerError, StalePlanError, StoreError, ValueError, TypeError)


def _refusals_as_tool_errors(tool: Callable[..., Awaitable[CallToolResult]]) -> Callable[..., Awaitable[CallToolResult]]:
    """``tool`` with the planner's refusals turned into MCP error results that carry the reason
    (the SDK keeps any other exception's text on the server)."""

    @functools.wraps(tool)
    async def refusing(*args: Any, **kwargs: Any) -> CallToolResult:
        try:
            return await tool(*args, **kwargs)
        except Exception as error:
            if isinstance(error, _REFUSALS) or is_refusal(error):
                raise ToolError(str(error)) from error
            raise

    return refusing


INSTRUCTIONS = """toolpath plans tool paths over a catalog's state graph and runs them as one Python cell in a persistent kernel.
Typical loop: search_skills to see what the catalogs can do; plan_task or run_task with the task in words (or as a list of steps); then execute free cells that use the variables the task left; session_overview shows what the session holds and what can run next.
Every tool takes an optional session_id: calls with the same id share one kernel and its variables."""


def kernel_session_id(user_id: str, session_id: str, authenticated: bool) -> str:
    """The :class:`kernel.CodeMode` session id (the key in the snapshot store) of ``user_id``'s
    ``session_id``.

    Without tokens there is one user, so it is ``session_id`` itself: sessions the local user made
    before ids were per user, or through the Python API, come back. With tokens it is the JSON text
    of ``[user_id, session_id]``: JSON quotes and escapes both strings, so no two pairs give the same
    key (user ``"a:b"`` with id ``"c"`` and user ``"a"`` with id ``"b:c"`` differ), and whatever id
    a user passes, the key names that user.
    """
    return json.dumps([user_id, session_id], ensure_ascii=False) if authenticated else session_id


class ToolpathServer:
    """The MCP server over one :class:`planner.Workspace` (see the module docstring).

    Args:
        workspace: the loaded catalogs.
        user_id: the user every session belongs to, when requests carry no token.
        tokens: ``{bearer token: user id}``: requests must carry one of these tokens (HTTP), and
            act for its user. ``url`` is then the server's address (for the OAuth resource metadata
            the SDK publishes).
        code_mode_options: :class:`kernel.CodeMode` options for the shared kernels.
    """

    def __init__(self, workspace: Workspace, user_id: str, tokens: dict[str, str] | None = None, url: str = "http://127.0.0.1", **code_mode_options: Any):
        self.workspace = workspace
        self.user_id = user_id
        self.authenticated = tokens is not None
        self.code_mode: CodeMode = workspace.code_mode(**code_mode_options)
        self._sessions: dict[tuple[str, str], AgentSession] = {}
        self._lock = asyncio.Lock()
        auth = {"token_verifier": StaticTokens(tokens), "auth": AuthSettings(issuer_url=url, resource_server_url=f"{url}/mcp")} if tokens is not None else {}
        self.mcp = MCPServer("toolpath", instructions=INSTRUCTIONS, log_level="WARNING", **auth)
        for tool in (self.search_skills, self.plan_task, self.run_task, self.execute, self.restart, self.list_variables, self.session_overview):
            self.mcp.add_tool(_refusals_as_tool_errors(tool), structured_output=False)
        self.mcp.resource("toolpath://graph", name="state graph", description="The state-transition graph of the loaded catalogs as Mermaid flowchart text: states (rounded) and tools (boxes), requires and produces as arrows.", mime_type="text/plain")(workspace.graph.to_mermaid)
        for number, catalog in enumerate(workspace.loaded.catalogs):
            self.mcp.resource(f"toolpath://catalogs/{number}", name=f"catalog {catalog.path.name}", description=f"The catalog file {catalog.path} (tools, their states and affordances).", mime_type="text/yaml" if catalog.path.suffix in (".yaml", ".yml") else "application/json")(_reader(catalog.path))

    def _user(self) -> str:
        """The user this request acts for: its token's, or the server's."""
        if not self.authenticated:
            return self.user_id
        token = get_access_token()
        if token is None:  # the SDK's bearer middleware admits no request without one
            raise ToolError("this request carries no bearer token")
        return token.client_id

    async def _session(self, session_id: str | None) -> AgentSession:
        """This request's user's session ``session_id`` (default ``"main"``).

        Raises:
            ValueError: a blank session id.
        """
        user = self._user()
        session_id = session_id or DEFAULT_SESSION
        if not session_id.strip():
            raise ValueError(f"session_id must name a session, or be left out for {DEFAULT_SESSION!r}; got {session_id!r}")
        async with self._lock:  # one AgentSession per user and id, even for concurrent first calls
            session = self._sessions.get((user, session_id))
            if session is None:
                # SessionOwnerError only when the Python API gave that key to another user in a shared store.
                session = await asyncio.to_thread(self.workspace.session, kernel_session_id(user, session_id, self.authenticated), code_mode=self.code_mode, user_id=user)
                self._sessions[(user, session_id)] = session
        return session

    async def search_skills(self, query: str, k: int = 5, session_id: str | None = None) -> CallToolResult:
        """Find the states and tools of the loaded catalogs that match what you want to achieve, in words. Each hit says whether a plan from the session's held states reaches it."""
        session = await self._session(session_id)
        hits = await session.asearch(query, k)
        lines = [f"{hit.kind} {f'{hit.server}.' if hit.kind == 'tool' and hit.server else ''}{hit.name}" + (f" (similarity {hit.similarity:.2f})" if hit.similarity is not None else "") + f": {hit.matched}" for hit in hits]
        return _result({"hits": [hit.to_dict() for hit in hits]}, "\n".join(lines) or "no matching state or tool")

    async def plan_task(self, task: str | list[str], inputs: dict[str, Any] | None = None, session_id: str | None = None) -> CallToolResult:
        """Plan a task, given in words or as a list of step descriptions, from what the session holds. Returns the parts it matched, the plan and the Python cell that runs it (and how to use it); nothing runs."""
        session = await self._session(session_id)
        task_plan = await session.aplan_task(task, inputs)
        return _result(task_plan.to_dict(), task_plan.cell.code)

    async def run_task(self, task: str | list[str], inputs: dict[str, Any] | None = None, session_id: str | None = None) -> CallToolResult:
        """Plan a task (in words or as a list of steps) and run its cell in the session's kernel. The variables it makes stay for later cells and tasks."""
        session = await self._session(session_id)
        run = await session.arun_task(task, inputs)
        return _result(run.to_dict(), run.text(), run.result)

    async def execute(self, code: str, session_id: str | None = None) -> CallToolResult:
        """Run Python code as one cell in the session's persistent kernel (top-level await works; tool handles are bound). Returns what the cell printed, its value, error and images."""
        session = await self._session(session_id)
        result = await session.aexecute(code)
        return _result(result.to_dict(), format_for_model(result), result)

    async def restart(self, session_id: str | None = None) -> CallToolResult:
        """Discard the session's kernel and all its variables (and its saved snapshot); the next cell starts fresh."""
        session = await self._session(session_id)
        await session.arestart()
        return _result({"restarted": True}, "The kernel was restarted; all variables are gone.")

    async def list_variables(self, session_id: str | None = None) -> CallToolResult:
        """The names of the variables defined in the session's kernel."""
        session = await self._session(session_id)
        try:
            names = await self.code_mode.avariables(session.session_id, session.user_id)
        except KeyError:  # no kernel yet: nothing defined
            names = []
        return _result({"variables": names}, ", ".join(names) or "no variables yet")

    async def session_overview(self, session_id: str | None = None) -> CallToolResult:
        """What the session holds (states and the variables that carry them), its tool handles, and which tools can run next."""
        session = await self._session(session_id)
        state = session.state()
        text = await asyncio.to_thread(session.instructions)
        return _result({"held": list(state.held), "artifacts": state.artifacts, "domains": list(state.domains), "instructions": text}, text)

    async def aclose(self) -> None:
        """Snapshot and stop every session's kernel."""
        await self.code_mode.ashutdown()


class StaticTokens(TokenVerifier):
    """Bearer tokens from a tokens file: each maps to a user id."""

    def __init__(self, tokens: dict[str, str]):
        self._tokens = [(token.encode(), user) for token, user in tokens.items()]

    async def verify_token(self, token: str) -> AccessToken | None:
        offered = token.encode()
        # Every token is compared, in constant time, so timing tells nothing about which one is close.
        matches = [user for known, user in self._tokens if hmac.compare_digest(known, offered)]
        return AccessToken(token=token, client_id=matches[0], scopes=[]) if matches else None


class ServeError(ValueError):
    """``toolpath serve`` cannot start as asked (bad address, tokens file, or auth choice)."""


def read_tokens(path: str) -> dict[str, str]:
    """The tokens file: a JSON object ``{"token": "user id", ...}``.

    Raises:
        ServeError: the file cannot be read, is not such an object, or has an empty or short token.
    """
    try:
        tokens = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise ServeError(f"cannot read the tokens file {path}: {error.strerror or error}") from error
    except ValueError as error:
        raise ServeError(f"the tokens file {path} is not JSON ({error}); write an object like {{\"a-long-random-token\": \"alice\"}}") from error
    if not isinstance(tokens, dict) or not tokens or not all(isinstance(token, str) and isinstance(user, str) and user for token, user in tokens.items()):
        raise ServeError(f"the tokens file {path} must be a non-empty JSON object mapping each token to a user id (both strings)")
    short = [token for token in tokens if len(token) < 16]
    if short:
        raise ServeError(f"the tokens file {path} has {len(short)} token(s) shorter than 16 characters; use long random tokens (e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))')")
    return tokens


def http_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` as a pair.

    Raises:
        ServeError: not ``HOST:PORT`` with a port from 1 to 65535.
    """
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ServeError(f"--http takes HOST:PORT (e.g. 127.0.0.1:8765), got {text!r}")
    return host.strip("[]"), int(port)


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _reader(path: Path) -> Callable[[], str]:
    """A resource function returning the file's text (read when the resource is read).

    The ``env`` and ``headers`` of a catalog's MCP servers may hold secrets written in the file
    itself, so their values are replaced by :data:`HIDDEN`; such a catalog is served re-written
    (comments dropped).
    """

    def read() -> str:
        text = path.read_text(encoding="utf-8")
        document = yaml.safe_load(text)
        servers = document.get("mcp_servers") if isinstance(document, dict) else None
        hidden = False
        for server in servers.values() if isinstance(servers, dict) else ():
            for key in ("env", "headers"):
                values = server.get(key) if isinstance(server, dict) else None
                if isinstance(values, dict) and values:
                    server[key], hidden = dict.fromkeys(values, HIDDEN), True
        if not hidden:
            return text
        return json.dumps(document, indent=2, ensure_ascii=False) if path.suffix == ".json" else yaml.safe_dump(document, sort_keys=False, allow_unicode=True)

    return read


#: What a catalog resource shows instead of an MCP server's ``env`` or ``headers`` value.
HIDDEN = "<hidden>"


def _result(structured: dict[str, Any], text: str, cell: CellResult | None = None) -> CallToolResult:
    """A tool result: a short text (and a cell's PNG images, as image content) for the model, the
    JSON for programs (images counted there, not repeated in base64)."""
    content: list[TextContent | ImageContent] = [TextContent(type="text", text=text)]
    if cell is not None:
        content += [ImageContent(type="image", data=base64.b64encode(image).decode("ascii"), mime_type="image/png") for image in cell.images]
        structured = _without_image_data(structured)
    return CallToolResult(content=content, structured_content=json.loads(json.dumps(structured, default=str)))


def _without_image_data(structured: dict[str, Any]) -> dict[str, Any]:
    """``structured`` with each ``images`` list of base64 strings replaced by its length."""
    return {key: (len(value) if key == "images" and isinstance(value, list) else _without_image_data(value) if isinstance(value, dict) else value) for key, value in structured.items()}


def serve(catalogs: Sequence[str | Path] = (), http: str | None = None, tokens_file: str | None = None, no_auth: bool = False, code_mode_options: dict[str, Any] | None = None, http_limits: HttpLimits | None = None, allowed_hosts: Sequence[str] = ()) -> None:
    """Run ``toolpath serve``: over stdio until the client disconnects, or over Streamable HTTP at
    ``http`` (``HOST:PORT``) until SIGTERM/SIGINT. ``code_mode_options`` go to the shared
    :class:`kernel.CodeMode` (where its kernels run: a gateway, a kernelspec, the bridge).

    Over HTTP a tokens file (:func:`read_tokens`) is required, unless ``no_auth`` on a loopback
    address (then every request acts for the local user); connections are bounded by
    ``http_limits`` (:class:`planner.http_serving.HttpLimits`) and the Host and Origin headers
    checked against the bound address and ``allowed_hosts`` (:func:`planner.http_serving.host_check`).

    Raises:
        ServeError: a bad address or tokens file, HTTP without auth on a non-loopback address, or
            too few file descriptors (checked before anything loads).
    """
    tokens = None
    if http is None:
        if tokens_file is not None or no_auth or allowed_hosts or http_limits is not None:
            raise ServeError("--tokens, --no-auth, --allowed-host and the connection limits only apply with --http (over stdio the user is the local user)")
    else:
        host, port = http_address(http)
        if tokens_file is not None and no_auth:
            raise ServeError("give either --tokens FILE or --no-auth, not both")
        if tokens_file is None and not no_auth:
            raise ServeError("over HTTP, toolpath serve needs --tokens FILE (bearer tokens mapped to user ids); on a loopback address --no-auth serves the local user without tokens")
        if no_auth and not _is_loopback(host):
            raise ServeError(f"--no-auth is only allowed on a loopback address (127.0.0.1, ::1, localhost), not {host}; give --tokens FILE")
        tokens = read_tokens(tokens_file) if tokens_file is not None else None
        try:
            connection_cap(http_limits or HttpLimits())
        except ValueError as error:
            raise ServeError(str(error)) from error
    default_embedder().prepare_queries()  # the query model loads in a thread while the catalogs do
    workspace = Workspace.open(list(catalogs))
    url = f"http://{host}:{port}" if http is not None else "http://127.0.0.1"
    server = ToolpathServer(workspace, user_id=getpass.getuser(), tokens=tokens, url=url, **(code_mode_options or {}))

    async def main() -> None:
        try:
            if http is None:
                await server.mcp.run_stdio_async()
            else:
                app = server.mcp.streamable_http_app(transport_security=host_check(host, port, allowed_hosts), host=host)
                await serve_http(app, host, port, http_limits or HttpLimits())
        finally:
            await server.aclose()

    asyncio.run(main())
