"""Invariants of the three embedding strategies on generated text and parameters."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.semantic.fakes import TOPICS, embed, with_embedder
from tests.semantic.invariants import assert_contiguous, assert_windows
from worker.chunking.semantic.context import ContextChunker
from worker.chunking.semantic.model_window import ModelWindow
from worker.chunking.semantic.sdpm import SDPMChunker
from worker.chunking.semantic.semantic import SemanticChunker
from worker.chunking.text.tokens import CharacterCounter

COUNTER = CharacterCounter()
WORDS = [w for topic in TOPICS.values() for w in topic.split()] + ["e.g.", "3.14", "مرحبا", "😀"]

sentences = st.builds(
    lambda words, end: " ".join(words).capitalize() + end,
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=14),
    st.sampled_from([".", "!", "?", "", "؟", "。"]),
)
documents = st.one_of(
    st.lists(sentences, max_size=25).flatmap(
        lambda parts: st.lists(
            st.sampled_from([" ", "\n", "\n\n", "  \t"]),
            min_size=len(parts),
            max_size=len(parts),
        ).map(lambda seps: "".join(p + s for p, s in zip(parts, seps, strict=True)))
    ),
    st.text(max_size=300),
)
windows = st.builds(ModelWindow, st.just(COUNTER), st.integers(4, 80))


@settings(max_examples=150, deadline=None)
@given(
    text=documents,
    chunk_size=st.integers(1, 400),
    threshold=st.floats(0.0, 1.0),
    similarity_window=st.integers(1, 4),
    min_sentences=st.integers(1, 3),
    min_characters=st.integers(0, 40),
    window=windows,
)
def test_semantic_invariants(
    text: str,
    chunk_size: int,
    threshold: float,
    similarity_window: int,
    min_sentences: int,
    min_characters: int,
    window: ModelWindow,
) -> None:
    chunker = with_embedder(
        SemanticChunker,
        embed,
        model_window=window,
        chunk_size=chunk_size,
        threshold=threshold,
        similarity_window=similarity_window,
        min_sentences_per_chunk=min_sentences,
        min_characters_per_sentence=min_characters,
    )
    plan = chunker.plan(text)
    assert len(set(plan.texts)) == len(plan.texts)
    chunks = chunker.assemble(plan, embed(list(plan.texts)))
    assert_contiguous(text, chunks, COUNTER, chunk_size)
    assert chunker.chunk(text) == chunks
    for chunk in chunks:
        assert chunk.metadata["start"] in ("document", "boundary", "cap")


@settings(max_examples=150, deadline=None)
@given(
    text=documents,
    chunk_size=st.integers(1, 400),
    threshold=st.floats(0.0, 1.0),
    merge_threshold=st.floats(-1.0, 1.0),
    skip_window=st.integers(1, 4),
    window=windows,
)
def test_sdpm_invariants(
    text: str,
    chunk_size: int,
    threshold: float,
    merge_threshold: float,
    skip_window: int,
    window: ModelWindow,
) -> None:
    chunker = with_embedder(
        SDPMChunker,
        embed,
        model_window=window,
        chunk_size=chunk_size,
        threshold=threshold,
        merge_threshold=merge_threshold,
        skip_window=skip_window,
    )
    chunks = chunker.chunk(text)
    assert_contiguous(text, chunks, COUNTER, chunk_size)
    assert chunker.chunk(text) == chunks
    for chunk in chunks:
        assert all(m["similarity"] > merge_threshold for m in chunk.metadata["merges"])


@settings(max_examples=150, deadline=None)
@given(
    text=documents,
    chunk_size=st.integers(1, 400),
    core_fraction=st.floats(0.1, 1.0),
    overlap=st.integers(0, 150),
    window_size=st.integers(0, 3),
    min_chunk_size=st.integers(0, 100),
    similarity_threshold=st.floats(-1.0, 1.0),
    language=st.sampled_from(["auto", "ar", "en"]),
    window=windows,
)
def test_context_invariants(
    text: str,
    chunk_size: int,
    core_fraction: float,
    overlap: int,
    window_size: int,
    min_chunk_size: int,
    similarity_threshold: float,
    language: str,
    window: ModelWindow,
) -> None:
    chunker = with_embedder(
        ContextChunker,
        embed,
        model_window=window,
        chunk_size=chunk_size,
        core_size=max(1, int(chunk_size * core_fraction)),
        overlap=overlap,
        window_size=window_size,
        min_chunk_size=min_chunk_size,
        similarity_threshold=similarity_threshold,
        language=language,
    )
    chunks = chunker.chunk(text)
    assert_windows(text, chunks, COUNTER, chunk_size)
    assert chunker.chunk(text) == chunks
    for chunk in chunks:
        assert all(c["similarity"] > similarity_threshold for c in chunk.metadata["context"])
