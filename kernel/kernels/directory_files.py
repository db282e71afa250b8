"""The host's one way to read and write files in a kernel's private directory.

The kernel can write its private directory (it must: snapshot dumps and reports leave through it),
so whatever the host finds there was chosen by the cell's code, not by toolpath. At the name the
host is about to open, a cell can leave a symbolic link (to ``/dev/zero``, or to a host file the
kernel cannot see but the host can), a FIFO (an ``open`` that never returns), a directory, a sparse
file of terabytes, a hard link, or swap one for another between a check and a read. Every file
the host takes from or gives to a kernel goes through this module, which:

- opens the directory itself without following a link, and every file relative to that open
  directory (``dir_fd``), by a bare name: a path cannot be redirected half-way;
- reads with ``O_NOFOLLOW | O_NONBLOCK`` and ``fstat``'s the open file: only a regular file with one
  link is read, at most ``max_bytes`` (checked on its size before reading and on the bytes while
  reading, since it may grow), within ``seconds``;
- writes to a fresh name created with ``O_CREAT | O_EXCL | O_NOFOLLOW`` (mode 0600), then renames it
  over the name: whatever the kernel left there is replaced, never written through.

What the host reads is still untrusted: callers parse it as such (see
:mod:`toolpath.kernel.codemode.session_snapshots`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
import time
from collections.abc import Iterator

from toolpath.kernel.errors import KernelError

#: Bytes read at a time, between checks of the time limit.
_CHUNK_BYTES = 1 << 20
#: Seconds a read may take by default (a 64 MB snapshot reads in well under a second).
READ_SECONDS = 30.0


class UnsafeKernelFileError(KernelError):
    """A file in a kernel's private directory is not one the host reads or writes through: a link,
    a FIFO, a directory, a device, a file with other names, or one over its size limit. The cell's
    code put it there (toolpath never does); the message names the file and what was found."""


def _check_name(name: str) -> None:
    if not name or "/" in name or "\0" in name or name in (".", ".."):
        raise ValueError(f"a kernel file is named by a bare file name, not {name!r}")


@contextlib.contextmanager
def _directory(directory: str) -> Iterator[int]:
    """The kernel's private directory, open (the host made it; its path has no link a kernel placed)."""
    descriptor = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        yield descriptor
    finally:
        os.close(descriptor)


def _kind(mode: int) -> str:
    for test, kind in (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return kind
    return "not a regular file"


def read_and_remove(directory: str, name: str, max_bytes: int, seconds: float = READ_SECONDS) -> bytes:
    """Read file ``name`` of ``directory`` (a kernel's private directory) and remove it.

    Whatever is at ``name`` is removed, read or refused (a directory is left).

    Args:
        directory: the kernel's private directory, as the host sees it.
        name: a bare file name in it.
        max_bytes: the most bytes accepted; a larger file is refused unread.
        seconds: the time the read may take.

    Raises:
        UnsafeKernelFileError: it is not a regular file with one name, it is over ``max_bytes``,
            or reading it took over ``seconds``.
        FileNotFoundError: there is no file ``name``.
        ValueError: ``name`` is not a bare file name.
        OSError: it could not be read.
    """
    _check_name(name)
    with _directory(directory) as directory_descriptor:
        try:
            return _read(directory_descriptor, name, max_bytes, seconds)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=directory_descriptor)


def _read(directory_descriptor: int, name: str, max_bytes: int, seconds: float) -> bytes:
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    try:
        descriptor = os.open(name, flags, dir_fd=directory_descriptor)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise UnsafeKernelFileError(f"the kernel's file {name} is a symbolic link; the host does not follow it") from None
        if error.errno == errno.ENXIO:  # what open() says of a Unix socket
            raise UnsafeKernelFileError(f"the kernel's file {name} is a socket; the host reads only regular files") from None
        raise
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            raise UnsafeKernelFileError(f"the kernel's file {name} is {_kind(status.st_mode)}; the host reads only regular files")
        if status.st_nlink != 1:
            raise UnsafeKernelFileError(f"the kernel's file {name} has {status.st_nlink} names (hard links); the host reads only a file of its own")
        if status.st_size > max_bytes:
            raise UnsafeKernelFileError(f"the kernel's file {name} has {status.st_size:,} bytes, over the {max_bytes:,} the host reads")
        deadline = time.monotonic() + seconds
        chunks, size = [], 0
        while chunk := os.read(descriptor, min(_CHUNK_BYTES, max_bytes + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
            if size > max_bytes:
                raise UnsafeKernelFileError(f"the kernel's file {name} grew past the {max_bytes:,} bytes the host reads while it was read")
            if time.monotonic() > deadline:
                raise UnsafeKernelFileError(f"reading the kernel's file {name} took over {seconds:g} s")
        return b"".join(chunks)
    finally:
        os.close(descriptor)


def write_replacing(directory: str, name: str, data: bytes) -> None:
    """Write ``data`` as file ``name`` of ``directory`` (a kernel's private directory), readable by
    this user only, replacing whatever is at ``name`` (a link is replaced, never followed).

    Raises:
        UnsafeKernelFileError: ``name`` is a directory.
        ValueError: ``name`` is not a bare file name.
        OSError: it could not be written (the partial file is removed).
    """
    _check_name(name)
    with _directory(directory) as directory_descriptor:
        partial = f".{name}.{secrets.token_hex(8)}.partial"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        descriptor = os.open(partial, flags, 0o600, dir_fd=directory_descriptor)
        try:
            with open(descriptor, "wb") as file:
                file.write(data)
            os.rename(partial, name, src_dir_fd=directory_descriptor, dst_dir_fd=directory_descriptor)
        except BaseException as error:
            with contextlib.suppress(OSError):
                os.unlink(partial, dir_fd=directory_descriptor)
            if isinstance(error, IsADirectoryError):
                raise UnsafeKernelFileError(f"the kernel's file {name} is a directory; the host does not write into it") from None
            raise


def restrict_socket(path: str) -> None:
    """Make the Unix socket at ``path`` (which the host has just bound, in a directory a kernel may
    write) readable and writable by this user only, without following a link the kernel swapped in.

    Raises:
        UnsafeKernelFileError: ``path`` is no longer a socket.
        OSError: it is gone.
    """
    if not hasattr(os, "O_PATH"):  # not Linux: no sandboxed kernels, so no kernel of another trust
        os.chmod(path, 0o600)
        return
    # chmod() follows links and lchmod() does not exist on Linux; an O_PATH descriptor names the
    # inode found, and chmod through /proc/self/fd acts on that inode, whatever the path is now.
    descriptor = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if not stat.S_ISSOCK(os.fstat(descriptor).st_mode):
            raise UnsafeKernelFileError(f"{path} is not the socket the host bound; a kernel replaced it")
        os.chmod(f"/proc/self/fd/{descriptor}", 0o600)
    finally:
        os.close(descriptor)
