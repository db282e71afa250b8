"""Directories of derived data kept under ``$TOOLPATH_HOME``, one per content key, written whole or
not at all: what stored skill indexes (:mod:`toolpath.planner.search.stored_index`) and catalog
snapshots (:mod:`toolpath.registry.catalog_snapshot`) share (issue 57).

**Layout.** ``<directory>/<first 32 hex digits of the key>/`` holds a store's files and
``manifest.json``, written last, which names every file with its size (and an array's dtype and
shape): a reader checks them before use. Nothing is a pickle: arrays load with
``allow_pickle=False``, the rest is JSON.

**Writes** go to a temporary directory beside the final one (mode 0700, files 0600, like the rest of
``TOOLPATH_HOME``), renamed into place whole: a reader sees a complete directory or none. Two
processes writing the same key both write; the first rename wins, the other drops its copy.

**A damaged directory** (no manifest, a file missing or of another size, anything its reader refuses
with :class:`DamagedStoreError`) warns once (``RuntimeWarning``, naming it and the problem), is moved
aside and removed, and reads as absent: the caller builds it again.

**A store that cannot be written** (read-only home, full disk) warns once per directory and process;
the caller goes on without it.

**Cleanup** after each write keeps the ``keep`` most recently used directories (a read marks its
manifest used) and removes temporary ones older than :data:`STALE_BUILD_SECONDS` (a process killed
while writing).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import stat
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from toolpath.errors import ToolpathError

if TYPE_CHECKING:
    import numpy as np

#: Age after which a temporary build directory is a leftover of a killed process, and removed.
STALE_BUILD_SECONDS = 3600
MANIFEST = "manifest.json"
KEY_DIGITS = 32
_BUILDING_PREFIX = ".building-"
_DAMAGED_PREFIX = ".damaged-"

_warned_lock = threading.Lock()
_warned_directories: set[str] = set()

Loaded = TypeVar("Loaded")


class DamagedStoreError(ToolpathError, ValueError):
    """A stored directory that cannot be trusted (the message says why); :meth:`KeyedDirectories.read`
    turns it into a warning and an absent entry."""


class KeyedDirectories:
    """The keyed directories of one store (see the module docstring).

    Args:
        directory: where the ``<key>`` directories are (created 0700 on the first write).
        what: what one directory holds, for warnings ("skill index", "catalog snapshot").
        keep: directories kept by the cleanup after a write.
    """

    def __init__(self, directory: str | os.PathLike[str], what: str, keep: int):
        self.directory = Path(directory)
        self.what = what
        self.keep = keep

    def path_of(self, key: str) -> Path:
        return self.directory / key[:KEY_DIGITS]

    def read(self, key: str, load: Callable[[Path, dict[str, Any]], Loaded]) -> Loaded | None:
        """``load(directory, manifest)`` of the directory of ``key``, or ``None`` when there is none.

        A directory ``load`` refuses (:class:`DamagedStoreError`, or a malformed manifest: ``ValueError``,
        ``TypeError``, ``KeyError``, ``AttributeError``, ``OSError``) warns, is moved aside and removed,
        and is ``None`` too; so is one another process removed while it was read.
        """
        directory = self.path_of(key)
        try:
            text = _read_regular_file(directory / MANIFEST).decode("utf-8")
        except UnicodeDecodeError:
            self._discard(directory, "its manifest is not UTF-8")
            return None
        except NotADirectoryError:
            return None  # a file where the store's directory should be: writing says so
        except FileNotFoundError:
            if directory.is_dir() and not (directory / MANIFEST).exists():
                self._discard(directory, "it has no manifest (a partial or foreign directory)")
            return None
        except OSError as error:
            self._discard(directory, f"its manifest cannot be read ({error.strerror or error})")
            return None
        try:
            manifest = json.loads(text)
            if not isinstance(manifest, dict):
                raise DamagedStoreError("its manifest is not a JSON object")
            loaded = load(directory, manifest)
        except FileNotFoundError as error:
            if (directory / MANIFEST).exists():  # a file it lists is gone: damaged
                self._discard(directory, f"{error.filename} is missing")
            return None  # else removed by another process's cleanup while being read: built again
        except (DamagedStoreError, ValueError, TypeError, KeyError, AttributeError, OSError, RecursionError) as error:  # json: deep nesting
            self._discard(directory, str(error) or type(error).__name__)
            return None
        # Marks it used, for the cleanup's "most recently used"; a read-only store is used all the same.
        with contextlib.suppress(OSError):
            os.utime(directory / MANIFEST)
        return loaded

    def write(self, key: str, fill: Callable[[Path], dict[str, Any]]) -> tuple[Path, bool, str | None]:
        """Write the directory of ``key``: ``fill(temporary directory)`` writes its files and returns
        the manifest (written last); then it is renamed into place whole, and old ones cleaned up.

        Returns:
            ``(directory, stored, problem)``: ``stored`` is false when the store cannot be written
            (``problem`` says why, in words, after one warning per directory and process); when
            another process stored the same key first, its copy is kept (stored, no problem).
            Never raises for the store's sake; ``fill``'s own errors other than ``OSError`` propagate.
        """
        final = self.path_of(key)
        try:
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            temporary = Path(tempfile.mkdtemp(prefix=f"{_BUILDING_PREFIX}{key[:KEY_DIGITS]}-", dir=self.directory))
        except OSError as error:
            return final, False, self._warn_unwritable(error)
        try:
            manifest = fill(temporary)
            (temporary / MANIFEST).write_text(
                json.dumps({**manifest, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, indent=1), encoding="utf-8"
            )
            _private(temporary)
            os.rename(temporary, final)
        except OSError as error:
            shutil.rmtree(temporary, ignore_errors=True)
            if error.errno in (errno.EEXIST, errno.ENOTEMPTY) and (final / MANIFEST).exists():
                return final, True, None  # another process stored it first
            return final, False, self._warn_unwritable(error)
        except BaseException:
            shutil.rmtree(temporary, ignore_errors=True)
            raise
        self.clean_up(keep=final)
        return final, True, None

    def clean_up(self, keep: Path | None = None) -> list[Path]:
        """Remove all but the ``keep`` most recently used directories (the directory ``keep`` always
        stays), and temporary ones older than :data:`STALE_BUILD_SECONDS`; the removed."""
        try:
            children = list(self.directory.iterdir())
        except OSError:
            return []
        removed: list[Path] = []
        now = time.time()
        kept: list[tuple[float, Path]] = []
        for child in children:
            try:
                if child.name.startswith((_BUILDING_PREFIX, _DAMAGED_PREFIX)):
                    if now - child.stat().st_mtime > STALE_BUILD_SECONDS:
                        removed.append(child)
                elif child.is_dir() and len(child.name) == KEY_DIGITS:
                    manifest = child / MANIFEST
                    kept.append(((manifest if manifest.exists() else child).stat().st_mtime, child))
            except OSError:
                continue  # removed meanwhile by another process
        others = [child for _, child in sorted(kept, reverse=True) if child != keep]
        removed.extend(others[self.keep - (keep is not None) :])
        for child in removed:
            shutil.rmtree(child, ignore_errors=True)
        return removed

    def _discard(self, directory: Path, problem: str) -> None:
        warnings.warn(f"the stored {self.what} {directory} cannot be used: {problem}; it is built again and stored anew", RuntimeWarning, stacklevel=4)
        remove_damaged(directory)

    def _warn_unwritable(self, error: OSError) -> str:
        """Warn (once per directory and process) that nothing can be stored; the problem, in words."""
        if error.errno == errno.ENOSPC:
            problem = "the disk is full"
        elif error.errno in (errno.EEXIST, errno.ENOTDIR):  # what mkdir says of a file in the way
            problem = "a file stands where its directory should be"
        else:
            problem = error.strerror or str(error)
        with _warned_lock:
            if str(self.directory) in _warned_directories:
                return problem
            _warned_directories.add(str(self.directory))
        warnings.warn(
            f"the {self.what} cannot be stored in {self.directory} ({problem}); it is used without being stored, and every process builds it again. "
            "Make the directory writable, or set TOOLPATH_HOME to a writable directory",
            RuntimeWarning,
            stacklevel=4,
        )
        return problem


def _read_regular_file(path: Path) -> bytes:
    """The bytes of ``path``, a regular file (opened without waiting for a named pipe's writer).

    Raises:
        OSError: it cannot be read, or is not a regular file (a pipe or a device would never end).
    """
    from toolpath.registry.catalog_files import open_without_waiting

    descriptor = open_without_waiting(path)
    with open(descriptor, "rb") as stream:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise OSError(errno.EINVAL, f"{path.name} is not a regular file")
        return stream.read()


def replace_file(path: Path, text: str, mode: int = 0o600) -> None:
    """Write ``text`` (UTF-8) to ``path`` whole or not at all: into a temporary file of ``mode``
    beside it (``.<stem>-*``), renamed over ``path``; a reader sees the old file or the new one.

    Raises:
        OSError: the directory cannot be written (no temporary file is left behind).
    """
    descriptor, staging = tempfile.mkstemp(prefix=f".{path.stem}-", dir=path.parent)
    try:
        with open(descriptor, "w", encoding="utf-8") as file:
            os.fchmod(file.fileno(), mode)
            file.write(text)
        os.replace(staging, path)
    finally:
        Path(staging).unlink(missing_ok=True)


def remove_damaged(directory: Path) -> bool:
    """Remove a stored directory found damaged, moved aside first (a rename is atomic) so that no
    other process reads it half removed; whether it was (false: gone already, or a read-only store)."""
    aside = directory.with_name(f"{_DAMAGED_PREFIX}{directory.name}-{os.getpid()}-{time.monotonic_ns()}")
    try:
        os.rename(directory, aside)
    except OSError:
        return False
    shutil.rmtree(aside, ignore_errors=True)
    return True


def described(path: Path, shape: tuple[int, ...], dtype: str) -> dict[str, Any]:
    """A manifest's entry for the array file ``path``: its size, dtype and shape."""
    return {"bytes": path.stat().st_size, "dtype": dtype, "shape": list(shape)}


def file_entry(directory: Path, name: str, manifest: dict[str, Any]) -> dict[str, Any]:
    """The manifest's entry for file ``name``, after checking the file has the size it records.

    Raises:
        DamagedStoreError: the manifest lists no such file, or the file is missing or of another size.
    """
    entry = manifest.get("files", {}).get(name)
    if not isinstance(entry, dict):
        raise DamagedStoreError(f"its manifest lists no {name}")
    path = directory / name
    if not path.is_file():
        raise DamagedStoreError(f"{name} is missing")
    if path.stat().st_size != entry.get("bytes"):
        raise DamagedStoreError(f"{name} has {path.stat().st_size} bytes, its manifest says {entry.get('bytes')}")
    return entry


def mapped_array(directory: Path, name: str, manifest: dict[str, Any], shape: tuple[int, ...] | None = None, dtype: str | None = None) -> np.ndarray:
    """The ``.npy`` file ``name`` of ``directory`` memory-mapped (read-only), checked against its
    manifest entry and, when given, the ``shape`` and ``dtype`` the caller needs.

    Raises:
        DamagedStoreError: it differs from its manifest entry or from what the caller needs.
    """
    import numpy as np  # only stores of arrays need it: a catalog snapshot holds none

    entry = file_entry(directory, name, manifest)
    array = np.load(directory / name, mmap_mode="r", allow_pickle=False)
    if array.dtype != np.dtype(entry.get("dtype")) or list(array.shape) != entry.get("shape"):
        raise DamagedStoreError(f"{name} holds {array.dtype.str} {list(array.shape)}, its manifest says {entry.get('dtype')} {entry.get('shape')}")
    if (shape is not None and array.shape != shape) or (dtype is not None and array.dtype != np.dtype(dtype)):
        raise DamagedStoreError(f"{name} holds {array.dtype.str} {list(array.shape)}, the catalog needs {dtype} {list(shape or ())}")
    return array


def _private(directory: Path) -> None:
    """Directories 0700 and files 0600 (``np.save`` and libraries create files as the umask says)."""
    for root, directories, files in os.walk(directory):
        os.chmod(root, 0o700)
        for name in directories:
            os.chmod(os.path.join(root, name), 0o700)
        for name in files:
            os.chmod(os.path.join(root, name), 0o600)


def size_of(directory: Path) -> int:
    """Bytes of every file under ``directory`` (files removed meanwhile count 0)."""
    total = 0
    for root, _, files in os.walk(directory):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_size
            except OSError:
                continue
    return total
