"""Serving an ASGI app over HTTP with uvicorn, within stated limits, for ``toolpath serve --http``.

The MCP SDK's ``run_streamable_http_async`` starts uvicorn with its defaults: no bound on open
connections, no time limit on a request's head or body, a graceful shutdown that waits for every
open stream, and the event loop's default error handler. Anyone who could reach the port could
then exhaust the process's file descriptors with idle or slow connections (``accept`` failing with
EMFILE, the error report itself failing and ending the loop, every user's kernels with it), and
SIGTERM could wait forever on one long request. :func:`serve_http` runs the same app under
uvicorn with :class:`HttpLimits`:

- at most ``max_connections`` open connections (never more than the descriptors left after a
  reserve for kernels, catalogs and the store); at the cap a new connection replaces the one that
  has waited longest without a request being served, or is answered ``503`` when all are busy;
- a client has ``request_timeout`` seconds from connecting (or from the first byte of a later
  request on a kept-alive connection) to send a whole request, head and body, so slow-header
  ("slowloris") and slow-body connections are closed; an idle kept-alive connection is closed
  after ``keep_alive_timeout`` seconds (uvicorn's own setting);
- on SIGTERM or SIGINT, requests still running after ``shutdown_timeout`` seconds are cancelled;
- an error the event loop reports (e.g. ``accept`` failing with EMFILE, which asyncio retries a
  second later) is written to standard error in one line and never ends the loop.

uvicorn's ``limit_concurrency`` is not used: it counts connections only once a request arrives
and answers 503 then, after the descriptor is already held.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import ipaddress
import os
import resource
import socket
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import h11
import psutil
import uvicorn
from mcp.server.transport_security import TransportSecuritySettings
from uvicorn.protocols.http.h11_impl import H11Protocol

from toolpath.errors import ToolpathError

#: Descriptors kept free of HTTP connections: each kernel holds about ten (ZeroMQ sockets, pipes,
#: its connection file), and the catalogs, SQLite store and MCP toolkits need their own.
RESERVED_DESCRIPTORS = 256
#: The listening socket's backlog. asyncio accepts up to this many connections in one go before
#: any of them can be refused or closed, so it must fit well inside the reserve (uvicorn's default
#: is 2,048).
BACKLOG = 64

_TOO_MANY_CONNECTIONS = b"too many open connections to this server; retry later\n"
_SERVICE_UNAVAILABLE = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\ncontent-length: %d\r\n\r\n%s" % (
    len(_TOO_MANY_CONNECTIONS),
    _TOO_MANY_CONNECTIONS,
)


@dataclass(frozen=True)
class HttpLimits:
    """Bounds on what HTTP clients can hold of the server (see the module docstring).

    Attributes:
        max_connections: open connections at once; lowered to the descriptors available less
            :data:`RESERVED_DESCRIPTORS`. 200 keeps a few dozen agents with an open event stream
            each well inside Linux's usual soft limit of 1,024 descriptors.
        request_timeout: seconds a client has to send a whole request (head and body).
        keep_alive_timeout: seconds an idle kept-alive connection stays open (uvicorn's default is 5).
        shutdown_timeout: seconds running requests get on SIGTERM/SIGINT before they are cancelled.
    """

    max_connections: int = 200
    request_timeout: float = 20.0
    keep_alive_timeout: int = 5
    shutdown_timeout: int = 5

    def __post_init__(self) -> None:
        for name in ("max_connections", "request_timeout", "keep_alive_timeout", "shutdown_timeout"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")


def connection_cap(limits: HttpLimits) -> int:
    """The number of connections the server admits: ``limits.max_connections``, or fewer when the
    process's descriptor limit (raised to its hard limit first) leaves less after the reserve.

    Raises:
        ValueError: fewer than 16 descriptors would be left for connections (the message says how
            to raise the limit).
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        # Raising the soft limit up to the hard one needs no privilege; servers commonly do it.
        wanted = hard if hard != resource.RLIM_INFINITY else max(soft, 65_536)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (ValueError, OSError):
            pass
    available = soft - RESERVED_DESCRIPTORS
    if available < 16:
        raise ValueError(
            f"the open-file limit is {soft} descriptors, which leaves {max(available, 0)} for HTTP connections after {RESERVED_DESCRIPTORS} kept for kernels and files; raise it (e.g. `ulimit -n 4096`) and start again"
        )
    return min(limits.max_connections, available)


class BoundedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a cap on open connections and a time limit per request (set
    on the class by :func:`serve_http`).

    At the cap a new connection takes the place of the connection that has waited longest
    without a request in progress (idle, or still sending its request); only when every
    connection is busy is the new one answered 503. A flood of idle connections therefore costs
    a real client a reconnect at most, never a refusal.
    """

    max_connections: int = HttpLimits.max_connections
    request_timeout: float = HttpLimits.request_timeout

    @staticmethod
    def cap_hit(outcome: str) -> None:
        """Told of each connection that found the cap reached: ``"replaced_waiting"`` (it took the
        place of the longest-waiting one) or ``"refused"`` (answered 503)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._request_timer: asyncio.TimerHandle | None = None
        self._waiting_since = 0.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if len(self.connections) >= self.max_connections:
            replaced = self._close_longest_waiting()
            self.cap_hit("replaced_waiting" if replaced else "refused")
            if not replaced:
                # Answer and let go at once: holding the descriptor is what the cap prevents.
                transport.write(_SERVICE_UNAVAILABLE)
                transport.close()
                self.transport = transport
                return
        super().connection_made(transport)
        self._start_request_timer()

    def data_received(self, data: bytes) -> None:
        if self.cycle is not None and self.conn.their_state is h11.IDLE and not self.conn.trailing_data[0]:
            # The first bytes of another request on a kept-alive connection: its own time starts.
            self._cancel_request_timer()
            self._start_request_timer()
        super().data_received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self not in self.connections:
            return  # refused in connection_made: nothing of it was set up
        self._cancel_request_timer()
        super().connection_lost(exc)

    def _waiting(self) -> bool:
        """No request of this connection is being served: it is idle or still sending one
        (h11 stays IDLE until a request's head is complete and in SEND_BODY until its body is)."""
        return self.conn.their_state in (h11.IDLE, h11.SEND_BODY) and (self.cycle is None or self.cycle.response_complete)

    def _close_longest_waiting(self) -> bool:
        waiting = [
            connection
            for connection in self.connections
            if isinstance(connection, BoundedH11Protocol) and connection._waiting() and not connection.transport.is_closing()
        ]
        if not waiting:
            return False
        min(waiting, key=lambda connection: connection._waiting_since).transport.close()
        return True

    def _start_request_timer(self) -> None:
        self._waiting_since = self.loop.time()
        self._request_timer = self.loop.call_later(self.request_timeout, self._request_timed_out)

    def _cancel_request_timer(self) -> None:
        if self._request_timer is not None:
            self._request_timer.cancel()
            self._request_timer = None

    def _request_timed_out(self) -> None:
        self._request_timer = None
        if self.conn.their_state in (h11.IDLE, h11.SEND_BODY) and not self.transport.is_closing():
            self.transport.close()


#: Addresses that accept connections on every interface: no one Host name is the server's.
WILDCARD_ADDRESSES = frozenset({"0.0.0.0", "::", ""})


def host_check(host: str, port: int, allowed_hosts: Sequence[str] = ()) -> TransportSecuritySettings:
    """The Host/Origin allow-list for a server bound to ``host:port`` (the MCP SDK checks it on
    every request and answers 421/403 otherwise), against DNS rebinding: a web page whose name
    an attacker re-points at this address must not reach the server through a visitor's browser.

    The SDK protects only ``127.0.0.1``, ``localhost`` and ``::1`` by itself; this allows, for any
    address, the bound address with its port (``localhost`` also as ``127.0.0.1`` and ``[::1]``, and
    a loopback address also as ``localhost``) and each of ``allowed_hosts`` (names a proxy or DNS gives the server, ``NAME`` or
    ``NAME:PORT``). A wildcard address (``0.0.0.0``, ``::``) with no ``allowed_hosts`` admits any
    Host: it is only served with bearer tokens, which a rebinding page does not have.
    """
    names = ["localhost", "127.0.0.1", "[::1]"] if host == "localhost" else [] if host in WILDCARD_ADDRESSES else [f"[{host}]" if ":" in host else host]
    if _is_loopback_address(host):
        # A client on this machine may name it localhost; a rebinding page's Host is its own domain.
        names.append("localhost")
    hosts = [f"{name}:{port}" for name in names] + [name if ":" in name.rsplit("]", 1)[-1] else f"{name}:{port}" for name in allowed_hosts]
    if port == 80:  # clients leave the default port out of Host
        hosts += [name.removesuffix(":80") for name in hosts if name.endswith(":80")]
    if not hosts:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    origins = [f"{scheme}://{name}" for name in hosts for scheme in ("http", "https")]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins)


