"""Embeddings: the ONNX model build (safetensors → ONNX, no torch), the embedder, its runtime.

Importing this package loads neither onnxruntime nor onnx/safetensors: ``OnnxEmbedder`` and
``intra_op_threads_for`` are imported from :mod:`worker.embedding.embedder` (which needs
onnxruntime) on first use, so pure code may read :mod:`worker.embedding.manifest` (the model
directory's layout and :data:`DEFAULT_MODEL_DIR`) without an inference runtime. The build lives
in :mod:`worker.embedding.build` and needs the `model` extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from worker.embedding.backend import EmbeddingBackend
from worker.embedding.manifest import DEFAULT_MODEL_DIR, Manifest, ManifestError, read_manifest

if TYPE_CHECKING:
    from worker.embedding.embedder import OnnxEmbedder, intra_op_threads_for

__all__ = [
    "DEFAULT_MODEL_DIR",
    "EmbeddingBackend",
    "Manifest",
    "ManifestError",
    "OnnxEmbedder",
    "intra_op_threads_for",
    "read_manifest",
]

_FROM_EMBEDDER = frozenset({"OnnxEmbedder", "intra_op_threads_for"})


def __getattr__(name: str) -> Any:
    if name in _FROM_EMBEDDER:
        from worker.embedding import embedder

        return getattr(embedder, name)
    raise AttributeError(f"module 'worker.embedding' has no attribute {name!r}")
