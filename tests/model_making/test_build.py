"""The graph builder on tiny random BERTs: ONNX output against the numpy reference pass."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from safetensors.numpy import load_file

from tests.support.numpy_reference import reference_embedding
from tests.support.tiny_bert import HIDDEN, write_tiny_model
from worker.model_making.build import build_model, ensure_model
from worker.model_making.source import read_source
from worker.models import tokenization
from worker.models.manifest import (
    INT8_MODEL_NAME,
    MODEL_NAME,
    TOKENIZER_NAME,
    mismatched_files,
    read_manifest,
    sha256_file,
)
from worker.models.onnx_embedder import OnnxEmbedder

SENTENCES = [
    "A tiny model still has to attend only to real tokens.",
    "Short one.",
    "Padding must not leak into the mean: this sentence is a good deal longer than the others.",
    "Ünïcödé and 数字 and emoji 🙂 go through the same word pieces.",
]


def reference(source_dir: Path, texts: list[str], max_length: int) -> np.ndarray:
    source = read_source(source_dir)
    weights = load_file(str(source.weights_path))
    tokenizer = tokenization.load_tokenizer(source.tokenizer_path, max_length)
    return np.stack(
        [
            reference_embedding(
                weights, source.config, tokenizer.encode(t).ids, pooling=source.pooling
            )
            for t in texts
        ]
    )


@pytest.fixture(scope="module")
def tiny_built(tiny_source: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tiny-built") / "model"
    build_model(tiny_source, out, int8=True)
    return out


def test_graph_passes_the_checker_with_dynamic_axes(tiny_built: Path) -> None:
    model = onnx.load(str(tiny_built / MODEL_NAME))
    onnx.checker.check_model(model, full_check=True)
    inputs = {i.name: i for i in model.graph.input}
    assert list(inputs) == ["input_ids", "attention_mask", "token_type_ids"]
    for value in inputs.values():
        assert value.type.tensor_type.elem_type == onnx.TensorProto.INT64
        dims = value.type.tensor_type.shape.dim
        assert [d.dim_param for d in dims] == ["batch", "sequence"]
    (output,) = model.graph.output
    assert output.name == "sentence_embedding"
    assert output.type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    assert [d.dim_param or d.dim_value for d in output.type.tensor_type.shape.dim] == [
        "batch",
        HIDDEN,
    ]
    ops = {node.op_type for node in model.graph.node}
    assert "Erf" in ops  # exact GELU, not the tanh approximation


def test_onnxruntime_fuses_every_dense_layer_with_its_bias(
    tiny_built: Path, tmp_path: Path
) -> None:
    """The encoder is 2-D ([batch·sequence, hidden]) so each MatMul + bias Add becomes one Gemm;
    a 3-D hidden state (builder version 2) left 6 separate bias Adds per layer."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    ort.InferenceSession(str(tiny_built / MODEL_NAME), options, providers=["CPUExecutionProvider"])
    optimized = onnx.load(str(tmp_path / "optimized.onnx"))
    initializers = {i.name for i in optimized.graph.initializer}
    ops = [node.op_type for node in optimized.graph.node]
    layers = read_manifest(tiny_built).num_layers
    assert ops.count("Gemm") == 6 * layers  # Q, K, V, attention output, FFN up and down
    # What MatMuls remain are the per-head products, none against a weight.
    for node in optimized.graph.node:
        if node.op_type == "MatMul":
            assert not initializers & set(node.input), node


def test_onnx_matches_the_numpy_reference_in_a_padded_batch(
    tiny_source: Path, tiny_built: Path
) -> None:
    embedder = OnnxEmbedder.load(tiny_built)
    got = embedder.embed(SENTENCES)
    want = reference(tiny_source, SENTENCES, embedder.max_seq_length)
    assert got.shape == (len(SENTENCES), HIDDEN)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(got, want, atol=2e-5)


def test_batch_and_single_embeddings_agree(tiny_built: Path) -> None:
    embedder = OnnxEmbedder.load(tiny_built)
    batched = embedder.embed(SENTENCES)
    single = np.vstack([embedder.embed([s]) for s in SENTENCES])
    np.testing.assert_allclose(batched, single, atol=2e-5)


