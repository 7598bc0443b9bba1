from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tests.support.fake_embedder import (
    RecordingEmbedder,
    embed,
    topic_document,
    topic_sentences,
    with_embedder,
)
from tests.support.window_invariants import assert_contiguous
from worker.chunking import registry
from worker.chunking.semantic import sdpm as sdpm_module
from worker.chunking.semantic.sdpm import (
    LEVEL_REACH,
    MERGE_PERCENTILE,
    SDPMChunker,
    _Run,
    cut_levels,
    row_percentiles,
    run_similarity,
)
from worker.chunking.semantic.semantic import SemanticChunker, atom_range
from worker.chunking.semantic.similarity import cosine, gap_similarities
from worker.chunking.semantic.units import UnitVectors
from worker.chunking.text.tokens import CharacterCounter
from worker.chunking.types import Span

COUNTER = CharacterCounter()
# A first pass that cuts at every paragraph break: no bar, paragraphs of one topic each.
OVER_SPLIT = {"similarity_window": 1, "threshold": 0.0, "min_chunk_size": 0}


def _paragraphs(topics: list[str], per_topic: int, paragraphs: int) -> tuple[str, list[int]]:
    """``paragraphs`` paragraphs per topic: the seams are where a topic starts."""
    parts: list[str] = []
    seams: list[int] = []
    position = 0
    for n, topic in enumerate(topics):
        for k in range(paragraphs):
            text = " ".join(topic_sentences(topic, per_topic, offset=k * per_topic))
            if n and not k:
                seams.append(position)
            parts.append(text)
            position += len(text) + 2
    return "\n\n".join(parts), seams


def test_merges_an_over_split_first_pass_back_to_topics() -> None:
    text, seams = _paragraphs(["cooking", "astronomy", "finance"], 2, 3)
    first = with_embedder(SemanticChunker, embed, **OVER_SPLIT).chunk(text)
    assert len(first) > 3, "the first pass alone over-splits"
    chunks = with_embedder(
        SDPMChunker, embed, merge_threshold=0.3, skip_window=1, **OVER_SPLIT
    ).chunk(text)
    assert_contiguous(text, chunks, COUNTER, 1000)
    assert [c.start_index for c in chunks] == [0, *seams]
    merges = [m for c in chunks for m in c.metadata["merges"]]
    assert merges
    assert all(m["similarity"] > 0.3 and m["bridged"] == 0 for m in merges)
    covered = [c.metadata["first_pass"] for c in chunks]
    assert covered[0][0] == 0
    assert covered[-1][1] == len(first)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(covered))


def test_skip_window_bridges_a_digression() -> None:
    text, seams = topic_document(["cooking", "astronomy", "cooking", "finance"], 5)
    settings = {"similarity_window": 2, "threshold": 0.0, "merge_threshold": 0.5}
    adjacent = with_embedder(SDPMChunker, embed, skip_window=1, **settings).chunk(text)
    assert [c.start_index for c in adjacent] == [0, *seams]
    bridged = with_embedder(SDPMChunker, embed, skip_window=2, **settings).chunk(text)
    assert_contiguous(text, bridged, COUNTER, 1000)
    assert [c.start_index for c in bridged] == [0, seams[2]]
    merges = bridged[0].metadata["merges"]
    assert [m["bridged"] for m in merges].count(1) == 1, merges
    assert all(m["similarity"] > 0.5 for m in merges)


def test_merges_never_break_the_cap() -> None:
    text, _ = topic_document(["sailing"], 10)
    chunks = with_embedder(
        SDPMChunker, embed, chunk_size=150, min_chunk_size=10, merge_threshold=-1.0
    ).chunk(text)
    assert_contiguous(text, chunks, COUNTER, 150)
    assert len(chunks) > 1


