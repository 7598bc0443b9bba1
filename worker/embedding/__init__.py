"""Embeddings: the ONNX model build (safetensors → ONNX, no torch) and its embedder, static
models (one vector per token: distilled here, or any model2vec directory) and theirs.

Importing this package loads neither onnx nor safetensors (the `model` extra): the build lives in
:mod:`worker.embedding.build` and is imported only by whoever builds.
"""

from worker.embedding.backend import EmbeddingBackend
from worker.embedding.embedder import OnnxEmbedder, intra_op_threads_for
from worker.embedding.loading import LoadedModel, load_model, model_identity
from worker.embedding.manifest import DEFAULT_MODEL_DIR, Manifest, ManifestError, read_manifest
from worker.embedding.static import StaticEmbedder, StaticModelError

__all__ = [
    "DEFAULT_MODEL_DIR",
    "EmbeddingBackend",
    "LoadedModel",
    "Manifest",
    "ManifestError",
    "OnnxEmbedder",
    "StaticEmbedder",
    "StaticModelError",
    "intra_op_threads_for",
    "load_model",
    "model_identity",
    "read_manifest",
]
