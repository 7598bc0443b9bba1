"""Property tests for sentence segmentation, hard-cap splitting and the `sentence` strategy."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.chunk_invariants import assert_all, assert_spans_exact
from tests.support.texts import any_text
from tests.support.token_counters import make_counter
from worker.chunking.rules.sentence import SentenceChunker, SentenceParams
from worker.chunking.text.segment import split_sentences, split_to_cap
from worker.chunking.types import Span

CHARS = make_counter()
BOUNDED = settings(max_examples=150, deadline=None)


@BOUNDED
@given(any_text, st.booleans())
def test_sentences_are_exact_and_lose_nothing(text: str, clauses: bool) -> None:
    spans = split_sentences(text, clauses=clauses)
    assert_spans_exact(text, spans)
    assert split_sentences(text, clauses=clauses) == spans


@BOUNDED
@given(any_text, st.integers(min_value=1, max_value=40))
def test_split_to_cap_is_exact_and_capped(text: str, cap: int) -> None:
    stripped = text.strip()
    if not stripped:
        return
    start = text.index(stripped[0])
    span = Span(start, start + len(stripped))
    pieces = split_to_cap(text, span, CHARS, cap)
    assert_spans_exact(text, pieces)
    assert all(p.end - p.start <= cap for p in pieces)


@BOUNDED
@given(any_text, st.integers(min_value=1, max_value=120))
def test_sentence_strategy_invariants(text: str, size: int) -> None:
    chunker = SentenceChunker(SentenceParams(chunk_size=size))
    chunks = chunker.chunk(text)
    assert_all(text, chunks, CHARS, size)
    assert chunker.chunk(text) == chunks


@settings(max_examples=30, deadline=None)
@given(any_text, st.integers(min_value=2, max_value=30))
def test_sentence_strategy_token_cap(tokenizer_path: str, text: str, size: int) -> None:
    counter = make_counter(tokenizer_path)
    chunks = SentenceChunker(SentenceParams(chunk_size=size, tokenizer=tokenizer_path)).chunk(text)
    assert_all(text, chunks, counter, size)


def test_a_character_over_the_token_cap_is_a_chunk_alone(tokenizer_path: str) -> None:
    # Found by hypothesis: each Hangul syllable here counts 2-3 tokens, so under a cap of 2 the
    # text cannot be cut any finer than by character; nothing is lost or merged past the cap.
    counter = make_counter(tokenizer_path)
    chunks = SentenceChunker(SentenceParams(chunk_size=2, tokenizer=tokenizer_path)).chunk("한국어")
    assert [c.text for c in chunks] == ["한", "국", "어"]
    assert [c.token_count for c in chunks] == [counter.count(ch) for ch in "한국어"]
