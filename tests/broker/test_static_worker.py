"""The worker on a static boundary model through a real broker: `semantic`, `sdpm` and `context`
place their boundaries with the distilled static model, while the vectors that go out with the
chunks come from the transformer (two roles, two models)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.support import kafka_io
from tests.support.embedding import embed_batch
from tests.support.generated_docs import check_complete, make_docs
from worker.chunking import registry
from worker.chunking.types import EmbeddingChunker

pytestmark = pytest.mark.kafka

REPO = Path(__file__).resolve().parents[2]
STATIC_DIR = REPO / ".cache" / "models" / "all-MiniLM-L6-v2-static"


@pytest.fixture(scope="module")
def onnx_dir() -> Path:
    from worker.model_making.build import ensure_model
    from worker.model_making.source import default_source_dir

    target = REPO / ".cache" / "models" / "all-MiniLM-L6-v2"
    ensure_model(default_source_dir(), target, int8=True)
    return target


@pytest.fixture(scope="module")
def static_dir() -> Path:
    # scripts/bootstrap distils it (minutes); a missing one is a broken setup, not a skip.
    if not (STATIC_DIR / "manifest.json").is_file():
        pytest.fail(f"no static model at {STATIC_DIR}: run scripts/bootstrap")
    return STATIC_DIR


@pytest.mark.parametrize(
    ("strategy", "by_default"),
    [("semantic", False), ("sdpm", False), ("context", False), ("semantic", True)],
)
async def test_static_boundaries_transformer_vectors(
    kafka_bootstrap: str,
    topic_names: dict[str, str],
    static_dir: Path,
    onnx_dir: Path,
    strategy: str,
    by_default: bool,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """Named directories, and (``by_default``) no model setting at all: the defaults are the
    distilled static model for boundaries and the transformer for the vectors."""
    from worker.models.loading import load_backend
    from worker.models.onnx_embedder import OnnxEmbedder
    from worker.models.reference import describe

    dirs = {"model_dir": str(static_dir), "retrieval_model_dir": str(onnx_dir)}
    if by_default:
        # Found on the model search path, from any working directory (not the checkout).
        monkeypatch.chdir(tmp_path)
        dirs = {}
    settings = kafka_io.make_settings(
        kafka_bootstrap, topic_names, strategy=strategy, include_embeddings="true", **dirs
    )
    await kafka_io.create(settings, partitions=2)
    docs = make_docs(12, seed=12, prefix=strategy)
    await kafka_io.produce_raw(
        kafka_bootstrap, settings.input_topic, kafka_io.encode_documents(docs)
    )
    await kafka_io.run_worker_to_end(settings, timeout_s=120)
    events = await kafka_io.chunk_events(kafka_bootstrap, settings.output_topic)
    if strategy == "context":  # window chunks: text is the join of their spans
        assert {e.doc_id for e in events} == {d.id for d in docs}
    else:
        check_complete(docs, events)

    # Boundaries: exactly those of the same chunker fed by the static model offline, sized in
    # the retrieval transformer's tokens as the worker sizes them.
    static_ref = describe(static_dir, "boundary")
    static = load_backend(static_ref)
    context = registry.BuildContext(boundary=static_ref, retrieval=describe(onnx_dir, "retrieval"))
    chunker = registry.build(strategy, {}, context)
    assert isinstance(chunker.chunker, EmbeddingChunker)
    for doc in docs:
        plan = chunker.chunker.plan(doc.text)
        offline = chunker.chunker.assemble(plan, embed_batch(static, list(plan.texts)))
        published = sorted((e for e in events if e.doc_id == doc.id), key=lambda e: e.index)
        assert [(e.start_index, e.end_index) for e in published] == [
            (c.start_index, c.end_index) for c in offline
        ], doc.id

    # Vectors: the transformer's, and the event says so.
    assert {e.embedding_model for e in events} == {describe(onnx_dir, "retrieval").label}
    got = np.stack([np.frombuffer(e.embedding or b"", dtype="<f4") for e in events])
    expected = OnnxEmbedder.load(onnx_dir).embed([e.text for e in events])
    assert got.shape == expected.shape == (len(events), 384)
    assert float(np.sum(got * expected, axis=1).min()) >= 0.9999
    assert static.dimension == 256
