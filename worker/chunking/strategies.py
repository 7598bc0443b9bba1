"""Imports every built-in strategy module so that each registers itself with the registry."""

from worker.chunking.adaptive import NAME as ADAPTIVE
from worker.chunking.adaptive import AdaptiveChunker, AdaptiveParams
from worker.chunking.registry import BuildContext, Strategy, register
from worker.chunking.sentence import NAME as SENTENCE
from worker.chunking.sentence import SentenceChunker, SentenceParams


def _build_sentence(params: SentenceParams, _context: BuildContext) -> SentenceChunker:
    return SentenceChunker(params)


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
