"""The built-in strategies: each name with its parameters, factory and whether it needs the
boundary model. The registry reads :data:`BUILTIN`; this module knows only the contract."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from worker.chunking.contract import BuildContext, Strategy
from worker.chunking.rules.adaptive import NAME as ADAPTIVE
from worker.chunking.rules.adaptive import AdaptiveChunker, AdaptiveParams
from worker.chunking.rules.lexical import NAME as LEXICAL
from worker.chunking.rules.lexical import LexicalChunker, LexicalParams
from worker.chunking.rules.sentence import NAME as SENTENCE
from worker.chunking.rules.sentence import (
    SentenceChunker,
    SentenceParams,
    compiled_layout_sentences,
    compiled_text_counts,
)
from worker.chunking.rules.sizing import CHARACTERS, Sizing
from worker.chunking.semantic import layout
from worker.chunking.semantic.context import NAME as CONTEXT
from worker.chunking.semantic.context import ContextChunker, ContextParams, check_embedding_model
from worker.chunking.semantic.model_window import ModelWindow, window_of
from worker.chunking.semantic.sdpm import NAME as SDPM
from worker.chunking.semantic.sdpm import SDPMChunker, SDPMParams
from worker.chunking.semantic.semantic import NAME as SEMANTIC
from worker.chunking.semantic.semantic import SemanticChunker, SemanticParams
from worker.chunking.semantic.sizing import Sizing as SemanticSizing
from worker.chunking.semantic.sizing import TokenizerUnit, resolve_sizing
from worker.chunking.text.tokens import CHARACTER, piece_counter

# The embedding layout's paragraph sentences in C when the sentence core is built: the semantic
# room may not import the cores, so it is handed over here (the same sentences either way).
layout.NATIVE_SENTENCES = compiled_layout_sentences()


def sizing(tokenizer: str | None, context: BuildContext) -> Sizing:
    """A rule strategy's unit from its ``tokenizer`` parameter: ``"character"``, a
    ``tokenizer.json``, a model directory (its tokenizer, and its window as a cap), or unset:
    the retrieval model's tokens and window when the context has one, else characters."""
    if tokenizer is None:
        retrieval = context.retrieval
        if retrieval is None:
            return CHARACTERS
        return Sizing(piece_counter(str(retrieval.tokenizer)), retrieval.window)
    if tokenizer == CHARACTER:
        return CHARACTERS
    if Path(tokenizer).is_dir():
        from worker.models.manifest import ManifestError
        from worker.models.reference import describe

        try:
            model = describe(Path(tokenizer), "retrieval")
        except ManifestError as exc:
            raise ValueError(f"tokenizer {tokenizer!r}: {exc}") from None
        return Sizing(piece_counter(str(model.tokenizer)), model.window)
    return Sizing(piece_counter(tokenizer))


def _build_sentence(params: SentenceParams, context: BuildContext) -> SentenceChunker:
    return SentenceChunker(params, sizing(params.tokenizer, context))


def _build_lexical(params: LexicalParams, context: BuildContext) -> LexicalChunker:
    return LexicalChunker(params, sizing(params.tokenizer, context))


def _build_adaptive(params: AdaptiveParams, context: BuildContext) -> AdaptiveChunker:
    return AdaptiveChunker.from_params(params, sizing(params.tokenizer, context))


def _count_compiled(counter: object) -> None:
    """Let a tokenizer unit of the embedding strategies count through the rule cores' piece
    memory where it can: a BERT-family tokenizer (counts add up at whitespace) and a built
    core. The counts are the same (tests/chunking/semantic/test_compiled_sizing.py); the semantic
    room may not import the cores, so the wiring is here."""
    if not isinstance(counter, TokenizerUnit) or not counter.additive:
        return
    try:
        pieces = piece_counter(counter.unit)
    except ValueError:  # not a BERT-style tokenizer: the unit counts on its own
        return
    text_counts = compiled_text_counts(pieces)
    if text_counts is not None:
        counter.count_texts_with(text_counts)


def semantic_sizing(tokenizer: str | None, context: BuildContext) -> SemanticSizing:
    """The embedding strategies' sizing (semantic/sizing.py), counting compiled where it can."""
    resolved = resolve_sizing(tokenizer, context.retrieval)
    _count_compiled(resolved.counter)
    return resolved


def model_window(context: BuildContext) -> ModelWindow:
    """The boundary model's window (semantic/model_window.py), counting compiled where it can."""
    window = window_of(context.boundary)
    _count_compiled(window.counter)
    return window


def _build_semantic(params: SemanticParams, context: BuildContext) -> SemanticChunker:
    sizing = semantic_sizing(params.tokenizer, context)
    return SemanticChunker(params, model_window=model_window(context), sizing=sizing)


def _build_sdpm(params: SDPMParams, context: BuildContext) -> SDPMChunker:
    sizing = semantic_sizing(params.tokenizer, context)
    return SDPMChunker(params, model_window=model_window(context), sizing=sizing)


def _build_context(params: ContextParams, context: BuildContext) -> ContextChunker:
    check_embedding_model(params, context.boundary)
    sizing = semantic_sizing(params.tokenizer, context)
    return ContextChunker(params, model_window=model_window(context), sizing=sizing)


BUILTIN: tuple[Strategy[Any], ...] = (
    Strategy(
        name=SENTENCE,
        params_type=SentenceParams,
        factory=_build_sentence,
        needs_model=False,
        summary=(
            "Whole sentences and blocks, content-defined cuts up to chunk_size"
            " (characters or tokens)."
        ),
    ),
    Strategy(
        name=ADAPTIVE,
        params_type=AdaptiveParams,
        factory=_build_adaptive,
        needs_model=False,
        summary=(
            "`sentence`'s units and cuts, each chunk's size following the local"
            " information density."
        ),
    ),
    Strategy(
        name=LEXICAL,
        params_type=LexicalParams,
        factory=_build_lexical,
        needs_model=False,
        summary=(
            "Blocks merged by lexical cues (headings, lists, phrases, keywords),"
            " content-defined cuts."
        ),
    ),
    Strategy(
        name=SEMANTIC,
        params_type=SemanticParams,
        factory=_build_semantic,
        needs_model=True,
        summary="Cuts where structure and sentence-embedding similarity agree, hard min and cap.",
    ),
    Strategy(
        name=SDPM,
        params_type=SDPMParams,
        factory=_build_sdpm,
        needs_model=True,
        summary="`semantic`, then merges of similar chunks up to skip_window apart.",
    ),
    Strategy(
        name=CONTEXT,
        params_type=ContextParams,
        factory=_build_context,
        needs_model=True,
        summary="Sentence groups plus the neighbouring sentences similar to each group.",
    ),
)
