"""A catalog's first embedding through the embedding cache: each finished chunk is kept at once, so a
run stopped by an error, Ctrl-C or a kill loses only the chunk under way and the next run embeds the
rest; vectors come back in the caller's order; progress goes to standard error, never stdout."""

import hashlib
import logging
import signal
import sqlite3
import subprocess
import sys
import time

import numpy as np
import pytest

from toolpath.planner.search import embedding_cache
from toolpath.planner.search.embedding_cache import CachedEmbedder, EmbeddingCache, text_hash

MODEL = "test/digest-v1"


def vector_of(text: str) -> np.ndarray:
    """A vector that only this text gets: 8 bytes of its SHA-256 digest, and its length."""
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return np.array([*digest[:8], len(text)], dtype=np.float32)


class DigestEmbedder:
    """Embeds with :func:`vector_of`; records each call's texts; fails on call ``fail_on`` (1-based)
    with ``failure``."""

    model_id = MODEL

    def __init__(self, fail_on: int | None = None, failure: BaseException | None = None):
        self.calls: list[list[str]] = []
        self.fail_on, self.failure = fail_on, failure

    def __call__(self, texts):
        self.calls.append(list(texts))
        if len(self.calls) == self.fail_on:
            raise self.failure
        return np.stack([vector_of(text) for text in texts])

    @property
    def embedded(self) -> list[str]:
        return [text for call in self.calls for text in call]


def catalog_texts(count: int) -> list[str]:
    """``count`` distinct texts of 1 to 60 words, in no order of length."""
    return [" ".join([f"tool{number}"] * (1 + number * 37 % 60)) for number in range(count)]


def cached_rows(path) -> int:
    with sqlite3.connect(path) as database:
        return database.execute("select count(*) from embeddings where model_id = ?", [MODEL]).fetchone()[0]


def integrity(path) -> str:
    with sqlite3.connect(path) as database:
        return database.execute("pragma integrity_check").fetchone()[0]


@pytest.fixture
def chunks_of_ten(monkeypatch):
    monkeypatch.setattr(embedding_cache, "SAVE_EVERY", 10)


def test_an_embedder_that_fails_after_two_chunks_leaves_them_cached_and_the_next_run_embeds_only_the_rest(tmp_path, chunks_of_ten, caplog):
    texts = catalog_texts(40)
    cache = EmbeddingCache(tmp_path / "toolpath.db")
    failing = DigestEmbedder(fail_on=3, failure=RuntimeError("the model crashed"))
    with caplog.at_level(logging.WARNING, logger="toolpath"), pytest.raises(RuntimeError, match="the model crashed"):
        CachedEmbedder(failing, cache)(texts)
    kept = failing.embedded[:20]
    assert len(failing.calls) == 3 and all(len(call) <= 10 for call in failing.calls)
    assert set(cache.get(MODEL, [text_hash(text) for text in texts])) == {text_hash(text) for text in kept}
    assert "embedding stopped (RuntimeError) after 20 of 40 new catalog texts; 20 are kept" in caplog.text

    again = DigestEmbedder()
    vectors = CachedEmbedder(again, cache)(texts)
    assert sorted(again.embedded) == sorted(set(texts) - set(kept))
    np.testing.assert_array_equal(vectors, np.stack([vector_of(text) for text in texts]))


def test_vectors_come_back_in_the_callers_order_with_repeats_and_some_texts_cached(tmp_path, chunks_of_ten):
    texts = catalog_texts(37)
    cache = EmbeddingCache(tmp_path / "toolpath.db")
    CachedEmbedder(DigestEmbedder(), cache)(texts[5:12])
    asked = [texts[30], *texts, texts[3], texts[8]]
    embedder = DigestEmbedder()
    vectors = CachedEmbedder(embedder, cache)(asked)
    np.testing.assert_array_equal(vectors, np.stack([vector_of(text) for text in asked]))
    assert sorted(embedder.embedded) == sorted(texts[:5] + texts[12:])  # each missing text once
    # Sorted by length across the whole run, each chunk spans the lengths, shortest first.
    for call in embedder.calls:
        assert [len(text) for text in call] == sorted(len(text) for text in call)
    assert max(len(call[0]) for call in embedder.calls) < min(len(call[-1]) for call in embedder.calls)


