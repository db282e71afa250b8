"""A remote kernel's private directory (this module is imported *in the kernel process*).

A kernel on another host shares no files with CodeMode, so the snapshot files that a local kernel
reads and writes in its host-made private directory (see :mod:`toolpath.kernel.inside.snapshot`) live in a
directory this module makes on the kernel's own host, and move over the kernel's Jupyter channels:

- into the kernel as comm messages of the ``toolpath.files`` target (:data:`COMM_TARGET`): a
  ``comm_open`` naming the file, one ``comm_msg`` per base64 chunk, a ``comm_close``. Comm messages
  are handled between cells, and parsing a cell that carries a megabyte of base64 as a literal
  takes IPython about 0.7 s, against milliseconds for a comm message;
- out of the kernel through silent cells: :func:`send` answers a chunk on the kernel's own stdout
  stream (see :func:`toolpath.kernel.inside.setup.answer`).

Names are plain file names; every answer is one JSON line.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import os
import shutil
import tempfile
from typing import Any

from toolpath.kernel.inside.protocol import COMM_TARGET
from toolpath.kernel.inside.setup import answer

_directory = ""


def create_directory() -> None:
    """Make the kernel's private directory (mode 0700, removed when the kernel exits), register the
    :data:`COMM_TARGET` that writes files into it, and answer ``{"directory": path}``."""
    global _directory
    if not _directory:
        _directory = tempfile.mkdtemp(prefix="toolpath-kernel-")
        atexit.register(shutil.rmtree, _directory, True)
        from comm import get_comm_manager  # ipykernel's comm manager inside a kernel

        get_comm_manager().register_target(COMM_TARGET, _receive_file)
    answer({"directory": _directory})


def _receive_file(comm: Any, message: dict[str, Any]) -> None:
    """A ``comm_open`` of :data:`COMM_TARGET`: empty (or create) the file its data names, and append
    the base64 ``chunk`` of each ``comm_msg`` to it."""
    path = _path(message["content"]["data"]["name"])
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600))

    def append_chunk(chunk_message: dict[str, Any]) -> None:
        with open(path, "ab") as file:
            file.write(base64.b64decode(chunk_message["content"]["data"]["chunk"]))

    comm.on_msg(append_chunk)


def size(name: str) -> None:
    """Answer ``{"size": bytes}`` of file ``name``, or ``{"error": ...}`` when it cannot be read."""
    try:
        answer({"size": os.stat(_path(name)).st_size})
    except OSError as error:
        answer({"error": f"{name}: {error.strerror or error}"})


def _path(name: str) -> str:
    if not _directory:
        raise RuntimeError("the kernel's private directory was not created (create_directory)")
    if os.path.basename(name) != name or name in ("", ".", ".."):
        raise ValueError(f"{name!r} is not a plain file name")
    return os.path.join(_directory, name)


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
