"""Each local kernel's private directory, and sweeping those of host processes that died.

A kernel's private temporary directory (mode 0700) holds its connection file with the kernel's key,
its sockets and its log, and an ``owner.json`` that names the host process. A host killed with
SIGKILL cannot remove it, so the first kernel a process starts under a root removes this user's
directories there whose owner is gone.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import tempfile
import time

import psutil

DIRECTORY_PREFIX = "toolpath-kernel-"
_OWNER_FILE = "owner.json"
#: A directory with no owner file is another process's that is still starting, unless it is older.
_UNOWNED_GRACE_SECONDS = 3600.0
#: Roots (``None``: the temporary directory) already swept of dead processes' kernel directories.
_swept: set[str | None] = set()


def new_private_directory(root: str | None = None) -> str:
    """The path of a new private directory (mode 0700) under ``root`` (default the temporary
    directory) owned by this process, which removes it with :func:`remove_directory`; the first
    call for a root sweeps it first (:func:`remove_stale_directories`).

    Raises:
        OSError: the directory or its owner file cannot be made.
    """
    if root not in _swept:
        _swept.add(root)
        remove_stale_directories(root)
    directory = tempfile.mkdtemp(prefix=DIRECTORY_PREFIX, dir=root)
    try:
        with open(os.path.join(directory, _OWNER_FILE), "w", encoding="utf-8") as file:
            json.dump(owner(), file)
    except BaseException:
        remove_directory(directory)
        raise
    return directory


def remove_directory(path: str) -> bool:
    """Remove the directory ``path`` and everything in it, without following links and however
    deep the kernel nested it; never raises. Returns whether it is gone.

    ``shutil.rmtree`` recurses once per level on Python 3.11 and raises ``RecursionError`` (which
    ``ignore_errors`` does not cover) on the 1,500-deep tree a cell can make in a minute; such a
    tree is left to ``rm -rf`` (POSIX), which walks any depth and does not follow links either.
    """
    try:
        shutil.rmtree(path, ignore_errors=True)
    except RecursionError:
        try:
            subprocess.run(["rm", "-rf", "--", path], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600)
        except (OSError, subprocess.SubprocessError):
            pass
    return not os.path.lexists(path)


def owner() -> dict[str, float]:
    """This process, as ``owner.json`` names it: pid and start time (pids are reused)."""
    return {"pid": os.getpid(), "started": psutil.Process().create_time()}


def _is_running(owner: dict) -> bool:
    try:
        return abs(psutil.Process(int(owner["pid"])).create_time() - float(owner["started"])) < 1.0
    except (psutil.Error, KeyError, TypeError, ValueError):
        return False


def _read_owner(path: str) -> dict | None:
    """The owner named by ``path``, or ``None`` when there is no readable, well-formed owner file
    (a half-written one, a FIFO or a link to a device are read without blocking, and at most 4 kB)."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return None
        owner = json.loads(os.read(descriptor, 4096))
    except (OSError, ValueError):
        return None
    finally:
        os.close(descriptor)
    return owner if isinstance(owner, dict) else None


def remove_stale_directories(root: str | None = None) -> list[str]:
    """Remove this user's kernel directories (under ``root``, default the temporary directory) whose
    owner process is gone, or whose owner file is missing or unreadable and that are over an hour old.

    Returns:
        The paths removed. Directories that cannot be read or removed are left as they are.
    """
    removed = []
    try:
        entries = list(os.scandir(root or tempfile.gettempdir()))
    except OSError:
        return removed
    for entry in entries:
        try:
            if (
                not entry.name.startswith(DIRECTORY_PREFIX)
                or not entry.is_dir(follow_symlinks=False)
                or entry.stat(follow_symlinks=False).st_uid != os.getuid()
            ):
                continue
            owner = _read_owner(os.path.join(entry.path, _OWNER_FILE))
            if owner is not None:
                if _is_running(owner):
                    continue
            elif time.time() - entry.stat(follow_symlinks=False).st_mtime < _UNOWNED_GRACE_SECONDS:
                continue
        except OSError:
            continue
        if remove_directory(entry.path):
            removed.append(entry.path)
    return removed
