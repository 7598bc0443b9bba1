from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tests.semantic.fakes import (
    RecordingEmbedder,
    embed,
    topic_document,
    topic_sentences,
    with_embedder,
)
from tests.semantic.invariants import assert_contiguous
from worker.chunking import registry
from worker.chunking.semantic.sdpm import (
    LEVEL_REACH,
    SDPMChunker,
    _Run,
    cut_levels,
    row_percentiles,
    run_similarity,
)
from worker.chunking.semantic.semantic import SemanticChunker
from worker.chunking.semantic.similarity import cosine
from worker.chunking.text.tokens import CharacterCounter

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
    pair: tuple[np.ndarray, np.ndarray],  # type: ignore[type-arg]
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
