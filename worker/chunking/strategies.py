"""Imports every built-in strategy module so that each registers itself with the registry."""

from worker.chunking.embedding.context import NAME as CONTEXT
from worker.chunking.embedding.context import ContextChunker, ContextParams, resolve_model_dir
from worker.chunking.embedding.model_window import load_model_window
from worker.chunking.embedding.sdpm import NAME as SDPM
from worker.chunking.embedding.sdpm import SDPMChunker, SDPMParams
from worker.chunking.embedding.semantic import NAME as SEMANTIC
from worker.chunking.embedding.semantic import SemanticChunker, SemanticParams
from worker.chunking.registry import BuildContext, Strategy, register
from worker.chunking.rules.adaptive import NAME as ADAPTIVE
from worker.chunking.rules.adaptive import AdaptiveChunker, AdaptiveParams
from worker.chunking.rules.lexical import NAME as LEXICAL
from worker.chunking.rules.lexical import LexicalChunker, LexicalParams
from worker.chunking.rules.sentence import NAME as SENTENCE
from worker.chunking.rules.sentence import SentenceChunker, SentenceParams


def _build_sentence(params: SentenceParams, _context: BuildContext) -> SentenceChunker:
    return SentenceChunker(params)


def _build_lexical(_params: LexicalParams, _context: BuildContext) -> LexicalChunker:
    return LexicalChunker()


def _build_adaptive(params: AdaptiveParams, _context: BuildContext) -> AdaptiveChunker:
    return AdaptiveChunker.from_params(params)


register(
    Strategy(
        name=SENTENCE,
        params_type=SentenceParams,
        factory=_build_sentence,
        needs_model=False,
        summary="Whole sentences packed greedily up to chunk_size (characters or tokens).",
    )
)
register(
    Strategy(
        name=ADAPTIVE,
        params_type=AdaptiveParams,
        factory=_build_adaptive,
        needs_model=False,
        summary="Sentence packing whose size target follows the local information density.",
    )
)
register(
    Strategy(
        name=LEXICAL,
        params_type=LexicalParams,
        factory=_build_lexical,
        needs_model=False,
        summary="Block-by-block merging by lexical cues (headings, lists, phrases, keywords).",
    )
)


def _build_semantic(params: SemanticParams, context: BuildContext) -> SemanticChunker:
    return SemanticChunker(params=params, model_window=load_model_window(context.model_dir))


def _build_sdpm(params: SDPMParams, context: BuildContext) -> SDPMChunker:
    return SDPMChunker(params=params, model_window=load_model_window(context.model_dir))


def _build_context(params: ContextParams, context: BuildContext) -> ContextChunker:
    model_dir = resolve_model_dir(params, context.model_dir)
    return ContextChunker(params=params, model_window=load_model_window(model_dir))


register(
    Strategy(
        name=SEMANTIC,
        params_type=SemanticParams,
        factory=_build_semantic,
        needs_model=True,
        summary="Boundaries at valleys of sentence-embedding similarity, packed under a hard cap.",
    )
)
register(
    Strategy(
        name=SDPM,
        params_type=SDPMParams,
        factory=_build_sdpm,
        needs_model=True,
        summary="`semantic`, then merges of similar chunks up to skip_window apart.",
    )
)
register(
    Strategy(
        name=CONTEXT,
        params_type=ContextParams,
        factory=_build_context,
        needs_model=True,
        summary="Sentence groups plus the neighbouring sentences similar to each group.",
    )
)
