"""The distilled static model (the default boundary model) on the seam documents: it must keep
the quality that made it the default, and stay above a cut at every paragraph."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.embedding import embed_batch
from tests.support.model_fixtures import STATIC_DIR
from tests.support.paragraphs import split_paragraphs
from tests.support.seams import Scores, score, seam_split
from worker.chunking import registry
from worker.chunking.types import EmbeddingChunker

REPO = Path(__file__).resolve().parents[3]

# Issue 21's goal on the held-out seams, measured in docs/benchmarks.md ("Boundary models").
F1_FLOOR = 0.68


@pytest.fixture(scope="module")
def static_dir() -> Path:
    if not (STATIC_DIR / "manifest.json").is_file():
        pytest.fail(f"no static model at {STATIC_DIR}: run scripts/bootstrap")
    return STATIC_DIR


@pytest.mark.parametrize("name", ["semantic", "sdpm"])
def test_static_model_seam_quality(name: str, static_dir: Path) -> None:
    from worker.models.loading import load_backend
    from worker.models.reference import describe

    ref = describe(static_dir, "boundary")
    backend = load_backend(ref)
    transformer = static_dir.parent / "all-MiniLM-L6-v2"  # sizes count its tokens, as in the worker
    context = registry.BuildContext(boundary=ref, retrieval=describe(transformer, "retrieval"))
    built = registry.build(name, {}, context)
    chunker = built.chunker
    assert isinstance(chunker, EmbeddingChunker)
    docs = seam_split("report")
    assert sum(len(d.seams) for d in docs) >= 100, "too few installed package descriptions"
    ours, paragraphs = Scores(0, 0, 0), Scores(0, 0, 0)
    for doc in docs:
        plan = chunker.plan(doc.text)
        chunks = chunker.assemble(plan, embed_batch(backend, list(plan.texts)))
        ours = ours + score(doc.text, doc.seams, [c.start_index for c in chunks])
        cuts = [span.start for span in split_paragraphs(doc.text)]
        paragraphs = paragraphs + score(doc.text, doc.seams, cuts)
    print(f"{name} static: F1={ours.f1:.3f} {ours}; paragraphs F1={paragraphs.f1:.3f}")
    assert ours.f1 >= F1_FLOOR, ours
    assert ours.f1 > paragraphs.f1, (ours, paragraphs)
