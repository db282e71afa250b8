"""Embeddings through ONNX Runtime: the shipped all-MiniLM-L6-v2 without torch.

Importing torch and sentence-transformers takes seconds and about 500 MB. :class:`OnnxEmbedder`
embeds queries and catalog texts with the same weights, exported once to ONNX
(:mod:`toolpath.planner.search.onnx_export`, run in a subprocess, the only place torch is imported) and
tokenised by the model's own ``tokenizer.json`` (``tokenizers``): a fresh process is ready to embed in
about 0.1 s, in about 100 MB. The vectors agree with sentence-transformers' to :data:`TOLERANCE`
(1 − cosine), so cached vectors stay valid.

The export is kept in ``<models>/<model>-<model version>/onnxruntime-<version>/``, one per model
version and runtime version, where ``<models>`` is ``$TOOLPATH_MODELS`` or else
``$TOOLPATH_HOME/models`` (:func:`models_directory`). It is made again when missing or damaged: a
file of another size or SHA-256 digest than written (the digest is checked when a file's
modification time is not the one recorded, and a file found as written has its new time recorded),
a model that does not load, or a vector of a
probe text that no longer matches the one sentence-transformers gave at export.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import json
import logging
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from toolpath.planner.search.embedding_model import DEFAULT_MODEL_ID, EmbedderUnavailableError, default_model_path, default_model_version
from toolpath.registry.storage import HOME_VARIABLE, default_home

logger = logging.getLogger(__name__)

#: Largest 1 − cosine allowed between this path and sentence-transformers (issue 19: the query path
#: must agree with the reference to 1e-5, so vectors cached by either stay valid).
TOLERANCE = 1e-5
#: Texts checked at export, and (the first) each time the export is loaded: a short query, one with
#: punctuation and digits, and one past the 256-token limit, so truncation is checked too.
PROBE_TEXTS = (
    "group similar molecules",
    "Is aspirin (CC(=O)Oc1ccccc1C(=O)O) drug-like? Check Lipinski's rule of 5.",
    " ".join(["compute the molecular descriptors of each compound in the table"] * 40),
)
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT_NAME = "sentence_embedding"
MODEL_FILE, DATA_FILE, MANIFEST_FILE = "model.onnx", "model.onnx.data", "manifest.json"
#: Environment variable naming where exported models are kept (default ``$TOOLPATH_HOME/models``):
#: one export can serve several homes, or live elsewhere than a read-only home.
MODELS_VARIABLE = "TOOLPATH_MODELS"
#: Threads of one query's forward pass: two where there are two cores. Measured with
#: benchmarks/bench_cli.py on 2 cores (300 MetaTool queries, two runs): idle, two threads gave p50
#: 8.2 and 10.0 ms against 12.4 and 14.2 ms with one; with a CPU-bound process running the two were
#: even (p50 11.7 vs 13.1 ms, then 15.0 vs 13.5 ms). Idle threads do not spin, so a busy machine
#: does not starve them.
QUERY_THREADS = min(2, os.cpu_count() or 1)
#: Texts per forward pass, sorted by length so batches pad little. On 600 MetaTool queries here 8,
#: 16, 32 and 64 took about the same time; peak memory grew with the batch (219, 234, 293, 305 MB),
#: and a search must stay under 250 MB (issue 37). Embedding many texts on every core
#: (:meth:`OnnxEmbedder.many_texts`, one thread a pass) 16 is as fast as 64 on the 100,000-tool
#: catalog of benchmarks/bench_scale_tools.py (385 and 383 texts per CPU second, texts of ~11
#: tokens) and faster on texts of mixed lengths, which pad less in small batches (MetaTool's 199
#: tool descriptions: 191 against 148; 600 of its queries: 136 against 113).
BATCH_SIZE = 16
#: Fewer texts than this in one call of :meth:`OnnxEmbedder.many_texts`'s embedder go through the
#: query session: opening the bulk session takes about 0.1 s, and embedding on it saves about a
#: tenth of the time.
BULK_FROM = 1024
#: Characters of text embedded per CPU second, one thread a pass: the basis of the expected time a
#: command announces before embedding many texts (:attr:`OnnxEmbedder.characters_per_second`). A
#: text's cost follows its length: measured here 17,400 on MetaTool's tool descriptions (91
#: characters on average), 19,700 on its queries (145) and 18,900 on the texts of
#: benchmarks/bench_scale_tools.py (49), i.e. 191, 136 and 385 texts per CPU second.
CHARACTERS_PER_CPU_SECOND = 18_000
#: Seconds the export may take (about 20 s here: loading torch, tracing, optimising, checking).
EXPORT_TIMEOUT_SECONDS = 600


class QueryModelError(EmbedderUnavailableError):
    """The ONNX query model cannot be exported or loaded; the message says why and what to do."""


def models_directory() -> Path:
    """``$TOOLPATH_MODELS``, else ``$TOOLPATH_HOME/models`` (:func:`toolpath.registry.storage.default_home`)."""
    return Path(os.environ.get(MODELS_VARIABLE) or default_home() / "models")


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity where the platform tells it, else the
    machine's count): the workers of :meth:`OnnxEmbedder.many_texts`."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1


def file_sha256(path: Path) -> str:
    """The SHA-256 digest of a file, as hex."""
    with open(path, "rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


def inference_session(model: Path, threads: int):
    """An ONNX Runtime CPU session of an exported model, as queries use it.

    Raises:
        ValueError: the file does not load (missing, damaged, or from an incompatible runtime).
    """
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    # Idle threads spinning for work burn a core between queries and fight a busy machine for it.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    # The export is optimised already (planner.onnx_export): loading skips the passes.
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    try:
        return onnxruntime.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    except Exception as error:  # onnxruntime's errors (InvalidProtobuf, Fail, ...) share no base but Exception
        raise ValueError(f"{model} does not load ({error})") from error


class OnnxEmbedder:
    """all-MiniLM-L6-v2 through ONNX Runtime; vectors equal sentence-transformers' to 1e-5.

    Args:
        models: where exports are kept; default :func:`models_directory`.
        threads: ONNX Runtime intra-op threads (default :data:`QUERY_THREADS`).

    Calling it maps ``n`` texts to an ``(n, 384)`` float32 array of unit rows. The model is loaded,
    and exported when needed, by :meth:`load` or on the first call.

    Raises (from :meth:`load` and the first call):
        QueryModelError: onnxruntime or tokenizers is not installed, the export directory cannot be
            written, or the export fails (its error quoted) or does not load.
    """

    model_id = DEFAULT_MODEL_ID

    def __init__(self, models: str | os.PathLike[str] | None = None, threads: int = QUERY_THREADS):
        self.models = Path(models) if models is not None else None
        self.threads = threads
        self._session = None
        self._tokenizer = None
        self._dimension = 0
        self._loading: threading.Thread | None = None
        self._load_error: Exception | None = None

    @property
    def characters_per_second(self) -> float:
        """About how many characters of text :meth:`many_texts` embeds per second on an idle
        machine (:data:`CHARACTERS_PER_CPU_SECOND` on each core): for announcing long runs."""
        return CHARACTERS_PER_CPU_SECOND * available_cores()

    @property
    def directory(self) -> Path:
        """Where this model version's export for the installed ONNX Runtime is kept.

        Raises:
            QueryModelError: onnxruntime is not installed.
        """
        try:
            import onnxruntime
        except ImportError as error:
            raise QueryModelError(f"onnxruntime is not installed; install toolpath with its dependencies: pip install -e . ({error})") from error
        models = self.models if self.models is not None else models_directory()
        return models / f"{DEFAULT_MODEL_ID.replace('/', '--')}-{default_model_version()}" / f"onnxruntime-{onnxruntime.__version__}"

    def load(self, background: bool = False) -> None:
        """Load the model now (exporting it first when needed), or start loading it in a thread
        with ``background=True`` and return at once: the next call waits for it. A command that
        will embed a query starts this before its other work; the two overlap on another core."""
        if self._session is not None or self._loading is not None:
            return
        if not background:
            self._load()
            return
        self._loading = threading.Thread(target=self._load_recording_error, name="toolpath-query-model", daemon=True)
        self._loading.start()
        # A process that exits while the thread is inside ONNX Runtime aborts ("terminate called
        # without an active exception", exit -6): one that refuses its input at once must wait.
        atexit.register(self._loading.join)

    def _load_recording_error(self) -> None:
        try:
            self._load()
        except Exception as error:  # raised in the caller's thread by the next call, as a load there would
            self._load_error = error

    def _load(self) -> None:
        directory = self.directory
        if self._opened(directory):
            return
        with _export_lock(directory):
            if self._opened(directory):  # another process exported it while this one waited
                return
            _refuse_if_failed_before(directory)
            _export(directory)  # missing or damaged: export again, and trust what that export checked
            try:
                self._open(directory)
            except (OSError, ValueError, KeyError) as error:
                raise QueryModelError(f"the query model exported to {directory} does not load: {error}. Delete that directory to export it again") from error

    def _opened(self, directory: Path) -> bool:
        """Whether the export in ``directory`` loaded (:meth:`_open`); ``False`` when it is missing or damaged."""
        try:
            self._open(directory)
        except (OSError, ValueError, KeyError):
            return False
        return True

    def _open(self, directory: Path) -> None:
        """Load the export in ``directory`` and check it on the first probe text.

        Raises:
            OSError, KeyError: a file is missing or the manifest incomplete.
            ValueError: the manifest is not JSON, a file has another size or digest than written,
                the model does not load, or its vector of the probe text differs from the recorded one.
        """
        try:
            from tokenizers import Tokenizer
        except ImportError as error:
            raise QueryModelError(f"tokenizers is not installed; install toolpath with its dependencies: pip install -e . ({error})") from error
        manifest = json.loads((directory / MANIFEST_FILE).read_text(encoding="utf-8"))
        modified = {}
        for name, written in manifest["files"].items():
            modified[name] = _time_if_as_written(directory / name, written)
            if modified[name] is None:
                raise ValueError(f"{directory / name} is not the file written (its size or SHA-256 digest differs)")
        session = inference_session(directory / MODEL_FILE, self.threads)
        tokenizer = Tokenizer.from_file(str(default_model_path() / "tokenizer.json"))
        # tokenizer.json pads and truncates to 128 tokens; sentence-transformers pads to the longest
        # text and truncates at the model's max_seq_length: do the same.
        tokenizer.no_padding()
        tokenizer.enable_truncation(manifest["max_tokens"])
        probe = manifest["probes"][0]
        distance = 1 - float(_forward(session, tokenizer, [probe["text"]])[0] @ np.asarray(probe["vector"], dtype=np.float32))
        if not distance <= TOLERANCE:
            raise ValueError(f"{directory / MODEL_FILE} gives 1 - cosine = {distance:.2e} on its probe text, over {TOLERANCE:g}")
        self._session, self._tokenizer, self._dimension = session, tokenizer, int(manifest["dimension"])
        if any(modified[name] != written.get("mtime_ns") for name, written in manifest["files"].items()):
            _record_times(directory, manifest, modified)

    def _ready(self) -> None:
        """Wait for a background load, or load now; raise what loading raised."""
        if self._loading is not None:
            self._loading.join()
            self._loading = None
            if self._load_error is not None:
                raise self._load_error
        if self._session is None:
            self._load()

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        self._ready()
        if not texts:
            return np.zeros((0, self._dimension), dtype=np.float32)
        return _forward(self._session, self._tokenizer, texts)

    @contextlib.contextmanager
    def many_texts(self, workers: int | None = None) -> Iterator[Callable[[Sequence[str]], np.ndarray]]:
        """An embedder for a long run of texts (a catalog's first embedding), for the ``with`` block.

        It gives the vectors this embedder gives, using every core: ``workers`` forward passes run at
        once (default :func:`available_cores`), each on one thread of a second ONNX Runtime session,
        in batches of :data:`BATCH_SIZE` texts of similar lengths. Measured on this 2-core
        machine under load (4,096 texts of benchmarks/bench_scale_tools.py, eight rounds alternating
        with the query path), two single-threaded passes at once embedded 378 texts per CPU second
        (median) against 340 for one pass on two threads (whose threads wait on each other), and
        246 against 227 per second of wall time; threads sharing one session and a session each
        were even, so the weights are loaded once. The model is bound by arithmetic (about 90
        GFLOP/s a core, near this CPU's peak): graph optimisations at load, flushing denormals and
        larger batches changed nothing measurable. The session (about 70 MB) is opened by the first call of at least
        :data:`BULK_FROM` texts (smaller calls go through the query session) and closed when the
        block ends. An interrupt (``KeyboardInterrupt``) lets the passes under way finish (a
        fraction of a second) and cancels the rest.

        Raises:
            QueryModelError: as loading does (on entering).
        """
        self._ready()
        workers = available_cores() if workers is None else workers
        if workers < 2:  # one core: nothing to run alongside
            yield self
            return
        bulk = _ManyTexts(self, workers)
        try:
            yield bulk
        finally:
            bulk.close()


def _time_if_as_written(path: Path, written: dict) -> int | None:
    """The modification time (ns) of ``path`` when it is the file the manifest's entry ``written``
    describes, else ``None``: its size, and its SHA-256 digest unless its modification time is still
    the one recorded (as Git trusts an unchanged stat). Hashing the 90 MB of weights costs a
    command about 0.07 s (benchmarks/bench_scale_tools.py: a tenth of a fresh search); a write
    changes the time."""
    status = path.stat()
    if status.st_size != written["bytes"]:
        return None
    if status.st_mtime_ns == written.get("mtime_ns") or file_sha256(path) == written["sha256"]:
        return status.st_mtime_ns
    return None


def _record_times(directory: Path, manifest: dict, modified: dict[str, int]) -> None:
    """Record in the manifest the modification times of files whose digests were checked because
    their times had changed (a copied or restored models directory), so later loads trust the stat
    again instead of hashing every time. Written to a sibling file and renamed into place; a
    directory that cannot be written keeps its manifest (loads then hash, as before)."""
    updated = {**manifest, "files": {name: {**written, "mtime_ns": modified[name]} for name, written in manifest["files"].items()}}
    from toolpath.registry.stored_directories import replace_file

    with contextlib.suppress(OSError):
        # The mode of the manifest it replaces: a models directory may serve other users.
        replace_file(directory / MANIFEST_FILE, json.dumps(updated), stat.S_IMODE((directory / MANIFEST_FILE).stat().st_mode))


class _ManyTexts:
    """The embedder :meth:`OnnxEmbedder.many_texts` gives (see there)."""

    def __init__(self, embedder: OnnxEmbedder, workers: int):
        self.embedder = embedder
        self.workers = workers
        self._session = None
        self._pool: ThreadPoolExecutor | None = None

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        if len(texts) < BULK_FROM:
            return self.embedder(texts)
        if self._session is None:
            self._session = inference_session(self.embedder.directory / MODEL_FILE, threads=1)
            self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="toolpath-embedding")
        return _forward(self._session, self.embedder._tokenizer, texts, self._pool)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        self._session = self._pool = None


def _forward(session, tokenizer, texts: Sequence[str], pool: ThreadPoolExecutor | None = None) -> np.ndarray:
    """``(len(texts), d)`` unit vectors, in the order of ``texts``.

    Texts are run in batches of :data:`BATCH_SIZE` texts of similar token counts, each padded to its
    longest (padding is masked out of the mean, so a text's vector does not depend on its batch);
    with a ``pool``, as many batches at once as it has threads (an interrupt cancels the batches
    not yet started).
    """
    encodings = tokenizer.encode_batch(list(texts))
    order = sorted(range(len(encodings)), key=lambda index: len(encodings[index].ids))
    batches = [order[start : start + BATCH_SIZE] for start in range(0, len(order), BATCH_SIZE)]

    def run(rows: list[int]) -> np.ndarray:
        width = max(len(encodings[index].ids) for index in rows)
        feed = {name: np.zeros((len(rows), width), dtype=np.int64) for name in INPUT_NAMES}
        for row, index in enumerate(rows):
            encoding = encodings[index]
            for name, values in zip(INPUT_NAMES, (encoding.ids, encoding.attention_mask, encoding.type_ids)):
                feed[name][row, : len(values)] = values
        return session.run(None, feed)[0]

    vectors: np.ndarray | None = None
    for rows, batch in zip(batches, pool.map(run, batches) if pool is not None else map(run, batches)):
        if vectors is None:
            vectors = np.empty((len(texts), batch.shape[1]), dtype=np.float32)
        vectors[rows] = batch
    assert vectors is not None  # texts is never empty here: OnnxEmbedder answers [] itself
    return vectors


#: Packages whose versions decide whether an export can run; a failed export is tried again only
#: when one of them changed (or its record is deleted).
_EXPORT_PACKAGES = ("torch", "onnx", "sentence-transformers", "transformers")


def _export_environment() -> dict[str, str | None]:
    import importlib.metadata

    versions: dict[str, str | None] = {}
    for package in _EXPORT_PACKAGES:
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = None
    return versions


def _failure_record(directory: Path) -> Path:
    return directory.with_name(directory.name + ".failed")


def _refuse_if_failed_before(directory: Path) -> None:
    """Raise the recorded error when exporting into ``directory`` failed with the packages installed
    now: an export that cannot run would otherwise cost every command its 20 s again.

    Raises:
        QueryModelError: the recorded failure, saying how to try again.
    """
    record = _failure_record(directory)
    try:
        failure = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if isinstance(failure, dict) and failure.get("environment") == _export_environment():
        raise QueryModelError(
            f"{failure.get('error')} (recorded in {record}: the export is tried again when torch, onnx or sentence-transformers change, or when that file is deleted)"
        )


@contextlib.contextmanager
def _export_lock(directory: Path) -> Iterator[None]:
    """Hold an exclusive lock beside ``directory`` (``<directory>.lock``), so that processes starting
    together on a new machine export once: the others wait, then load that export. Without a writable
    parent directory there is no lock, and the export says why it cannot write."""
    try:
        directory.parent.mkdir(parents=True, exist_ok=True)
        lock = open(directory.with_name(directory.name + ".lock"), "a")
    except OSError:
        yield
        return
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        yield


def _export(directory: Path) -> None:
    """Export the model into ``directory`` (replacing what is there) in a subprocess.

    The export is written to a sibling directory and renamed into place, so a reader never sees
    half of it; when another process renames its export there first, that one is kept.

    A failed export is recorded beside the directory (:func:`_refuse_if_failed_before`).

    Raises:
        QueryModelError: the directory cannot be written, or the export fails (its error quoted).
    """
    try:
        directory.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".export-", dir=directory.parent))
    except OSError as error:
        raise QueryModelError(
            f"cannot write the ONNX query model under {directory.parent}: {error.strerror or error}; set {MODELS_VARIABLE} (or {HOME_VARIABLE}) to a writable directory"
        ) from error
    logger.info("exporting the embedding model to ONNX for fast queries (once per model and onnxruntime version; about 20 s)")
    try:
        # The same interpreter imports toolpath as this process does (its installed distribution).
        environment = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        command = [sys.executable, "-m", "toolpath.planner.search.onnx_export", str(staging)]
        try:
            completed = subprocess.run(command, capture_output=True, text=True, timeout=EXPORT_TIMEOUT_SECONDS, env=environment)
        except subprocess.TimeoutExpired:
            raise QueryModelError(
                f"exporting the query model to ONNX took over {EXPORT_TIMEOUT_SECONDS} s and was stopped; try again on a less busy machine"
            ) from None
        if completed.returncode != 0:
            lines = completed.stderr.strip().splitlines()
            reason = lines[-1] if lines else f"exit status {completed.returncode}"
            error = QueryModelError(
                f"exporting the query model to ONNX failed ({reason}); run `python -m toolpath.planner.search.onnx_export DIRECTORY` to see the whole error"
            )
            with contextlib.suppress(OSError):  # the record only saves time: without it, the next command tries again
                _failure_record(directory).write_text(json.dumps({"error": str(error), "environment": _export_environment()}), encoding="utf-8")
            raise error
        _failure_record(directory).unlink(missing_ok=True)
        shutil.rmtree(directory, ignore_errors=True)
        # When another process's export got there first, the rename fails and that export is kept:
        # it is checked on loading like this one.
        with contextlib.suppress(OSError):
            staging.rename(directory)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
