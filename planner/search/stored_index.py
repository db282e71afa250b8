"""Stored skill indexes: the catalog part of a :class:`toolpath.planner.search.skills.SkillIndex`
(its BM25 index and its catalog texts' unit vectors) built once per catalog version and loaded by
every later process instead of rebuilt (issue 57).

**Where.** One directory per catalog version, ``indexes/<key>/`` beside the embedding cache's file
(by default ``$TOOLPATH_HOME/indexes/``):

* ``dense/``: the dense index of the texts' unit vectors, in the index's text order, as
  :mod:`toolpath.planner.search.dense_index` saves it (the ``(texts, d)`` float32 vectors, and for a
  large catalog the approximate index's graph), loaded with its own checks
  (:func:`toolpath.planner.search.dense_index.load_dense_index`);
* ``bm25/``: the BM25 index in bm25s's own format (``BM25.save``: three ``.npy`` arrays and two JSON
  files), read with ``BM25.load(mmap=True)``;
* ``first_text.npy``: where each entry's texts start among the texts (int64, one per entry);
* ``manifest.json``: the format version, the whole key, the model, the counts (entries, texts,
  dimensions, BM25 documents and vocabulary) and every file's size, dtype and shape. Written last.

Nothing stored is a pickle: arrays load with ``allow_pickle=False`` and the rest is JSON, so a file
another process wrote cannot run code here. The arrays are memory-mapped (read-only): a process
reads the pages a search touches, and processes on one machine share them through the page cache.

**The key** is SHA-256 (the directory takes its first 32 hex digits; the manifest keeps all 64) of
everything the stored part is built from, computed from the graph alone (no embedding, no SQLite):
each entry's kind, name and server, which texts are its own, every text and BM25 document, the
embedding model's id and version (:func:`model_identity`), the bm25s and PyStemmer versions (their
tokens and index format) and :data:`FORMAT_VERSION` (raised when this layout or the way a
``SkillIndex`` words its texts changes). Any change to a catalog's states or tools that reaches
search changes the key, and the index is built again; rrf_k, dense_weight and learned evidence are
applied on top at each load and are not part of it.

**Over a catalog snapshot** (a registry read from, or stored as, a snapshot:
:mod:`toolpath.registry.catalog_snapshot`, whose ``content_key`` covers every byte of its catalog
files and toolpath's version) the key is worked out without a text (:func:`content_index_key`): that
content key, the declared states' texts, the model and the versions above. A process that loads such
an index reads a tool's definition only to show one of its texts (a hit's best-matching text).

**What is not stored**: the texts and documents (made from the graph when an index is built, or
when its key needs them), the state graph and learned evidence.

**Trust.** A directory is used only when its manifest matches the key, the format, the model and
the counts, every file listed has its recorded size, the arrays their dtype and shape, and the BM25
index its invariants (parameters as built, offsets increasing from 0 to the number of scores,
document numbers within range). Anything else (a partial, truncated, damaged or foreign directory)
warns once (``RuntimeWarning``, naming the directory and the problem) and the index is built again
and stored anew. The vectors' values are not read at load (that would cost what mapping saves): a
flipped bit inside a file of the right size is not detected.

**Writes** go to a temporary directory beside the final one (mode 0700, files 0600, like the rest of
``TOOLPATH_HOME``), which is renamed into place whole: a reader sees a complete directory or none.
Two processes building the same index at once both build it; the first rename wins, the other
process drops its copy and keeps its (identical) index in memory: no lock, no corrupt result.

**A store that cannot be written** (read-only home, full disk) warns once per directory and process
and the index is used without being stored; every process then builds it again.

**Cleanup** after each store: the :data:`KEEP_INDEXES` most recently used index directories are kept
(a load marks its manifest used) and older ones removed, as are temporary directories of builds
older than an hour (a process killed while writing): :mod:`toolpath.registry.stored_directories`.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from toolpath.planner.search.dense_index import DenseIndex, DenseIndexError, load_dense_index
from toolpath.planner.search.embedding_cache import EmbeddingCache
from toolpath.planner.search.embedding_model import DEFAULT_MODEL_ID, EmbedderUnavailableError, default_model_version
from toolpath.registry.storage import default_home
from toolpath.registry.stored_directories import DamagedStoreError, KeyedDirectories, described, file_entry, mapped_array, size_of

if TYPE_CHECKING:
    import bm25s
    from tqdm import tqdm

    from toolpath.registry import State

#: Version of the stored layout and of the texts a SkillIndex builds; part of the key.
FORMAT_VERSION = 4
#: Index directories kept after storing a new one: the most recently used (one per catalog set in use).
KEEP_INDEXES = 4
#: Name of the directory of stored indexes, beside the embedding cache's file.
INDEXES_DIRECTORY = "indexes"
#: Entries from which building an index shows a progress bar (on a terminal): smaller ones take under a second.
PROGRESS_FROM_ENTRIES = 1000

_DENSE = "dense"
_FIRST_TEXT = "first_text.npy"
_BM25 = "bm25"
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ModelIdentity:
    """The embedding model a stored index's vectors come from: its ``model_id`` and version."""

    model_id: str
    version: str

    def to_dict(self) -> dict[str, str]:
        return {"id": self.model_id, "version": self.version}


