from __future__ import annotations

import numpy as np
import pytest

from tests.semantic.fakes import RecordingEmbedder, embed, topic_document, with_embedder
from tests.semantic.invariants import assert_contiguous
from worker.chunking import registry
from worker.chunking.semantic.model_window import ModelWindow, character_window
from worker.chunking.semantic.semantic import SemanticChunker
from worker.chunking.semantic.units import plan_units, sentence_units, unit_vectors
from worker.chunking.text.tokens import CharacterCounter, make_counter
from worker.chunking.types import EmbeddingChunker, Span

COUNTER = CharacterCounter()


def test_cuts_at_topic_seams() -> None:
    text, seams = topic_document(["cooking", "astronomy", "finance"], 5)
    chunker = with_embedder(SemanticChunker, embed, similarity_window=2, threshold=0.5)
    chunks = chunker.chunk(text)
    assert_contiguous(text, chunks, COUNTER, 2048)
    starts = [c.start_index for c in chunks]
    assert starts == [0, *seams]
    for chunk in chunks[1:]:
        meta = chunk.metadata
        assert meta["start"] == "boundary"
        assert meta["boundary_similarity"] <= meta["percentile_cut"]
        assert meta["threshold"] == 0.5
    assert chunks[0].metadata["start"] == "document"


def test_is_an_embedding_chunker_and_embeds_each_text_once() -> None:
    text = "Same line repeated here.\nSame line repeated here.\n" * 3 + "A different one at last."
    recorder = RecordingEmbedder()
    chunker = with_embedder(SemanticChunker, recorder)
    assert isinstance(chunker, EmbeddingChunker)
    chunks = chunker.chunk(text)
    assert len(recorder.calls) == 1
    (texts,) = recorder.calls
    assert (
        sorted(texts)
        == sorted(set(texts))
        == ["A different one at last.", "Same line repeated here."]
    )
    assert_contiguous(text, chunks, COUNTER, 2048)


def test_short_sentences_join_their_neighbour() -> None:
    text = "Hi. Ok. This sentence is long enough to stand alone. Yes."
    units = sentence_units(text, COUNTER, 1000, min_characters=10)
    pieces = [text[u.start : u.end] for u in units]
    assert pieces == ["Hi. Ok. This sentence is long enough to stand alone. Yes."] or pieces == [
        "Hi. Ok. This sentence is long enough to stand alone.",
        "Yes.",
    ]
    # The last short one joins the one before it.
    assert pieces[-1].endswith("Yes.")
    assert len(units) == 1


def test_short_sentence_stays_alone_when_joining_would_break_the_cap() -> None:
    text = "Hi. " + "x" * 25
    units = sentence_units(text, COUNTER, 20, min_characters=10)
    assert all(u.end - u.start <= 20 for u in units)
    assert [text[u.start : u.end] for u in units] == ["Hi.", "x" * 20, "x" * 5]


def test_hard_cap_splits_and_says_so() -> None:
    text, _ = topic_document(["sailing"], 12)
    chunker = with_embedder(SemanticChunker, embed, chunk_size=120)
    chunks = chunker.chunk(text)
    assert_contiguous(text, chunks, COUNTER, 120)
    caps = [c for c in chunks if c.metadata["start"] == "cap"]
    assert caps, "a one-topic text over the cap must be split by the cap"
    assert all(c.metadata["cap"] == 120 for c in caps)


def test_min_sentences_per_chunk() -> None:
    text, _ = topic_document(["cooking", "astronomy", "finance", "sailing"], 2)
    chunker = with_embedder(
        SemanticChunker, embed, similarity_window=1, threshold=1.0, min_sentences_per_chunk=3
    )
    chunks = chunker.chunk(text)
    assert_contiguous(text, chunks, COUNTER, 2048)
    for chunk in chunks:
        first, stop = chunk.metadata["units"]
        assert stop - first >= 3


