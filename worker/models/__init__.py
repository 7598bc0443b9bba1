"""The run-time model room: what a model directory is (manifest, identity, reference) and the
embedders that serve it (ONNX, static), behind one backend protocol.

This room is the contract at the bottom: it imports nothing of the worker above it (no
settings, batcher or metrics; :mod:`worker.inference.serving` wires models into those) and nothing
of the offline model-making room (:mod:`worker.model_making`: build, distill, training corpus),
which imports it. Importing this package loads neither onnxruntime nor tokenizers: the embedders are
imported from their modules on first use, so pure code may read :mod:`worker.models.manifest` and
:mod:`worker.models.reference` without an inference runtime.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from worker.models.backend import EmbeddingBackend
from worker.models.manifest import (
    Manifest,
    ManifestError,
    StaticManifest,
    read_any_manifest,
    read_manifest,
)
from worker.models.reference import ModelRef, describe, find, find_retrieval, search_path

if TYPE_CHECKING:
    from worker.models.loading import load_backend
    from worker.models.onnx_embedder import OnnxEmbedder
    from worker.models.static import StaticEmbedder
    from worker.models.static_layout import StaticModelError

__all__ = [
    "EmbeddingBackend",
    "Manifest",
    "ManifestError",
    "ModelRef",
    "OnnxEmbedder",
    "StaticEmbedder",
    "StaticManifest",
    "StaticModelError",
    "describe",
    "find",
    "find_retrieval",
    "load_backend",
    "read_any_manifest",
    "read_manifest",
    "search_path",
]

# Public names that live in modules with heavy imports, loaded when first asked for.
_LAZY = {
    "OnnxEmbedder": "onnx_embedder",
    "load_backend": "loading",
    "StaticEmbedder": "static",
    "StaticModelError": "static_layout",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'worker.models' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"worker.models.{module}"), name)
