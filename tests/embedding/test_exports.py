"""The curated public surface of worker.embedding; changing it should be deliberate."""

from __future__ import annotations

import subprocess
import sys

import worker.embedding


def test_public_names() -> None:
    assert sorted(worker.embedding.__all__) == [
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
    for name in worker.embedding.__all__:
        assert getattr(worker.embedding, name) is not None


def test_serving_imports_do_not_need_the_build_tooling() -> None:
    # onnx and safetensors come with the `model` extra; a worker image may not have them.
    code = (
        "import sys, worker.embedding, worker.embedding.embedder, worker.batcher;"
        "print(sorted(m for m in ('onnx', 'safetensors') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
