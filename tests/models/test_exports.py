"""The curated public surface of worker.models; changing it should be deliberate."""

from __future__ import annotations

import subprocess
import sys

import worker.models


def test_public_names() -> None:
    assert sorted(worker.models.__all__) == [
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
    for name in worker.models.__all__:
        assert getattr(worker.models, name) is not None


def test_serving_imports_do_not_need_the_build_tooling() -> None:
    # onnx and safetensors come with the `model` extra; a worker image may not have them.
    code = (
        "import sys, worker.models, worker.models.onnx_embedder, worker.inference.batcher;"
        "print(sorted(m for m in ('onnx', 'safetensors') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
