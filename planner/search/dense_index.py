"""Dense indexes for skill search: each entry's best cosine similarity with a query, exact or approximate.

An *entry* (a state or a tool of :class:`toolpath.planner.search.skills.SkillIndex`) has one or more
texts. Their unit vectors are the rows of one ``(texts, d)`` float32 array, entry ``i`` owning the
rows from ``first_text[i]`` up to ``first_text[i + 1]`` (the last entry up to the end); an entry's
dense similarity is the largest cosine of its texts with the query.

* :class:`ExactDenseIndex` scores every text (one pass over the vectors): what skill search has
  always done, kept for indexes of fewer than :data:`APPROXIMATE_FROM_TEXTS` texts so that their
  results do not change at all.
* :class:`ApproximateDenseIndex` asks an HNSW graph (Malkov & Yashunin, "Efficient and robust
  approximate nearest neighbor search using Hierarchical Navigable Small World graphs", TPAMI 2020;
  faiss's ``IndexHNSWSQ``) for the texts nearest the query, its vectors stored as 8-bit codes, then
  re-scores every text of those texts' entries exactly against the float32 vectors. A candidate's
  similarity is therefore exact; only *which* entries are candidates is approximate, and every entry
  left out scores at most the candidates' :attr:`DenseCandidates.floor` (as far as the graph found).

faiss-cpu was chosen over usearch and hnswlib on the 100,000-tool catalog of
``benchmarks/bench_scale_tools.py`` (307,380 texts; ``benchmarks/bench_dense_index.py``, figures in
docs/benchmarks.md). With 32 links per node all three found the exact top 10 entries of all 200
queries from 64 candidate texts on, in 1.0-1.4 ms a query (p50, re-scoring included). usearch 2.26
builds fastest (55 s against faiss's 129 s on 2 cores), but a process that imports it before
onnxruntime (the query embedder) crashes as onnxruntime loads: usearch's wheel links a C++ runtime
of its own. hnswlib 0.8 has no wheel for Python 3.11 (it compiles from source) and reads its whole
file back (0.75 s and 559 MiB, where faiss takes 18 ms and 80 MiB). faiss maps the 8-bit codes from
the file (``IO_FLAG_MMAP_IFC``) and reads only the links, checks every link as it reads them (a
damaged graph is refused, not crashed on), and answers one query in the calling thread (its OpenMP
threads work only while building). Float16 codes found no more than 8-bit ones and take twice the
space (320 against 202 MB).

Saved indexes (:meth:`ExactDenseIndex.save`, :func:`load_dense_index`) are a directory of
``dense_index.json`` (what was saved; each file's size, modification time and CRC-32),
``vectors.npy``, ``first_text.npy`` and, for the approximate index, ``texts.faiss``. Loading
memory-maps the vectors and the graph's codes, so a process holds only the pages a search touches.
"""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from toolpath.registry.storage import StoreError

#: Indexes of at least this many texts are approximate (:func:`build_dense_index`). One exact pass
#: over 100,000 texts of 384 dimensions takes about 13 ms on this project's 2-core machine (40 ms
#: over the 307,380 texts of 100,000 tools), most of the 20 ms a search may take (issue 57), while
#: the graph answers in about 1 ms; the MetaTool benchmark (1,199 texts), the shipped catalogs and
#: 10,000 generated tools (37,290 texts) stay below, so their results do not change.
APPROXIMATE_FROM_TEXTS = 100_000
#: The graph's links per node ("M"), the breadth of the search that inserts a node ("efConstruction")
#: and of a query ("efSearch"; a query for more texts searches as broadly as it asks). Measured with
#: 1,001 queries on the generated catalogs of ``benchmarks/bench_scale_tools.py``: with 16 links and
#: a breadth of 256, one query at 100,000 tools (and three at 10,000) found 1 of the 10 best entries
#: (the search stays in a crowd of near-identical texts: "validate ... for the night shift" of every
#: object); with 32 links and a breadth of 512, every query found all 10 at both sizes, for about
#: 1 ms a query and half as long again to build as 16 links.
CONNECTIVITY = 32
EXPANSION_ADD = 128
EXPANSION_SEARCH = 512

