"""Where toolpath keeps its data: one SQLite file for offloaded results, the embedding cache and
snapshots (``$TOOLPATH_HOME/toolpath.db``, else the platform's user data directory).

The file is created readable by its owner only: rows may hold pickles, and reading a pickle runs
code from whoever wrote it.

Every way the file can be unusable (a directory, not a database, corrupt, unreadable, read-only, a
table with other columns, a full disk, locked too long) is raised as one type, :class:`StoreError`,
whose message names the file and what to do; callers that can work without the store catch it.

Connections are the standard library's ``sqlite3`` in autocommit mode; a :func:`transaction` groups
statements. (sqlite-utils was used before: importing it loads pandas when installed, about 0.4 s of
every command that reads the embedding cache.)
"""

from __future__ import annotations

import errno
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import platformdirs

from toolpath.errors import ToolpathError

#: Environment variable naming toolpath's data directory (default: the user data directory).
HOME_VARIABLE = "TOOLPATH_HOME"
#: Seconds a connection waits for another process's write before giving up.
_BUSY_TIMEOUT_SECONDS = 5


class StoreError(ToolpathError):
    """toolpath's store (its SQLite file, or a PostgreSQL server) cannot be used.

    Attributes:
        path: the file, or the server's URL without its password.
        purpose: what it was used for ("embedding cache", "result store", ...).
        problem: what is wrong with it, e.g. ``"the disk is full"``.
        remedy: what to do, a sentence, e.g. ``"Delete or move it, or set TOOLPATH_HOME ..."``.
    """

    def __init__(self, path: Path | str, purpose: str, problem: str, remedy: str):
        self.path = path
        self.purpose = purpose
        self.problem = problem
        self.remedy = remedy
        super().__init__(f"{purpose} {path} is unusable: {problem}. {remedy}")


_reported_lock = threading.Lock()
_reported_files: set[str] = set()


def first_report_of(error: StoreError) -> bool:
    """Whether ``error`` is the first this process reports about its file: one broken file is one
    warning, whatever it was used for (the embedding cache and the record of use share one file)."""
    with _reported_lock:
        first = str(error.path) not in _reported_files
        _reported_files.add(str(error.path))
        return first


def default_home() -> Path:
    """``$TOOLPATH_HOME``, else toolpath's directory in the platform's user data directory."""
    return Path(os.environ.get(HOME_VARIABLE) or platformdirs.user_data_dir("toolpath", appauthor=False))


def default_database_path() -> Path:
    """``$TOOLPATH_HOME/toolpath.db``, else ``toolpath.db`` in the platform's user data directory."""
    return default_home() / "toolpath.db"


def database_file(path: str | os.PathLike[str] | None, purpose: str) -> Path:
    """The database file at ``path`` (default :func:`default_database_path`), created when missing
    (mode 0600, parent directories 0700).

    Raises:
        StoreError: ``path`` is a directory, or it or its directory cannot be created (a file stands
            in the way, no permission, a full disk); ``purpose`` ("result store", ...) names the use.
    """
    path = Path(path) if path is not None else default_database_path()
    try:
        if path.is_dir():
            raise StoreError(path, purpose, "it is a directory", f"Delete or move it, or {_elsewhere(path)}.")
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    except OSError as error:
        raise store_error(path, purpose, error) from error
    return path


def connect(path: Path) -> sqlite3.Connection:
    """An autocommit connection that waits up to 5 s for another process's write instead of failing."""
    return sqlite3.connect(path, timeout=_BUSY_TIMEOUT_SECONDS, isolation_level=None)


@contextmanager
def connected(path: Path, purpose: str) -> Iterator[sqlite3.Connection]:
    """:func:`connect` to ``path`` for the ``with`` block, closing it afterwards.

    Raises:
        StoreError: for any ``sqlite3.Error`` or ``OSError`` raised in the block or by the connection.
    """
    try:
        database = connect(path)
        try:
            yield database
        finally:
            database.close()
    except (sqlite3.Error, OSError) as error:
        raise store_error(path, purpose, error) from error


