"""``toolpath serve``: skill search, planning and persistent kernels served to agents over MCP, and
the options that bound it (kernels, sandboxes, the session store, HTTP limits, per-user quotas).
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from collections.abc import Sequence
from typing import Any

from toolpath.planner.interfaces.cli.shared import (
    CommandLineError,
    add_catalog_options,
    add_kernel_options,
    catalog_paths,
    code_mode_options,
    positive_count,
    positive_number,
)
from toolpath.planner.interfaces.serve_limits import SERVE_MAX_KERNELS, SERVE_MAX_KERNELS_PER_USER, SERVE_MAX_SESSIONS_PER_USER, SERVE_MAX_TASKS_PER_USER

SERVE_EXAMPLES = """examples:
  toolpath serve
  toolpath serve --catalog my_catalog.yaml
  toolpath serve --http 127.0.0.1:8765 --tokens tokens.json   # tokens.json: {"a-long-random-token": "alice"}
  toolpath serve --hash-token    # reads a token, prints "sha256:...": a tokens.json key that does not give the token away
  toolpath serve --http 127.0.0.1:8765 --tokens tokens.json --metrics 127.0.0.1:9464   # Prometheus scrapes :9464/metrics
MCP client configuration (e.g. Claude Desktop's mcpServers):
  {"mcpServers": {"toolpath": {"command": "toolpath", "args": ["serve"]}}}
With --http, "toolpath serve: listening on http://HOST:PORT/mcp" goes to stderr once it accepts
connections; an address it cannot bind (a port in use) exits 2 at once, naming the process holding it."""


def lease_seconds(text: str) -> float:
    """argparse type: a session lease in seconds, at least :data:`toolpath.kernel.codemode.snapshot_store.MIN_LEASE_SECONDS`
    (refused as the command line is read, before the server loads anything)."""
    from toolpath.kernel.codemode.snapshot_store import MIN_LEASE_SECONDS

    number = positive_number(text)
    if number < MIN_LEASE_SECONDS:
        raise argparse.ArgumentTypeError(f"{text!r} is shorter than the shortest lease, {MIN_LEASE_SECONDS:g} s (it is renewed every third of it)")
    return number


def kernel_caps(arguments: argparse.Namespace) -> dict[str, Any]:
    """The :class:`toolpath.kernel.CodeMode` caps of ``toolpath serve``'s ``--max-kernels`` and ``--max-kernels-per-user``."""
    return {"max_kernels": arguments.max_kernels, "max_kernels_per_user": arguments.max_kernels_per_user}


#: ``--sandbox-limit`` fields (:class:`toolpath.kernel.sandbox.provisioner.SandboxPolicy`'s limits) and byte-size suffixes.
SANDBOX_LIMITS = ("memory_bytes", "cpu_seconds", "processes", "open_files", "disk_bytes")
SIZE_SUFFIXES = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30}
#: The largest size a byte-size option takes (1 EiB): more is a typo, and would overflow float arithmetic.
MAX_BYTE_SIZE = 2**60


def _whole_number(text: str, sizes: bool) -> int | None:
    """``text`` as a whole number, with a KiB, MiB or GiB suffix when ``sizes``; ``None`` when it is
    not one (``isascii``: ``str.isdigit`` also says yes to "²", which ``int`` refuses)."""
    scale = next((size for suffix, size in SIZE_SUFFIXES.items() if sizes and text.endswith(suffix)), 1)
    number = text[:-3] if scale != 1 else text
    return int(number) * scale if number.isascii() and number.isdigit() else None


def byte_size(text: str) -> int:
    """argparse type: a positive whole number of bytes up to :data:`MAX_BYTE_SIZE`, or of KiB, MiB or GiB (``16GiB``)."""
    # At most 20 digits are read: 400 of them made int() work for nothing, and any such is too large.
    size = _whole_number(text, sizes=True) if len(text) <= 23 else None
    if size is None or not 0 < size <= MAX_BYTE_SIZE:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size: give a positive whole number of bytes up to 2**60, or with KiB, MiB or GiB (16GiB)")
    return size


def _sandbox_limits(items: Sequence[str]) -> dict[str, int | None]:
    """``--sandbox-limit FIELD=VALUE`` options as SandboxPolicy keywords: VALUE is a whole number
    (``_bytes`` fields also take a KiB, MiB or GiB suffix), or ``none`` to lift the limit.

    Raises:
        CommandLineError: an unknown field or a value that is not a whole number (the message says
            what is accepted).
    """
    limits: dict[str, int | None] = {}
    for item in items:
        field, _, value = item.partition("=")
        if field not in SANDBOX_LIMITS:
            raise CommandLineError(f"--sandbox-limit {item!r}: the field is one of {', '.join(SANDBOX_LIMITS)} (e.g. --sandbox-limit memory_bytes=1GiB)")
        number = _whole_number(value, sizes=field.endswith("_bytes"))
        if value == "none":
            limits[field] = None
        elif number is not None:
            limits[field] = number
        else:
            raise CommandLineError(
                f"--sandbox-limit {item!r}: give a whole number{' (or with KiB, MiB or GiB)' if field.endswith('_bytes') else ''}, or none to lift the limit"
            )
    return limits