_MANIFEST = "dense_index.json"
_VECTORS = "vectors.npy"
_FIRST_TEXT = "first_text.npy"
_GRAPH = "texts.faiss"
_FORMAT = 1
_PURPOSE = "dense index"
_REMEDY = "Delete the directory; the index is built again from the embeddings"


class DenseIndexError(StoreError):
    """A saved dense index that cannot be used (missing, truncated, from another format, or not
    matching its manifest); ``path`` is the file at fault. A caller that keeps indexes beside the
    embedding cache can build the index again instead."""

    def __init__(self, path: Path | str, problem: str):
        super().__init__(path, _PURPOSE, problem, _REMEDY)


@dataclass(frozen=True)
class DenseCandidates:
    """The entries a dense index found nearest a query, with their exact similarity.

    Attributes:
        entries: ``(m,)`` int64 entry positions, increasing.
        similarity: ``(m,)`` float32, each entry's best cosine over all its texts, exact.
        best_text: ``(m,)`` int64, the row of the text reaching it (the first such, by row).
        floor: the lowest exact similarity of the texts the search returned: an entry not among
            ``entries`` scores at most this, as far as the approximate search found (``-inf`` when
            ``complete``).
        complete: every entry is among ``entries`` (the exact index, or a search for every text).
    """

    entries: np.ndarray
    similarity: np.ndarray
    best_text: np.ndarray
    floor: float
    complete: bool


