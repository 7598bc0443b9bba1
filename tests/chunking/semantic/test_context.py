from __future__ import annotations

import msgspec
import pytest

from tests.support.fake_embedder import (
    RecordingEmbedder,
    embed,
    model_ref,
    topic_sentences,
    with_embedder,
)
from tests.support.window_invariants import assert_windows
from worker.chunking import registry
from worker.chunking.semantic.context import ContextChunker, ContextParams, check_embedding_model
from worker.chunking.text.tokens import CharacterCounter
from worker.chunking.types import SPAN_JOINER

COUNTER = CharacterCounter()


def _doc(topics: list[str]) -> str:
    return " ".join(topic_sentences(t, 1, offset=i)[0] for i, t in enumerate(topics))


def test_context_is_judged_sentence_by_sentence() -> None:
    # Cores of two sentences; before the second core (cooking) the sentence about the sky is
    # dropped and the one before it, about cooking again, is kept: not contiguous.
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
    assert kept[0]["start"] == 0
    assert second.spans is not None
    assert len(second.spans) == 2
    assert second.text.count(SPAN_JOINER) == 1
    assert second.metadata["dropped"] == 3  # astronomy before, finance and sailing after
    msgspec.json.encode(second)  # metadata is plain JSON


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
        ContextChunker,
        embed,
        chunk_size=150,
        overlap=60,
        window_size=0,
        similarity_threshold=1.0,
        min_chunk_size=0,
    )
    chunks = chunker.chunk(text)
    assert_windows(text, chunks, COUNTER, 150)
    assert any(c.metadata["carried_units"] == 1 for c in chunks[1:])
    # Without context the chunk is its core, one contiguous slice.
    assert all(c.spans is None for c in chunks)


def test_cores_keep_the_minimum_and_blocks_whole() -> None:
    code = "```\n" + "\n".join(f"x{n} = compute({n})" for n in range(12)) + "\n```"
    text = "A tiny one.\n\n" + " ".join(topic_sentences("finance", 3)) + f"\n\n{code}\n"
    chunker = with_embedder(ContextChunker, embed, chunk_size=400, core_size=150)
    chunks = chunker.chunk(text)
    assert_windows(text, chunks, COUNTER, 400)
    cores = [text[slice(*c.metadata["core"])] for c in chunks]
    assert all(len(core) >= 400 // 8 for core in cores)
    # The code block is over the core size but fits the chunk: it is one core, whole.
    assert code in cores


def test_a_heading_is_context_before_a_core_never_after() -> None:
    text = "# Cooking\n\n" + " ".join(topic_sentences("cooking", 4)) + "\n\n# Cooking again\n\n"
    text += " ".join(topic_sentences("cooking", 4, offset=4))
    chunks = with_embedder(
        ContextChunker, embed, chunk_size=300, core_size=150, similarity_threshold=-1.0
    ).chunk(text)
    assert_windows(text, chunks, COUNTER, 300)
    for chunk in chunks:
        after = [c for c in chunk.metadata["context"] if c["side"] == "after"]
        assert not any(text[c["start"] : c["end"]].startswith("#") for c in after)


def test_arabic_sentences_and_clauses() -> None:
    text = "هذه جملة أولى؟ وهذه جملة ثانية، وهي طويلة جدا، ولها فواصل كثيرة، ثم تنتهي. الأخيرة."
    chunks = with_embedder(ContextChunker, embed, chunk_size=40, min_chunk_size=0).chunk(text)
    assert_windows(text, chunks, COUNTER, 40)
    english = with_embedder(
        ContextChunker, embed, chunk_size=40, min_chunk_size=0, language="en"
    ).chunk(text)
    assert_windows(text, english, COUNTER, 40)
    assert {c.metadata["language"] for c in chunks} == {"ar"}


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
