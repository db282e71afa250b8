"""Kernels on a Jupyter Kernel Gateway or Enterprise Gateway, driven over their public REST and WebSocket API.

Enterprise Gateway starts kernels on Kubernetes, YARN, Docker or SSH hosts; Kernel Gateway starts
them on its own machine. Both serve the same API (jupyter_server's):

- ``POST /api/kernels`` starts a kernel (``{"name": kernelspec, "env": {...}}``), ``GET`` and
  ``DELETE /api/kernels/{id}`` read and shut it down, ``POST /api/kernels/{id}/interrupt``
  interrupts its cell;
- one WebSocket per kernel, ``/api/kernels/{id}/channels``, carries its Jupyter messages as JSON
  objects tagged with their ``channel`` (jupyter_server's default WebSocket protocol, which needs
  no subprotocol). The gateway signs them for the kernel.

Every request carries ``Authorization: token <gateway token>``.

jupyter_server's own gateway client is not used: it reads its settings from a process-wide
singleton (one gateway per process) and waits for messages by spinning on ``asyncio.sleep(0)``,
a busy loop per waiting cell.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import queue
import socket
import uuid
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import httpx2
from jupyter_client.jsonutil import json_default
from jupyter_client.session import msg_header

from toolpath.errors import MissingExtraError
from toolpath.kernel.errors import KernelError

try:
    import websockets
except ImportError as error:  # an optional part: kernels on this machine need none of it
    raise MissingExtraError("kernels on a Jupyter gateway need websockets: pip install 'toolpath[gateway]'") from error

#: Seconds a REST request to the gateway may take (starting a kernel has its own limit).
REQUEST_TIMEOUT = 30.0

#: Seconds the WebSocket handshake may take beyond the kernel's start timeout. A Jupyter server
#: holds the handshake until the kernel answers the one ``kernel_info_request`` it sends; when that
#: reply is lost it gives up after its ``kernel_info_timeout`` (jupyter_server's default 60 s, the
#: same as the default start timeout here) and completes the handshake. The grace lets that answer
#: arrive; :meth:`GatewayTransport._wait_for_ready` then asks the kernel itself, repeatedly.
HANDSHAKE_GRACE = 15.0
#: Seconds between asking the gateway whether it still has a kernel whose cell is silent.
CHECK_SECONDS = 2.0
#: Execution states the gateway announces when the kernel process is gone (jupyter_server sends
#: ``restarting`` when its restarter replaces a dead kernel, ``dead`` when it gives up).
_LOST_STATES = ("restarting", "autorestarting", "dead")


class Gateway:
    """A Jupyter Kernel Gateway or Enterprise Gateway that starts this process's kernels.

    Args:
        url: the gateway's base URL, ``http(s)://host:port[/base_url]``.
        token: its auth token (Kernel Gateway's ``--KernelGatewayApp.auth_token``, Enterprise
            Gateway's ``--EnterpriseGatewayApp.auth_token``); ``None`` when it needs none.
        kernel_name: the gateway's kernelspec to start; ``None`` for the gateway's default.
        request_timeout: seconds a REST request may take.

    Raises:
        ValueError: a URL that is not ``http://`` or ``https://`` with a host.

    Its kernels share one HTTP client, made on first use on the loop that drives them (making one
    loads the TLS trust store, about 40 ms that would otherwise delay a cell each time a kernel
    starts); :meth:`aclose` closes it.
    """

    def __init__(self, url: str, token: str | None = None, kernel_name: str | None = None, request_timeout: float = REQUEST_TIMEOUT):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname or any(character.isspace() for character in url):
            raise ValueError(f"gateway_url must be an http:// or https:// URL with a host and no spaces, like http://gateway:8888, got {url!r}")
        try:
            parts.port  # noqa: B018 - urllib checks the port only when it is read
        except ValueError:
            raise ValueError(f"gateway_url has a port that is not a number from 0 to 65535: {url!r}") from None
        if parts.username is not None or parts.password is not None:
            raise ValueError("gateway_url must not hold credentials (user:password@): give the gateway's token as gateway_token")
        if token is not None and (not token or not token.isascii() or not token.isprintable() or any(character.isspace() for character in token)):
            raise ValueError("gateway_token must be printable ASCII without spaces or line breaks (check for a trailing newline)")
        self.url = urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/") + "/", "", ""))
        self.token, self.kernel_name, self.request_timeout = token, kernel_name, request_timeout
        self.headers = {"Authorization": f"token {token}"} if token else {}
        self._http: httpx2.AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"Gateway({self.url!r}, kernel_name={self.kernel_name!r})"  # never the token

    def http(self) -> httpx2.AsyncClient:
        """The HTTP client of the gateway's REST API, made on first use on the running loop (and
        made again on another loop: a client's connections belong to the loop that opened them)."""
        loop = asyncio.get_running_loop()
        if self._http is None or self._loop is not loop:
            self._http, self._loop = httpx2.AsyncClient(base_url=self.url, headers=self.headers, timeout=self.request_timeout), loop
        return self._http

    async def aclose(self) -> None:
        """Close the HTTP client (a later kernel start makes a new one)."""
        http, self._http = self._http, None
        if http is not None:
            await http.aclose()

    def websocket_url(self, kernel_id: str) -> str:
        """The kernel's channels WebSocket: the base URL with ``ws``/``wss`` for ``http``/``https``."""
        parts = urlsplit(self.url)
        scheme = "wss" if parts.scheme == "https" else "ws"
        return urlunsplit((scheme, parts.netloc, f"{parts.path}api/kernels/{quote(kernel_id, safe='')}/channels", "", ""))


class GatewayTransport:
    """One kernel on a gateway: a :class:`toolpath.kernel.kernels.transport.KernelTransport`.

    Messages are read from the WebSocket by one task as they arrive and queued by channel; a cell
    waits on its queue without polling.
    """

    remote = True

    def __init__(self, gateway: Gateway, env: dict[str, str]):
        self.gateway = gateway
        self.env = env
        self.kernel_id: str | None = None
        self._socket: Any = None
        self._reader: asyncio.Task | None = None
        self._queues: dict[str, asyncio.Queue] = {"iopub": asyncio.Queue(), "shell": asyncio.Queue()}
        # The gateway signs messages with the kernel's key; the client only names its session.
        self._session_id = uuid.uuid4().hex
        #: Why the kernel is known to be gone ("" while it is not), and why its channels closed.
        self._lost = self._disconnected = ""
        self._timeout = REQUEST_TIMEOUT
        #: Loop time the gateway last said it has the kernel.
        self._checked = 0.0

    async def start(self, timeout: float) -> None:
        """Ask the gateway for a kernel and open its channels.

        Raises:
            KernelError: the gateway cannot be reached, refuses the token, has no such kernelspec,
                or the kernel does not answer within ``timeout`` seconds (the WebSocket handshake
                gets :data:`HANDSHAKE_GRACE` more); the message says which.
        """
        body: dict[str, Any] = {"env": self.env}
        if self.gateway.kernel_name:
            body["name"] = self.gateway.kernel_name
        # Starting a kernel on a cluster (pulling an image, scheduling a pod) takes longer than a request.
        request = asyncio.ensure_future(self._request("POST", "api/kernels", json=body, timeout=timeout))
        try:
            model = await asyncio.shield(request)
        except asyncio.CancelledError:
            # The gateway starts the kernel anyway: shut it down once its id is known.
            with contextlib.suppress(Exception):
                started = await request
                await self._request("DELETE", f"api/kernels/{quote(started['id'], safe='')}", missing_ok=True)
            raise
        except KernelError as error:
            raise (await self._missing_kernelspec()) or error from None
        if not isinstance(model, dict) or not isinstance(model.get("id"), str):
            raise KernelError(f"the gateway at {self.gateway.url} answered a kernel start with {str(model)[:200]!r}, not a kernel model")
        self.kernel_id = model["id"]
        self._timeout = timeout
        await self._connect()
        await self._wait_for_ready(timeout)

    async def attach(self, kernel_id: str, timeout: float) -> bool:
        """Open the channels of kernel ``kernel_id``, which another process started on this gateway
        and left running (it failed over); ``False`` when the gateway no longer has it.

        Raises:
            KernelError: the gateway cannot be reached, or the kernel does not answer within
                ``timeout`` seconds; the kernel is left to the gateway as it was.
        """
        model = await self._request("GET", f"api/kernels/{quote(kernel_id, safe='')}", missing_ok=True)
        if not isinstance(model, dict) or model.get("id") != kernel_id:
            return False
        self.kernel_id = kernel_id
        self._timeout = timeout
        try:
            await self._connect()
            await self._wait_for_ready(timeout)
        except BaseException:
            await self.detach()
            raise
        return True

    async def detach(self) -> None:
        """Close the kernel's channels and leave the kernel running on the gateway."""
        await self._close_channels()
        self.kernel_id = None

    async def _connect(self) -> None:
        """Open the kernel's channels (a gateway may hold the handshake until the kernel is up)."""
        assert self.kernel_id is not None
        try:
            self._socket = await websockets.connect(
                self.gateway.websocket_url(self.kernel_id),
                additional_headers=self.gateway.headers,
                max_size=None,
                open_timeout=self._timeout + HANDSHAKE_GRACE,
                compression=None,
            )
        except (OSError, websockets.exceptions.WebSocketException, TimeoutError) as error:
            raise KernelError(
                f"cannot open the channels of kernel {self.kernel_id} on the gateway at {self.gateway.url}: {type(error).__name__}: {error or 'no answer'}; check the gateway's log (the kernel may have failed to start)"
            ) from None
        self._disconnected = ""
        self._reader = asyncio.create_task(self._route())

    def connection_lost(self) -> str:
        """Why the kernel's channels closed while the kernel may still be running ("" while they are
        open); :meth:`reconnect` opens them again."""
        return self._disconnected

    async def reconnect(self) -> None:
        """Open the kernel's channels again; messages sent while they were closed are lost.

        Raises:
            KernelError: the channels cannot be opened.
        """
        await self._close_channels()
        await self._connect()

    async def _request(self, method: str, path: str, json: Any = None, timeout: float | None = None, missing_ok: bool = False) -> Any:
        """One REST request; its JSON answer (``{}`` for an empty one), or ``None`` for a 404 with ``missing_ok``."""
        try:
            response = await self.gateway.http().request(method, path, json=json, timeout=timeout or self.gateway.request_timeout)
        except httpx2.HTTPError as error:
            raise KernelError(
                f"cannot reach the kernel gateway at {self.gateway.url} ({type(error).__name__}: {error or 'no answer in time'}); check gateway_url (http or https, host, port) and that the gateway is running"
            ) from None
        if response.status_code == 404 and missing_ok:
            return None
        if response.status_code == 404 and method == "POST" and path == "api/kernels":
            raise KernelError(f"the kernel gateway at {self.gateway.url} has no kernels API there (HTTP 404); check gateway_url, including its base path")
        if response.status_code in (401, 403):
            # Enterprise Gateway also answers 403 for a user it will not start kernels for (its
            # unauthorized_users, root by default), saying so in its message.
            said = _reason(response)
            raise KernelError(
                f"the kernel gateway at {self.gateway.url} refused the request (HTTP {response.status_code}){'; it said: ' + said.rstrip('.') if said else ''}; check the gateway token (CodeMode's gateway_token, or $TOOLPATH_GATEWAY_TOKEN for the toolpath command), or the user the gateway starts kernels for (KERNEL_USERNAME in CodeMode's env)"
            )
        if response.status_code >= 400:
            raise KernelError(f"the kernel gateway at {self.gateway.url} answered {method} {path} with HTTP {response.status_code}: {_reason(response)}")
        return response.json() if response.content else {}

    async def _missing_kernelspec(self) -> KernelError | None:
        """The error to give when the gateway has no kernelspec of the name asked for (gateways answer
        that with a bare HTTP 500), or ``None``."""
        if not self.gateway.kernel_name:
            return None
        try:
            specs = await self._request("GET", "api/kernelspecs")
        except KernelError:
            return None
        names = sorted(specs.get("kernelspecs", {})) if isinstance(specs, dict) else []
        if not names or self.gateway.kernel_name in names:
            return None
        return KernelError(
            f"the kernel gateway at {self.gateway.url} has no kernelspec {self.gateway.kernel_name!r}; it has {', '.join(names)} (set kernel_name to one of them)"
        )

    async def _wait_for_ready(self, timeout: float) -> None:
        """Send ``kernel_info_request`` until the kernel answers (it ignores requests while starting).

        Channels the gateway closes meanwhile are opened again while time is left: a Jupyter server
        may drop a starting kernel's connection when its own first request goes unanswered.
        """
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            if self._disconnected and not self._lost and asyncio.get_running_loop().time() < deadline:
                await self.reconnect()
            message_id = await self._send("shell", "kernel_info_request", {})
            with contextlib.suppress(queue.Empty):
                while True:
                    reply = await self.get_shell_msg(timeout=1.0)
                    if reply.get("parent_header", {}).get("msg_id") == message_id:
                        return
            gone = self._lost or self._disconnected
            if self._lost or asyncio.get_running_loop().time() > deadline:
                raise KernelError(
                    f"kernel {self.kernel_id} on the gateway at {self.gateway.url} did not answer within {timeout:g} s"
                    + (f" ({gone})" if gone else "")
                    + "; check the gateway's log"
                )

    async def _route(self) -> None:
        """Queue each incoming message by channel; note when the gateway says the kernel is gone."""
        connection = self._socket.transport.get_extra_info("socket")
        try:
            async for raw in self._socket:
                _acknowledge_now(connection)
                if isinstance(raw, bytes):
                    continue  # only comm messages carry binary buffers, and cells' output has none
                message = json.loads(raw)
                channel = message.get("channel")
                if channel == "iopub" and message.get("msg_type") == "status" and message.get("content", {}).get("execution_state") in _LOST_STATES:
                    self._lost = f"the gateway reported the kernel {message['content']['execution_state']}"
                if channel in self._queues:
                    self._queues[channel].put_nowait(message)
        except websockets.exceptions.ConnectionClosed as error:
            self._disconnected = f"the gateway closed the kernel's channels ({error})"
        except ValueError as error:
            self._disconnected = f"the gateway sent a message that is not JSON ({error})"

    async def send_shell(self, message_type: str, content: dict[str, Any]) -> str:
        """Send a shell request (a comm message, say); its message id."""
        return await self._send("shell", message_type, content)

    async def _send(self, channel: str, message_type: str, content: dict[str, Any], metadata: dict[str, Any] | None = None) -> str:
        message_id = uuid.uuid4().hex
        header = msg_header(message_id, message_type, "toolpath", self._session_id)
        message = {
            "header": header,
            "msg_id": message_id,
            "msg_type": message_type,
            "parent_header": {},
            "metadata": metadata or {},
            "content": content,
            "buffers": [],
            "channel": channel,
        }
        try:
            await self._socket.send(json.dumps(message, default=json_default))
        except websockets.exceptions.ConnectionClosed as error:
            self._disconnected = self._disconnected or f"the gateway closed the kernel's channels ({error})"
        return message_id

    async def execute(
        self, code: str, silent: bool, store_history: bool, user_expressions: dict[str, str] | None = None, metadata: dict[str, Any] | None = None
    ) -> str:
        """Send an ``execute_request`` (stdin off: ``input()`` raises in the cell) with ``metadata``; its message id."""
        content = {"code": code, "silent": silent, "store_history": store_history, "user_expressions": user_expressions or {}, "allow_stdin": False}
        return await self._send("shell", "execute_request", {**content, "stop_on_error": True}, metadata)

    async def get_iopub_msg(self, timeout: float) -> dict[str, Any]:
        return await self._next("iopub", timeout)

    async def get_shell_msg(self, timeout: float) -> dict[str, Any]:
        return await self._next("shell", timeout)

    async def _next(self, channel: str, timeout: float) -> dict[str, Any]:
        """The next message of ``channel``; ``queue.Empty`` after ``timeout`` seconds, as jupyter_client's clients raise."""
        try:
            return await asyncio.wait_for(self._queues[channel].get(), timeout)
        except TimeoutError:
            raise queue.Empty from None

    async def interrupt(self) -> None:
        if await self._request("POST", f"api/kernels/{quote(self.kernel_id or '', safe='')}/interrupt", missing_ok=True) is None and not self._lost:
            self._lost = "the gateway no longer has the kernel (it was shut down or culled)"

    async def is_alive(self) -> bool:
        """False once the gateway said the kernel died or restarted, or no longer has it.

        jupyter_server announces a dead kernel on its WebSocket (``restarting`` when its restarter
        replaces the process, ``dead`` when it gives up), but leaves the WebSocket of a kernel it shut
        down or culled open: the gateway is asked too, at most every :data:`CHECK_SECONDS` (and at
        once when the channels closed). An unreachable gateway counts as a lost kernel.
        """
        if self._lost or self.kernel_id is None:
            return False
        now = asyncio.get_running_loop().time()
        if self._disconnected or now - self._checked >= CHECK_SECONDS:
            try:
                model = await self._request("GET", f"api/kernels/{quote(self.kernel_id, safe='')}", missing_ok=True)
            except KernelError as error:
                self._lost = str(error)
                return False
            if not isinstance(model, dict) or model.get("execution_state") == "dead":
                self._lost = "the gateway no longer has the kernel (it was shut down or culled)"
                return False
            self._checked = now
        return True

    async def _close_channels(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
        if self._socket is not None:
            with contextlib.suppress(Exception):  # the connection may already be broken
                await self._socket.close()
        self._socket = self._reader = None

    async def shutdown(self) -> None:
        """Close the channels and ask the gateway to shut the kernel down. Best effort: a gateway that
        cannot be reached keeps the kernel until it culls it, which is not this caller's error."""
        await self._close_channels()
        if self.kernel_id is not None:
            with contextlib.suppress(KernelError):
                await self._request("DELETE", f"api/kernels/{quote(self.kernel_id, safe='')}", missing_ok=True)

    def log_tail(self, limit: int = 2000) -> str:
        """The kernel's own output is in the gateway's log, not here."""
        return ""


def _acknowledge_now(connection: Any) -> None:
    """Acknowledge what the gateway sent at once (Linux ``TCP_QUICKACK``).

    A gateway's WebSocket (Tornado's) does not set ``TCP_NODELAY``, so every message it writes while
    the previous one is unacknowledged waits for this end's ACK, which Linux delays by up to 40 ms:
    a cell's messages after ``busy`` arrived 40 ms late, and a trivial cell took 50 ms instead of 13
    (``benchmarks/bench_cells.py``). The flag is not sticky, hence once per message.
    """
    if connection is not None and hasattr(socket, "TCP_QUICKACK"):
        with contextlib.suppress(OSError):
            connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)


def _reason(response: httpx2.Response) -> str:
    """The gateway's error message (jupyter_server answers ``{"message": ..., "reason": ...}``)."""
    try:
        answer = response.json()
    except ValueError:
        return response.text[:300]
    if isinstance(answer, dict):
        return str(answer.get("message") or answer.get("reason") or answer)[:300]
    return str(answer)[:300]
