"""Invariants of the embedding strategies' output, on top of the shared chunking checks."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from tests.support.chunk_invariants import assert_all
from worker.chunking.text.tokens import TokenCounter
from worker.chunking.types import Chunk, Span, join_spans


def assert_contiguous(text: str, chunks: Sequence[Chunk], counter: TokenCounter, cap: int) -> None:
    """`semantic`/`sdpm`: exact slices, in order, disjoint, covering, within the cap."""
    assert_all(text, chunks, counter, cap)
    for before, after in itertools.pairwise(chunks):
        assert before.end_index <= after.start_index, "chunks overlap"
    assert all(c.spans is None for c in chunks)


def assert_windows(text: str, chunks: Sequence[Chunk], counter: TokenCounter, cap: int) -> None:
    """`context`: exact spans, cores in order and covering everything, the whole text capped."""
    covered = bytearray(len(text))
    previous_core = -1
    for chunk in chunks:
        spans = chunk.spans or (Span(chunk.start_index, chunk.end_index),)
        assert chunk.text == join_spans(text, spans)
        assert chunk.start_index == spans[0].start
        assert chunk.end_index == spans[-1].end
        for left, right in itertools.pairwise(spans):
            assert left.end < right.start, "spans must be ordered and separated"
        size = counter.count(chunk.text)
        assert size == chunk.token_count
        assert size <= cap, (size, cap)
        core_start, core_end = chunk.metadata["core"]
        assert core_start > previous_core, "cores out of order"
        previous_core = core_start
        assert any(s.start <= core_start and core_end <= s.end for s in spans), "core not a piece"
        covered[core_start:core_end] = b"\x01" * (core_end - core_start)
        assert chunk.metadata["chunk_type"] == "window"
    lost = [i for i, ch in enumerate(text) if not covered[i] and not ch.isspace()]
    assert not lost, f"characters lost at {lost[:10]}"
