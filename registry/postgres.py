"""The shared store on a PostgreSQL server, for several toolpath processes on several machines.

Connections come from a psycopg 3 pool (``psycopg_pool``), opened on first use. Writers of one key
(a session id) are serialized with a transaction-level advisory lock on the key's hash, so two
processes never interleave the writes of one session, while other sessions' writes go on; a
collision of two keys' hashes only makes them wait for each other. Reads run at ``repeatable
read``, so a snapshot's variables and its session row come from one commit.

Install with ``pip install 'toolpath[postgres]'`` (psycopg with its binary build and pool).
"""

from __future__ import annotations

import threading
import urllib.parse
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from toolpath.registry.storage import StoreError
from toolpath.registry.store_engine import Database, StoreConnection
from toolpath.registry.store_schema import Table

try:
    import psycopg
    import psycopg_pool
except ModuleNotFoundError as missing:  # pragma: no cover - depends on the installation
    raise ModuleNotFoundError(f"a postgresql:// store needs psycopg and its pool: pip install 'toolpath[postgres]' ({missing})") from missing

#: Connections one process keeps to the server at most (its sessions' writes are short).
MAX_CONNECTIONS = 8
#: Seconds to wait for a connection (the server down, or every connection busy) before failing.
CONNECT_TIMEOUT_SECONDS = 10.0


#: Query parameters of a libpq URL that hold secrets.
_SECRET_PARAMETERS = ("password", "sslpassword")


def shown_url(url: str) -> str:
    """``url`` as messages show it: without its password (in the user part, or a ``password`` or
    ``sslpassword`` parameter)."""
    try:
        parts = urllib.parse.urlsplit(url)
        netloc = parts.netloc
    except ValueError:  # an unbalanced [IPv6] host
        return f"{url.partition('://')[0]}://(a URL that cannot be read)"
    if "@" in netloc:
        user, _, host = netloc.rpartition("@")
        netloc = f"{user.partition(':')[0]}@{host}"
    parameters = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    secret = any(name in _SECRET_PARAMETERS for name, _ in parameters)
    query = urllib.parse.urlencode([(name, value) for name, value in parameters if name not in _SECRET_PARAMETERS]) if secret else parts.query
    return f"{parts.scheme}://{netloc}{parts.path}{'?' + query if query else ''}"


def _secrets(url: str) -> list[str]:
    """The secrets written in ``url``, as written and decoded, to be removed from any message; read
    by hand, so that a URL ``urlsplit`` cannot read still has its password found."""
    authority = url.partition("://")[2].split("/", 1)[0].split("?", 1)[0]
    user_part = authority.rpartition("@")[0]
    found = [user_part.partition(":")[2]] if ":" in user_part else []
    query = url.partition("?")[2]
    found += [raw.partition("=")[2] for raw in query.split("&") if raw.partition("=")[0] in _SECRET_PARAMETERS]
    decoded = [urllib.parse.unquote_plus(secret) for secret in found]
    return sorted({secret for secret in found + decoded if secret}, key=len, reverse=True)


def redacted(text: str, url: str) -> str:
    """``text`` without the secrets of ``url`` (libpq's messages may quote a malformed one)."""
    for secret in _secrets(url):
        text = text.replace(secret, "***")
    return text


class PostgresDatabase(Database):
    """The store on the PostgreSQL server at ``url`` (libpq's URL form, ``postgresql://user@host/db``).

    Tables are made in the connection's current schema (set ``options=-csearch_path=NAME`` in the
    URL to keep them apart). The pool opens on first use; every method raises ``StoreError`` when
    the server cannot be reached within :data:`CONNECT_TIMEOUT_SECONDS`.
    """

    engine = "postgresql"

    def __init__(self, url: str):
        super().__init__()
        self.url = url
        self.location = shown_url(url)
        self._pool: psycopg_pool.ConnectionPool | None = None
        self._pool_lock = threading.Lock()

    def close(self) -> None:
        """Close the pool's connections (it opens again when used)."""
        with self._pool_lock:
            if self._pool is not None:
                self._pool.close()
                self._pool = None

    def _connections(self, purpose: str) -> psycopg_pool.ConnectionPool:
        with self._pool_lock:
            if self._pool is None:
                # One connection first, here: its error is libpq's own reason, at once, where the
                # pool would retry in the background, logging the URL's malformed parts.
                try:
                    psycopg.connect(self.url, connect_timeout=max(1, int(CONNECT_TIMEOUT_SECONDS))).close()
                except psycopg.Error as error:
                    raise StoreError(self.location, purpose, f"cannot connect to it: {redacted(str(error).strip(), self.url)}", _REMEDY) from None
                self._pool = psycopg_pool.ConnectionPool(
                    self.url,
                    min_size=1,
                    max_size=MAX_CONNECTIONS,
                    timeout=CONNECT_TIMEOUT_SECONDS,
                    kwargs={"autocommit": True},
                    # A connection the server dropped (a restart, a failover) is replaced, not handed out.
                    check=psycopg_pool.ConnectionPool.check_connection,
                    open=True,
                    name="toolpath store",
                )
            return self._pool

    @contextmanager
    def _transaction(self, purpose: str, write: bool, key: str | None) -> Iterator[StoreConnection]:
        try:
            with self._connections(purpose).connection() as connection, connection.transaction():
                if not write:
                    connection.execute("set transaction isolation level repeatable read")
                if key is not None:
                    connection.execute("select pg_advisory_xact_lock(hashtextextended(%s, 0))", (key,))
                yield _PostgresConnection(connection, self.location, purpose)
        except psycopg_pool.PoolTimeout as error:
            raise StoreError(self.location, purpose, f"no connection to it within {CONNECT_TIMEOUT_SECONDS:g} s ({error})", _REMEDY) from error
        except psycopg.OperationalError as error:
            raise StoreError(self.location, purpose, f"the server cannot be used ({redacted(str(error).strip(), self.url)})", _REMEDY) from None
        except psycopg.Error as error:
            raise StoreError(self.location, purpose, redacted(str(error).strip(), self.url), "See the server's log, or use another store") from None


_REMEDY = "Check that the server runs and lets this user in, and that TOOLPATH_STORE (or --store) names it"


class _PostgresConnection(StoreConnection):
    engine = "postgresql"

    def __init__(self, connection: psycopg.Connection, location: str, purpose: str):
        self._connection = connection
        self._location = location
        self._purpose = purpose

    def execute(self, sql: str, parameters: Sequence[Any] = ()) -> psycopg.Cursor:
        # The statements are toolpath's own; only their placeholders differ between engines.
        return self._connection.execute(sql.replace("?", "%s"), tuple(parameters))

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            with self._connection.cursor() as cursor:
                cursor.executemany(sql.replace("?", "%s"), [tuple(row) for row in rows])

    def now(self) -> float:
        return float(self._connection.execute("select extract(epoch from clock_timestamp())").fetchone()[0])

    def table_matches(self, table: Table) -> bool:
        rows = self._connection.execute(
            "select column_name from information_schema.columns where table_schema = current_schema() and table_name = %s", (table.name,)
        ).fetchall()
        if not rows:
            return False
        found = sorted(row[0] for row in rows)
        if found != sorted(table.column_names):
            problem = f"its {table.name} table has columns ({', '.join(found)}), not ({', '.join(table.column_names)})"
            raise StoreError(self._location, self._purpose, problem, "Drop that table, or give toolpath its own schema (options=-csearch_path=NAME in the URL)")
        return True
