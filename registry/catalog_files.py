"""Reading a catalog file's text, bounded: a catalog must be a regular file of at most
:data:`DEFAULT_MAX_CATALOG_BYTES` (16 MiB) unless ``max_bytes=`` or the environment variable
``TOOLPATH_MAX_CATALOG_BYTES`` says otherwise; pipes, devices and directories are refused without
waiting on them, and a file that is not UTF-8 is a problem (TP100), not an exception.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from toolpath.registry.catalog_problems import UNREADABLE, CatalogError, CatalogProblem

#: Largest catalog file read by default, in bytes: 16 MiB, a 25,000-tool catalog (10-17 MiB, by
#: benchmarks/bench_catalog_load.py and bench_scale_tools.py). It does not fit 100,000 tools (68 MiB
#: of compact JSON, 63 MiB of YAML), on purpose: the limit bounds what one file named by mistake, or
#: written by someone else, costs before anything has checked it, and that cost follows the number
#: of items, not the bytes. 16 MiB of empty mappings (``[{}, {}, ...]``) peaks at 1.4 GB as JSON
#: while its problem is located (the nodes that give positions), and at 2 GB as YAML with one anchor
#: (read through PyYAML's own nodes), so a 128 MiB default would let such a file take 11-16 GB; a
#: real catalog of 100,000 tools peaks at about 0.7 GB (JSON or YAML) and is a deliberate
#: deployment, which raises the limit for its files (the refusal says how).
DEFAULT_MAX_CATALOG_BYTES = 16 * 2**20
#: Environment variable that raises (or lowers) the limit for every read, e.g. from the CLI.
MAX_CATALOG_BYTES_VARIABLE = "TOOLPATH_MAX_CATALOG_BYTES"


def _unreadable(path: Path, message: str) -> CatalogError:
    return CatalogError([CatalogProblem(str(path), "", message, code=UNREADABLE)])


def size_limit(path: Path, max_bytes: int | None) -> int:
    """``max_bytes``, else the environment variable, else the default; an unusable variable is the catalog's error."""
    if max_bytes is not None:
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
            raise ValueError(f"max_bytes must be a positive number of bytes, got {max_bytes!r}")
        return max_bytes
    configured = os.environ.get(MAX_CATALOG_BYTES_VARIABLE)
    if configured is None or not configured.strip():
        return DEFAULT_MAX_CATALOG_BYTES
    try:
        limit = int(configured)
    except ValueError:
        limit = 0
    if limit < 1:
        raise _unreadable(
            path,
            f"the environment variable {MAX_CATALOG_BYTES_VARIABLE}={configured!r} is not a positive number of bytes; set it to one (e.g. {4 * DEFAULT_MAX_CATALOG_BYTES} for 64 MiB) or unset it",
        )
    return limit


def _file_kind(mode: int) -> str:
    kinds = [
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a named pipe (FIFO)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ]
    return next((kind for test, kind in kinds if test(mode)), "not a regular file")


def _byte_count(count: int) -> str:
    """``16,777,216 bytes (16 MiB)``: exact, and readable when large."""
    return f"{count:,} bytes" + (f" ({count / 2**20:.4g} MiB)" if count >= 2**20 else "")


def _too_large(size: int | None, limit: int) -> str:
    found = f"the file is {_byte_count(size)}," if size is not None else "the file is"
    # Twice what the file needs, rounded up to whole MiB.
    suggested = -(-2 * max(size or 0, limit + 1) // 2**20) * 2**20
    return (
        f"{found} over the limit of {_byte_count(limit)} for a catalog; if it really is one, raise the limit: "
        f"set the environment variable {MAX_CATALOG_BYTES_VARIABLE}={suggested} ({suggested // 2**20} MiB), or pass max_bytes= from Python"
    )


def open_without_waiting(path: str | os.PathLike[str]) -> int:
    """A read-only descriptor of ``path``, opened without waiting: opening a named pipe would
    otherwise wait for a writer forever (regular files, the only kind toolpath reads, ignore
    ``O_NONBLOCK``). Check the descriptor's ``os.fstat`` before reading.

    Raises:
        OSError: as ``os.open`` does.
    """
    return os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0))


def read_bytes(path: Path, limit: int) -> bytes:
    """The bytes of ``path``, which must be a regular file of at most ``limit`` bytes.

    The file is opened once and checked through its descriptor, so it cannot be swapped for a pipe
    or a device between the check and the read; at most ``limit + 1`` bytes are ever read.

    Raises:
        CatalogError: TP100 for a file that cannot be opened, is not a regular file, or is larger
            than ``limit`` bytes.
    """
    try:
        descriptor = open_without_waiting(path)
    except FileNotFoundError:
        raise _unreadable(path, f"cannot read catalog file: it does not exist (looked for {os.path.abspath(path)}); check the path") from None
    except PermissionError:
        raise _unreadable(path, "cannot read catalog file: permission denied; make it readable, or give a copy you can read") from None
    except OSError as error:
        raise _unreadable(path, f"cannot read catalog file: {error.strerror or error}") from None
    chunks: list[bytes] = []
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            raise _unreadable(path, f"cannot read catalog file: it is {_file_kind(status.st_mode)}, not a regular file")
        if status.st_size > limit:
            raise _unreadable(path, _too_large(status.st_size, limit))
        # The size can be wrong (a file still growing, /proc): read one byte past the limit to know.
        remaining = limit + 1
        while remaining > 0:
            chunk = os.read(descriptor, min(remaining, 2**20))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
    except OSError as error:
        raise _unreadable(path, f"cannot read catalog file: {error}") from None
    finally:
        os.close(descriptor)
    data = b"".join(chunks)
    if len(data) > limit:
        raise _unreadable(path, _too_large(None, limit))
    return data


def read_text(path: Path, limit: int) -> str:
    """The text of ``path`` (:func:`read_bytes`, decoded as UTF-8, line ends as ``Path.read_text`` gives them).

    Raises:
        CatalogError: as :func:`read_bytes`, and TP100 for a file that is not UTF-8.
    """
    return decoded_text(path, read_bytes(path, limit))


def decoded_text(path: Path, data: bytes) -> str:
    """``data`` read from ``path`` as :func:`read_text` gives it (UTF-8, ``\\n`` line ends).

    Raises:
        CatalogError: TP100 naming ``path`` when ``data`` is not UTF-8.
    """
    try:
        text = data.decode("utf-8-sig")  # a byte-order mark is not content
    except UnicodeDecodeError as error:
        raise _unreadable(path, f"cannot read catalog file: {error}") from None
    # Line ends as Path.read_text gives them, so positions and values are what they always were.
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text
