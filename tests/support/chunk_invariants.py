"""Checks every strategy's output must pass, shared by the example and property tests."""

from __future__ import annotations

from collections.abc import Sequence

import regex

from worker.chunking.text.tokens import TokenCounter
from worker.chunking.types import Chunk, Span, join_spans


def assert_spans_exact(text: str, spans: Sequence[Span]) -> None:
    """Spans are in order, disjoint, stripped, and cover every non-whitespace character."""
    position = 0
    for span in spans:
        assert position <= span.start < span.end <= len(text), (span, len(text))
        piece = text[span.start : span.end]
        assert piece == piece.strip(), repr(piece)
        assert text[position : span.start].strip() == "", "non-whitespace left out"
        position = span.end
    assert text[position:].strip() == "", "non-whitespace left out at the end"


def assert_chunks_exact(text: str, chunks: Sequence[Chunk]) -> None:
    """Each chunk maps back to the source; chunks start in order."""
    previous_start = -1
    for chunk in chunks:
        if chunk.spans is None:
            assert chunk.text == text[chunk.start_index : chunk.end_index]
        else:
            assert chunk.text == join_spans(text, chunk.spans)
            assert chunk.start_index == chunk.spans[0].start
            assert chunk.end_index == chunk.spans[-1].end
        assert chunk.text, "empty chunk"
        assert chunk.start_index > previous_start, "chunks out of order"
        previous_start = chunk.start_index


def assert_covers(text: str, chunks: Sequence[Chunk]) -> None:
    """The union of chunk ranges holds every non-whitespace character."""
    covered = bytearray(len(text))
    for chunk in chunks:
        for span in chunk.spans or (Span(chunk.start_index, chunk.end_index),):
            covered[span.start : span.end] = b"\x01" * (span.end - span.start)
    lost = [i for i, ch in enumerate(text) if not covered[i] and not ch.isspace()]
    assert not lost, f"characters lost at {lost[:10]}"


def assert_capped(chunks: Sequence[Chunk], counter: TokenCounter, cap: int) -> None:
    r"""Every chunk within the cap, but for the documented exception: a single character (a
    grapheme cluster, by the ``regex`` package's ``\X``) whose own count passes it (with a
    tokenizer, "한" is 3 tokens) is a chunk alone, as no smaller piece exists
    (docs/concepts/strategies.md, "Segmentation")."""
    for chunk in chunks:
        size = counter.count(chunk.text)
        assert size == chunk.token_count, (size, chunk.token_count)
        one = len(chunk.text) == 1 or len(regex.findall(r"\X", chunk.text)) == 1
        assert size <= cap or one, (size, cap, chunk.text[:80])


def assert_all(text: str, chunks: Sequence[Chunk], counter: TokenCounter, cap: int) -> None:
    assert_chunks_exact(text, chunks)
    assert_covers(text, chunks)
    assert_capped(chunks, counter, cap)