class ExactDenseIndex:
    """Every text scored for every query.

    Args:
        vectors: ``(texts, d)`` float32 unit vectors (an array or a read-only memory map; kept, not copied).
        first_text: ``(entries,)`` the first row of each entry: 0 first, strictly increasing, below ``texts``.

    Raises:
        ValueError: vectors that are not a 2-D float32 array, or ``first_text`` not as above.
    """

    approximate = False

    def __init__(self, vectors: np.ndarray, first_text: np.ndarray | list[int]):
        self.vectors, self.first_text = _checked(vectors, first_text)

    def __len__(self) -> int:
        """Number of entries."""
        return len(self.first_text)

    def scores(self, query_vector: np.ndarray, entries: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Each entry's best cosine with ``query_vector`` (a unit ``(d,)`` vector) and the row of
        the text reaching it: ``((m,) float32, (m,) int64)`` for ``entries`` (positions; ``None``: all)."""
        if entries is None:
            # Not `@`: a BLAS matrix-vector product wakes OpenBLAS's threads, which then spin and
            # starve the embedding model's threads on the next query (2.5x slower with torch on 2
            # cores); einsum stays in one thread.
            similarities = np.einsum("ij,j->i", self.vectors, query_vector)
            return group_maxima(similarities, self.first_text)
        entries = np.asarray(entries, dtype=np.int64)
        if not len(entries):
            return np.zeros(0, dtype=np.float32), np.zeros(0, dtype=np.int64)
        starts = self.first_text[entries]
        lengths = self._ends()[entries] - starts
        local_starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
        rows = np.repeat(starts - local_starts, lengths) + np.arange(int(lengths.sum()))
        best, position = group_maxima(np.einsum("ij,j->i", self.vectors[rows], query_vector), local_starts)
        return best, rows[position]

    def nearest(self, query_vector: np.ndarray, texts: int) -> DenseCandidates:
        """Every entry, scored exactly (``texts`` is for the approximate index's sake)."""
        similarity, best_text = self.scores(query_vector)
        return DenseCandidates(np.arange(len(self.first_text)), similarity, best_text, float("-inf"), True)

    def save(self, directory: str | os.PathLike[str]) -> None:
        """Write the index into ``directory`` (created when missing; files of an earlier index are
        replaced, the manifest last, so an interrupted save leaves a directory that refuses to load).

        Raises:
            OSError: the directory cannot be written.
        """
        _save(Path(directory), self, {})

    def _ends(self) -> np.ndarray:
        return np.append(self.first_text[1:], len(self.vectors))


class ApproximateDenseIndex(ExactDenseIndex):
    """An HNSW graph of the texts (faiss, 8-bit codes) for the candidates, then exact re-scoring of
    their entries (see the module docstring). Build with :meth:`build` or :func:`build_dense_index`,
    or load with :func:`load_dense_index`.

    Args:
        vectors, first_text: as :class:`ExactDenseIndex`.
        graph: a ``faiss.IndexHNSW`` of the texts, in row order, by inner product.
    """

    approximate = True

    def __init__(self, vectors: np.ndarray, first_text: np.ndarray | list[int], graph):
        super().__init__(vectors, first_text)
        self._graph = graph
        self._owner = np.repeat(np.arange(len(self.first_text)), np.diff(np.append(self.first_text, len(self.vectors))))

    @classmethod
    def build(cls, vectors: np.ndarray, first_text: np.ndarray | list[int], threads: int | None = None) -> ApproximateDenseIndex:
        """Build the graph: about a minute per 100,000 texts on 2 cores (``threads``: faiss's
        OpenMP threads while building, default all cores; 1 builds the same graph on every run).

        Raises:
            ValueError: as :class:`ExactDenseIndex`.
        """
        import faiss

        vectors, first_text = _checked(vectors, first_text)
        # Inner product of unit vectors is their cosine; 8-bit codes over each dimension's range.
        graph = faiss.IndexHNSWSQ(vectors.shape[1], faiss.ScalarQuantizer.QT_8bit, CONNECTIVITY, faiss.METRIC_INNER_PRODUCT)
        graph.hnsw.efConstruction = EXPANSION_ADD
        contiguous = np.ascontiguousarray(vectors)
        before = faiss.omp_get_max_threads()
        if threads is not None:
            faiss.omp_set_num_threads(threads)
        try:
            if len(contiguous):
                graph.train(contiguous)
                graph.add(contiguous)
        finally:
            faiss.omp_set_num_threads(before)
        return cls(vectors, first_text, graph)

    def nearest(self, query_vector: np.ndarray, texts: int) -> DenseCandidates:
        """The entries of the ``texts`` texts nearest ``query_vector`` by the graph, each scored
        exactly over all its texts; every entry when ``texts`` reaches the number of texts."""
        if texts >= len(self.vectors):
            return super().nearest(query_vector, texts)
        import faiss

        parameters = faiss.SearchParametersHNSW(efSearch=max(EXPANSION_SEARCH, texts))
        _, found = self._graph.search(np.ascontiguousarray(query_vector, dtype=np.float32)[None, :], texts, params=parameters)
        rows = found[0][found[0] >= 0].astype(np.int64)
        if not len(rows):
            return DenseCandidates(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32), np.zeros(0, dtype=np.int64), float("inf"), False)
        floor = float(np.einsum("ij,j->i", self.vectors[np.sort(rows)], query_vector).min())
        entries = np.unique(self._owner[rows])
        similarity, best_text = self.scores(query_vector, entries)
        return DenseCandidates(entries, similarity, best_text, floor, False)

    def save(self, directory: str | os.PathLike[str]) -> None:
        """As :meth:`ExactDenseIndex.save`, the graph too."""
        import faiss

        _save(Path(directory), self, {_GRAPH: lambda path: faiss.write_index(self._graph, str(path))})


DenseIndex = ExactDenseIndex | ApproximateDenseIndex


def build_dense_index(vectors: np.ndarray, first_text: np.ndarray | list[int], approximate: bool | None = None) -> DenseIndex:
    """The dense index of these vectors: approximate from :data:`APPROXIMATE_FROM_TEXTS` texts on
    (``approximate`` forces either), else exact.

    Raises:
        ValueError: as :class:`ExactDenseIndex`.
    """
    if approximate is None:
        approximate = len(vectors) >= APPROXIMATE_FROM_TEXTS
    return ApproximateDenseIndex.build(vectors, first_text) if approximate else ExactDenseIndex(vectors, first_text)


def load_dense_index(directory: str | os.PathLike[str]) -> DenseIndex:
    """The index saved in ``directory``, its vectors and the graph's codes memory-mapped (read-only).

    Every file must be there with the size the manifest records and the arrays of the recorded
    shape and type; a file whose modification time is not the recorded one must also have the
    recorded CRC-32 (reading it all; as the ONNX model's files are checked, see
    ``planner/search/onnx_embedding.py``), and faiss checks every link of the graph as it reads it.
    A file damaged in place without its modification time changing goes unnoticed, as in any cache:
    a damaged code changes only which candidates are found (they are re-scored from the vectors).

    Raises:
        DenseIndexError: naming the file that is missing, damaged, or of another format.
    """
    directory = Path(directory)
    manifest_path = directory / _MANIFEST
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DenseIndexError(manifest_path, "there is no saved dense index (its manifest is missing)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise DenseIndexError(manifest_path, f"the manifest cannot be read ({error})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != _FORMAT:
        found = manifest.get("format") if isinstance(manifest, dict) else None
        raise DenseIndexError(manifest_path, f"the manifest is of format {found!r}, not {_FORMAT}")
    try:
        approximate, texts, entries, dimensions = bool(manifest["approximate"]), int(manifest["texts"]), int(manifest["entries"]), int(manifest["dimensions"])
        files = {name: dict(record) for name, record in manifest["files"].items()}
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise DenseIndexError(manifest_path, f"the manifest lacks a field or has one of the wrong type ({error!r})") from None
    expected = [_VECTORS, _FIRST_TEXT, *([_GRAPH] if approximate else [])]
    for name in expected:
        path = directory / name
        if name not in files:
            raise DenseIndexError(manifest_path, f"the manifest does not record {name}")
        try:
            size = path.stat().st_size
        except OSError as error:
            raise DenseIndexError(path, f"it cannot be read ({error.strerror or error})") from None
        if size != files[name].get("bytes"):
            raise DenseIndexError(path, f"it has {size:,} bytes where {files[name].get('bytes')!r} were saved (cut short or overwritten)")
        if path.stat().st_mtime_ns != files[name].get("mtime_ns") and _crc32(path) != files[name].get("crc32"):
            raise DenseIndexError(path, "it was changed after it was saved (its CRC-32 differs from the one saved)")
    vectors = _mapped(directory / _VECTORS, np.float32, (texts, dimensions))
    first_text = np.array(_mapped(directory / _FIRST_TEXT, np.int64, (entries,)))
    try:
        first_text = _checked(vectors, first_text)[1]
    except ValueError as error:
        raise DenseIndexError(directory / _FIRST_TEXT, str(error)) from None
    if not approximate:
        return ExactDenseIndex(vectors, first_text)
    return ApproximateDenseIndex(vectors, first_text, _read_graph(directory / _GRAPH, texts, dimensions))


def _read_graph(path: Path, texts: int, dimensions: int):
    import faiss

    try:
        graph = faiss.read_index(str(path), faiss.IO_FLAG_MMAP_IFC)
    except RuntimeError as error:
        # faiss says where in its reader it failed; the last line says what.
        raise DenseIndexError(path, f"faiss cannot read it ({str(error).strip().splitlines()[-1]})") from None
    if not isinstance(graph, faiss.IndexHNSW) or graph.ntotal != texts or graph.d != dimensions:
        raise DenseIndexError(
            path,
            f"it holds a {type(graph).__name__} of {graph.ntotal} vectors of {graph.d} dimensions where the manifest records an HNSW graph of {texts} of {dimensions}",
        )
    return graph


def _mapped(path: Path, dtype: type, shape: tuple[int, ...]) -> np.ndarray:
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as error:
        raise DenseIndexError(path, f"it is not a NumPy array file ({error})") from None
    if array.dtype != np.dtype(dtype) or array.shape != shape:
        raise DenseIndexError(path, f"it holds {array.dtype} {array.shape} where the manifest records {np.dtype(dtype)} {shape}")
    return array


def _save(directory: Path, index: ExactDenseIndex, graph_writers: dict[str, Callable[[Path], None]]) -> None:
    """Write each file under a temporary name and move it in place, the manifest last: until the
    new manifest is there, the directory refuses to load."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / _MANIFEST).unlink(missing_ok=True)
    writers: dict[str, Callable[[Path], None]] = {
        _VECTORS: lambda path: np.save(path, np.asarray(index.vectors, dtype=np.float32), allow_pickle=False),
        _FIRST_TEXT: lambda path: np.save(path, index.first_text, allow_pickle=False),
        **graph_writers,
    }
    files: dict[str, dict] = {}
    for name, write in writers.items():
        # np.save adds ".npy" to a name without it, so the temporary name keeps the suffix.
        partial = directory / f".partial-{name}"
        write(partial)
        os.replace(partial, directory / name)
        status = (directory / name).stat()
        files[name] = {"bytes": status.st_size, "mtime_ns": status.st_mtime_ns, "crc32": _crc32(directory / name)}
    manifest = {
        "format": _FORMAT,
        "approximate": index.approximate,
        "texts": len(index.vectors),
        "entries": len(index.first_text),
        "dimensions": int(index.vectors.shape[1]),
        "files": files,
    }
    if index.approximate:
        import faiss

        manifest["graph"] = {
            "library": f"faiss {faiss.__version__}",
            "kind": "IndexHNSWSQ QT_8bit",
            "connectivity": CONNECTIVITY,
            "expansion_add": EXPANSION_ADD,
        }
    partial = directory / f".{_MANIFEST}.partial"
    partial.write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    os.replace(partial, directory / _MANIFEST)


def _crc32(path: Path) -> int:
    checksum = 0
    with open(path, "rb") as file:
        while chunk := file.read(1 << 22):
            checksum = zlib.crc32(chunk, checksum)
    return checksum


def _checked(vectors: np.ndarray, first_text: np.ndarray | list[int]) -> tuple[np.ndarray, np.ndarray]:
    if not isinstance(vectors, np.ndarray) or vectors.ndim != 2 or vectors.dtype != np.float32:
        raise ValueError(f"vectors must be a (texts, d) float32 array, got {getattr(vectors, 'dtype', type(vectors).__name__)} {getattr(vectors, 'shape', '')}")
    first_text = np.asarray(first_text, dtype=np.int64)
    if first_text.ndim != 1 or (len(first_text) and (first_text[0] != 0 or first_text[-1] >= len(vectors) or (np.diff(first_text) <= 0).any())):
        raise ValueError(f"first_text must start at 0 and increase strictly below the {len(vectors)} texts (every entry has a text)")
    if len(vectors) and not len(first_text):
        raise ValueError(f"{len(vectors)} texts belong to no entry: first_text is empty")
    return vectors, first_text


def group_maxima(values: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per group of consecutive ``values`` beginning at ``starts`` (increasing, the first 0): the
    largest value, and the position of the first value reaching it."""
    best = np.maximum.reduceat(values, starts)
    # reduceat has no argmax counterpart: mark every value equal to its group's best, keep the first.
    owner = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(values))))
    is_best = np.flatnonzero(values == best[owner])
    position = np.empty(len(starts), dtype=np.int64)
    position[owner[is_best][::-1]] = is_best[::-1]
    return best, position
