"""The identity an ONNX build writes into its manifest (the rule: :mod:`worker.models.identity`)."""

from __future__ import annotations

import dataclasses
import hashlib

import msgspec

from worker.model_making.source import BertConfig
from worker.models.identity import IDENTITY_SCHEME


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