def add_serve_parser(commands: argparse._SubParsersAction) -> None:
    """Add ``toolpath serve`` to ``commands``, run by :func:`command_serve`."""
    serve_parser = commands.add_parser(
        "serve",
        help="Serve skill search, planning and persistent kernels to agents over MCP (stdio or Streamable HTTP).",
        description="Serve skill search, planning and persistent kernels to agents over MCP (stdio, or Streamable HTTP with --http): the model and indexes load once.",
        epilog=SERVE_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    serve_parser.set_defaults(handler=command_serve)
    add_catalog_options(serve_parser)
    serve_parser.add_argument("--http", metavar="HOST:PORT", help="serve Streamable HTTP at this address (at /mcp) instead of stdio, e.g. 127.0.0.1:8765")
    serve_parser.add_argument(
        "--tokens",
        metavar="FILE",
        help='with --http: a JSON file {"bearer token": "user id", ...}, where a token may be given hashed as "sha256:<hex digest>" (see --hash-token); each request acts for its token\'s user',
    )
    serve_parser.add_argument(
        "--hash-token",
        action="store_true",
        help='read a bearer token from standard input and print its hashed form, "sha256:<hex digest>", a tokens file key that does not give the token away; serves nothing',
    )
    serve_parser.add_argument("--no-auth", action="store_true", help="with --http on a loopback address: no tokens, every request acts for the local user")
    serve_parser.add_argument(
        "--metrics",
        metavar="HOST:PORT",
        help="with --http: serve Prometheus metrics at http://HOST:PORT/metrics, a listener of its own without tokens (bind it to a loopback or internal address); needs toolpath[metrics]",
    )
    serve_parser.add_argument(
        "--kernels",
        choices=("auto", "sandboxed", "plain"),
        default="auto",
        help="where users' code runs on this machine: sandboxed (bubblewrap: no view of this server's files, environment, other sessions or the network), or plain (as this server's user, with its files); auto: sandboxed with --tokens, plain otherwise",
    )
    serve_parser.add_argument(
        "--sandbox-read",
        action="append",
        default=[],
        metavar="PATH",
        help="a host path sandboxed kernels may read (e.g. a data directory or your catalogs' modules); repeatable",
    )
    serve_parser.add_argument("--sandbox-network", action="store_true", help="let sandboxed kernels use the network (default: none)")
    serve_parser.add_argument(
        "--sandbox-limit",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="a sandboxed kernel's limit: memory_bytes (default 2GiB), cpu_seconds (3600), processes (256), open_files (1024) or disk_bytes (512MiB); none lifts one (not disk_bytes); repeatable",
    )
    serve_parser.add_argument(
        "--store",
        metavar="PATH|URL",
        help="where sessions' snapshots, owners, holders and approval decisions are kept: a SQLite file, or a postgresql:// URL that several serve replicas share (default: $TOOLPATH_STORE, else toolpath.db in $TOOLPATH_HOME); keep a password out of the command line (other users can read it): use $TOOLPATH_STORE, PGPASSWORD or ~/.pgpass",
    )
    serve_parser.add_argument(
        "--session-lease",
        type=lease_seconds,
        metavar="SECONDS",
        help="how long this server's hold on a session lasts in the store unless renewed (it renews every third of that); another replica takes a session over once it runs out (default 30)",
    )
    serve_parser.add_argument(
        "--snapshot",
        choices=("after-each-cell", "debounce"),
        help="when a session's variables are saved: after-each-cell (before a cell's result is returned, so a replica's death loses no finished cell; the default with a PostgreSQL --store) or debounce (1.5 s after the last cell; the default with a SQLite store)",
    )
    serve_parser.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME[:PORT]",
        help="with --http: a Host name clients (or a proxy) use for this server besides its address; requests naming any other Host or Origin are refused (DNS rebinding); repeatable",
    )
    serve_parser.add_argument(
        "--max-connections",
        type=positive_count,
        metavar="N",
        help="with --http: open connections at once (default 200, fewer if the open-file limit is low); more are answered 503",
    )
    serve_parser.add_argument(
        "--request-timeout", type=positive_number, metavar="SECONDS", help="with --http: time a client has to send a whole request, head and body (default 20)"
    )
    serve_parser.add_argument(
        "--max-kernels-per-user",
        type=positive_count,
        default=SERVE_MAX_KERNELS_PER_USER,
        metavar="N",
        help=f"live kernels one user may have; a new session beyond them snapshots and stops that user's least recently used idle one (default {SERVE_MAX_KERNELS_PER_USER})",
    )
    serve_parser.add_argument(
        "--max-kernels",
        type=positive_count,
        metavar="N",
        help=f"live kernels of all users together; a new session beyond them snapshots and stops the least recently used idle one (default {SERVE_MAX_KERNELS}, and for sandboxed kernels no more than fit --memory-budget at their memory limit; more than fit is refused)",
    )
    serve_parser.add_argument(
        "--memory-budget",
        type=byte_size,
        metavar="BYTES",
        help="memory the sandboxed kernels' limits may add up to, like 16GiB (default 75%% of this machine's memory, or of the control group's limit the server runs in)",
    )
    serve_parser.add_argument(
        "--max-sessions-per-user",
        type=positive_count,
        default=SERVE_MAX_SESSIONS_PER_USER,
        metavar="N",
        help=f"sessions one user may have open in this server (close_session ends one); a call naming a new one beyond them is an error (default {SERVE_MAX_SESSIONS_PER_USER})",
    )
    serve_parser.add_argument(
        "--max-tasks-per-user",
        type=positive_count,
        default=SERVE_MAX_TASKS_PER_USER,
        metavar="N",
        help=f"plan_task, run_task and execute calls one user may have running at once; one more is an error at once, not queued (default {SERVE_MAX_TASKS_PER_USER})",
    )
    serve_parser.add_argument(
        "--max-request-bytes",
        type=positive_count,
        metavar="N",
        help="with --http: the largest request body, in bytes; a larger one is answered 413 (default: the MCP SDK's, 4 MiB)",
    )
    add_kernel_options(serve_parser)


