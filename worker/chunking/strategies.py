"""The built-in strategies: each name with its parameters, factory and whether it needs the
boundary model. The registry reads :data:`BUILTIN`; this module knows only the contract.

The factories resolve every strategy's ``tokenizer`` parameter here, once (:func:`size_unit`):
they may read a model directory (the strategies' rooms may not, or need not), and the rule and
the embedding strategies then count in the same unit, each room with its own counter."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worker.chunking.contract import BuildContext, Strategy
from worker.chunking.rules.adaptive import NAME as ADAPTIVE
from worker.chunking.rules.adaptive import AdaptiveChunker, AdaptiveParams
from worker.chunking.rules.lexical import NAME as LEXICAL
from worker.chunking.rules.lexical import LexicalChunker, LexicalParams
from worker.chunking.rules.sentence import NAME as SENTENCE
from worker.chunking.rules.sentence import SentenceChunker, SentenceParams
from worker.chunking.rules.sizing import CHARACTERS, Sizing
from worker.chunking.semantic import sizing as semantic_units
from worker.chunking.semantic.context import NAME as CONTEXT
from worker.chunking.semantic.context import ContextChunker, ContextParams, check_embedding_model
from worker.chunking.semantic.model_window import window_of
from worker.chunking.semantic.sdpm import NAME as SDPM
from worker.chunking.semantic.sdpm import SDPMChunker, SDPMParams
from worker.chunking.semantic.semantic import NAME as SEMANTIC
from worker.chunking.semantic.semantic import SemanticChunker, SemanticParams
from worker.chunking.text.tokens import CHARACTER, piece_counter


@dataclass(frozen=True)
class SizeUnit:
    """What a ``tokenizer`` parameter names: a ``tokenizer.json`` whose tokens sizes count,
    and the window of the model that reads them (None: none known)."""

    tokenizer: str
    window: int | None


def size_unit(tokenizer: str | None, context: BuildContext) -> SizeUnit | None:
    """The unit of every strategy's ``tokenizer`` parameter (None: characters):
    ``"character"``, a ``tokenizer.json``, a model directory (its tokenizer, and its window as
    a cap), or unset: the retrieval model's tokens and window when the context has one, else
    characters (docs/concepts/strategies.md, "Sizes")."""
    if tokenizer is None:
        retrieval = context.retrieval
        return None if retrieval is None else SizeUnit(str(retrieval.tokenizer), retrieval.window)
    if tokenizer == CHARACTER:
        return None
    if Path(tokenizer).is_dir():
        from worker.models.manifest import ManifestError
        from worker.models.reference import describe

        try:
            model = describe(Path(tokenizer), "retrieval")
        except ManifestError as exc:
            raise ValueError(f"tokenizer {tokenizer!r}: {exc}") from None
        return SizeUnit(str(model.tokenizer), model.window)
    return SizeUnit(tokenizer, None)


def sizing(tokenizer: str | None, context: BuildContext) -> Sizing:
    """A rule strategy's unit (rules/sizing.py)."""
    unit = size_unit(tokenizer, context)
    return CHARACTERS if unit is None else Sizing(piece_counter(unit.tokenizer), unit.window)


def semantic_sizing(tokenizer: str | None, context: BuildContext) -> semantic_units.Sizing:
    """An embedding strategy's unit (semantic/sizing.py)."""
    unit = size_unit(tokenizer, context)
    if unit is None:
        return semantic_units.CHARACTERS
    return semantic_units.Sizing(semantic_units.load_unit(unit.tokenizer), unit.window)


def _build_sentence(params: SentenceParams, context: BuildContext) -> SentenceChunker:
    return SentenceChunker(params, sizing(params.tokenizer, context))


def _build_lexical(params: LexicalParams, context: BuildContext) -> LexicalChunker:
    return LexicalChunker(params, sizing(params.tokenizer, context))


def _build_adaptive(params: AdaptiveParams, context: BuildContext) -> AdaptiveChunker:
    return AdaptiveChunker.from_params(params, sizing(params.tokenizer, context))


def _build_semantic(params: SemanticParams, context: BuildContext) -> SemanticChunker:
    sizing = semantic_sizing(params.tokenizer, context)
    return SemanticChunker(params, model_window=window_of(context.boundary), sizing=sizing)


def _build_sdpm(params: SDPMParams, context: BuildContext) -> SDPMChunker:
    sizing = semantic_sizing(params.tokenizer, context)
    return SDPMChunker(params, model_window=window_of(context.boundary), sizing=sizing)


def _build_context(params: ContextParams, context: BuildContext) -> ContextChunker:
    check_embedding_model(params, context.boundary)
    sizing = semantic_sizing(params.tokenizer, context)
    return ContextChunker(params, model_window=window_of(context.boundary), sizing=sizing)


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
