"""What every engine of toolpath's shared store offers (:mod:`toolpath.registry.database` picks
one): transactions of statements with ``?`` placeholders, and the schema made or brought up to
date (:mod:`toolpath.registry.store_schema`) the first time a process uses the store."""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from toolpath.registry.storage import StoreError
from toolpath.registry.store_schema import LATEST_VERSION, DamagedVersionError, NewerStoreError, Table, migrate


class Database(ABC):
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

    def check(self, purpose: str) -> None:
        """Reach the store now and make or update its tables (a server does this as it starts,
        rather than failing its first request).

        Raises:
            StoreError: the store cannot be used.
        """
        self._ensure_schema(purpose)

    @abstractmethod
    def close(self) -> None:
        """Let go of what the store holds open (its connections)."""

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
                    raise StoreError(self.location, purpose, str(error), "Use that toolpath, or another store") from error
                except DamagedVersionError as error:
                    remedy = f"Set it to the version the tables are at (one row; {LATEST_VERSION} if another toolpath of this version wrote them), or use another store"
                    raise StoreError(self.location, purpose, str(error), remedy) from error
            self._schema_ready = True

    @abstractmethod
    def _transaction(self, purpose: str, write: bool, key: str | None) -> AbstractContextManager[StoreConnection]:
        """The engine's transaction (a context manager giving its :class:`StoreConnection`):
        ``write`` ones serialize writers of ``key``; read ones see one consistent state."""


class StoreConnection(ABC):
    """A connection inside a transaction of :class:`Database`: ``execute`` and ``executemany``
    with ``?`` placeholders, as the standard library's ``sqlite3`` has them."""

    engine: str

    @abstractmethod
    def execute(self, sql: str, parameters: Sequence[Any] = ()) -> Any:
        """Run one statement; a cursor (``fetchone``, ``fetchall``, ``rowcount``)."""

    @abstractmethod
    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run one statement for each of ``rows``."""

    @abstractmethod
    def table_matches(self, table: Table) -> bool:
        """Whether ``table`` exists; one that exists with other columns raises ``StoreError``."""

    def now(self) -> float:
        """The store's clock, seconds since the epoch: leases written by processes on several hosts
        compare times of one clock (the database server's; SQLite's file is on one host anyway)."""
        return time.time()
