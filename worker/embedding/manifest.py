"""``manifest.json``: what a built model directory holds, how it was built, and file digests.

The manifest is written last, so a directory with a manifest is a complete build; the digests let
a cache (tests, CI, a container image) reuse a build only when every file is byte-identical.
``identity`` says which model this is (:mod:`worker.embedding.identity`): equal for two builds of
the same source by the same builder, whatever onnx/onnxruntime serialised the files.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Literal

import msgspec

# Where `chunkstream model build` puts the model unless told otherwise (relative to the cwd).
DEFAULT_MODEL_DIR = Path(".cache/models/all-MiniLM-L6-v2")
# Where `chunkstream model distill` (and scripts/bootstrap) put the static model distilled from
# it: the worker's default boundary model (relative to the cwd).
DEFAULT_STATIC_DIR = Path(".cache/models/all-MiniLM-L6-v2-static")

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


class Manifest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
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
    # What the vectors depend on, digested (worker.embedding.identity.onnx_identity). None only
    # in manifests written before it existed: those directories are rebuilt, never trusted.
    identity: str | None = None
    # Every model manifest says its kind; static token-vector directories say "static".
    kind: Literal["onnx"] = "onnx"


class ManifestError(ValueError):
    """A model directory has no usable manifest, or its files do not match it."""


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_manifest(directory: Path, manifest: Manifest) -> None:
    data = msgspec.json.format(msgspec.json.encode(manifest, order="sorted"), indent=2)
    (directory / MANIFEST_NAME).write_bytes(data + b"\n")


def read_manifest(directory: Path) -> Manifest:
    path = directory / MANIFEST_NAME
    try:
        return msgspec.json.decode(path.read_bytes(), type=Manifest)
    except FileNotFoundError:
        raise ManifestError(
            f"{str(directory)!r} has no {MANIFEST_NAME}; build it with `chunkstream model build`"
        ) from None
    except msgspec.DecodeError as exc:
        raise ManifestError(f"{path}: {exc}") from exc


def mismatched_files(directory: Path, manifest: Manifest) -> list[str]:
    """Names of listed files that are missing or whose digest differs (empty when intact)."""
    bad = []
    for name, expected in sorted(manifest.files.items()):
        path = directory / name
        if not path.is_file() or sha256_file(path) != expected:
            bad.append(name)
    return bad
