"""The shared store: session owners, snapshots, session holders and their leases, approval decisions.

Two engines behind one interface (:class:`Database`):

- **SQLite** (the default, no setup): toolpath's file ``$TOOLPATH_HOME/toolpath.db``; enough for one
  machine, where every process serving sessions reads the same file.
- **PostgreSQL** (:class:`toolpath.registry.postgres.PostgresDatabase`), for several ``toolpath
  serve`` replicas on several machines: a ``postgresql://`` URL.

:func:`open_database` picks one from a location: a path, a URL, or ``$TOOLPATH_STORE``. Tables are
made, or brought up to date, by :mod:`toolpath.registry.store_schema` the first time a process uses
the store. Statements are written once, with ``?`` placeholders for values (never values spliced
into SQL), and run unchanged on both engines. The embedding cache and offloaded results stay in
the local SQLite file: one is a cache, and a kernel reads the other from its own machine.
"""

from __future__ import annotations

import os
import re
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from toolpath.registry.storage import StoreError, connected, database_file, default_database_path, table_exists, transaction
from toolpath.registry.store_engine import Database, StoreConnection
from toolpath.registry.store_schema import Table

__all__ = ["Database", "SQLiteDatabase", "StoreConnection", "forget_database", "is_postgres", "open_database", "store_location"]

#: Environment variable naming the shared store: a SQLite file's path or a ``postgresql://`` URL.
STORE_VARIABLE = "TOOLPATH_STORE"
#: URL schemes that name a PostgreSQL server (libpq's own).
POSTGRES_SCHEMES = ("postgresql://", "postgres://")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
# The start of a libpq "key=value" connection string (its most used keywords).
_CONNECTION_STRING = re.compile(r"^(host|hostaddr|port|dbname|user|password|passfile|service|sslmode|options)\s*=")


class SQLiteDatabase(Database):
    """The store in one SQLite file (created, mode 0600, when missing).

    Raises:
        StoreError: ``path`` is a directory or cannot be created (see
            :func:`toolpath.registry.storage.database_file`).
    """

    engine = "sqlite"

    def __init__(self, path: str | os.PathLike[str] | None = None, purpose: str = "store"):
        super().__init__()
        self.path = database_file(path, purpose)
        self.location = str(self.path)

    def close(self) -> None:
        """Nothing to let go of: each transaction opens and closes its own connection."""

    @contextmanager
    def _transaction(self, purpose: str, write: bool, key: str | None) -> Iterator[StoreConnection]:
        # SQLite has one writer at a time: BEGIN IMMEDIATE takes its lock from the start, so two
        # processes that read and then write do not deadlock on the upgrade.
        with connected(self.path, purpose) as database, transaction(database, immediate=write):
            yield _SQLiteConnection(database, self.path, purpose)


class _SQLiteConnection(StoreConnection):
    engine = "sqlite"

    def __init__(self, database: sqlite3.Connection, path: Path, purpose: str):
        self._database = database
        self._path = path
        self._purpose = purpose

    def execute(self, sql: str, parameters: Sequence[Any] = ()) -> sqlite3.Cursor:
        return self._database.execute(sql, parameters)

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self._database.executemany(sql, rows)

    def table_matches(self, table: Table) -> bool:
        return table_exists(self._database, table.name, table.column_names, table.primary_key, self._path, self._purpose)


#: One :class:`Database` per location in this process, so its users share a connection pool.
_OPEN: dict[str, Database] = {}
_OPEN_LOCK = threading.Lock()


def store_location(location: str | os.PathLike[str] | None = None, purpose: str = "store") -> str:
    """The store a process uses: ``location``, else ``$TOOLPATH_STORE``, else
    ``$TOOLPATH_HOME/toolpath.db`` (:func:`toolpath.registry.storage.default_database_path`); a
    ``postgresql://`` (or ``postgres://``) URL, or a file's path (``~`` expanded).

    Raises:
        StoreError: an empty location, a URL of another scheme (``mysql://``,
            ``postgresql+psycopg://``), or a libpq ``key=value`` string: none of them is taken for a
            file's name (replicas would each get a file of their own without a word).
    """
    text = os.fspath(location) if location is not None else os.environ.get(STORE_VARIABLE) or str(default_database_path())
    text = text.strip()
    if not text:
        raise StoreError(
            "(an empty location)", purpose, "no store is named", f"Give a SQLite file's path or a postgresql:// URL, or leave {STORE_VARIABLE} unset"
        )
    scheme = _SCHEME.match(text)
    if scheme is not None:
        name = scheme.group(1).lower()
        if name in ("postgresql", "postgres"):
            return f"{name}://{text[scheme.end() :]}"
        raise StoreError(
            f"{scheme.group(1)}://...", purpose, f"{scheme.group(1)}:// is not a store toolpath can use", "Give a postgresql:// URL or a SQLite file's path"
        )
    if _CONNECTION_STRING.match(text):
        raise StoreError(
            "(a key=value string)",
            purpose,
            "libpq key=value connection strings are not taken",
            "Write it as a postgresql:// URL (postgresql://user@host:port/database)",
        )
    return os.path.expanduser(text)


def is_postgres(location: str) -> bool:
    return location.startswith(POSTGRES_SCHEMES)


def open_database(location: str | os.PathLike[str] | None = None, purpose: str = "store") -> Database:
    """The store at ``location`` (see :func:`store_location`): a PostgreSQL server for a
    ``postgresql://`` URL, else a SQLite file. Opening the same location again gives the same object.

    Raises:
        StoreError: a location :func:`store_location` refuses, a SQLite path that cannot be
            created, or a URL when psycopg is not installed.
    """
    where = store_location(location, purpose)
    with _OPEN_LOCK:
        database = _OPEN.get(where)
        if database is None:
            if is_postgres(where):
                try:
                    from toolpath.registry.postgres import PostgresDatabase
                except ModuleNotFoundError as missing:
                    raise StoreError("postgresql://...", purpose, f"psycopg is not installed ({missing.name})", "pip install 'toolpath[postgres]'") from missing

                database = PostgresDatabase(where)
            else:
                database = SQLiteDatabase(where, purpose)
            _OPEN[where] = database
    return database


def forget_database(location: str | os.PathLike[str]) -> None:
    """Close the store at ``location`` if this process opened it (its connections, for a server);
    the next :func:`open_database` of it opens it anew."""
    with _OPEN_LOCK:
        database = _OPEN.pop(store_location(location), None)
    if database is not None:
        database.close()