def test_the_level_at_a_cut_is_read_around_it() -> None:
    # Valleys at gaps 1 and 4 are left out; the rest within LEVEL_REACH of each cut count.
    curve = np.array([0.5, 0.1, 0.6, 0.7, 0.2, 0.9, 0.8, 0.4, 0.3, 0.35])
    assert LEVEL_REACH >= 2
    levels = cut_levels(curve, np.array([1, 4]), 0.5)
    valleys = {1, 4, 8}
    for gap, level in zip([1, 4], levels, strict=True):
        near = [
            curve[g]
            for g in range(max(0, gap - LEVEL_REACH), min(len(curve), gap + LEVEL_REACH + 1))
            if g not in valleys
        ]
        assert level == pytest.approx(float(np.percentile(near, 50)))
    # The curve farther away does not move it: an edit elsewhere leaves the level alone.
    rng = np.random.default_rng(3)
    long = rng.uniform(0, 1, 80)
    edited = long.copy()
    edited[: 40 - LEVEL_REACH - 1] = rng.uniform(0, 1, 40 - LEVEL_REACH - 1)
    edited[40 + LEVEL_REACH + 2 :] = 0.05
    assert cut_levels(edited, np.array([40]), 0.8) == cut_levels(long, np.array([40]), 0.8)


def test_the_derived_level_merges_and_is_reported() -> None:
    text, _ = _paragraphs(["cooking", "astronomy", "finance"], 2, 3)
    first = with_embedder(SemanticChunker, embed, **OVER_SPLIT).chunk(text)
    chunks = with_embedder(SDPMChunker, embed, **OVER_SPLIT).chunk(text)
    assert len(chunks) < len(first)
    merges = [m for c in chunks for m in c.metadata["merges"]]
    assert merges
    assert all(m["similarity"] > m["level"] for m in merges)


def test_one_embedding_call_with_distinct_texts() -> None:
    text, _ = topic_document(["cooking", "finance"], 4)
    recorder = RecordingEmbedder()
    with_embedder(SDPMChunker, recorder, merge_threshold=0.0).chunk(text)
    (texts,) = recorder.calls
    assert len(texts) == len(set(texts)) == 8


def test_registry() -> None:
    built = registry.build("sdpm", {"skip_window": "2", "merge_threshold": "0.4"})
    assert isinstance(built.chunker, SDPMChunker)
    assert built.chunker.params.skip_window == 2
    with pytest.raises(registry.InvalidParameters, match="skip_window"):
        registry.build("sdpm", {"skip_window": "0"})


@settings(max_examples=300, deadline=None)
@given(
    pair=st.integers(1, 64).flatmap(
        lambda n: st.tuples(
            *[hnp.arrays(np.float32, n, elements=st.floats(-1e3, 1e3, width=32))] * 2
        )
    )
)
def test_run_similarity_is_the_cosine_bit_for_bit(
    pair: tuple[np.ndarray, np.ndarray],
) -> None:
    """The merge loop's similarity from each run's norm, computed once, is the cosine it
    replaced, to the last bit (merges, and so boundaries and chunk ids, do not move)."""
    left, right = pair
    expected = cosine(left, right)
    found = run_similarity(_Run(0, 1, left), _Run(1, 2, right))
    assert found == expected or (np.isnan(found) and np.isnan(expected))


@settings(max_examples=300, deadline=None)
@given(
    rows=st.integers(1, 30).flatmap(
        lambda width: st.lists(
            st.lists(
                st.floats(-1, 1, allow_nan=False) | st.just(float("nan")),
                min_size=width,
                max_size=width,
            ).filter(lambda row: not all(np.isnan(row))),
            min_size=1,
            max_size=20,
        )
    ),
    percentile=st.sampled_from([0.0, 0.25, 0.5, 0.75, 0.9, 1.0]) | st.floats(0, 1),
)
def test_row_percentiles_are_numpys_nanpercentile_bit_for_bit(
    rows: list[list[float]], percentile: float
) -> None:
    values = np.array(rows, dtype=np.float64)
    # Zeros signless: numpy's partition puts -0.0 and 0.0 in whatever order (see the function).
    expected = np.nanpercentile(values + 0.0, percentile * 100.0, axis=1)
    assert row_percentiles(values.copy(), percentile).tobytes() == expected.tobytes()


