"""SHA-256 digests of catalog files, reused while a file's status is unchanged (issue 57).

A catalog snapshot's key covers every byte of its files (:mod:`toolpath.registry.catalog_snapshot`),
and hashing the 68 MiB of 100,000 tools took about 50 ms of every process, a tenth of a fresh
search. As Git does for the files of its index, a digest is recorded with the file's device, inode,
size, modification time and status-change time, and reused while all five are unchanged: a write,
a rename over it or ``touch`` changes the status-change time, which no system call sets to a
chosen value.

**Racy writes.** File times advance by the kernel's coarse clock tick (a few milliseconds), so a
file rewritten with the same size within the tick of the recorded write would keep both times. A
digest is therefore recorded only when the file's status changed at least :data:`RACY_SECONDS`
before it was hashed: any later rewrite comes after the hash, ticks later, and changes that time.
Git calls such entries "racily clean" and hashes them again for the same reason.

The record is ``$TOOLPATH_HOME/catalogs/file_digests.json`` (mode 0600, the
:data:`KEEP_FILES` most recently used files), replaced whole by a rename. It only saves time: one
that is missing, unreadable, damaged or not writable means hashing, never an error.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import time
from pathlib import Path
from typing import IO, Any

from toolpath.registry.catalog_files import read_bytes
from toolpath.registry.catalog_problems import CatalogError
from toolpath.registry.stored_directories import replace_file

#: A file whose status changed less than this long before it was hashed is hashed again next time
#: (see the module docstring): far above the clock tick of file times, short enough that a catalog
#: written by a generator is trusted from its second load on.
RACY_SECONDS = 2
#: Files whose digests are kept (the most recently used): a few catalog sets in use at once.
KEEP_FILES = 64
#: A record larger than this is ignored (and replaced): :data:`KEEP_FILES` entries take a few KiB
#: each at most (a path of up to 4 KiB), and a pipe or device in its place is never read.
MAX_RECORD_BYTES = 1 << 20
_STATUS_FIELDS = ("device", "inode", "bytes", "mtime_ns", "ctime_ns")
_SHA256 = re.compile(r"[0-9a-f]{64}")


class FileDigests:
    """The recorded digests in ``path`` (see the module docstring), read on first use.

    Args:
        path: the record's file; its directory is created (0700) when the record is saved.
    """

    def __init__(self, path: Path):
        self.path = path
        self._entries: dict[str, dict[str, Any]] | None = None
        self._changed = False

    def sha256(self, stream: IO[bytes], status: os.stat_result, name: str) -> str:
        """The SHA-256 (hex) of the open file ``stream`` whose ``os.fstat`` is ``status``, recorded
        under ``name`` (its resolved path): the recorded digest when the status is the recorded one,
        else every byte hashed (from the stream's position, which must be its start)."""
        entries = self._read()
        found = _status_of(status)
        entry = entries.pop(name, None)
        if entry is not None and all(entry.get(field) == value for field, value in found.items()):
            entries[name] = entry  # most recently used last
            return entry["sha256"]
        hashed_at = time.time_ns()
        digest = hashlib.file_digest(stream, "sha256").hexdigest()  # streamed: no copy of the file in memory
        if hashed_at - status.st_ctime_ns >= RACY_SECONDS * 10**9:
            entries[name] = {**found, "sha256": digest}
            self._changed = True
        elif entry is not None:
            self._changed = True  # its entry is out of date: dropped
        return digest

    def save(self) -> None:
        """Write the record when a digest was added or dropped; any failure leaves it as it was."""
        if not self._changed or self._entries is None:
            return
        kept = dict(list(self._entries.items())[-KEEP_FILES:])
        with contextlib.suppress(OSError):
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            replace_file(self.path, json.dumps({"files": kept}))
        self._changed = False

    def _read(self) -> dict[str, dict[str, Any]]:
        if self._entries is None:
            try:
                recorded = json.loads(read_bytes(self.path, MAX_RECORD_BYTES))["files"]
            except (CatalogError, ValueError, TypeError, KeyError, RecursionError):  # json refuses deep nesting with RecursionError
                recorded = {}
            self._entries = {name: entry for name, entry in recorded.items() if _is_entry(entry)} if isinstance(recorded, dict) else {}
        return self._entries


def _status_of(status: os.stat_result) -> dict[str, int]:
    return dict(zip(_STATUS_FIELDS, (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns)))


def _is_entry(entry: Any) -> bool:
    """Whether a recorded entry has every field, of its type (one that does not is ignored)."""
    return (
        isinstance(entry, dict)
        and all(type(entry.get(field)) is int for field in _STATUS_FIELDS)
        and isinstance(entry.get("sha256"), str)
        and _SHA256.fullmatch(entry["sha256"]) is not None
    )
