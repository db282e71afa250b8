"""Recorded file digests (issue 57): a catalog file's SHA-256 is reused while its status is the one
recorded, recorded only for files not written just before, and a broken record only costs hashing."""

from __future__ import annotations

import hashlib
import json
import os
import time

import pytest

from toolpath.registry import file_digests
from toolpath.registry.file_digests import FileDigests


def digest_of(digests: FileDigests, path) -> str:
    with open(path, "rb") as stream:
        return digests.sha256(stream, os.fstat(stream.fileno()), str(path))


@pytest.fixture()
def counted_hashing(monkeypatch):
    hashed = []
    real = hashlib.file_digest
    monkeypatch.setattr(file_digests.hashlib, "file_digest", lambda stream, name: hashed.append(stream.name) or real(stream, name))
    return hashed


@pytest.fixture()
def hashed_later(monkeypatch):
    """Hashing happens three seconds after the files were written, as for files written long ago."""
    real = time.time_ns
    monkeypatch.setattr(file_digests.time, "time_ns", lambda: real() + 3 * 10**9)


def test_a_file_written_long_ago_is_hashed_once_then_its_recorded_digest_is_used(tmp_path, counted_hashing, hashed_later):
    catalog = tmp_path / "catalog.json"
    catalog.write_text('{"tools": []}')
    record = tmp_path / "home" / "file_digests.json"
    first = FileDigests(record)
    assert digest_of(first, catalog) == hashlib.sha256(b'{"tools": []}').hexdigest()
    first.save()
    assert record.stat().st_mode & 0o777 == 0o600 and not [name for name in os.listdir(record.parent) if name.startswith(".")]
    assert counted_hashing == [str(catalog)]

    counted_hashing.clear()
    assert digest_of(FileDigests(record), catalog) == hashlib.sha256(b'{"tools": []}').hexdigest()
    assert counted_hashing == []


def test_a_file_just_written_is_hashed_every_time(tmp_path, counted_hashing):
    catalog = tmp_path / "catalog.json"
    catalog.write_text("{}")
    record = tmp_path / "file_digests.json"
    for _ in range(2):
        digests = FileDigests(record)
        digest_of(digests, catalog)
        digests.save()
    assert len(counted_hashing) == 2 and not record.exists()


def test_a_rewrite_of_the_same_size_with_its_time_put_back_is_hashed_again(tmp_path, counted_hashing, hashed_later):
    catalog = tmp_path / "catalog.json"
    catalog.write_text('{"a": 1}')
    record = tmp_path / "file_digests.json"
    digests = FileDigests(record)
    digest_of(digests, catalog)
    digests.save()
    status = catalog.stat()
    time.sleep(0.05)  # past the tick of file times, as a rewrite after the hash always is
    catalog.write_text('{"a": 2}')
    os.utime(catalog, ns=(status.st_atime_ns, status.st_mtime_ns))
    assert digest_of(FileDigests(record), catalog) == hashlib.sha256(b'{"a": 2}').hexdigest()
    assert len(counted_hashing) == 2


@pytest.mark.parametrize(
    "record_text",
    [
        "{not json",
        "[]",
        '{"files": []}',
        '{"files": {"X": {"device": "1", "inode": 2, "bytes": 3, "mtime_ns": 4, "ctime_ns": 5, "sha256": "00"}}}',
        "[" * 100_000,  # json raises RecursionError, not ValueError, for nesting this deep
        '{"files": ' + '{"a": ' * 100_000,
    ],
)
def test_a_damaged_record_means_hashing_and_is_replaced(tmp_path, counted_hashing, hashed_later, record_text):
    catalog = tmp_path / "catalog.json"
    catalog.write_text("{}")
    record = tmp_path / "file_digests.json"
    record.write_text(record_text.replace("X", str(catalog)))
    digests = FileDigests(record)
    assert digest_of(digests, catalog) == hashlib.sha256(b"{}").hexdigest()
    digests.save()
    assert list(json.loads(record.read_text())["files"]) == [str(catalog)]


@pytest.mark.parametrize("kind", ["named pipe", "device"])
def test_a_pipe_or_device_in_the_records_place_is_not_read_and_is_replaced(tmp_path, hashed_later, kind):
    # Reading either would never end: a pipe waits for a writer, /dev/zero fills memory.
    catalog = tmp_path / "catalog.json"
    catalog.write_text("{}")
    record = tmp_path / "file_digests.json"
    if kind == "named pipe":
        os.mkfifo(record)
    else:
        record.symlink_to("/dev/zero")
    digests = FileDigests(record)
    assert digest_of(digests, catalog) == hashlib.sha256(b"{}").hexdigest()
    digests.save()
    assert list(json.loads(record.read_text())["files"]) == [str(catalog)]
    assert os.path.exists("/dev/zero") and not record.is_symlink()


def test_a_record_that_cannot_be_written_is_no_error(tmp_path, hashed_later):
    catalog = tmp_path / "catalog.json"
    catalog.write_text("{}")
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the record's directory should be")
    digests = FileDigests(blocked / "file_digests.json")
    assert digest_of(digests, catalog) == hashlib.sha256(b"{}").hexdigest()
    digests.save()
    assert blocked.read_text().startswith("a file")


def test_only_the_most_recently_used_files_are_kept(tmp_path, hashed_later, monkeypatch):
    monkeypatch.setattr(file_digests, "KEEP_FILES", 3)
    record = tmp_path / "file_digests.json"
    digests = FileDigests(record)
    for number in range(5):
        (tmp_path / f"{number}.json").write_text(str(number))
        digest_of(digests, tmp_path / f"{number}.json")
    digest_of(digests, tmp_path / "0.json")
    digests.save()
    assert list(json.loads(record.read_text())["files"]) == [str(tmp_path / name) for name in ("3.json", "4.json", "0.json")]