@contextmanager
def transaction(database: sqlite3.Connection, immediate: bool = False) -> Iterator[None]:
    """One transaction for the ``with`` block: committed when it ends, rolled back when it raises.

    ``immediate`` takes SQLite's write lock when the transaction begins (``BEGIN IMMEDIATE``): two
    processes that read first and then write would otherwise deadlock on the upgrade, and one fail.
    """
    database.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")
    try:
        yield
    except BaseException:
        if database.in_transaction:  # SQLite rolls back by itself on some errors (a full disk)
            database.execute("ROLLBACK")
        raise
    database.execute("COMMIT")


def table_exists(database: sqlite3.Connection, table: str, columns: Iterable[str], primary_key: Iterable[str], path: Path, purpose: str) -> bool:
    """Whether ``table`` exists in ``database`` (the file at ``path``); one that exists must have
    exactly these columns and this primary key. An absent table is the caller's to create.

    Raises:
        StoreError: the table exists with other columns or another primary key (written by another
            program, or by an incompatible toolpath).
        sqlite3.Error: the file cannot be read (inside :func:`connected`, that becomes a StoreError).
    """
    # Rows of table_info: (position, name, type, not null, default, position in the primary key or 0).
    rows = database.execute("select * from pragma_table_info(?)", [table]).fetchall()
    if not rows:
        return False
    found = [row[1] for row in rows]
    found_key = [row[1] for row in sorted((row for row in rows if row[5]), key=lambda row: row[5])]
    expected, expected_key = list(columns), list(primary_key)
    if sorted(found) != sorted(expected):
        problem = f"its {table} table has columns ({', '.join(found)}), not ({', '.join(expected)})"
    elif found_key != expected_key:
        problem = f"its {table} table has primary key ({', '.join(found_key) or 'none'}), not ({', '.join(expected_key)})"
    else:
        return True
    raise StoreError(path, purpose, problem, f"Delete or move it (toolpath creates a new one), or {_elsewhere(path)}.")


def store_error(path: Path, purpose: str, error: sqlite3.Error | OSError) -> StoreError:
    """The :class:`StoreError` saying what ``error``, met while using the file at ``path``, means and what to do."""
    elsewhere = _elsewhere(path)
    if isinstance(error, sqlite3.Error):
        # The primary result code is the low byte of SQLite's extended code.
        code = (getattr(error, "sqlite_errorcode", None) or 0) & 0xFF
        if code in (sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT):
            return StoreError(
                path, purpose, f"it is not a SQLite database or is corrupt ({error})", f"Delete or move it (toolpath creates a new one), or {elsewhere}."
            )
        if code == sqlite3.SQLITE_FULL:
            return _disk_full(path, purpose)
        if code in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM):
            return _no_access(path, purpose, str(error))
        if code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
            return StoreError(
                path, purpose, f"another process kept it locked for over {_BUSY_TIMEOUT_SECONDS} s", f"Try again when that process is done, or {elsewhere}."
            )
        return StoreError(path, purpose, str(error), f"Delete or move it (toolpath creates a new one), or {elsewhere}.")
    where = f" ({error.filename})" if error.filename is not None and Path(os.fsdecode(error.filename)) != path else ""
    problem = f"{error.strerror or error}{where}"
    if error.errno == errno.ENOSPC:
        return _disk_full(path, purpose)
    if error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return _no_access(path, purpose, problem)
    if error.errno in (errno.ENOTDIR, errno.EEXIST):
        # A file where a directory of the path should be: mkdir(parents=True) says EEXIST or ENOTDIR.
        return StoreError(path, purpose, f"a file stands where its directory should be{where}", f"Delete or move that file, or {elsewhere}.")
    return StoreError(path, purpose, problem, f"Delete or move it (toolpath creates a new one), or {elsewhere}.")


def _disk_full(path: Path, purpose: str) -> StoreError:
    return StoreError(path, purpose, "the disk is full", f"Free some disk space, or {_elsewhere(path)} on another disk.")


def _no_access(path: Path, purpose: str, problem: str) -> StoreError:
    return StoreError(
        path,
        purpose,
        f"it cannot be read or written ({problem})",
        f"Make it and its directory readable and writable by you (chmod u+rw), or {_elsewhere(path)}.",
    )


def _elsewhere(path: Path) -> str:
    # TOOLPATH_HOME only moves the default file; a path the caller chose is changed where it was given.
    return f"set {HOME_VARIABLE} to another directory" if path == default_database_path() else "use another file"
