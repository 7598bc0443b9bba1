from __future__ import annotations

import pytest

from tests.semantic.fakes import (
    RecordingEmbedder,
    embed,
    model_ref,
    topic_sentences,
    with_embedder,
)
from tests.semantic.invariants import assert_windows
from worker.chunking import registry
from worker.chunking.semantic.context import ContextChunker, ContextParams, check_embedding_model
from worker.chunking.text.tokens import CharacterCounter
from worker.chunking.types import SPAN_JOINER

COUNTER = CharacterCounter()


def _doc(topics: list[str]) -> str:
    return " ".join(topic_sentences(t, 1, offset=i)[0] for i, t in enumerate(topics))


def test_context_is_judged_sentence_by_sentence() -> None:
    # Each core holds two sentences; the one before a cooking core is about the sky and is
    # dropped, the one before that is about cooking again and is kept: not contiguous.
    text = _doc(["cooking", "astronomy", "cooking", "cooking", "finance", "sailing"])
    chunker = with_embedder(
        ContextChunker,
        embed,
        chunk_size=300,
        core_size=100,
        overlap=0,
        similarity_threshold=0.2,
        min_chunk_size=0,
    )
    chunks = chunker.chunk(text)
    assert_windows(text, chunks, COUNTER, 300)
    second = chunks[1]
    assert second.metadata["core_units"] == [2, 4]
    kept = second.metadata["context"]
    assert [c["side"] for c in kept] == ["before"]
    assert kept[0]["similarity"] > 0.2
    assert second.spans is not None
    assert len(second.spans) == 2
    assert second.text.count(SPAN_JOINER) == 1
    assert second.metadata["dropped"] == 3  # astronomy before, finance and sailing after


def test_cap_counts_context_and_joiners() -> None:
    text = _doc(["cooking"] * 8)
    chunks = with_embedder(
        ContextChunker, embed, chunk_size=120, core_size=60, similarity_threshold=-1.0
    ).chunk(text)
    assert_windows(text, chunks, COUNTER, 120)
    assert any(c.metadata["dropped_for_size"] for c in chunks)


def test_overlap_carries_whole_sentences() -> None:
    text = _doc(["sailing"] * 6)
    chunker = with_embedder(
        ContextChunker, embed, chunk_size=150, overlap=60, window_size=0, similarity_threshold=1.0
    )
    chunks = chunker.chunk(text)
    assert_windows(text, chunks, COUNTER, 150)
    assert any(c.metadata["carried_units"] == 1 for c in chunks[1:])
    # Without context the chunk is its core, one contiguous slice.
    assert all(c.spans is None for c in chunks)


def test_small_groups_merge_instead_of_vanishing() -> None:
    text = "A tiny one. " + " ".join(topic_sentences("finance", 3))
    chunker = with_embedder(
        ContextChunker, embed, chunk_size=400, core_size=50, overlap=0, min_chunk_size=30
    )
    chunks = chunker.chunk(text)
    assert_windows(text, chunks, COUNTER, 400)
    assert chunks[0].metadata["merged_small_group"]
    assert chunks[0].metadata["core"][0] == 0


def test_arabic_sentences_and_clauses() -> None:
    text = "هذه جملة أولى؟ وهذه جملة ثانية، وهي طويلة جدا، ولها فواصل كثيرة، ثم تنتهي. الأخيرة."
    chunks = with_embedder(ContextChunker, embed, chunk_size=40, min_chunk_size=0).chunk(text)
    assert_windows(text, chunks, COUNTER, 40)
    english = with_embedder(
        ContextChunker, embed, chunk_size=40, min_chunk_size=0, language="en"
    ).chunk(text)
    assert_windows(text, english, COUNTER, 40)


def test_each_sentence_embedded_once() -> None:
    text = _doc(["cooking", "finance", "sailing", "astronomy"])
    recorder = RecordingEmbedder()
    with_embedder(ContextChunker, recorder, chunk_size=120).chunk(text)
    (texts,) = recorder.calls
    assert len(texts) == len(set(texts)) == 4


def test_parameters_and_model_dir(tmp_path: object) -> None:
    with pytest.raises(ValueError, match="language"):
        ContextParams(language="fr")
    with pytest.raises(ValueError, match="core_size"):
        ContextParams(chunk_size=10, core_size=20)
    boundary = model_ref("m")  # in /models/m
    check_embedding_model(ContextParams(), boundary)  # unset: the caller's model
    check_embedding_model(ContextParams(embedding_model="/models/x/../m"), boundary)  # the same
    with pytest.raises(ValueError, match="differs"):
        check_embedding_model(ContextParams(embedding_model="/other"), boundary)
    with pytest.raises(registry.InvalidParameters, match="no boundary model was resolved"):
        registry.build("context", {"embedding_model": "/nonexistent/model"})
    built = registry.build("context", {"window_size": "1"})
    assert isinstance(built.chunker, ContextChunker)
    assert built.needs_model
