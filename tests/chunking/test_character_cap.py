"""The hard cap in characters beside the cap in tokens (worker/chunking/text/character_cap.py),
in every strategy and in both paths of the rule strategies (compiled core and Python twin).

A run of letters and digits longer than WordPiece's word limit is one unknown token, so the
token cap never cut it: issue 46's ``'Here is a hash: ' + token_hex(150000) + ' end.'`` was one
chunk of 300,021 characters and 8 tokens in ``sentence``, ``adaptive``, ``lexical``,
``semantic`` (and ``sdpm`` and ``context``). Every chunk is now within
``CHARACTERS_PER_TOKEN`` × the window, cut at characters between grapheme clusters (checked
against the ``regex`` package's ``\\X``), with exact offsets and token counts, while documents
without such runs chunk exactly as before.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import regex
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.support.chunk_invariants import assert_chunks_exact, assert_covers
from tests.support.clusters import CLUSTERS, documents_with_runs, unspaced_runs
from tests.support.fake_embedder import embed
from worker.chunking import _native as native
from worker.chunking import registry
from worker.chunking.rules import adaptive, lexical, sentence
from worker.chunking.rules.adaptive import AdaptiveChunker
from worker.chunking.rules.lexical import LexicalChunker, LexicalParams
from worker.chunking.rules.sentence import SentenceChunker, SentenceParams
from worker.chunking.rules.sizing import Sizing
from worker.chunking.semantic.context import ContextChunker, ContextParams
from worker.chunking.semantic.sdpm import SDPMChunker, SDPMParams
from worker.chunking.semantic.semantic import SemanticChunker, SemanticParams
from worker.chunking.semantic.sizing import Sizing as SemanticSizing
from worker.chunking.semantic.sizing import load_unit
from worker.chunking.text import character_cap
from worker.chunking.text.character_cap import CHARACTERS_PER_TOKEN, CharacterCap, characters_for
from worker.chunking.text.tokens import PIECE_MEMORY_MAX_CHARS, PieceCounter, piece_counter
from worker.chunking.text.units import piece_sums
from worker.chunking.types import Chunk, ContentType, Span, join_spans
from worker.models.reference import describe
from worker.pipeline import assemble_with_sync

RULES = ("sentence", "adaptive", "lexical")
EMBEDDING = ("semantic", "sdpm", "context")
WINDOW = 254  # all-MiniLM-L6-v2's, the worker's default retrieval model
CHECKS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def issue_document(seed: int = 46) -> str:
    """Issue 46's reproduction, with a seeded hash: 300,021 characters."""
    digits = random.Random(seed).getrandbits(150000 * 8).to_bytes(150000, "big").hex()
    return f"Here is a hash: {digits} end."


@pytest.fixture(scope="module")
def counter(tokenizer_path: str) -> PieceCounter:
    return piece_counter(tokenizer_path)


@pytest.fixture(scope="module")
def worker_context(model_dir: Path) -> registry.BuildContext:
    """What the worker builds its strategies with by default: the retrieval model's sizes."""
    return registry.BuildContext(retrieval=describe(model_dir, "retrieval"))


