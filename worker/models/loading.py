"""A model's backend from its reference: the one place that turns a :class:`ModelRef` into an
:class:`~worker.models.backend.EmbeddingBackend`.

Invariants: what is loaded is what the reference describes — the kind decides the embedder, the
variant decides the ONNX file — so the identity that goes into chunk ids is the identity of the
vectors served. Every failure is a :class:`~worker.models.manifest.ManifestError` whose one-line
message names the directory. onnxruntime is imported only for an ONNX model.
"""

from __future__ import annotations

from worker.models.backend import EmbeddingBackend
from worker.models.manifest import ManifestError
from worker.models.reference import ModelRef
from worker.models.static import StaticEmbedder


def load_backend(ref: ModelRef, *, intra_op_threads: int | None = None) -> EmbeddingBackend:
    """Load the model ``ref`` describes (seconds for an ONNX model: call it off the loop)."""
    if ref.kind == "static":
        static = StaticEmbedder.load(ref.directory)
        if static.dimension != ref.dimension:
            raise ManifestError(
                f"{ref.directory}: manifest says dimension {ref.dimension}, "
                f"the matrix has {static.dimension}"
            )
        return static
    from worker.models.onnx_embedder import OnnxEmbedder  # onnxruntime: only when it is needed

    return OnnxEmbedder.load(ref.directory, int8=ref.int8, intra_op_threads=intra_op_threads)
