"""Offloaded tool results: payloads too large to cross the bridge, kept in toolpath's SQLite file.

The host writes a result here instead of sending it; the cell receives its id and reads it back with
``await results.get(id)``, straight from the file (the kernel runs on the same machine), so the value
never crosses the bridge. Rows hold the value as a bridge body (:mod:`toolpath.kernel.inside.wire`): JSON or pickle.
Reading a pickle runs code from whoever wrote it; the file is created readable by its owner only.
"""

from __future__ import annotations

import os
import secrets
import time
from typing import Any

from toolpath.kernel.inside import wire
from toolpath.registry.storage import connected, database_file, table_exists, transaction

_TABLE = "offloaded_results"
_COLUMNS = ("id", "tool", "type", "size", "created", "body")
_PURPOSE = "result store"


class ResultStore:
    """Offloaded results in one SQLite file.

    Args:
        path: the database file; created (mode 0600, parent directories 0700) when missing.

    Raises:
        registry.storage.StoreError: ``path`` is a directory or cannot be created. Every method
            raises it too when the file is unusable (not a database, corrupt, unreadable, read-only,
            an ``offloaded_results`` table with other columns, a full disk).
    """

    def __init__(self, path: str | os.PathLike[str] | None = None):
        self.path = database_file(path, _PURPOSE)

    def put(self, value_body: bytes, tool: str, value_type: str) -> str:
        """Store one encoded value (a :func:`toolpath.kernel.inside.wire.encode` frame without its header); return its id."""
        result_id = secrets.token_hex(8)
        with connected(self.path, _PURPOSE) as database, transaction(database, immediate=True):
            if not table_exists(database, _TABLE, _COLUMNS, ("id",), self.path, _PURPOSE):
                database.execute(f"create table {_TABLE} (id text primary key, tool text, type text, size integer, created float, body blob)")
            database.execute(
                f"insert into {_TABLE} (id, tool, type, size, created, body) values (?, ?, ?, ?, ?, ?)",
                [result_id, tool, value_type, len(value_body), time.time(), value_body],
            )
        return result_id

    def get(self, result_id: str) -> Any:
        """The stored value.

        Raises:
            KeyError: no result with that id.
            kernel.inside.wire.WireError: the value cannot be loaded in this process.
            registry.storage.StoreError: the file is unusable.
        """
        with connected(self.path, _PURPOSE) as database:
            if not table_exists(database, _TABLE, _COLUMNS, ("id",), self.path, _PURPOSE):
                raise KeyError(f"no offloaded result {result_id!r}")
            row = database.execute(f"select body from {_TABLE} where id = ?", [result_id]).fetchone()
        if row is None:
            raise KeyError(f"no offloaded result {result_id!r}")
        return wire.decode(row[0])["value"]

    def delete(self, result_id: str) -> None:
        """Forget one result (no error when it is already gone)."""
        with connected(self.path, _PURPOSE) as database:
            if table_exists(database, _TABLE, _COLUMNS, ("id",), self.path, _PURPOSE):
                database.execute(f"delete from {_TABLE} where id = ?", [result_id])