def test_truncation_keeps_exactly_max_seq_length_tokens(
    tiny_source: Path, tiny_built: Path
) -> None:
    embedder = OnnxEmbedder.load(tiny_built)
    long_text = " ".join(["word"] * 500)
    assert embedder.token_lengths([long_text, "two words"]) == [48, 4]
    got = embedder.embed([long_text])
    want = reference(tiny_source, [long_text], 48)
    np.testing.assert_allclose(got, want, atol=2e-5)


def test_cls_pooling_and_prefixed_weights_build(source_dir: Path, tmp_path: Path) -> None:
    source = write_tiny_model(
        tmp_path / "src", source_dir / "tokenizer.json", pooling="cls", prefix="bert."
    )
    build_model(source, tmp_path / "out")
    got = OnnxEmbedder.load(tmp_path / "out").embed(SENTENCES)
    np.testing.assert_allclose(got, reference(source, SENTENCES, 48), atol=2e-5)


def test_manifest_describes_the_build(tiny_source: Path, tiny_built: Path) -> None:
    manifest = read_manifest(tiny_built)
    assert manifest.architecture == "BertModel"
    assert manifest.dimension == HIDDEN
    assert manifest.max_seq_length == 48
    assert (manifest.pooling, manifest.normalization) == ("mean", "l2")
    assert set(manifest.files) == {MODEL_NAME, TOKENIZER_NAME, INT8_MODEL_NAME}
    assert manifest.build.int8
    assert manifest.build.quantization is not None
    assert "per_channel=True" in manifest.build.quantization
    assert manifest.source_sha256 == sha256_file(tiny_source / "model.safetensors")
    assert mismatched_files(tiny_built, manifest) == []
    raw = json.loads((tiny_built / "manifest.json").read_text())
    assert raw["files"][MODEL_NAME] == sha256_file(tiny_built / MODEL_NAME)


def test_int8_variant_runs_and_stays_close(tiny_built: Path) -> None:
    fp32 = OnnxEmbedder.load(tiny_built).embed(SENTENCES)
    int8 = OnnxEmbedder.load(tiny_built, int8=True).embed(SENTENCES)
    model = onnx.load(str(tiny_built / INT8_MODEL_NAME))
    assert any(node.op_type == "MatMulInteger" for node in model.graph.node)
    assert float(np.mean(np.sum(fp32 * int8, axis=1))) > 0.9


def test_ensure_model_reuses_an_intact_build_and_rebuilds_a_tampered_one(
    tiny_source: Path, tmp_path: Path
) -> None:
    out = tmp_path / "model"
    ensure_model(tiny_source, out)
    built_at = (out / MODEL_NAME).stat().st_mtime_ns
    ensure_model(tiny_source, out)
    assert (out / MODEL_NAME).stat().st_mtime_ns == built_at

    (out / TOKENIZER_NAME).write_text("{}")
    ensure_model(tiny_source, out)
    assert mismatched_files(out, read_manifest(out)) == []

    manifest = ensure_model(tiny_source, out, int8=True)  # asking for more than was built
    assert INT8_MODEL_NAME in manifest.files


def test_measured_encodings_are_reused_and_bounded(
    tiny_built: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from worker.models import onnx_embedder as embedder_module

    monkeypatch.setattr(embedder_module, "ENCODING_CACHE_SIZE", 3)
    embedder = OnnxEmbedder.load(tiny_built)
    cold = embedder.embed(SENTENCES)
    assert embedder.token_lengths(SENTENCES) == [len(x) for x in _ids(embedder, SENTENCES)]
    assert len(embedder._measured) == 3  # bounded: the oldest measurement was dropped
    warm = embedder.embed(SENTENCES)  # three from the cache, one tokenised again
    assert len(embedder._measured) == 0
    np.testing.assert_array_equal(cold, warm)


def _ids(embedder: OnnxEmbedder, texts: list[str]) -> list[list[int]]:
    return [e.ids for e in embedder._tokenizer.encode_batch(texts)]