@dataclass(frozen=True)
class CatalogPart:
    """The part of a skill index stored: the BM25 index of the entries' documents, the dense index
    of their texts' unit vectors (``None`` for an index without embeddings), and where each entry's
    texts start."""

    lexical: bm25s.BM25
    dense: DenseIndex | None
    #: The position of each entry's first text among the texts (``(entries,)`` int64).
    first_text: np.ndarray


@dataclass(frozen=True)
class StoredIndex:
    """How a skill index's catalog part was got, and where it is stored.

    Attributes:
        directory: ``indexes/<key>`` (absent from disk when ``stored`` is false).
        key: the whole key (64 hex digits; see the module docstring).
        loaded: read from the store (true) or built in this process (false).
        stored: on disk now (loaded, or stored after building; false when the store cannot be written).
        bytes: size of its files on disk (0 when not stored).
        entries, texts: the index's entries (states and tools) and their texts.
        problem: why it is not stored (e.g. ``"Permission denied"``), else ``None``.
    """

    directory: Path
    key: str
    loaded: bool
    stored: bool
    bytes: int
    entries: int
    texts: int
    problem: str | None = None


def model_identity(embedder: object) -> ModelIdentity | None:
    """The identity of ``embedder``'s model, or ``None`` when its vectors cannot be stored: it has no
    ``model_id`` (as for the embedding cache: two anonymous embedders cannot be told apart), or it is
    the shipped model and its package is missing (the index then falls back to BM25 as it says).

    The shipped model's version is its package's; another embedder's is its ``model_version``
    attribute when it has one (an embedder whose vectors change must change ``model_id`` or that).
    """
    model_id = getattr(embedder, "model_id", None)
    if not model_id:
        return None
    if model_id == DEFAULT_MODEL_ID:
        try:
            return ModelIdentity(model_id, default_model_version())
        except EmbedderUnavailableError:
            return None
    return ModelIdentity(str(model_id), str(getattr(embedder, "model_version", "") or ""))


