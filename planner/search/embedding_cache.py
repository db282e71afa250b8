"""Embedding cache: vectors kept in toolpath's SQLite file, keyed by model id and text hash.

Reopening a catalog whose texts are already embedded computes nothing; adding one tool embeds only
its new texts. Rows are ``(model_id, text_hash, dimension, vector)`` in table ``embeddings``, the
hash being SHA-256 of the UTF-8 text and the vector little-endian float32 bytes. Only embedders that
name their model (a ``model_id`` attribute) are cached: two anonymous embedders could not be told
apart. A malformed row is treated as missing, so its text is embedded again and the row rewritten.

Embedding the texts of a new or grown catalog takes seconds to minutes (at 100,000 tools, about
300,000 texts: minutes), so it is announced: one ``INFO`` record on this module's logger with the
count and the expected time (the command line prints toolpath's records on standard error; a library
user sees them once logging is configured), then a progress bar on standard error when that is a
terminal, else an ``INFO`` record every :data:`PROGRESS_EVERY_SECONDS`. Nothing is ever written to
standard output, which is the MCP server's stdio channel. The vectors are kept chunk by chunk as
they are computed (:class:`CachedEmbedder`), so a stopped run is resumed, not restarted.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import sys
import time
import warnings
from collections import Counter
from collections.abc import Sequence

import numpy as np

from toolpath.planner.search.embedding import Embedder, checked_vectors
from toolpath.registry.storage import StoreError, connected, database_file, first_report_of, table_exists, transaction

_TABLE = "embeddings"
_COLUMNS = ("model_id", "text_hash", "dimension", "vector")
_PRIMARY_KEY = ("model_id", "text_hash")
_PURPOSE = "embedding cache"
logger = logging.getLogger(__name__)
#: Rows fetched per query (SQLite caps the number of bound parameters).
_LOOKUP_CHUNK = 500
#: Texts embedded, then kept in the cache in one transaction, at a time: at about 385 texts of ~11
#: tokens per CPU second a core, a chunk takes about 11 s on this 2-core machine when idle (longer
#: under load), and writing it about 0.15 s (4,096 rows: 0.06-0.1 s), while the model waits.
SAVE_EVERY = 8192
#: Seconds between progress records on this module's logger when standard error is not a terminal.
PROGRESS_EVERY_SECONDS = 30.0


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class EmbeddingCache:
    """The ``embeddings`` table of one SQLite file.

    Args:
        path: the database file; default ``$TOOLPATH_HOME/toolpath.db`` (created 0600 when missing).

    Raises:
        registry.storage.StoreError: ``path`` is a directory or cannot be created. Every method
            raises it too when the file is unusable (not a database, corrupt, unreadable, read-only,
            an ``embeddings`` table with other columns, a full disk).
    """

    def __init__(self, path: str | os.PathLike[str] | None = None):
        self.path = database_file(path, _PURPOSE)

    def get(self, model_id: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """The cached vectors of those text hashes that have one, as ``{hash: (d,) float32}``.

        A malformed row counts as missing: vector bytes that are not 4 × its dimension, a dimension
        unlike the model's other rows, NaN or infinite values, NULLs or values of the wrong type.
        When there are any, one ``RuntimeWarning`` names the file and how many rows were ignored;
        :meth:`put` of the re-embedded texts overwrites them.
        """
        rows: list[tuple] = []
        with connected(self.path, _PURPOSE) as database:
            if not table_exists(database, _TABLE, _COLUMNS, _PRIMARY_KEY, self.path, _PURPOSE):
                return {}
            unique = list(dict.fromkeys(hashes))
            for start in range(0, len(unique), _LOOKUP_CHUNK):
                chunk = unique[start : start + _LOOKUP_CHUNK]
                placeholders = ", ".join("?" * len(chunk))
                rows.extend(
                    database.execute(
                        f"select text_hash, dimension, vector from {_TABLE} where model_id = ? and text_hash in ({placeholders})", [model_id, *chunk]
                    )
                )
        decoded = {digest: vector for digest, dimension, blob in rows if (vector := _vector(dimension, blob)) is not None}
        found: dict[str, np.ndarray] = {}
        if decoded:
            # One model's vectors share a dimension: rows of a rarer one are damage, not another model.
            ((dimension, _),) = Counter(len(vector) for vector in decoded.values()).most_common(1)
            found = {digest: vector for digest, vector in decoded.items() if len(vector) == dimension}
        if len(found) < len(rows):
            warnings.warn(
                f"ignored {len(rows) - len(found)} malformed row(s) of the embedding cache {self.path}; their texts are embedded again and the rows rewritten",
                RuntimeWarning,
                stacklevel=2,
            )
        return found

    def put(self, model_id: str, vectors: dict[str, np.ndarray]) -> None:
        """Store ``{hash: vector}`` for ``model_id`` in one transaction (replacing equal keys)."""
        with connected(self.path, _PURPOSE) as database, transaction(database, immediate=True):
            if not table_exists(database, _TABLE, _COLUMNS, _PRIMARY_KEY, self.path, _PURPOSE):
                database.execute(f"create table {_TABLE} (model_id text, text_hash text, dimension integer, vector blob, primary key (model_id, text_hash))")
            database.executemany(
                f"insert or replace into {_TABLE} (model_id, text_hash, dimension, vector) values (?, ?, ?, ?)",
                [(model_id, digest, len(vector), np.asarray(vector, dtype="<f4").tobytes()) for digest, vector in vectors.items()],
            )


def warn_unusable(error: StoreError) -> None:
    """The one ``RuntimeWarning`` for an embedding cache that cannot be used: the file, what is
    wrong and what to do; embedding goes on without it."""
    first_report_of(error)  # noted, so that the record of use does not warn about the same file again
    warnings.warn(f"the embedding cache at {error.path} is unusable: {error.problem}; embedding without it. {error.remedy}", RuntimeWarning, stacklevel=2)


def _vector(dimension: object, blob: object) -> np.ndarray | None:
    """The ``(dimension,)`` float32 vector stored in a row, or ``None`` when the row is malformed."""
    if not isinstance(dimension, int) or not isinstance(blob, bytes) or dimension < 1 or len(blob) != 4 * dimension:
        return None
    vector = np.frombuffer(blob, dtype="<f4")
    return vector if np.isfinite(vector).all() else None


class CachedEmbedder:
    """An embedder that reads and writes an :class:`EmbeddingCache`.

    ``hits`` and ``misses`` count distinct texts found in the cache and texts embedded.

    Texts the cache lacks are embedded in chunks of :data:`SAVE_EVERY` texts (:func:`_chunks`: sorted
    by length, so batches pad little), each kept in the cache in its own transaction as soon as it
    is embedded, so an interrupted run (Ctrl-C, a kill, an error) loses at most the chunk under way
    and the next run embeds only the rest. Through an embedder that offers ``many_texts()`` (the default one: every core) the run
    uses that. Progress is shown on standard error: a bar when it is a terminal, else an ``INFO``
    record on this module's logger every :data:`PROGRESS_EVERY_SECONDS` (texts done, rate, time
    left).

    Args:
        embedder: the embedder that computes missing vectors; must have a ``model_id``.
        cache: where vectors are kept.
        progress_from: show a progress bar on standard error, when that is a terminal, once at least
            this many texts miss (every miss is announced on this module's logger whatever the count).

    Raises:
        ValueError: the embedder has no ``model_id``.
    """

    def __init__(self, embedder: Embedder, cache: EmbeddingCache, progress_from: int = 1):
        model_id = getattr(embedder, "model_id", None)
        if not model_id:
            raise ValueError("only an embedder with a model_id attribute can be cached: set embedder.model_id to a name for its model and version")
        self.embedder = embedder
        self.model_id = str(model_id)
        self.cache = cache
        self.progress_from = progress_from
        self.hits = 0
        self.misses = 0

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        """``(len(texts), d)`` float32 vectors; only texts the cache lacks reach the embedder.

        A cache that cannot be written (read-only, full disk) warns once (:func:`warn_unusable`) and
        the vectors computed are still returned. When embedding stops early (an interrupt, an error
        of the embedder), a ``WARNING`` record says how many texts were embedded and kept, and the
        exception goes on.

        Raises:
            registry.storage.StoreError: the cache's file cannot be read.
            ValueError: the embedder breaks its contract, or returns vectors of another dimension
                than those cached under its ``model_id`` (then nothing it returned is kept).
        """
        digests = [text_hash(text) for text in texts]
        if not digests:
            return np.zeros((0, 0), dtype=np.float32)
        found = self.cache.get(self.model_id, digests)
        missing = {digest: text for digest, text in zip(digests, texts) if digest not in found}
        self.hits += len(found)
        self.misses += len(missing)
        rows: dict[str, list[int]] = {}
        for row, digest in enumerate(digests):
            rows.setdefault(digest, []).append(row)
        vectors: np.ndarray | None = None
        if found:
            # One dimension: the cache returns only its model's most common one.
            vectors = np.empty((len(digests), len(next(iter(found.values())))), dtype=np.float32)
            for digest, vector in found.items():
                vectors[rows[digest]] = vector
        if missing:
            vectors = self._embed_missing(missing, rows, vectors)
        assert vectors is not None  # every text was found or embedded
        return vectors

    def _embed_missing(self, missing: dict[str, str], rows: dict[str, list[int]], vectors: np.ndarray | None) -> np.ndarray:
        """Embed ``missing`` (``{hash: text}``) chunk by chunk, keeping each chunk in the cache, and
        write each text's vector into ``vectors`` at its ``rows`` (made when ``None``)."""
        rate = getattr(self.embedder, "characters_per_second", None)
        logger.info(
            "embedding %d new catalog text%s with %s%s, once: later loads read them from %s",
            len(missing),
            "" if len(missing) == 1 else "s",
            self.model_id,
            f" (about {_duration(sum(map(len, missing.values())) / rate)})" if rate else "",
            self.cache.path,
        )
        chunks = _chunks(list(missing.items()))
        saving = True
        kept = 0
        progress = _Progress(len(missing), len(missing) >= self.progress_from)
        many_texts = getattr(self.embedder, "many_texts", None)
        try:
            with progress, many_texts() if many_texts is not None else contextlib.nullcontext(self.embedder) as embed:
                for chunk in chunks:
                    computed = checked_vectors(embed([text for _, text in chunk]), len(chunk), self.embedder)
                    if vectors is None:
                        vectors = np.empty((sum(len(positions) for positions in rows.values()), computed.shape[1]), dtype=np.float32)
                    elif computed.shape[1] != vectors.shape[1]:
                        raise ValueError(
                            f"the cache holds vectors of another dimension ({vectors.shape[1]}) for model {self.model_id!r} than its embedder gives ({computed.shape[1]}): give a changed embedder a new model_id"
                        )
                    for (digest, _), vector in zip(chunk, computed):
                        vectors[rows[digest]] = vector
                    if saving:
                        try:
                            self.cache.put(self.model_id, {digest: vector for (digest, _), vector in zip(chunk, computed)})
                            kept += len(chunk)
                        except StoreError as error:  # the vectors are computed: use them, keep nothing more
                            warn_unusable(error)
                            saving = False
                    progress.update(len(chunk))
        except BaseException as error:
            if progress.done == 0 and not isinstance(error, KeyboardInterrupt):
                raise  # nothing was embedded: the error says all
            logger.warning(
                "embedding stopped (%s) after %d of %d new catalog texts; %d are kept in %s, and the next run embeds the other %d",
                type(error).__name__,
                progress.done,
                len(missing),
                kept,
                self.cache.path,
                len(missing) - kept,
            )
            raise
        assert vectors is not None
        return vectors


def _chunks(pending: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """``pending`` (``(hash, text)`` pairs) in chunks of at most :data:`SAVE_EVERY`, for embedding
    one after another.

    The texts are sorted by length once, and chunk *k* takes every *K*-th of them from the *k*-th
    on: within a chunk the texts come shortest first, so the embedder's batches of neighbours pad
    little, and every chunk spans the same lengths, so each takes about as long as the others (the
    rate and the time left are steady, and a run stopped at half time has half its texts kept).
    """
    ordered = sorted(pending, key=lambda item: len(item[1]))
    count = -(-len(ordered) // SAVE_EVERY)
    return [ordered[start::count] for start in range(count)]


class _Progress:
    """Progress of one embedding run on standard error: tqdm's bar on a terminal (when ``bar``),
    else an ``INFO`` record every :data:`PROGRESS_EVERY_SECONDS` with the texts done, the rate and
    the time left."""

    def __init__(self, total: int, bar: bool):
        self.total = total
        self.done = 0
        self._started = self._reported = time.monotonic()
        self._log = not _is_terminal(sys.stderr)
        self._bar = None
        if bar and not self._log:
            from tqdm import tqdm  # here: a command whose texts are all cached never shows a bar

            self._bar = tqdm(total=total, desc="embedding catalog texts", unit="text", file=sys.stderr)

    def __enter__(self) -> _Progress:
        return self

    def __exit__(self, *exception: object) -> None:
        if self._bar is not None:
            self._bar.close()

    def update(self, count: int) -> None:
        self.done += count
        if self._bar is not None:
            self._bar.update(count)
        now = time.monotonic()
        if self._log and self.done < self.total and now - self._reported >= PROGRESS_EVERY_SECONDS:
            self._reported = now
            rate = self.done / max(now - self._started, 1e-9)
            logger.info(
                "embedded %d of %d catalog texts (%d %%), %.0f texts/s, about %s left",
                self.done,
                self.total,
                100 * self.done // self.total,
                rate,
                _duration((self.total - self.done) / rate),
            )


def _is_terminal(stream: object) -> bool:
    try:
        return bool(stream.isatty())  # type: ignore[attr-defined]
    except (AttributeError, ValueError):  # no stream (None), or a closed one
        return False


def _duration(seconds: float) -> str:
    """``seconds`` for a person: "40 s", "7 min 40 s", "2 h 5 min"."""
    whole = max(1, round(seconds))
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"
