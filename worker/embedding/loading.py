"""One entry point for every kind of model directory: which kind it is, its identity, a backend.

Invariants: the kind is decided by the directory alone — ``manifest.json``'s ``kind`` when it
says one (``"onnx"`` when it has none, as every ONNX manifest so far), else a model2vec-layout
directory without our manifest (``model.safetensors`` present) is ``"static"``. The identity —
the digest that goes into chunk ids — is read from the same place the vectors come from, so two
directories with the same identity give the same vectors. Every failure is a
:class:`~worker.embedding.manifest.ManifestError` whose one-line message names the directory.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import msgspec

from worker.embedding.backend import EmbeddingBackend
from worker.embedding.identity import read_model_head, variant_identity
from worker.embedding.manifest import (
    MANIFEST_NAME,
    ManifestError,
)
from worker.embedding.static import (
    StaticEmbedder,
    is_static_dir,
    read_static_manifest,
    static_identity,
)

ModelKind = Literal["onnx", "static"]


class _Kind(msgspec.Struct):
    """The one manifest field read to dispatch (the rest belongs to each kind's reader)."""

    kind: str = "onnx"


@dataclass(frozen=True)
class LoadedModel:
    backend: EmbeddingBackend
    kind: ModelKind
    identity: str  # short digest, as chunk ids and chunk events carry it
    variant: str  # "fp32", "int8" or "static"


def model_kind(directory: Path) -> ModelKind:
    path = directory / MANIFEST_NAME
    if path.is_file():
        try:
            kind = msgspec.json.decode(path.read_bytes(), type=_Kind).kind
        except msgspec.DecodeError as exc:
            raise ManifestError(f"{path}: {exc}") from exc
        if kind not in ("onnx", "static"):
            raise ManifestError(f"{path}: unknown model kind {kind!r} (onnx or static)")
        return "static" if kind == "static" else "onnx"
    if is_static_dir(directory):
        return "static"
    raise ManifestError(
        f"{str(directory)!r} holds no model (no {MANIFEST_NAME}, no model.safetensors); "
        "build one with `chunkstream model build` or `chunkstream model distill`"
    )


def model_identity(directory: Path, *, int8: bool = False) -> str | None:
    """The short identity of the model that ``load_model`` would load (None if there is none).

    With our manifest: its ``identity`` (for ONNX, with the variant: worker.embedding.identity),
    never a digest of serialised files. A model2vec directory without our manifest: the digest
    of its matrix, tokenizer and the config keys that change vectors. Raises
    :class:`~worker.embedding.identity.IdentityError` for a manifest that says no identity."""
    try:
        kind = model_kind(directory)
    except ManifestError:
        return None
    head = read_model_head(directory)
    if head is not None:
        return variant_identity(head, directory, int8=int8)
    if kind == "static":
        return static_identity(directory)[:16]
    return None


def load_model(
    directory: Path, *, int8: bool = False, intra_op_threads: int | None = None
) -> LoadedModel:
    """Load the directory's model as an embedding backend (``int8`` applies to ONNX models)."""
    if model_kind(directory) == "static":
        static = StaticEmbedder.load(directory)
        manifest = read_static_manifest(directory)
        if manifest is not None and manifest.dimension != static.dimension:
            raise ManifestError(
                f"{directory}: manifest says dimension {manifest.dimension}, "
                f"the matrix has {static.dimension}"
            )
        identity = model_identity(directory) or static.identity[:16]
        return LoadedModel(static, "static", identity, "static")
    from worker.embedding.embedder import OnnxEmbedder  # onnxruntime: only when it is needed

    onnx = OnnxEmbedder.load(directory, int8=int8, intra_op_threads=intra_op_threads)
    identity = model_identity(directory, int8=int8) or ""
    return LoadedModel(onnx, "onnx", identity, "int8" if int8 else "fp32")