def catalog_key(
    entries: Sequence[tuple[str, str, str | None]], first_text: Sequence[int], texts: Sequence[str], documents: Sequence[str], model: ModelIdentity | None
) -> str:
    """The key (64 hex digits) of a skill index's catalog part (see the module docstring).

    Args:
        entries: each entry's ``(kind, name, server)``, in index order.
        first_text: the position of each entry's first text in ``texts``.
        texts: every entry's texts, entry after entry (what the vectors embed).
        documents: each entry's BM25 document.
        model: the embedding model (``None``: an index without embeddings).
    """
    digest = hashlib.sha256()
    header = {
        "format": FORMAT_VERSION,
        "model": None if model is None else model.to_dict(),
        "bm25s": _version("bm25s"),
        "stemmer": _version("PyStemmer"),
        "counts": [len(entries), len(texts), len(documents)],
    }
    digest.update(json.dumps(header, sort_keys=True).encode("utf-8"))
    digest.update(json.dumps(list(entries), ensure_ascii=False).encode("utf-8"))
    digest.update(np.asarray(first_text, dtype="<i8").tobytes())
    for strings in (texts, documents):
        # The lengths make the concatenation unambiguous, whatever characters the texts hold.
        digest.update(np.fromiter(map(len, strings), dtype="<i8", count=len(strings)).tobytes())
        digest.update("".join(strings).encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def content_index_key(content_key: str, states: Mapping[str, State], model: ModelIdentity | None) -> str:
    """The key (64 hex digits) of the catalog part of a skill index over a registry whose catalog
    files' content is ``content_key`` (:attr:`toolpath.registry.ToolRegistry.content_key`: every byte
    of the files, and toolpath's version) and the declared ``states``: what :func:`catalog_key`
    hashes, known without reading a tool's texts."""
    header = {
        "format": FORMAT_VERSION,
        "model": None if model is None else model.to_dict(),
        "bm25s": _version("bm25s"),
        "stemmer": _version("PyStemmer"),
        "catalogs": content_key,
        "states": [[token, state.description, list(state.affordances)] for token, state in states.items()],
    }
    return hashlib.sha256(json.dumps(header, sort_keys=True, ensure_ascii=False).encode("utf-8", "surrogatepass")).hexdigest()


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _identity(key: str, model: ModelIdentity | None, entries: int, texts: int | None) -> dict[str, Any]:
    """The manifest fields that say which catalog version and model a stored index is of: a load
    checks them against the catalog's own (``texts``: ``None`` when the catalog's count is not known)."""
    identity = {"format": FORMAT_VERSION, "key": key, "model": None if model is None else model.to_dict(), "entries": entries, "texts": texts}
    return identity if texts is not None else {name: value for name, value in identity.items() if name != "texts"}


class IndexStore:
    """The stored skill indexes of one directory (see the module docstring).

    Args:
        directory: where the ``<key>`` directories are (created 0700 on the first store).
    """

    def __init__(self, directory: str | os.PathLike[str]):
        self.directory = Path(directory)
        self._directories = KeyedDirectories(self.directory, "skill index", KEEP_INDEXES)

    @classmethod
    def beside(cls, cache: EmbeddingCache | str | os.PathLike[str] | None) -> IndexStore:
        """The store beside an embedding cache as :class:`SkillIndex` takes it: an
        :class:`EmbeddingCache`, its file's path, or ``None`` for ``$TOOLPATH_HOME/toolpath.db``."""
        if isinstance(cache, EmbeddingCache):
            return cls(cache.path.parent / INDEXES_DIRECTORY)
        return cls((Path(cache).parent if cache is not None else default_home()) / INDEXES_DIRECTORY)

    def path_of(self, key: str) -> Path:
        return self._directories.path_of(key)

    def load(self, key: str, entries: int, texts: int | None, model: ModelIdentity | None) -> tuple[CatalogPart, StoredIndex] | None:
        """The catalog part stored under ``key``, or ``None`` when there is none. A directory that
        cannot be trusted (see the module docstring) warns, is moved aside and removed, and is
        ``None`` too; so is one another process removed while it was read.

        Args:
            entries, texts: the counts the catalog gives (a stored index must have them); ``texts``
                ``None``: the stored count, when the catalog's is not worked out (a snapshot's key).
            model: the model the vectors must come from (``None``: an index without embeddings).
        """

        def checked_part(directory: Path, manifest: dict[str, Any]) -> CatalogPart:
            for field, value in _identity(key, model, entries, texts).items():
                if manifest.get(field) != value:
                    raise DamagedStoreError(f"its manifest's {field} is {manifest.get(field)!r}, not {value!r}")
            stored_texts = manifest["texts"]
            if not isinstance(stored_texts, int) or stored_texts < entries:
                raise DamagedStoreError(f"its manifest's texts is {stored_texts!r}, not a count of at least {entries}")
            first_text = mapped_array(directory, _FIRST_TEXT, manifest, shape=(entries,), dtype="<i8")
            if entries and (first_text[0] != 0 or np.any(np.diff(first_text) < 1) or first_text[-1] >= stored_texts):
                raise DamagedStoreError(f"{_FIRST_TEXT} does not rise from 0 below its {stored_texts} texts")
            dense = _read_dense(directory, manifest, stored_texts) if model is not None else None
            return CatalogPart(_read_bm25(directory, manifest, entries), dense, first_text), stored_texts

        found = self._directories.read(key, checked_part)
        if found is None:
            return None
        part, stored_texts = found
        directory = self.path_of(key)
        return part, StoredIndex(directory, key, True, True, size_of(directory), entries, stored_texts)

    def save(self, key: str, part: CatalogPart, model: ModelIdentity | None, entries: int, texts: int) -> StoredIndex:
        """Store ``part`` under ``key`` (atomically, see the module docstring), then clean up.

        A store that cannot be written warns once per directory and process (``RuntimeWarning``) and
        the result says ``stored=False``; when another process stored the same key first, its copy
        is kept. Never raises for the store's sake.
        """

        def fill(temporary: Path) -> dict[str, Any]:
            # The dense index is written before the rename, so one rename makes the whole index appear.
            if part.dense is not None:
                part.dense.save(temporary / _DENSE)
            first_text = np.asarray(part.first_text, dtype="<i8")
            np.save(temporary / _FIRST_TEXT, first_text, allow_pickle=False)
            return {
                **_identity(key, model, entries, texts),
                "dimensions": None if part.dense is None else int(part.dense.vectors.shape[1]),
                "files": {**_write_bm25(temporary, part.lexical), _FIRST_TEXT: described(temporary / _FIRST_TEXT, first_text.shape, "<i8")},
            }

        directory, stored, problem = self._directories.write(key, fill)
        return StoredIndex(directory, key, False, stored, size_of(directory) if stored else 0, entries, texts, problem)

    def clean_up(self, keep: Path | None = None) -> list[Path]:
        """Remove all but the :data:`KEEP_INDEXES` most recently used index directories (``keep``
        always stays), and temporary ones older than an hour; the removed."""
        return self._directories.clean_up(keep)


def _write_bm25(directory: Path, lexical: bm25s.BM25) -> dict[str, dict[str, Any]]:
    lexical.save(directory / _BM25, show_progress=False)
    files: dict[str, dict[str, Any]] = {}
    for name in ("data", "indices", "indptr"):
        array = lexical.scores[name]
        path = directory / _BM25 / f"{name}.csc.index.npy"
        files[f"{_BM25}/{path.name}"] = described(path, array.shape, array.dtype.str)
    for name in ("vocab.index.json", "params.index.json"):
        files[f"{_BM25}/{name}"] = {"bytes": (directory / _BM25 / name).stat().st_size}
    return files


def _read_dense(directory: Path, manifest: dict[str, Any], texts: int) -> DenseIndex:
    """The dense index saved in ``dense/``, memory-mapped, of ``texts`` texts of the manifest's dimensions.

    Raises:
        DamagedStoreError: it is missing, damaged, or of other texts.
    """
    try:
        dense = load_dense_index(directory / _DENSE)
    except DenseIndexError as error:
        raise DamagedStoreError(f"{Path(error.path).relative_to(directory)}: {error.problem}") from None
    if dense.vectors.shape != (texts, manifest.get("dimensions")):
        raise DamagedStoreError(f"its dense index holds {list(dense.vectors.shape)} vectors, the catalog needs [{texts}, {manifest.get('dimensions')}]")
    return dense


def _read_bm25(directory: Path, manifest: dict[str, Any], documents: int) -> bm25s.BM25:
    """The BM25 index stored in ``directory``, its arrays memory-mapped, after checking them."""
    from toolpath.kernel.inside.tool_search import bm25s

    arrays = {name: mapped_array(directory, f"{_BM25}/{name}.csc.index.npy", manifest) for name in ("data", "indices", "indptr")}
    for name in ("vocab.index.json", "params.index.json"):
        file_entry(directory, f"{_BM25}/{name}", manifest)
    lexical = bm25s.BM25.load(directory / _BM25, mmap=True, allow_pickle=False, show_progress=False)
    built = bm25s.BM25(csc_backend="numpy")
    for parameter in ("k1", "b", "delta", "method", "idf_method", "dtype", "int_dtype", "backend"):
        if getattr(lexical, parameter) != getattr(built, parameter):
            raise DamagedStoreError(f"its BM25 {parameter} is {getattr(lexical, parameter)!r}, toolpath builds {getattr(built, parameter)!r}")
    if lexical.scores.get("num_docs") != documents:
        raise DamagedStoreError(f"its BM25 index has {lexical.scores.get('num_docs')!r} documents, the catalog {documents}")
    data, indices, indptr = arrays["data"], arrays["indices"], arrays["indptr"]
    vocabulary = lexical.vocab_dict
    if not isinstance(vocabulary, dict) or not all(isinstance(token_id, int) for token_id in vocabulary.values()):
        raise DamagedStoreError("its BM25 vocabulary is not a JSON object of token ids")
    if len(data) != len(indices) or indptr.ndim != 1 or len(indptr) < 1 or len(indptr) > len(vocabulary) + 1:
        raise DamagedStoreError(
            f"its BM25 arrays disagree: {len(data)} scores, {len(indices)} document numbers, {len(indptr)} offsets for {len(vocabulary)} tokens"
        )
    if indptr[0] != 0 or indptr[-1] != len(data) or (len(indptr) > 1 and np.any(np.diff(indptr) < 0)):
        raise DamagedStoreError("its BM25 offsets do not run from 0 to the number of scores")
    if len(indices) and (int(indices.min()) < 0 or int(indices.max()) >= documents):
        raise DamagedStoreError(f"its BM25 index names documents outside 0-{documents - 1}")
    return lexical


def build_progress(entries: int, texts: int, directory: Path | None) -> tqdm:
    """The progress bar of building an index (on standard error, on a terminal only, from
    :data:`PROGRESS_FROM_ENTRIES` entries), after one ``INFO`` record saying what is built and where
    it will be stored (from as many entries too). Its three steps: the BM25 index, the vectors, storing."""
    from tqdm import tqdm

    large = entries >= PROGRESS_FROM_ENTRIES
    if large:
        where = f" once; later processes load it from {directory}" if directory is not None else ""
        logger.info("building the skill index of %d entries (%d texts)%s", entries, texts, where)
    # disable=None: tqdm shows the bar on a terminal only, never in logs or pipes.
    # Three steps of seconds each: every one is drawn (mininterval=0), and the bar erased at the end.
    return tqdm(total=3, desc="skill index: BM25", unit="step", file=sys.stderr, disable=None if large else True, leave=False, mininterval=0, miniters=1)
