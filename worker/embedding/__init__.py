"""Embeddings: the ONNX model build (safetensors → ONNX, no torch) and its embedder, static
models (one vector per token: distilled here, or any model2vec directory) and theirs, and the
runtime that serves either through the batcher.

Importing this package loads neither onnxruntime, tokenizers nor onnx/safetensors: the
embedders and the loader are imported from their modules on first use, so pure code may read
:mod:`worker.embedding.manifest` (the model directory's layout and :data:`DEFAULT_MODEL_DIR`)
without an inference runtime. The build lives in :mod:`worker.embedding.build` and needs the
`model` extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from worker.embedding.backend import EmbeddingBackend
from worker.embedding.manifest import DEFAULT_MODEL_DIR, Manifest, ManifestError, read_manifest

if TYPE_CHECKING:
    from worker.embedding.embedder import OnnxEmbedder, intra_op_threads_for
    from worker.embedding.loading import LoadedModel, load_model, model_identity
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

# Public names that live in modules with heavy imports, loaded when first asked for.
_LAZY = {
    "OnnxEmbedder": "embedder",
    "intra_op_threads_for": "embedder",
    "LoadedModel": "loading",
    "load_model": "loading",
    "model_identity": "loading",
    "StaticEmbedder": "static",
    "StaticModelError": "static",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'worker.embedding' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"worker.embedding.{module}"), name)
