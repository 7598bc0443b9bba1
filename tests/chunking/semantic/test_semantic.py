from __future__ import annotations

import numpy as np
import pytest

from tests.support.fake_embedder import RecordingEmbedder, embed, topic_document, with_embedder
from tests.support.token_counters import make_counter
from tests.support.window_invariants import assert_contiguous
from worker.chunking import registry
from worker.chunking.semantic.first_pass import SENTENCE_BAR, bars
from worker.chunking.semantic.layout import BLOCK, GLUE, ITEM, SECTION, SENTENCE
from worker.chunking.semantic.model_window import ModelWindow, character_window
from worker.chunking.semantic.semantic import SemanticChunker
from worker.chunking.semantic.units import UnitVectors
from worker.chunking.text.tokens import CharacterCounter
from worker.chunking.types import EmbeddingChunker, Span

COUNTER = CharacterCounter()


def test_cuts_at_topic_seams() -> None:
    text, seams = topic_document(["cooking", "astronomy", "finance"], 5)
    chunker = with_embedder(SemanticChunker, embed, similarity_window=2)
    chunks = chunker.chunk(text)
    assert_contiguous(text, chunks, COUNTER, 1000)
    assert [c.start_index for c in chunks] == [0, *seams]
    for chunk in chunks[1:]:
        meta = chunk.metadata
        assert meta["start"] == "boundary"
        assert meta["cut_level"] == "block"
        assert meta["evidence"] > meta["threshold"] == 1.5
    assert chunks[0].metadata["start"] == "document"


def test_a_cut_inside_a_paragraph_needs_more_evidence() -> None:
    table = bars(1.5)
    assert table[SECTION] == -np.inf  # a section start needs none
    assert table[BLOCK] == table[ITEM] == 1.5
    assert table[SENTENCE] == SENTENCE_BAR * 1.5 > table[BLOCK]
    assert table[GLUE] == np.inf  # never for evidence alone
    # The same topic change, once at a paragraph break and once inside a paragraph: with
    # evidence between the two bars only the break is cut.
    text, seams = topic_document(["cooking", "astronomy"], 5)
    joined = text.replace("\n\n", " ")
    at_break = with_embedder(SemanticChunker, embed, similarity_window=2).chunk(text)
    evidence = at_break[1].metadata["evidence"]
    threshold = evidence / (SENTENCE_BAR + 1) * 2  # above it / SENTENCE_BAR, below it
    assert threshold < evidence < SENTENCE_BAR * threshold
    params = {"similarity_window": 2, "threshold": threshold}
    assert [c.start_index for c in with_embedder(SemanticChunker, embed, **params).chunk(text)] == [
        0,
        *seams,
    ]
    inside = with_embedder(SemanticChunker, embed, **params).chunk(joined)
    assert [c.start_index for c in inside] == [0]


def test_is_an_embedding_chunker_and_embeds_each_text_once() -> None:
    text = "Same line repeated here.\nSame line repeated here.\n" * 3 + "A different one at last."
    recorder = RecordingEmbedder()
    chunker = with_embedder(SemanticChunker, recorder)
    assert isinstance(chunker.chunker, EmbeddingChunker)
    chunks = chunker.chunk(text)
    assert len(recorder.calls) == 1
    (texts,) = recorder.calls
    assert (
        sorted(texts)
        == sorted(set(texts))
        == ["A different one at last.", "Same line repeated here."]
    )
    assert_contiguous(text, chunks, COUNTER, 1000)


def test_hard_cap_splits_and_says_so() -> None:
    text, _ = topic_document(["sailing"], 12)
    chunker = with_embedder(SemanticChunker, embed, chunk_size=120, min_chunk_size=20)
    chunks = chunker.chunk(text)
    assert_contiguous(text, chunks, COUNTER, 120)
    caps = [c for c in chunks if c.metadata["start"] == "cap"]
    assert caps, "a one-topic text over the cap must be split by the cap"
    assert all(c.token_count >= 20 for c in chunks)


def test_no_chunk_under_the_minimum_unless_the_document_is() -> None:
    # The example: a short first sentence must not be a chunk of its own.
    text = (
        "Retrieval-augmented generation starts long before a model sees a prompt.\n\n"
        + topic_document(["finance", "sailing"], 4)[0]
    )
    chunks = with_embedder(SemanticChunker, embed, similarity_window=1, threshold=0.0).chunk(text)
    assert all(c.token_count >= 1000 // 8 for c in chunks)
    small = with_embedder(SemanticChunker, embed).chunk("Tiny. Document.")
    assert [c.text for c in small] == ["Tiny. Document."]


def test_min_sentences_per_chunk() -> None:
    text, _ = topic_document(["cooking", "astronomy", "finance", "sailing"], 2)
    chunker = with_embedder(
        SemanticChunker,
        embed,
        similarity_window=1,
        threshold=0.0,
        min_sentences_per_chunk=3,
        min_chunk_size=0,
    )
    chunks = chunker.chunk(text)
    assert_contiguous(text, chunks, COUNTER, 1000)
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
    assert plan.count == 3
    assert len(plan.texts) > 3
    # The long unit's vector is the length-weighted mean of its windows' vectors.
    vectors = UnitVectors(plan, embed(list(plan.texts)))
    pieces = window.pieces(text, plan.units[1])
    weights = np.array([p.end - p.start for p in pieces], dtype=np.float64)
    expected = (embed([text[p.start : p.end] for p in pieces]) * weights[:, None]).sum(axis=0)
    expected /= np.linalg.norm(expected)
    assert vectors.rows(1, 2)[0] == pytest.approx(expected, abs=1e-6)
    # Nothing about the windows leaks into the chunks: they stay exact.
    assert_contiguous(text, chunker.assemble(plan, embed(list(plan.texts))), COUNTER, 1000)


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


def test_the_caller_embeddings_are_normalised_in_place_not_copied() -> None:
    chunker = SemanticChunker()
    plan = chunker.plan("One sentence here, long enough. Another sentence there, also long.")
    rows = np.array([[3.0, 4.0], [0.0, 2.0]], dtype=np.float32)
    vectors = UnitVectors(plan, rows)
    assert vectors.matrix is rows
    assert rows.tolist() == [[0.6000000238418579, 0.800000011920929], [0.0, 1.0]]
    frozen = rows.copy()
    frozen.flags.writeable = False
    assert UnitVectors(plan, frozen).matrix is not frozen  # what it may not change, it copies


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
    assert all(c.token_count >= 5 for c in chunks)  # 40 // 8


def test_registry_builds_it_and_refuses_bad_parameters() -> None:
    built = registry.build("semantic", {"threshold": "0.5", "chunk_size": "300"})
    assert built.needs_model
    assert isinstance(built.chunker, SemanticChunker)
    assert built.chunker.params.threshold == 0.5
    with pytest.raises(registry.InvalidParameters, match="threshold"):
        registry.build("semantic", {"threshold": "-1"})
    with pytest.raises(registry.InvalidParameters, match="bogus"):
        registry.build("semantic", {"bogus": "1"})
    with pytest.raises(registry.InvalidParameters, match="min_chunk_size"):
        registry.build("semantic", {"chunk_size": "100", "min_chunk_size": "26"})
    with pytest.raises(ValueError, match="chunk_size"):
        SemanticChunker(chunk_size=0)
