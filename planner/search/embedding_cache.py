"""Embedding cache: vectors kept in toolpath's SQLite file, keyed by model id and text hash.

Reopening a catalog whose texts are already embedded computes nothing; adding one tool embeds only
its new texts. Rows are ``(model_id, text_hash, dimension, vector)`` in table ``embeddings``, the
hash being SHA-256 of the UTF-8 text and the vector little-endian float32 bytes. Only embedders that
name their model (a ``model_id`` attribute) are cached: two anonymous embedders could not be told
apart. A malformed row is treated as missing, so its text is embedded again and the row rewritten.

Embedding the texts of a new or grown catalog takes seconds to minutes, so it is announced: one
``INFO`` record on this module's logger with the count (the command line prints toolpath's records
on standard error; a library user sees them once logging is configured), and a progress bar on
standard error when that is a terminal. Nothing is ever written to standard output, which is the MCP
server's stdio channel.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
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
#: Texts embedded per model call, so a progress bar moves and memory stays flat.
_BATCH = 256


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
        the vectors just computed are still returned.

        Raises:
            registry.storage.StoreError: the cache's file cannot be read.
            ValueError: the embedder breaks its contract, or returns vectors of another dimension
                than those cached under its ``model_id``.
        """
        digests = [text_hash(text) for text in texts]
        found = self.cache.get(self.model_id, digests)
        missing = {digest: text for digest, text in zip(digests, texts) if digest not in found}
        self.hits += len(found)
        self.misses += len(missing)
        if missing:
            computed: dict[str, np.ndarray] = {}
            pending = list(missing.items())
            rate = getattr(self.embedder, "texts_per_second", None)
            logger.info(
                "embedding %d new catalog text%s with %s%s, once: later loads read them from %s",
                len(pending),
                "" if len(pending) == 1 else "s",
                self.model_id,
                f" (about {max(1, round(len(pending) / rate))} s)" if rate else "",
                self.cache.path,
            )
            from tqdm import tqdm  # here: a command whose texts are all cached never shows a bar

            # disable=None: tqdm shows the bar on a terminal only, never in logs or pipes.
            disable = None if len(pending) >= self.progress_from else True
            with tqdm(total=len(pending), desc="embedding catalog texts", unit="text", file=sys.stderr, disable=disable) as progress:
                for start in range(0, len(pending), _BATCH):
                    batch = pending[start : start + _BATCH]
                    vectors = checked_vectors(self.embedder([text for _, text in batch]), len(batch), self.embedder)
                    computed.update((digest, vector) for (digest, _), vector in zip(batch, vectors))
                    progress.update(len(batch))
            try:
                self.cache.put(self.model_id, computed)
            except StoreError as error:  # the vectors are computed: use them, keep nothing
                warn_unusable(error)
            found.update(computed)
        if not digests:
            return np.zeros((0, 0), dtype=np.float32)
        if len({len(vector) for vector in found.values()}) > 1:
            raise ValueError(f"the cache holds vectors of another dimension for model {self.model_id!r}: give a changed embedder a new model_id")
        return np.stack([found[digest] for digest in digests]).astype(np.float32, copy=False)