def _defined_merge(chunker: SDPMChunker, plan: Any, vectors: Any, passed: Any) -> list[_Run]:
    """The merge loop as first written: every pair scored again on every pass, each chunk's
    unit vectors made on their own. The chunker's loop remembers pairs and fits by the runs'
    bounds and makes the vectors a block of chunks at a time; its runs must be these, bit for
    bit (the merges' similarities and levels are in the chunks' metadata)."""
    p = chunker.params
    spans = passed.spans
    ranges = [atom_range(plan, passed, i) for i in range(len(spans))]
    runs = [
        _Run(i, i + 1, vectors.weighted_sum(first, stop, plan.weights).astype(np.float32))
        for i, (first, stop) in enumerate(ranges)
    ]
    firsts = [cut.first for cut in passed.cuts]
    gaps = passed.grain_gap[firsts]
    gaps[1:][np.diff(firsts) == 0] = -1
    at_cut = np.full(len(runs), np.inf)
    between = gaps >= 0
    if p.merge_threshold is not None:
        at_cut[between] = p.merge_threshold
    elif between.any():
        curve = gap_similarities(vectors.rows, plan.count, plan.weights, p.similarity_window)
        at_cut[between] = cut_levels(curve, gaps[between], MERGE_PERCENTILE)
    changed = True
    while changed:
        changed = False
        i = 0
        while i < len(runs) - 1:
            best: tuple[float, int, float] | None = None
            for j in range(i + 1, min(len(runs), i + 1 + p.skip_window)):
                similarity = run_similarity(runs[i], runs[j])
                level = float(at_cut[runs[i].stop : runs[j].first + 1].max())
                if similarity <= level or (best is not None and similarity <= best[0]):
                    continue
                span = Span(spans[runs[i].first].start, spans[runs[j].stop - 1].end)
                if plan.size([span]) <= chunker.bounds.cap:
                    best = (similarity, j, level)
            if best is None:
                i += 1
                continue
            similarity, j, level = best
            merged = {"partner": runs[j].first, "similarity": round(similarity, 6)}
            runs[i] = _Run(
                runs[i].first,
                runs[j].stop,
                sum((r.vector for r in runs[i + 1 : j + 1]), runs[i].vector),
                [*runs[i].merges, {**merged, "level": round(level, 6), "bridged": j - i - 1}]
                + [m for run in runs[i + 1 : j + 1] for m in run.merges],
            )
            del runs[i + 1 : j + 1]
            changed = True
    return runs


@pytest.mark.parametrize(
    "params",
    [{}, {"skip_window": 4}, {"skip_window": 1, "merge_threshold": 0.2}, OVER_SPLIT],
    ids=["defaults", "skip-4", "threshold", "over-split"],
)
def test_the_merge_is_its_definition_on_real_documents(
    params: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """On package descriptions with the shipped static model, and one page with a sentence too
    long for the model's window (a unit of several pieces), blocks of 7 units at a time."""
    from tests.support.embedding import embed_batch
    from tests.support.model_fixtures import STATIC_DIR
    from tests.support.seams import seam_split
    from worker.models.loading import load_backend
    from worker.models.reference import describe

    monkeypatch.setattr(sdpm_module, "BLOCK_UNITS", 7)
    ref = describe(STATIC_DIR, "boundary")
    backend = load_backend(ref)
    context = registry.BuildContext(
        boundary=ref, retrieval=describe(STATIC_DIR.parent / "all-MiniLM-L6-v2", "retrieval")
    )
    chunker = registry.build("sdpm", params, context).chunker
    assert isinstance(chunker, SDPMChunker)
    pages = [doc.text for doc in seam_split("report")]
    texts = ["\n\n".join(pages[at : at + 6]) for at in range(0, len(pages), 6)]
    long_sentence = " ".join(f"word{n} and more" for n in range(900))
    texts.append(f"{texts[0]}\n\n{long_sentence}.\n\n{texts[1]}")
    several_pieces = merged_any = 0
    for text in texts:
        plan = chunker.plan(text)
        vectors = UnitVectors(plan, embed_batch(backend, list(plan.texts)))
        several_pieces += len(plan.piece_rows) > plan.count
        passed = chunker._semantic.first_pass(plan, vectors)
        found = chunker._merge(plan, vectors, passed)
        expected = _defined_merge(chunker, plan, vectors, passed)
        assert [(r.first, r.stop, r.merges) for r in found] == [
            (r.first, r.stop, r.merges) for r in expected
        ]
        assert all(
            a.vector.tobytes() == b.vector.tobytes() for a, b in zip(found, expected, strict=True)
        )
        merged_any += sum(len(r.merges) for r in found)
    # The defaults merge a few times on these pages (4 when written), the over-split first
    # pass and the fixed threshold some two hundred times.
    assert several_pieces
    assert merged_any
