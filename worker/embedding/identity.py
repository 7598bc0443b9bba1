"""Model identity: one digest that changes exactly when the vectors a model directory yields
can change, and never because a build tool serialised the same model differently.

Invariants:
- ``manifest.json``'s ``identity`` field is the one source of truth. The worker reads it (via
  :func:`read_model_head`, which understands every kind of model directory: ``kind`` "onnx",
  the default, or "static") and never re-hashes model files to decide who the model is.
- For an ONNX build the identity is a digest over what determines the vectors: the source
  weights (sha256 of ``model.safetensors``), the tokenizer (sha256 of ``tokenizer.json``), the
  encoder's configuration (every field of :class:`~worker.embedding.source.BertConfig`), the
  pooling and normalisation, the token window (``max_seq_length``), the builder version and
  the opset the graph is written in. Not in it: the bytes of ``model.onnx`` (they carry the
  onnx library's serialisation and version stamps), the versions of onnx, onnxruntime or the
  weights package, the source's path or package name.
- The variant is part of what a worker embeds with: fp32 and int8 give different vectors, so
  :func:`variant_identity` keeps them apart. The int8 recipe is fixed per builder version
  (``BUILDER_VERSION`` is bumped whenever it changes), so the builder version covers it.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Literal

import msgspec

from worker.embedding.manifest import MANIFEST_NAME
from worker.embedding.source import BertConfig

# Bump if the material below changes shape: every identity (and chunk id) changes with it.
IDENTITY_SCHEME = "chunkstream-model-identity/1"

ModelKind = Literal["onnx", "static"]
Variant = Literal["fp32", "int8"]


class ModelHead(msgspec.Struct, frozen=True):
    """The fields every kind of model manifest shares (others are ignored here)."""

    kind: ModelKind = "onnx"
    identity: str | None = None


class IdentityError(ValueError):
    """A model directory whose manifest does not say who the model is."""


def onnx_identity(
    *,
    weights_sha256: str,
    tokenizer_sha256: str,
    config: BertConfig,
    pooling: str,
    normalization: str,
    max_seq_length: int,
    builder_version: int,
    opset: int,
) -> str:
    """sha256 hex over the canonical JSON of everything that determines an ONNX build's vectors."""
    material = {
        "scheme": IDENTITY_SCHEME,
        "kind": "onnx",
        "weights_sha256": weights_sha256,
        "tokenizer_sha256": tokenizer_sha256,
        "config": dataclasses.asdict(config),
        "pooling": pooling,
        "normalization": normalization,
        "max_seq_length": max_seq_length,
        "builder_version": builder_version,
        "opset": opset,
    }
    return hashlib.sha256(msgspec.json.encode(material, order="sorted")).hexdigest()


def read_model_head(directory: Path) -> ModelHead | None:
    """``kind`` and ``identity`` of the manifest in ``directory``; None when there is none."""
    path = directory / MANIFEST_NAME
    try:
        return msgspec.json.decode(path.read_bytes(), type=ModelHead)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except msgspec.DecodeError as exc:
        raise IdentityError(f"{path}: {exc}") from exc


def variant_identity(head: ModelHead, directory: Path, *, int8: bool) -> str:
    """The 16-hex identity a worker puts into chunk-id fingerprints and the model-info metric.

    ONNX: the manifest's identity plus the variant the worker loads. Static: its identity as
    it stands (a static directory holds one variant; its builder put that into the identity)."""
    if not head.identity:
        raise IdentityError(
            f"{directory / MANIFEST_NAME} has no identity (built by an older chunkstream): "
            "rebuild it with `chunkstream model build`"
        )
    if head.kind == "static":
        return head.identity[:16]
    variant: Variant = "int8" if int8 else "fp32"
    return hashlib.sha256(f"{head.identity}/{variant}".encode()).hexdigest()[:16]