def command_serve(arguments: argparse.Namespace) -> int:
    from toolpath.kernel.sandbox.provisioner import SandboxPolicy
    from toolpath.planner.interfaces.http_serving import HttpLimits
    from toolpath.planner.interfaces.server import ServeError, serve  # the MCP SDK loads only for this command
    from toolpath.registry.database import STORE_VARIABLE, open_database
    from toolpath.registry.storage import StoreError

    if arguments.hash_token:
        print(_hashed_token_from_stdin())
        return 0
    try:
        limits = None
        if arguments.max_connections is not None or arguments.request_timeout is not None:
            defaults = HttpLimits()
            limits = HttpLimits(
                max_connections=arguments.max_connections or defaults.max_connections, request_timeout=arguments.request_timeout or defaults.request_timeout
            )
        quotas = {"max_sessions_per_user": arguments.max_sessions_per_user, "max_tasks_per_user": arguments.max_tasks_per_user}
        sandbox = None
        if arguments.sandbox_network or arguments.sandbox_read or arguments.sandbox_limit:
            sandbox = SandboxPolicy(network=arguments.sandbox_network, read_only=tuple(arguments.sandbox_read), **_sandbox_limits(arguments.sandbox_limit))
        if arguments.store or os.environ.get(STORE_VARIABLE):
            open_database(arguments.store).check("store")  # a store it cannot use stops it now, not at the first request
        serve(
            catalog_paths(arguments),
            arguments.http,
            arguments.tokens,
            arguments.no_auth,
            {**code_mode_options(arguments), **kernel_caps(arguments), **store_options(arguments)},
            limits,
            arguments.allowed_host,
            quotas,
            arguments.max_request_bytes,
            arguments.kernels,
            sandbox,
            arguments.memory_budget,
            arguments.metrics,
        )
    except (ServeError, ValueError, StoreError) as error:  # ValueError: CodeMode refused the kernel options
        raise CommandLineError(str(error)) from error
    return 0


def store_options(arguments: argparse.Namespace) -> dict[str, Any]:
    """The :class:`toolpath.kernel.CodeMode` options of ``--store``, ``--session-lease`` and ``--snapshot``."""
    options: dict[str, Any] = {}
    if arguments.store:
        options["snapshot_store"] = arguments.store
    if arguments.session_lease is not None:
        options["session_lease"] = arguments.session_lease
    if arguments.snapshot is not None:
        options["snapshot_after_each_cell"] = arguments.snapshot == "after-each-cell"
    return options


def _hashed_token_from_stdin() -> str:
    """``toolpath serve --hash-token``: the hashed form of the token read from standard input
    (without echo at a terminal), for a tokens file.

    Raises:
        CommandLineError: no token, a token with spaces or line breaks inside, or a short one.
    """
    from toolpath.planner.interfaces.server import MIN_TOKEN_LENGTH, hash_token

    token = (getpass.getpass("token (not shown): ") if sys.stdin.isatty() else sys.stdin.read()).strip()
    if not token or any(character.isspace() for character in token):
        raise CommandLineError(
            "--hash-token reads one bearer token, without spaces or line breaks, from standard input; e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))' | tee token.txt | toolpath serve --hash-token"
        )
    if len(token) < MIN_TOKEN_LENGTH:
        raise CommandLineError(
            f"the token has {len(token)} characters, fewer than {MIN_TOKEN_LENGTH}; use a long random one (e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))')"
        )
    return hash_token(token)