def test_vectors_of_another_dimension_than_those_cached_are_refused_and_not_kept(tmp_path):
    cache = EmbeddingCache(tmp_path / "toolpath.db")
    CachedEmbedder(DigestEmbedder(), cache)(["already cached"])

    class Wider(DigestEmbedder):
        def __call__(self, texts):
            return np.hstack([super().__call__(texts), np.ones((len(texts), 1), dtype=np.float32)])

    with pytest.raises(ValueError, match=r"another dimension \(9\) for model 'test/digest-v1' than its embedder gives \(10\)"):
        CachedEmbedder(Wider(), cache)(["already cached", "new text"])
    assert cached_rows(tmp_path / "toolpath.db") == 1


def test_progress_is_logged_with_the_time_left_when_standard_error_is_no_terminal(tmp_path, chunks_of_ten, monkeypatch, capsys):
    monkeypatch.setattr(embedding_cache, "PROGRESS_EVERY_SECONDS", 0.0)
    records: list[logging.LogRecord] = []
    listener = logging.Handler(logging.INFO)
    listener.emit = records.append
    logger = logging.getLogger("toolpath")
    logger.addHandler(listener)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        CachedEmbedder(DigestEmbedder(), EmbeddingCache(tmp_path / "toolpath.db"))(catalog_texts(25))
    finally:
        logger.removeHandler(listener)
        logger.setLevel(level)
    progress = [record.getMessage() for record in records if record.getMessage().startswith("embedded ")]
    assert [message.split(",")[0] for message in progress] == ["embedded 9 of 25 catalog texts (36 %)", "embedded 17 of 25 catalog texts (68 %)"]
    assert all(" texts/s, about " in message and message.endswith(" s left") for message in progress)
    assert capsys.readouterr().out == ""


#: Embeds ``sys.argv[2]`` texts into the cache file ``sys.argv[1]``, chunks of 5, each chunk slowly,
#: logging to standard error as the command line does.
SLOW_RUN = """
import logging, sys, time
import numpy as np
from toolpath.planner.search import embedding_cache
from toolpath.planner.search.embedding_cache import CachedEmbedder, EmbeddingCache

logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")
embedding_cache.SAVE_EVERY = 5

class Slow:
    model_id = "test/digest-v1"

    def __call__(self, texts):
        time.sleep(0.05)
        return np.ones((len(texts), 9), dtype=np.float32)

CachedEmbedder(Slow(), EmbeddingCache(sys.argv[1]))([f"text {number}" for number in range(int(sys.argv[2]))])
"""


def stopped_run(tmp_path, stop: signal.Signals) -> subprocess.CompletedProcess:
    """Run :data:`SLOW_RUN` on 400 texts and send it ``stop`` once some chunks are kept."""
    path = tmp_path / "toolpath.db"
    child = subprocess.Popen([sys.executable, "-c", SLOW_RUN, str(path), "400"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (path.exists() and _rows_or_zero(path) >= 20):
            assert child.poll() is None and time.monotonic() < deadline, "the run ended or stalled before keeping 20 texts"
            time.sleep(0.05)
        child.send_signal(stop)
        out, err = child.communicate(timeout=60)
    finally:
        child.kill()
        child.wait()
    return subprocess.CompletedProcess(child.args, child.returncode, out, err)


def _rows_or_zero(path) -> int:
    try:
        return cached_rows(path)
    except sqlite3.OperationalError:  # no table yet, or the writer holds the lock
        return 0


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "kill"])
def test_a_stopped_run_leaves_a_valid_database_with_whole_chunks_and_the_next_run_embeds_the_rest(tmp_path, stop):
    stopped = stopped_run(tmp_path, stop)
    path = tmp_path / "toolpath.db"
    assert stopped.returncode != 0 and stopped.stdout == ""
    assert integrity(path) == "ok"
    kept = cached_rows(path)
    assert 20 <= kept < 400 and kept % 5 == 0
    if stop == signal.SIGINT:
        assert "KeyboardInterrupt" in stopped.stderr
        assert (
            f"embedding stopped (KeyboardInterrupt) after {kept} of 400 new catalog texts; {kept} are kept in {path}, and the next run embeds the other {400 - kept}"
            in stopped.stderr
        )

    again = DigestEmbedder()
    CachedEmbedder(again, EmbeddingCache(path))([f"text {number}" for number in range(400)])
    assert len(again.embedded) == 400 - kept
