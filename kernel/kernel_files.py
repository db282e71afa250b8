"""A remote kernel's private directory (this module is imported *in the kernel process*).

A kernel on another host shares no files with CodeMode, so the snapshot files that a local kernel
reads and writes in its host-made private directory (see :mod:`kernel.kernel_snapshot`) live in a
directory this module makes on the kernel's own host, and move through silent cells: the host sends
base64 chunks as :func:`append` calls and reads them back with :func:`send`, which answers on the
kernel's own stdout stream (see :func:`kernel.kernel_setup.answer`). Names are plain file names;
every answer is one JSON line.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import os
import shutil
import tempfile

from kernel.kernel_setup import answer

_directory = ""


def create_directory() -> None:
    """Make the kernel's private directory (mode 0700, removed when the kernel exits) and answer
    ``{"directory": path}``."""
    global _directory
    if not _directory:
        _directory = tempfile.mkdtemp(prefix="toolpath-kernel-")
        atexit.register(shutil.rmtree, _directory, True)
    answer({"directory": _directory})


def _path(name: str) -> str:
    if not _directory:
        raise RuntimeError("the kernel's private directory was not created (create_directory)")
    if os.path.basename(name) != name or name in ("", ".", ".."):
        raise ValueError(f"{name!r} is not a plain file name")
    return os.path.join(_directory, name)


def append(name: str, chunk: str, truncate: bool = False) -> None:
    """Append base64 ``chunk`` to file ``name`` (emptied first with ``truncate``); answer ``{}``."""
    flags = os.O_CREAT | os.O_WRONLY | (os.O_TRUNC if truncate else os.O_APPEND)
    with open(os.open(_path(name), flags, 0o600), "wb") as file:
        file.write(base64.b64decode(chunk))
    answer({})


def send(name: str, offset: int, size: int) -> None:
    """Answer ``{"size": bytes in the file, "data": base64 of at most size bytes from offset}``, or
    ``{"error": ...}`` when the file cannot be read."""
    try:
        with open(_path(name), "rb") as file:
            total = os.fstat(file.fileno()).st_size
            file.seek(offset)
            data = file.read(size)
    except OSError as error:
        answer({"error": f"{name}: {error.strerror or error}"})
        return
    answer({"size": total, "data": base64.b64encode(data).decode()})


def remove(name: str) -> None:
    """Remove file ``name`` if it exists; answer ``{}``."""
    with contextlib.suppress(FileNotFoundError):
        os.remove(_path(name))
    answer({})
