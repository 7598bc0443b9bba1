"""``manifest.json``: what a model directory holds, how it was made, and file digests.

The manifest is written last, so a directory with a manifest is a complete build; the digests let
a cache (tests, CI, a container image) reuse a build only when every file is byte-identical.
``identity`` says which model this is (:mod:`worker.models.identity`): equal for two builds of
the same source by the same builder, whatever onnx/onnxruntime serialised the files.

One manifest type per model kind, told apart by the ``kind`` tag ("onnx" or "static"), and one
reader (:func:`read_any_manifest`) that decodes the file once into the right one: every other
module takes what it needs from that value (:mod:`worker.models.reference`) instead of decoding
the file again with a struct of its own.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Literal

import msgspec

# The default models' directory names, looked for on the model search path
# (worker.models.reference.search_path): the transformer `chunkstream model build` makes (the
# retrieval model) and the static model `chunkstream model distill` makes from it (the boundary
# model of the embedding strategies).
DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"
DEFAULT_STATIC_NAME = "all-MiniLM-L6-v2-static"

MANIFEST_NAME = "manifest.json"
MODEL_NAME = "model.onnx"
INT8_MODEL_NAME = "model.int8.onnx"
TOKENIZER_NAME = "tokenizer.json"

# The model's interface: three int64 [batch, sequence] inputs, one float32 [batch, dim] output.
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT_NAME = "sentence_embedding"

# Bump whenever the graph or the quantisation recipe changes: a cached build made by an older
# builder then no longer matches and is rebuilt. 2: attention in the shape onnxruntime's
# transformer optimizer fuses; 3: the hidden state 2-D, dense layers fused with their bias.
BUILDER_VERSION = 3


class BuildOptions(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    builder_version: int
    opset: int
    int8: bool
    # How model.int8.onnx was made, or None when it was not requested.
    quantization: str | None = None


class Manifest(
    msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag_field="kind", tag="onnx"
):
    """``manifest.json`` of an ONNX build (``chunkstream model build``)."""

    source: str
    source_sha256: str  # digest of the source model.safetensors
    architecture: str
    dimension: int
    num_layers: int
    max_seq_length: int
    pooling: Literal["mean", "cls"]
    normalization: Literal["l2"]
    files: dict[str, str]  # file name in the directory → sha256 hex digest
    build: BuildOptions
    # What the vectors depend on, digested (worker.models.identity.onnx_identity). None only
    # in manifests written before it existed: those directories are rebuilt, never trusted.
    identity: str | None = None


class StaticManifest(
    msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag_field="kind", tag="static"
):
    """``manifest.json`` of a static model made here (``chunkstream model distill``); a
    model2vec directory made elsewhere has none."""

    identity: str  # worker.models.static.static_identity(): what determines the vectors
    dimension: int
    # The chunkers' window is max_seq_length minus the encoder's two special tokens; a static
    # model adds none, so this is max_length + 2 and the window is max_length tokens.
    max_seq_length: int
    source: str  # the encoder it was distilled from (its manifest's source and model digest)
    corpus: list[str]  # the pinned training files, "name sha256"
    recipe: str  # how the vectors were made (bench/static_bench.py has the variants)
    distiller_version: int
    files: dict[str, str]  # file name → sha256


AnyManifest = Manifest | StaticManifest


class ManifestError(ValueError):
    """A model directory has no usable manifest, or its files do not match it."""


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_manifest(directory: Path, manifest: AnyManifest) -> None:
    data = msgspec.json.format(msgspec.json.encode(manifest, order="sorted"), indent=2)
    (directory / MANIFEST_NAME).write_bytes(data + b"\n")


def read_any_manifest(directory: Path) -> AnyManifest | None:
    """The directory's manifest, decoded once into its kind's type; None when it has none."""
    path = directory / MANIFEST_NAME
    try:
        data = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        return msgspec.json.decode(data, type=AnyManifest)
    except msgspec.DecodeError as exc:
        raise ManifestError(
            f"{path}: {exc} (made by another chunkstream version? rebuild it with "
            "`chunkstream model build` or `chunkstream model distill`)"
        ) from exc


def read_manifest(directory: Path) -> Manifest:
    """The manifest of an ONNX build (refused for any other directory)."""
    manifest = read_any_manifest(directory)
    if manifest is None:
        raise ManifestError(
            f"{str(directory)!r} has no {MANIFEST_NAME}; build it with `chunkstream model build`"
        )
    if not isinstance(manifest, Manifest):
        raise ManifestError(f"{directory} holds a static model, not an ONNX build")
    return manifest


def mismatched_files(directory: Path, manifest: Manifest) -> list[str]:
    """Names of listed files that are missing or whose digest differs (empty when intact)."""
    bad = []
    for name, expected in sorted(manifest.files.items()):
        path = directory / name
        if not path.is_file() or sha256_file(path) != expected:
            bad.append(name)
    return bad
