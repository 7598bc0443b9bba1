from __future__ import annotations

import itertools

import numpy as np
import pytest

from tests.semantic.fakes import RecordingEmbedder, embed, topic_document, with_embedder
from tests.semantic.invariants import assert_contiguous
from worker.chunking import registry
from worker.chunking.semantic.sdpm import SDPMChunker, SDPMParams
from worker.chunking.semantic.semantic import SemanticChunker
from worker.chunking.text.tokens import CharacterCounter

COUNTER = CharacterCounter()


def test_merges_an_over_split_first_pass_back_to_topics() -> None:
    text, seams = topic_document(["cooking", "astronomy", "finance"], 6)
    settings = {"similarity_window": 1, "threshold": 1.0}
    first = with_embedder(SemanticChunker, embed, **settings).chunk(text)
    assert len(first) > 3, "the first pass alone over-splits"
    chunks = with_embedder(SDPMChunker, embed, merge_threshold=0.3, **settings).chunk(text)
    assert_contiguous(text, chunks, COUNTER, 2048)
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
    settings = {"similarity_window": 2, "threshold": 1.0, "merge_threshold": 0.5}
    adjacent = with_embedder(SDPMChunker, embed, skip_window=1, **settings).chunk(text)
    assert [c.start_index for c in adjacent] == [0, *seams]
    bridged = with_embedder(SDPMChunker, embed, skip_window=2, **settings).chunk(text)
    assert_contiguous(text, bridged, COUNTER, 2048)
    assert [c.start_index for c in bridged] == [0, seams[2]]
    merges = bridged[0].metadata["merges"]
    assert [m["bridged"] for m in merges].count(1) == 1, merges
    assert all(m["similarity"] > 0.5 for m in merges)


def test_merges_never_break_the_cap() -> None:
    text, _ = topic_document(["sailing"], 10)
    chunks = with_embedder(
        SDPMChunker, embed, chunk_size=150, threshold=1.0, merge_threshold=-1.0
    ).chunk(text)
    assert_contiguous(text, chunks, COUNTER, 150)
    assert len(chunks) > 1


def test_merge_level_is_a_percentile_of_the_non_valley_gaps_by_default() -> None:
    # Valleys at gaps 0 (0.1, an edge lower than its neighbour) and 3 (0.2): the level is
    # read from the other gaps, 0.5 0.6 0.7 0.9, by linear interpolation as the first pass's
    # cut: the 80th percentile is 0.78, the 50th 0.65.
    curve = np.array([0.1, 0.5, 0.6, 0.2, 0.7, 0.9])
    assert SDPMParams().merge_level(curve) == pytest.approx(0.78)
    assert SDPMParams(threshold=0.5).merge_level(curve) == pytest.approx(0.65)
    assert SDPMParams(threshold=0.6, merge_threshold=0.2).merge_level(curve) == 0.2
    # No valley (a flat curve): every gap counts. No gap: no merge.
    assert SDPMParams().merge_level(np.array([0.4, 0.4])) == pytest.approx(0.4)
    assert SDPMParams().merge_level(np.array([])) == float("inf")


def test_the_derived_level_merges_and_is_reported() -> None:
    # Three topics over-split by the first pass: at defaults (no merge_threshold) the second
    # pass merges back within topics, and every chunk says which level it merged at.
    text, _ = topic_document(["cooking", "astronomy", "finance"], 6)
    settings = {"similarity_window": 1, "threshold": 1.0}
    first = with_embedder(SemanticChunker, embed, **settings).chunk(text)
    chunks = with_embedder(SDPMChunker, embed, **settings).chunk(text)
    assert len(chunks) < len(first)
    assert {c.metadata["merge_level"] for c in chunks} == {chunks[0].metadata["merge_level"]}
    assert all(
        m["similarity"] > chunks[0].metadata["merge_level"]
        for c in chunks
        for m in c.metadata["merges"]
    )


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
