"""Offloaded tool results: payloads too large to cross the bridge, kept in toolpath's SQLite file.

The host writes a result here instead of sending it; the cell receives its id and reads it back with
``await results.get(id)``, straight from the file (the kernel runs on the same machine), so the value
never crosses the bridge. Rows hold the value as a bridge body (:mod:`kernel.wire`): JSON or pickle.
Reading a pickle runs code from whoever wrote it; the file is created readable by its owner only.
"""

from __future__ import annotations

import os
import secrets
import time
from typing import Any

import sqlite_utils

from kernel import wire
from registry.storage import connect, database_file

_TABLE = "offloaded_results"


class ResultStore:
    """Offloaded results in one SQLite file.

    Args:
        path: the database file; created (mode 0600, parent directories 0700) when missing.

    Raises:
        ValueError: ``path`` is a directory.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None):
        self.path = database_file(path, "result store")

    def _database(self) -> sqlite_utils.Database:
        return connect(self.path)

    def put(self, value_body: bytes, tool: str, value_type: str) -> str:
        """Store one encoded value (a :func:`kernel.wire.encode` frame without its header); return its id."""
        result_id = secrets.token_hex(8)
        database = self._database()
        try:
            with database.conn:
                database[_TABLE].insert(
                    {"id": result_id, "tool": tool, "type": value_type, "size": len(value_body), "created": time.time(), "body": value_body},
                    pk="id",
                )
        finally:
            database.close()
        return result_id

    def get(self, result_id: str) -> Any:
        """The stored value.

        Raises:
            KeyError: no result with that id.
            kernel.wire.WireError: the value cannot be loaded in this process.
        """
        database = self._database()
        try:
            if _TABLE not in database.table_names():
                raise KeyError(f"no offloaded result {result_id!r}")
            rows = list(database.query(f"select body from {_TABLE} where id = ?", [result_id]))
        finally:
            database.close()
        if not rows:
            raise KeyError(f"no offloaded result {result_id!r}")
        return wire.decode(rows[0]["body"])["value"]

    def delete(self, result_id: str) -> None:
        """Forget one result (no error when it is already gone)."""
        database = self._database()
        try:
            if _TABLE in database.table_names():
                with database.conn:
                    database.execute(f"delete from {_TABLE} where id = ?", [result_id])
        finally:
            database.close()
