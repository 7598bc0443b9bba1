"""Embeddings: the ONNX model build (safetensors → ONNX, no torch) and the embedder.

Importing this package loads neither onnx nor safetensors (the `model` extra): the build lives in
:mod:`worker.embedding.build` and is imported only by whoever builds.
"""

from worker.embedding.backend import EmbeddingBackend
from worker.embedding.embedder import OnnxEmbedder, intra_op_threads_for
from worker.embedding.manifest import DEFAULT_MODEL_DIR, Manifest, ManifestError, read_manifest

__all__ = [
    "DEFAULT_MODEL_DIR",
    "EmbeddingBackend",
    "Manifest",
    "ManifestError",
    "OnnxEmbedder",
    "intra_op_threads_for",
    "read_manifest",
]
