"""Export the shipped all-MiniLM-L6-v2 to ONNX, for embedding queries without torch.

Run in its own process by :mod:`toolpath.planner.search.onnx_embedding` (``python -m toolpath.planner.search.onnx_export DIRECTORY``),
so torch and sentence-transformers (seconds to import, about 500 MB) never load in the process that
searches. It writes into DIRECTORY:

- ``model.onnx`` and ``model.onnx.data``: the transformer with mean pooling and L2 normalisation
  (the three modules of the sentence-transformers model) as one graph, optimised by ONNX Runtime
  (basic and extended graph optimisations, done once here), its weights in the data file. Inputs
  ``input_ids``, ``attention_mask`` and ``token_type_ids`` (``(batch, tokens)`` int64); output
  ``sentence_embedding`` (``(batch, 384)`` float32, unit rows). Weights kept apart are memory-mapped
  when loaded: half the peak memory and a quarter of the load time of weights inside the graph.
- ``manifest.json``: what was exported (model id and package version, the torch, ONNX Runtime and
  opset versions, the tokenizer's maximum length, the files' sizes, SHA-256 digests and modification times) and sentence-transformers'
  vectors of :data:`toolpath.planner.search.onnx_embedding.PROBE_TEXTS`, which the query process checks against.

The export is checked before it is kept: ONNX Runtime's vectors of the probe texts, one by one and as
one padded batch, loaded as the query process loads them, must agree with sentence-transformers' to
:data:`toolpath.planner.search.onnx_embedding.TOLERANCE` (1 − cosine).

Exit status: 0 when written; 1 with the reason on standard error otherwise.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from pathlib import Path

import numpy as np

from toolpath.errors import ToolpathError
from toolpath.planner.search.embedding_model import DEFAULT_MODEL_ID, default_model_path, default_model_version
from toolpath.planner.search.onnx_embedding import (
    DATA_FILE,
    INPUT_NAMES,
    MANIFEST_FILE,
    MODEL_FILE,
    OUTPUT_NAME,
    PROBE_TEXTS,
    TOLERANCE,
    file_sha256,
    inference_session,
)

#: ONNX opset of the graph; ONNX Runtime 1.16 and later run it.
OPSET = 18


class ExportError(ToolpathError, RuntimeError):
    """The model cannot be exported, or the export disagrees with sentence-transformers."""


def export(directory: Path) -> None:
    """Write the model files and ``manifest.json`` into ``directory`` (which must exist).

    Raises:
        ExportError: the shipped model is not Transformer → Pooling → Normalize, or the exported
            graph's vectors disagree with sentence-transformers' beyond the tolerance.
    """
    import onnxruntime
    import torch
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(default_model_path()), device="cpu")
    modules = [type(module).__name__ for module in model]
    if modules != ["Transformer", "Pooling", "Normalize"]:
        raise ExportError(f"the shipped model's modules are {modules}; the ONNX export covers Transformer, Pooling (mean) and Normalize only")
    # The pooling is written as a mean below; the check against the model itself catches any other.
    encoder = model[0].auto_model.eval()

    class SentenceEmbedding(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = encoder

        def forward(self, input_ids, attention_mask, token_type_ids):
            tokens = self.encoder(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(tokens.dtype)
            mean = (tokens * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(mean, p=2, dim=1)

    # `preprocess` replaced `tokenize` in sentence-transformers 6 (which warns on the old name).
    tokenize = getattr(model, "preprocess", None) or model.tokenize
    traced = directory / "traced.onnx"
    with warnings.catch_warnings():
        # The tracer's notes on Python conditions in transformers' attention code: the exported graph
        # is checked against the model below instead.
        warnings.simplefilter("ignore")
        features = tokenize(list(PROBE_TEXTS[:2]))
        torch.onnx.export(
            SentenceEmbedding(),
            tuple(features[name] for name in INPUT_NAMES),
            str(traced),
            input_names=list(INPUT_NAMES),
            output_names=[OUTPUT_NAME],
            dynamic_axes={**{name: {0: "batch", 1: "tokens"} for name in INPUT_NAMES}, OUTPUT_NAME: {0: "batch"}},
            opset_version=OPSET,
            dynamo=False,  # the TorchScript exporter needs no onnxscript; the graph is checked below
        )
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(directory / MODEL_FILE)
    options.add_session_config_entry("session.optimized_model_external_initializers_file_name", DATA_FILE)
    options.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "1024")
    onnxruntime.InferenceSession(str(traced), options, providers=["CPUExecutionProvider"])
    traced.unlink()

    reference = model.encode(list(PROBE_TEXTS), normalize_embeddings=True, convert_to_numpy=True)
    session = inference_session(directory / MODEL_FILE, threads=1)
    padded = tokenize(list(PROBE_TEXTS))
    batch = session.run(None, {name: padded[name].numpy() for name in INPUT_NAMES})[0]
    single = np.concatenate(
        [session.run(None, {name: value.numpy() for name, value in tokenize([text]).items() if name in INPUT_NAMES})[0] for text in PROBE_TEXTS]
    )
    for label, vectors in (("one by one", single), ("as a padded batch", batch)):
        distance = float((1 - (vectors * reference).sum(axis=1)).max())
        if distance > TOLERANCE:
            raise ExportError(f"the exported model's vectors ({label}) differ from sentence-transformers' by 1 - cosine = {distance:.2e}, over {TOLERANCE:g}")
    manifest = {
        "model_id": DEFAULT_MODEL_ID,
        "model_version": default_model_version(),
        "onnxruntime": onnxruntime.__version__,
        "torch": torch.__version__,
        "opset": OPSET,
        "max_tokens": model.get_max_seq_length(),
        "dimension": int(reference.shape[1]),
        "files": {name: _file_record(directory / name) for name in (MODEL_FILE, DATA_FILE)},
        "probes": [{"text": text, "vector": vector.tolist()} for text, vector in zip(PROBE_TEXTS, reference)],
    }
    (directory / MANIFEST_FILE).write_text(json.dumps(manifest), encoding="utf-8")


def _file_record(path: Path) -> dict:
    """What loading checks a written file against: its size, SHA-256 digest and modification time."""
    status = path.stat()
    return {"bytes": status.st_size, "sha256": file_sha256(path), "mtime_ns": status.st_mtime_ns}


def main(argv: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else argv
    if len(arguments) != 1 or not os.path.isdir(arguments[0]):
        print("usage: python -m toolpath.planner.search.onnx_export DIRECTORY (an existing directory)", file=sys.stderr)
        return 2
    try:
        export(Path(arguments[0]))
    except (ExportError, ImportError, OSError, RuntimeError) as error:
        print(f"{type(error).__name__}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
