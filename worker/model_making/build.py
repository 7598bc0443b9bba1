"""``chunkstream model build``: a sentence-transformers directory → an ONNX model directory.

No PyTorch: the weights are read with safetensors' numpy loader and the graph is written
operator by operator (:mod:`worker.model_making.graph`). The output directory holds ``model.onnx``,
``tokenizer.json`` (copied byte for byte), optionally ``model.int8.onnx``, and ``manifest.json``.
A build goes to a temporary sibling directory and is moved into place at the end, so a reader
never sees a half-written model.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import onnx
from safetensors.numpy import load_file

from worker.model_making.graph import OPSET, build_graph
from worker.model_making.onnx_identity import onnx_identity
from worker.model_making.source import (
    ModelSource,
    default_source_dir,
    default_source_label,
    read_source,
)
from worker.model_making.staging import staged_directory
from worker.models.manifest import (
    BUILDER_VERSION,
    INT8_MODEL_NAME,
    MODEL_NAME,
    TOKENIZER_NAME,
    BuildOptions,
    Manifest,
    ManifestError,
    mismatched_files,
    read_manifest,
    sha256_file,
    write_manifest,
)

# Per-channel scales: per-tensor int8 loses ~4 points of cosine on MiniLM because a few output
# channels of the FFN down-projections carry outliers that flatten every other channel's scale.
INT8_RECIPE = "onnxruntime.quantize_dynamic(per_channel=True, weight_type=QInt8, op_types=[MatMul])"


def build_model(source_dir: Path | None, out_dir: Path, *, int8: bool = False) -> Manifest:
    """Build (or rebuild) the model directory ``out_dir`` from ``source_dir``."""
    source = read_source(source_dir if source_dir is not None else default_source_dir())
    with staged_directory(out_dir) as staging:
        return _build_into(source, staging, int8=int8)


def ensure_model(source_dir: Path | None, out_dir: Path, *, int8: bool = False) -> Manifest:
    """Reuse ``out_dir`` if it is an intact, current build of the same source, else build it."""
    source = read_source(source_dir if source_dir is not None else default_source_dir())
    try:
        manifest = read_manifest(out_dir)
    except ManifestError:
        return build_model(source.directory, out_dir, int8=int8)
    fresh = (
        manifest.build.builder_version == BUILDER_VERSION
        and (manifest.build.int8 or not int8)  # an int8 build also serves fp32 callers
        and manifest.identity == source_identity(source)
        and not mismatched_files(out_dir, manifest)
    )
    return manifest if fresh else build_model(source.directory, out_dir, int8=int8)


def source_identity(source: ModelSource) -> str:
    """The identity a build of ``source`` by this builder gets (no graph is built for it)."""
    return onnx_identity(
        weights_sha256=sha256_file(source.weights_path),
        tokenizer_sha256=sha256_file(source.tokenizer_path),
        config=source.config,
        pooling=source.pooling,
        normalization="l2",
        max_seq_length=source.max_seq_length,
        builder_version=BUILDER_VERSION,
        opset=OPSET,
    )


def _build_into(source: ModelSource, directory: Path, *, int8: bool) -> Manifest:
    weights = load_file(str(source.weights_path))
    model = build_graph(
        weights, source.config, pooling=source.pooling, name=source.directory.name or "encoder"
    )
    onnx.checker.check_model(model, full_check=True)
    onnx.save_model(model, str(directory / MODEL_NAME))
    shutil.copyfile(source.tokenizer_path, directory / TOKENIZER_NAME)

    files = [MODEL_NAME, TOKENIZER_NAME]
    if int8:
        quantize_int8(directory / MODEL_NAME, directory / INT8_MODEL_NAME)
        files.append(INT8_MODEL_NAME)

    manifest = Manifest(
        source=default_source_label(source.directory),
        source_sha256=sha256_file(source.weights_path),
        architecture=source.config.architecture,
        dimension=source.config.hidden_size,
        num_layers=source.config.num_layers,
        max_seq_length=source.max_seq_length,
        pooling=source.pooling,
        normalization="l2",
        files={name: sha256_file(directory / name) for name in files},
        build=BuildOptions(
            builder_version=BUILDER_VERSION,
            opset=OPSET,
            int8=int8,
            quantization=INT8_RECIPE if int8 else None,
        ),
        identity=source_identity(source),
    )
    write_manifest(directory, manifest)
    return manifest


def quantize_int8(model_path: Path, out_path: Path) -> None:
    """Dynamic int8 quantisation of the MatMul weights with one scale per output channel."""
    # Imported here: the quantisation tooling is heavy and only the --int8 build needs it.
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # quantize_dynamic logs a root-logger warning suggesting its shape-inference pre-pass. That
    # pass cannot infer this graph's dynamic shapes symbolically (it raises), and the graph needs
    # nothing from it: the MatMul weights are plain initializers already. So the hint is dropped.
    root = logging.getLogger()
    root.addFilter(_not_the_preprocess_hint)
    try:
        quantize_dynamic(
            model_path,
            out_path,
            per_channel=True,
            weight_type=QuantType.QInt8,
            op_types_to_quantize=["MatMul"],
        )
    finally:
        root.removeFilter(_not_the_preprocess_hint)


def _not_the_preprocess_hint(record: logging.LogRecord) -> bool:
    return not record.getMessage().startswith("Please consider")
