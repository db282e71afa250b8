"""Skill search, above planning: states and tools ranked by their affordances for a query (dense
embeddings + BM25, :mod:`.skills`), the embedders behind it (:mod:`.embedding`, the embedded model
:mod:`.embedding_model`, its ONNX query model :mod:`.onnx_embedding` and one-off export
:mod:`.onnx_export`) and the catalog vectors cached on disk (:mod:`.embedding_cache`). The modules
load on use (this file imports nothing): ``toolpath plan`` never pays for BM25 or the model.
"""
