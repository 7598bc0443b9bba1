"""Model identity: one digest that changes exactly when the vectors a model directory yields
can change, and never because a build tool serialised the same model differently.

Invariants:
- ``manifest.json``'s ``identity`` field is the one source of truth. The worker reads it once,
  with the rest of the manifest (:func:`worker.models.reference.describe`), and never re-hashes
  model files to decide who the model is (a model2vec directory made elsewhere has no manifest:
  its identity is the digest of its matrix, tokenizer and decisive config keys).
- For an ONNX build the identity is a digest over what determines the vectors
  (:func:`worker.model_making.onnx_identity.onnx_identity`): the source weights (sha256 of
  ``model.safetensors``), the tokenizer (sha256 of ``tokenizer.json``), the encoder's
  configuration, the pooling and normalisation, the token window (``max_seq_length``), the
  builder version and the opset the graph is written in. Not in it: the bytes of
  ``model.onnx`` (they carry the onnx library's serialisation and version stamps), the versions
  of onnx, onnxruntime or the weights package, the source's path or package name.
- The variant is part of what a worker embeds with: fp32 and int8 give different vectors, so
  :func:`variant_identity` keeps them apart. The int8 recipe is fixed per builder version
  (``BUILDER_VERSION`` is bumped whenever it changes), so the builder version covers it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Literal

from worker.models.manifest import MANIFEST_NAME, AnyManifest, StaticManifest

# Bump if the material of an identity changes shape: every identity (and chunk id) changes.
IDENTITY_SCHEME = "chunkstream-model-identity/1"

Variant = Literal["fp32", "int8"]


class IdentityError(ValueError):
    """A model directory whose manifest does not say who the model is."""


def variant_identity(manifest: AnyManifest, directory: Path, *, int8: bool) -> str:
    """The 16-hex identity a worker puts into chunk-id fingerprints and the model-info metric.

    ONNX: the manifest's identity plus the variant the worker loads. Static: its identity as
    it stands (a static directory holds one variant; its builder put that into the identity)."""
    if not manifest.identity:
        raise IdentityError(
            f"{directory / MANIFEST_NAME} has no identity (built by an older chunkstream): "
            "rebuild it with `chunkstream model build`"
        )
    if isinstance(manifest, StaticManifest):
        return manifest.identity[:16]
    variant: Variant = "int8" if int8 else "fp32"
    return hashlib.sha256(f"{manifest.identity}/{variant}".encode()).hexdigest()[:16]
