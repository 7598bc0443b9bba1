"""Invariants of the three embedding strategies on generated text and parameters, and the
structure rules on generated markdown."""

from __future__ import annotations

from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.support.fake_embedder import TOPICS, embed, with_embedder
from tests.support.markdown_docs import documents, keepable
from tests.support.token_counters import make_counter
from tests.support.window_invariants import assert_contiguous, assert_windows
from worker.chunking.semantic.context import ContextChunker
from worker.chunking.semantic.layout import HEADING, read_atoms
from worker.chunking.semantic.model_window import ModelWindow
from worker.chunking.semantic.sdpm import SDPMChunker
from worker.chunking.semantic.semantic import SemanticChunker
from worker.chunking.text.markdown import split_blocks
from worker.chunking.text.tokens import CharacterCounter, TokenCounter
from worker.chunking.types import Chunk

COUNTER = CharacterCounter()
WORDS = [w for topic in TOPICS.values() for w in topic.split()] + ["e.g.", "3.14", "مرحبا", "😀"]

sentences = st.builds(
    lambda words, end: " ".join(words).capitalize() + end,
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=14),
    st.sampled_from([".", "!", "?", "", "؟", "。"]),
)
texts = st.one_of(
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


@st.composite
def sizes(draw: st.DrawFn) -> tuple[int, int]:
    cap = draw(st.integers(4, 400))
    return cap, draw(st.integers(0, cap // 4))


@settings(max_examples=150, deadline=None)
@given(
    text=texts,
    size=sizes(),
    threshold=st.floats(0.0, 5.0),
    similarity_window=st.integers(1, 4),
    min_sentences=st.integers(1, 3),
    min_characters=st.integers(0, 40),
    window=windows,
)
def test_semantic_invariants(
    text: str,
    size: tuple[int, int],
    threshold: float,
    similarity_window: int,
    min_sentences: int,
    min_characters: int,
    window: ModelWindow,
) -> None:
    cap, minimum = size
    chunker = with_embedder(
        SemanticChunker,
        embed,
        model_window=window,
        chunk_size=cap,
        min_chunk_size=minimum,
        threshold=threshold,
        similarity_window=similarity_window,
        min_sentences_per_chunk=min_sentences,
        min_characters_per_sentence=min_characters,
    )
    plan = chunker.plan(text)
    assert len(set(plan.texts)) == len(plan.texts)
    chunks = chunker.assemble(plan, embed(list(plan.texts)))
    assert_contiguous(text, chunks, COUNTER, cap)
    assert chunker.chunk(text) == chunks
    for chunk in chunks:
        assert chunk.metadata["start"] in ("document", "boundary", "cap")


@settings(max_examples=150, deadline=None)
@given(
    text=texts,
    size=sizes(),
    threshold=st.floats(0.0, 5.0),
    merge_threshold=st.floats(-1.0, 1.0),
    skip_window=st.integers(1, 4),
    window=windows,
)
def test_sdpm_invariants(
    text: str,
    size: tuple[int, int],
    threshold: float,
    merge_threshold: float,
    skip_window: int,
    window: ModelWindow,
) -> None:
    cap, minimum = size
    chunker = with_embedder(
        SDPMChunker,
        embed,
        model_window=window,
        chunk_size=cap,
        min_chunk_size=minimum,
        threshold=threshold,
        merge_threshold=merge_threshold,
        skip_window=skip_window,
    )
    chunks = chunker.chunk(text)
    assert_contiguous(text, chunks, COUNTER, cap)
    assert chunker.chunk(text) == chunks
    for chunk in chunks:
        assert all(m["similarity"] > merge_threshold for m in chunk.metadata["merges"])


@settings(max_examples=150, deadline=None)
@given(
    text=texts,
    size=sizes(),
    core_fraction=st.floats(0.1, 1.0),
    overlap=st.integers(0, 150),
    window_size=st.integers(0, 3),
    similarity_threshold=st.floats(-1.0, 1.0),
    language=st.sampled_from(["auto", "ar", "en"]),
    window=windows,
)
@example(  # a float32 cosine of identical texts above 1.0, kept, and reported as 1.0
    text="Chef chef simmers simmers onions simmers. " * 2,
    size=(83, 0),
    core_fraction=0.5,
    overlap=0,
    window_size=1,
    similarity_threshold=1.0,
    language="auto",
    window=ModelWindow(COUNTER, 4),
)
def test_context_invariants(
    text: str,
    size: tuple[int, int],
    core_fraction: float,
    overlap: int,
    window_size: int,
    similarity_threshold: float,
    language: str,
    window: ModelWindow,
) -> None:
    cap, _ = size
    core = max(1, int(cap * core_fraction))
    chunker = with_embedder(
        ContextChunker,
        embed,
        model_window=window,
        chunk_size=cap,
        core_size=core,
        min_chunk_size=core // 4,
        overlap=overlap,
        window_size=window_size,
        similarity_threshold=similarity_threshold,
        language=language,
    )
    chunks = chunker.chunk(text)
    assert_windows(text, chunks, COUNTER, cap)
    assert chunker.chunk(text) == chunks
    for chunk in chunks:
        assert all(c["similarity"] > similarity_threshold for c in chunk.metadata["context"])


def _cuts(chunks: list[Chunk], core: bool) -> list[tuple[int, int]]:
    if core:
        return [tuple(c.metadata["core"]) for c in chunks]
    return [(c.start_index, c.end_index) for c in chunks]


def assert_structure(
    text: str, chunks: list[Chunk], counter: TokenCounter, cap: int, minimum: int, core: bool
) -> None:
    """The structure rules, wherever some chunking can keep them all (markdown_docs.keepable)."""
    characters = isinstance(counter, CharacterCounter)
    # semantic and sdpm join sentences under 24 characters to the next (their default); context
    # keeps every sentence a unit.
    joined = 0 if core else 24
    if not keepable(text, counter.count, cap, minimum, characters, joined):
        return
    pieces = _cuts(chunks, core)
    atoms = read_atoms(text, joined)
    spans = list(zip(atoms.starts, atoms.ends, strict=True))
    edges = {start for start, _ in pieces[1:]}
    for a, b in spans:  # no cut inside any atom: a block, an item, a sentence
        assert not any(a < edge < b for edge in edges), (text[a:b], pieces)
    if len(pieces) > 1:
        for start, end in pieces:
            assert counter.count(text[start:end]) >= minimum, text[start:end]
    headings = {(a, b) for (a, b), k in zip(spans, atoms.kinds, strict=True) if k == HEADING}
    for start, end in pieces:
        inside = [(a, b) for a, b in spans if start <= a and b <= end]
        if len(pieces) > 1:
            assert not all(s in headings for s in inside), f"heading-only {text[start:end]!r}"
        if end < len(text.rstrip()):
            assert inside[-1] not in headings, f"chunk ends with a heading {text[start:end]!r}"
    # Fenced code: balanced in every chunk (nothing in these documents is over the cap).
    for start, end in pieces:
        fences = [
            b for b in split_blocks(text[start:end]) if text[start + b.start :].startswith("```")
        ]
        assert all(text[start + b.start : start + b.end].count("```") % 2 == 0 for b in fences)


@settings(max_examples=250, deadline=None)
@given(
    text=documents,
    name=st.sampled_from(["semantic", "sdpm", "context"]),
    cap=st.integers(60, 500),
    threshold=st.floats(0.0, 4.0),
)
# Found by hypothesis: the split after the first code block left "Chef:", the second block and
# the heading, whose only cut put the heading alone under the minimum; cutting after "Chef:"
# keeps every rule (worker.chunking.semantic.cuts._repair).
@example(
    text="```\nchef()\n```\n\nChef:\n\n```\nchef_simmers_simmers_simmers_simmers()\n```\n\n# Chef",
    name="semantic",
    cap=60,
    threshold=0.0,
)
def test_structure_rules_in_characters(text: str, name: str, cap: int, threshold: float) -> None:
    minimum = cap // 8
    chunker = _chunker(name, cap, minimum, threshold, tokenizer="character")
    chunks = chunker.chunk(text, content_type="text/markdown")
    bound = cap if name != "context" else cap * 3 // 4
    assert_structure(text, chunks, COUNTER, bound, minimum, name == "context")


@settings(max_examples=120, deadline=None)
@given(
    text=documents,
    name=st.sampled_from(["semantic", "sdpm"]),
    cap=st.integers(24, 160),
)
def test_structure_rules_in_tokens(text: str, name: str, cap: int, tokenizer_path: str) -> None:
    minimum = cap // 8
    chunker = _chunker(name, cap, minimum, 1.5, tokenizer=tokenizer_path)
    chunks = chunker.chunk(text, content_type="text/markdown")
    counter = make_counter(tokenizer_path)
    assert_contiguous(text, chunks, counter, cap)
    assert_structure(text, chunks, counter, cap, minimum, False)


def _chunker(name: str, cap: int, minimum: int, threshold: float, tokenizer: str) -> Any:
    if name == "semantic":
        return with_embedder(
            SemanticChunker, embed, chunk_size=cap, min_chunk_size=minimum,
            threshold=threshold, tokenizer=tokenizer,
        )  # fmt: skip
    if name == "sdpm":
        return with_embedder(
            SDPMChunker, embed, chunk_size=cap, min_chunk_size=minimum,
            threshold=threshold, tokenizer=tokenizer,
        )  # fmt: skip
    return with_embedder(
        ContextChunker, embed, chunk_size=cap, min_chunk_size=minimum, tokenizer=tokenizer,
        similarity_threshold=0.3,
    )  # fmt: skip