def test_over_long_sentence_is_embedded_in_windows_and_averaged() -> None:
    sentence = "Alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron."
    text = f"Short one first here. {sentence} Short one at the end."
    window = ModelWindow(CharacterCounter(), 30)
    chunker = with_embedder(
        SemanticChunker, embed, model_window=window, min_characters_per_sentence=0
    )
    plan = chunker.plan(text)
    assert all(len(t) <= 30 for t in plan.texts)
    assert len(plan.units) == 3
    assert len(plan.texts) > 3
    # The long unit's vector is the length-weighted mean of its windows' vectors.
    vectors = unit_vectors(plan, embed(list(plan.texts)))
    pieces = window.pieces(text, plan.units[1])
    weights = np.array([p.end - p.start for p in pieces], dtype=np.float64)
    expected = (embed([text[p.start : p.end] for p in pieces]) * weights[:, None]).sum(axis=0)
    expected /= np.linalg.norm(expected)
    assert vectors[1] == pytest.approx(expected)
    # Nothing about the windows leaks into the chunks: they stay exact.
    assert_contiguous(text, chunker.assemble(plan, embed(list(plan.texts))), COUNTER, 2048)


def test_window_pieces_fit_the_model() -> None:
    window = character_window(12)
    text = "one two three four five six seven"
    pieces = window.pieces(text, Span(0, len(text)))
    assert all(p.end - p.start <= 10 for p in pieces)
    assert " ".join(text[p.start : p.end] for p in pieces) == text


def test_wrong_embeddings_are_refused() -> None:
    chunker = SemanticChunker()
    plan = chunker.plan("One sentence here, long enough. Another sentence there, also long.")
    with pytest.raises(ValueError, match="expected 2 embeddings"):
        chunker.assemble(plan, np.zeros((1, 4), dtype=np.float32))
    with pytest.raises(TypeError):
        chunker.assemble(object(), np.zeros((1, 4), dtype=np.float32))  # type: ignore[arg-type]
    # The chunker never embeds: the pipeline does, between plan and assemble.
    assert not hasattr(chunker, "chunk")


@pytest.mark.parametrize("text", ["", "   \n\n\t "])
def test_empty_documents(text: str) -> None:
    chunker = with_embedder(SemanticChunker, embed)
    plan = chunker.plan(text)
    assert plan.texts == ()
    assert chunker.assemble(plan, np.zeros((0, 8), dtype=np.float32)) == []


def test_deterministic() -> None:
    text, _ = topic_document(["finance", "cooking", "sailing"], 4)
    first = with_embedder(SemanticChunker, embed).chunk(text)
    second = with_embedder(SemanticChunker, embed).chunk(text)
    assert first == second


def test_tokens_as_the_unit(tokenizer_path: str) -> None:
    text, _ = topic_document(["cooking", "astronomy"], 8)
    chunker = with_embedder(SemanticChunker, embed, tokenizer=tokenizer_path, chunk_size=40)
    chunks = chunker.chunk(text)
    assert_contiguous(text, chunks, make_counter(tokenizer_path), 40)


def test_registry_builds_it_and_refuses_bad_parameters() -> None:
    built = registry.build("semantic", {"threshold": "0.5", "chunk_size": "300"})
    assert built.needs_model
    assert isinstance(built.chunker, SemanticChunker)
    assert built.chunker.params.threshold == 0.5
    with pytest.raises(registry.InvalidParameters, match="threshold"):
        registry.build("semantic", {"threshold": "1.5"})
    with pytest.raises(registry.InvalidParameters, match="bogus"):
        registry.build("semantic", {"bogus": "1"})
    with pytest.raises(ValueError, match="chunk_size"):
        SemanticChunker(chunk_size=0)


def test_plan_units_lists_sizes_in_the_unit() -> None:
    text = "First sentence. Second one!"
    units = sentence_units(text, COUNTER, 100)
    plan = plan_units(text, units, COUNTER, character_window())
    assert list(plan.sizes) == [15.0, 11.0]
    assert plan.texts == ("First sentence.", "Second one!")


def test_threshold_zero_is_the_deepest_valley_only() -> None:
    # The design's range is 0.0-1.0: 0.0 takes the 0th percentile, so only the valley of
    # least similarity (and any tied with it) is a candidate.
    text, seams = topic_document(["cooking", "astronomy", "finance"], 5)
    chunks = with_embedder(SemanticChunker, embed, similarity_window=2, threshold=0.0).chunk(text)
    assert len(chunks) == 2
    assert chunks[1].start_index in seams
    lowest = min(
        c.metadata["boundary_similarity"]
        for c in with_embedder(SemanticChunker, embed, similarity_window=2, threshold=1.0).chunk(
            text
        )[1:]
    )
    assert chunks[1].metadata["boundary_similarity"] == lowest
    assert registry.build("semantic", {"threshold": "0.0"}).chunker.params.threshold == 0.0
    assert registry.build("sdpm", {"threshold": "0"}).chunker.params.threshold == 0.0