def twin_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pure-Python path: every compiled core off (the seam's one switch)."""
    monkeypatch.setenv(native.PURE_PYTHON_ENV, "1")
    assert (sentence.compiled(), adaptive.compiled(), lexical.compiled()) == (None, None, None)


def rule_chunk(chunker: Any, text: str, content_type: ContentType = "text/plain") -> list[Chunk]:
    return list(chunker.chunk(text, content_type=content_type))


def twin(chunker: Any, text: str, content_type: ContentType = "text/plain") -> list[Chunk]:
    if isinstance(chunker, AdaptiveChunker):  # reads plain text and markdown alike
        return chunker.chunk_reference(text)
    return list(chunker.chunk_reference(text, content_type=content_type))


def assert_within(
    text: str, chunks: list[Chunk], characters: int, tokens: int, count: Callable[[str], int]
) -> None:
    """Exact offsets, nothing lost, no chunk over either cap (but one grapheme cluster whose
    own count passes the token cap), every token count exact, and no chunk edge inside a
    cluster (by the ``regex`` package's ``\\X``). In order, but for ``context``, whose chunk
    may start with context before the previous chunk's core."""
    if not any(c.strategy == "context" for c in chunks):
        assert_chunks_exact(text, chunks)
    for chunk in chunks:
        pieces = chunk.spans or (Span(chunk.start_index, chunk.end_index),)
        assert chunk.text == join_spans(text, pieces)
    assert_covers(text, chunks)
    boundaries = {0} | {m.end() for m in regex.finditer(r"\X", text)}
    for chunk in chunks:
        assert len(chunk.text) <= characters, (len(chunk.text), characters)
        assert chunk.token_count == count(chunk.text), chunk.text[:60]
        one_cluster = len(regex.findall(r"\X", chunk.text)) == 1
        assert chunk.token_count <= tokens or one_cluster, (chunk.token_count, tokens)
        for span in chunk.spans or (Span(chunk.start_index, chunk.end_index),):
            assert span.start in boundaries, (span, chunk.text[:40])
            assert span.end in boundaries, (span, chunk.text[:40])


# -- issue 46's reproduction --------------------------------------------------------------------


@pytest.mark.parametrize("name", RULES)
def test_the_issue_hash_is_cut_by_the_rule_strategies_in_both_paths(
    name: str,
    worker_context: registry.BuildContext,
    counter: PieceCounter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = issue_document()
    built = registry.build(name, {}, worker_context)
    chunker: Any = built.chunker
    compiled = rule_chunk(chunker, text)
    assert compiled == chunker.chunk_reference(text)
    twin_only(monkeypatch)
    assert rule_chunk(registry.build(name, {}, worker_context).chunker, text) == compiled
    characters = CHARACTERS_PER_TOKEN * WINDOW
    assert chunker.characters.characters == characters
    assert_within(text, compiled, characters, WINDOW, counter.count_exact)
    assert len(compiled) >= len(text) // characters
    assert compiled[0].text == "Here is a hash:"  # the run starts a chunk of its own
    assert [c.metadata["chunk_index"] for c in compiled] == list(range(len(compiled)))


@pytest.mark.parametrize("name", EMBEDDING)
def test_the_issue_hash_is_cut_by_the_embedding_strategies(
    name: str, worker_context: registry.BuildContext, counter: PieceCounter
) -> None:
    text = issue_document()
    built = registry.build(name, {}, worker_context)
    assert built.needs_model
    chunks = assemble_with_sync(built.chunker, text, "text/plain", embed)  # type: ignore[arg-type]
    assert_within(text, chunks, CHARACTERS_PER_TOKEN * WINDOW, WINDOW, counter.count_exact)
    assert all(c.metadata["start"] == "cap" for c in chunks[1:] if name != "context")


# -- properties on adversarial text -------------------------------------------------------------


def rule_chunkers(counter: PieceCounter, window: int, cap: int) -> Iterator[Any]:
    sizing = Sizing(counter, window)
    yield SentenceChunker(SentenceParams(chunk_size=cap), sizing)
    yield AdaptiveChunker(max_size=cap, min_size=max(1, cap // 4), sizing=sizing)
    yield LexicalChunker(LexicalParams(chunk_size=cap), sizing)


@CHECKS
@given(
    text=documents_with_runs(),
    window=st.sampled_from([4, 8, 16, 40]),
    share=st.sampled_from([1, 2, 4]),
    content_type=st.sampled_from(["text/plain", "text/markdown"]),
)
def test_rule_strategies_hold_both_caps_in_both_paths(
    counter: PieceCounter, text: str, window: int, share: int, content_type: ContentType
) -> None:
    """Small windows make the cap small (16 characters a token), so short runs reach it."""
    cap = max(1, window // share)
    for chunker in rule_chunkers(counter, window, cap):
        compiled = rule_chunk(chunker, text, content_type)
        assert compiled == twin(chunker, text, content_type)
        tokens = chunker.params.max_size if isinstance(chunker, AdaptiveChunker) else cap
        assert tokens is not None
        assert_within(text, compiled, characters_for(window, cap), tokens, counter.count_exact)


@CHECKS
@given(
    text=documents_with_runs(max_run=120),
    cap=st.sampled_from([1, 3, 12, 50]),
    content_type=st.sampled_from(["text/plain", "text/markdown"]),
)
def test_words_cut_in_characters_keep_their_clusters_in_both_paths(
    text: str, cap: int, content_type: ContentType
) -> None:
    """In characters the cap is the character cap: a word over it is cut between clusters,
    by the core (which calls the twin's cutter) as by the twin."""
    characters = Sizing()
    for chunker in (
        SentenceChunker(SentenceParams(chunk_size=cap), characters),
        AdaptiveChunker(max_size=cap, min_size=1, sizing=characters),
        LexicalChunker(LexicalParams(chunk_size=cap), characters),
    ):
        compiled = rule_chunk(chunker, text, content_type)
        assert compiled == twin(chunker, text, content_type)
        assert_chunks_exact(text, compiled)
        assert_covers(text, compiled)
        # Every edge between clusters, but inside a cluster longer than the cap (a family
        # emoji under a cap of 3), which the cap cuts: it comes first.
        wide: set[int] = set()
        boundaries = {0}
        for cluster in regex.finditer(r"\X", text):
            boundaries.add(cluster.end())
            if cluster.end() - cluster.start() > cap:
                wide.update(range(cluster.start() + 1, cluster.end()))
        for chunk in compiled:
            assert len(chunk.text) == chunk.token_count <= cap
            for edge in (chunk.start_index, chunk.end_index):
                assert edge in boundaries or edge in wide, (edge, chunk.text)


def embedding_chunker(name: str, tokenizer: str, window: int, cap: int) -> Any:
    sizing = SemanticSizing(load_unit(tokenizer), window)
    if name == "semantic":
        return SemanticChunker(SemanticParams(chunk_size=cap), sizing=sizing)
    if name == "sdpm":
        return SDPMChunker(SDPMParams(chunk_size=cap), sizing=sizing)
    return ContextChunker(ContextParams(chunk_size=cap), sizing=sizing)


@CHECKS
@given(
    text=documents_with_runs(),
    name=st.sampled_from(EMBEDDING),
    window=st.sampled_from([8, 16, 40]),
)
@example(text="done. The done. done.", name="context", window=8)  # context before a core
def test_embedding_strategies_hold_both_caps(
    tokenizer_path: str, counter: PieceCounter, text: str, name: str, window: int
) -> None:
    chunker = embedding_chunker(name, tokenizer_path, window, window)
    chunks = assemble_with_sync(chunker, text, "text/plain", embed)
    assert_within(text, chunks, characters_for(window, window), window, counter.count_exact)


@pytest.mark.parametrize("window", [4, 5])
@pytest.mark.parametrize("cluster", [c for c in CLUSTERS if len(c) > 1])
def test_a_run_of_clusters_is_cut_between_them(
    cluster: str, window: int, tokenizer_path: str, counter: PieceCounter
) -> None:
    """Each kind of cluster, repeated well past a small window's cap after one letter (for
    one of the two windows the cap falls inside a cluster), in every strategy."""
    text = f"Look: x{cluster * (211 // len(cluster) + 1) * 3} and the end."
    characters = characters_for(window, window)
    for chunker in rule_chunkers(counter, window, window):
        chunks = rule_chunk(chunker, text)
        assert chunks == twin(chunker, text)
        tokens = chunker.params.max_size if isinstance(chunker, AdaptiveChunker) else window
        assert tokens is not None
        assert_within(text, chunks, characters, tokens, counter.count_exact)
    for name in EMBEDDING:
        chunker = embedding_chunker(name, tokenizer_path, window, window)
        chunks = assemble_with_sync(chunker, text, "text/plain", embed)
        assert_within(text, chunks, characters, window, counter.count_exact)


# -- the cap leaves ordinary text alone ---------------------------------------------------------


@pytest.fixture(scope="module")
def ordinary() -> list[tuple[str, str, ContentType]]:
    """Real documents: the examples (Arabic among them) and the descriptions of the project's
    installed dependency closure (markdown and reStructuredText, code, tables)."""
    from tests.support.corpus import gather

    examples = sorted((Path(__file__).resolve().parents[2] / "examples").iterdir())
    docs: list[tuple[str, str, ContentType]] = [
        (
            p.name,
            p.read_text(encoding="utf-8"),
            "text/markdown" if p.suffix == ".md" else "text/plain",
        )
        for p in examples
    ]
    return docs + [(d.name, d.text, d.content_type) for d in gather()]


def test_ordinary_documents_chunk_as_without_the_cap(
    ordinary: list[tuple[str, str, ContentType]],
    worker_context: registry.BuildContext,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def chunked() -> dict[str, list[list[Chunk]]]:
        out: dict[str, list[list[Chunk]]] = {}
        for name in (*RULES, *EMBEDDING):
            built = registry.build(name, {}, worker_context)
            out[name] = [
                assemble_with_sync(built.chunker, text, kind, embed)  # type: ignore[arg-type]
                if built.needs_model
                else rule_chunk(built.chunker, text, kind)
                for _, text, kind in ordinary
            ]
        return out

    capped = chunked()
    monkeypatch.setattr(character_cap, "CHARACTERS_PER_TOKEN", 10**9)
    assert chunked() == capped
    longest = max(len(c.text) for runs in capped.values() for doc in runs for c in doc)
    assert longest < CHARACTERS_PER_TOKEN * WINDOW // 2  # far from the cap, not just under it


# -- the pieces, the derivation, the memory -----------------------------------------------------


def test_the_cap_follows_the_window() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs/concepts/strategies.md").read_text()
    assert f"{CHARACTERS_PER_TOKEN} characters × the model's window" in page
    assert f"{CHARACTERS_PER_TOKEN * 254:,} characters for all-MiniLM-L6-v2's 254" in page
    assert characters_for(254, 96) == CHARACTERS_PER_TOKEN * 254
    assert characters_for(None, 8) == CHARACTERS_PER_TOKEN * 254  # the default model's window
    assert characters_for(None, 1000) == CHARACTERS_PER_TOKEN * 1000


def test_a_run_cut_short_stays_within_the_token_cap(counter: PieceCounter) -> None:
    """A run over WordPiece's word limit is one unknown token; a piece of it under the limit
    is many: the pieces are shortened until each fits the token cap."""
    text = "see " + "0123456789abcdef" * 20 + " end"
    cap = CharacterCap(100, counter.count_exact)
    assert counter.count_exact(text) <= 3
    pieces = cap.pieces(text, 0, len(text), 3)
    assert "".join(text[a:b] for a, b, _ in pieces) == text.replace(" ", "")
    for a, b, count in pieces:
        assert b - a <= 100
        assert count == counter.count_exact(text[a:b]) <= 3


def test_pieces_end_at_words_where_they_can(counter: PieceCounter) -> None:
    words = " ".join(["word"] * 40)
    text = f"{words} {'f' * 300} {words}"
    pieces = CharacterCap(120, counter.count_exact).pieces(text, 0, len(text), 1000)
    for a, b, _ in pieces:
        assert b - a <= 120
        inside_run = text[a:b].strip("f") == ""
        assert inside_run or text[a:b].endswith("word") or text[a:b].endswith("f")


@given(run=unspaced_runs(min_size=50))
@settings(max_examples=60, deadline=None)
def test_piece_sums_are_the_tokenizers_counts(counter: PieceCounter, run: str) -> None:
    text = f"A {run} z.\x0bq\t{run[:7]}"
    assert piece_sums(counter)(text) == counter.count_exact(text)


def test_long_pieces_are_counted_not_remembered(tokenizer_path: str) -> None:
    """A multi-megabyte run is counted once and not kept by the memory of piece counts,
    which would hold it long after its document."""
    counter = piece_counter(tokenizer_path)
    long_run, word = "ab" * PIECE_MEMORY_MAX_CHARS, "remembered"
    assert counter.count_pieces([long_run, word]) == [
        counter.count_exact(long_run),
        counter.count_exact(word),
    ]
    assert word in counter.known
    assert long_run not in counter.known
    unit = load_unit(tokenizer_path)
    assert list(unit.count_many([f"x {long_run}"])) == [counter.count_exact(f"x {long_run}")]
