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
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from toolpath.registry.storage import StoreError, connected, database_file, default_database_path, table_exists, transaction
from toolpath.registry.store_schema import NewerStoreError, Table, migrate

#: Environment variable naming the shared store: a SQLite file's path or a ``postgresql://`` URL.
STORE_VARIABLE = "TOOLPATH_STORE"
#: URL schemes that name a PostgreSQL server (libpq's own).
POSTGRES_SCHEMES = ("postgresql://", "postgres://")


class Database:
    """One store, as its users see it: transactions of statements with ``?`` placeholders.

    Attributes:
        location: where it is, as messages name it (a file path, or a URL without its password).
        engine: ``"sqlite"`` or ``"postgresql"``.

    Every method raises :class:`toolpath.registry.storage.StoreError` when the store cannot be used,
    naming ``purpose`` (``"snapshot store"``, ...) and what to do.
    """

    location: str
    engine: str

    def __init__(self) -> None:
        self._schema_ready = False
        self._schema_lock = threading.Lock()

    @contextmanager
    def reading(self, purpose: str) -> Iterator[StoreConnection]:
        """A transaction that reads one consistent state of the store (nothing it reads changes
        halfway through)."""
        self._ensure_schema(purpose)
        with self._transaction(purpose, write=False, key=None) as connection:
            yield connection

    @contextmanager
    def writing(self, purpose: str, key: str | None = None) -> Iterator[StoreConnection]:
        """A write transaction, committed when the block ends and rolled back when it raises.

        Args:
            key: writers of the same key (a session id) run one after another; ``None``: nothing
                else is serialized beyond what the engine does. (SQLite serializes every writer.)
        """
        self._ensure_schema(purpose)
        with self._transaction(purpose, write=True, key=key) as connection:
            yield connection

    def close(self) -> None:
        """Let go of what the store holds open (nothing, for SQLite)."""

    def _ensure_schema(self, purpose: str) -> None:
        if self._schema_ready:
            return
        with self._schema_lock:
            if self._schema_ready:
                return
            with self._transaction(purpose, write=True, key="toolpath schema") as connection:
                try:
                    migrate(connection)
                except NewerStoreError as error:
                    raise StoreError(self.location, purpose, str(error), "Use that toolpath, or another store") from error  # type: ignore[arg-type]
            self._schema_ready = True

    def _transaction(self, purpose: str, write: bool, key: str | None):
        raise NotImplementedError


class StoreConnection:
    """A connection inside a transaction of :class:`Database`: ``execute`` and ``executemany``
    with ``?`` placeholders, as the standard library's ``sqlite3`` has them."""

    engine: str

    def execute(self, sql: str, parameters: Sequence[Any] = ()) -> Any:
        raise NotImplementedError

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        raise NotImplementedError

    def table_matches(self, table: Table) -> bool:
        """Whether ``table`` exists; one that exists with other columns raises ``StoreError``."""
        raise NotImplementedError


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


def store_location(location: str | os.PathLike[str] | None = None) -> str:
    """The store a process uses: ``location``, else ``$TOOLPATH_STORE``, else
    ``$TOOLPATH_HOME/toolpath.db`` (:func:`toolpath.registry.storage.default_database_path`)."""
    if location is not None:
        return os.fspath(location)
    return os.environ.get(STORE_VARIABLE) or str(default_database_path())


def is_postgres(location: str) -> bool:
    return location.startswith(POSTGRES_SCHEMES)


def open_database(location: str | os.PathLike[str] | None = None, purpose: str = "store") -> Database:
    """The store at ``location`` (see :func:`store_location`): a PostgreSQL server for a
    ``postgresql://`` URL, else a SQLite file. Opening the same location again gives the same object.

    Raises:
        StoreError: a SQLite path that cannot be created; ``ModuleNotFoundError`` (with what to
            install) for a URL when psycopg is not installed.
    """
    where = store_location(location)
    with _OPEN_LOCK:
        database = _OPEN.get(where)
        if database is None:
            if is_postgres(where):
                from toolpath.registry.postgres import PostgresDatabase

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