def _is_loopback_address(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a name, not an address
        return False


def report_loop_error(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """An event-loop error handler that cannot fail: one line on standard error, written with
    ``os.write`` because formatting a traceback may need files the process has no descriptor for."""
    error = context.get("exception")
    line = f"toolpath serve: {context.get('message', 'event loop error')}" + (f": {type(error).__name__}: {error}" if error is not None else "") + "\n"
    try:
        os.write(sys.stderr.fileno(), line.encode("utf-8", "replace"))
    except Exception:  # nowhere left to say it; the loop must go on
        pass


class AddressUnavailableError(ToolpathError, OSError):
    """The address to serve at cannot be bound; the message says why (in use, and by which process
    when that can be seen; not an address of this machine; a privileged port) and what to do."""


def bind_address(host: str, port: int, option: str = "--http") -> list[socket.socket]:
    """Sockets bound to ``host:port`` (one per address ``host`` resolves to, as asyncio's
    ``create_server`` binds them), not yet listening: connections are refused until
    :func:`serve_http` serves them. Binding first lets ``toolpath serve`` find the address taken
    before it spends seconds loading catalogs and models. ``option`` is the command-line option
    that gave the address, named in the advice.

    Raises:
        AddressUnavailableError: an address cannot be bound (the sockets bound so far are closed).
    """
    try:
        addresses = {(family, address) for family, _, _, _, address in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)}
    except socket.gaierror as error:
        raise AddressUnavailableError(errno.EADDRNOTAVAIL, f"cannot serve at {host}:{port}: {host!r} does not resolve ({error.strerror})") from error
    sockets: list[socket.socket] = []
    unavailable: OSError | None = None
    try:
        for family, address in sorted(addresses, key=lambda pair: pair[0]):
            try:
                # IPPROTO_TCP named, not 0: asyncio turns Nagle's algorithm off only on sockets
                # whose protocol says TCP, and with it on every response waited ~40 ms for the
                # client's delayed acknowledgement.
                listener = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
            except OSError as error:  # a family this machine does not have (e.g. IPv6 disabled)
                unavailable = error
                continue
            sockets.append(listener)
            # As asyncio and uvicorn do: a port whose last server left connections in TIME_WAIT can be
            # bound again at once, and an IPv6 socket leaves the IPv4 address to its own socket.
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                listener.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                listener.bind(address)
            except OSError as error:
                if error.errno != errno.EADDRNOTAVAIL:
                    raise AddressUnavailableError(error.errno, _why_unbindable(host, port, error, option)) from error
                # As asyncio does: a name's address of a family that is not enabled (``localhost``'s
                # ::1 without IPv6) is left out, as long as another one binds.
                sockets.pop().close()
                unavailable = error
        if not sockets:
            error = unavailable or OSError(errno.EADDRNOTAVAIL, "no address")
            raise AddressUnavailableError(error.errno, _why_unbindable(host, port, error, option)) from unavailable
    except BaseException:
        for listener in sockets:
            listener.close()
        raise
    return sockets


def _why_unbindable(host: str, port: int, error: OSError, option: str) -> str:
    if error.errno == errno.EADDRINUSE:
        holder = port_holder(port)
        return (
            f"cannot serve at {host}:{port}: the port is already in use{f' by {holder}' if holder else ' by another process'}; "
            f"stop that process, or give {option} another port"
        )
    if error.errno == errno.EADDRNOTAVAIL:
        return f"cannot serve at {host}:{port}: {host} is not an address of this machine; give one of its addresses (e.g. 127.0.0.1, or 0.0.0.0 for all)"
    if error.errno == errno.EACCES:
        return f"cannot serve at {host}:{port}: ports below 1024 need privileges this process does not have; give a port from 1024 up"
    return f"cannot serve at {host}:{port}: {error.strerror or error}"


def port_holder(port: int) -> str | None:
    """The process listening on TCP ``port``, as ``"process 1234 (python -m http.server 8000)"``;
    ``None`` when none can be seen (another user's processes are hidden without privileges)."""
    try:
        connections = psutil.net_connections(kind="tcp")
    except (psutil.AccessDenied, OSError):
        return None
    pids = sorted(
        {
            connection.pid
            for connection in connections
            if connection.status == psutil.CONN_LISTEN and connection.laddr and connection.laddr.port == port and connection.pid
        }
    )
    if not pids:
        return None
    try:
        process = psutil.Process(pids[0])
        command = " ".join(process.cmdline()) or process.name()
    except psutil.Error:
        return f"process {pids[0]}"
    command = " ".join(command.split())  # one line, whatever the command line held
    shown = command if len(command) <= 120 else command[:117] + "..."
    return f"process {pids[0]} ({shown})"


class _AnnouncingServer(uvicorn.Server):
    """uvicorn's server that writes one line to standard error once it accepts connections, and
    leaves SIGTERM/SIGINT alone unless ``on_signals``."""

    def __init__(self, config: uvicorn.Config, announcement: str, on_signals: bool):
        super().__init__(config)
        self.announcement = announcement
        self.on_signals = on_signals

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            print(self.announcement, file=sys.stderr, flush=True)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if not self.on_signals:
            yield
            return
        with super().capture_signals():
            yield


async def serve_http(
    app: Any,
    sockets: list[socket.socket],
    url: str,
    limits: HttpLimits,
    on_cap_hit: Callable[[str], None] = BoundedH11Protocol.cap_hit,
    stop: asyncio.Event | None = None,
    on_signals: bool = True,
) -> None:
    """Serve the ASGI ``app`` on ``sockets`` (bound by :func:`bind_address`) until SIGTERM/SIGINT
    (unless not ``on_signals``) or until ``stop`` is set, within ``limits``; once it accepts
    connections, write ``toolpath serve: listening on URL`` (``url``) to standard error.
    ``on_cap_hit`` is told of each connection that finds the connection cap reached
    (:meth:`BoundedH11Protocol.cap_hit`).

    One process serves a second app (the metrics) beside the first with ``on_signals=False`` and a
    ``stop`` the first sets as it ends: signals then reach the first alone, as with one app.

    Raises:
        ValueError: too few descriptors for connections (see :func:`connection_cap`).
    """
    protocol = type(
        "ServeProtocol",
        (BoundedH11Protocol,),
        {"max_connections": connection_cap(limits), "request_timeout": limits.request_timeout, "cap_hit": staticmethod(on_cap_hit)},
    )
    asyncio.get_running_loop().set_exception_handler(report_loop_error)
    config = uvicorn.Config(
        app,
        http=protocol,
        log_level="warning",
        backlog=BACKLOG,
        timeout_keep_alive=limits.keep_alive_timeout,
        timeout_graceful_shutdown=limits.shutdown_timeout,
    )
    server = _AnnouncingServer(config, f"toolpath serve: listening on {url}", on_signals)
    stopping = asyncio.ensure_future(_stop_when(stop, server)) if stop is not None else None
    try:
        await server.serve(sockets=sockets)
    finally:
        if stopping is not None:
            stopping.cancel()


async def _stop_when(stop: asyncio.Event, server: uvicorn.Server) -> None:
    """Have ``server`` shut down (gracefully, as on a signal) once ``stop`` is set."""
    await stop.wait()
    server.should_exit = True
