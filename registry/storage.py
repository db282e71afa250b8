"""Where toolpath keeps its data: one SQLite file for offloaded results, the embedding cache and
snapshots (``$TOOLPATH_HOME/toolpath.db``, else the platform's user data directory).

The file is created readable by its owner only: rows may hold pickles, and reading a pickle runs
code from whoever wrote it.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs
import sqlite_utils

#: Environment variable naming toolpath's data directory (default: the user data directory).
HOME_VARIABLE = "TOOLPATH_HOME"


def default_database_path() -> Path:
    """``$TOOLPATH_HOME/toolpath.db``, else ``toolpath.db`` in the platform's user data directory."""
    home = os.environ.get(HOME_VARIABLE) or platformdirs.user_data_dir("toolpath", appauthor=False)
    return Path(home) / "toolpath.db"


def database_file(path: str | os.PathLike[str] | None, purpose: str) -> Path:
    """The database file at ``path`` (default :func:`default_database_path`), created when missing
    (mode 0600, parent directories 0700).

    Raises:
        ValueError: ``path`` is a directory; ``purpose`` ("result store", ...) names the setting.
    """
    path = Path(path) if path is not None else default_database_path()
    if path.is_dir():
        raise ValueError(f"{purpose} {path} is a directory; name a file, e.g. {path / 'toolpath.db'}")
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    return path


def connect(path: Path) -> sqlite_utils.Database:
    """A connection that waits up to 5 s for another process's write instead of failing."""
    database = sqlite_utils.Database(path)
    database.execute("PRAGMA busy_timeout = 5000")
    return database
