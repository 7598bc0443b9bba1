"""Imports every built-in strategy module so that each registers itself with the registry."""

import msgspec

from worker.chunking.adaptive import NAME as ADAPTIVE
from worker.chunking.adaptive import AdaptiveChunker, AdaptiveParams
from worker.chunking.lexical import NAME as LEXICAL
from worker.chunking.lexical import LexicalChunker
from worker.chunking.registry import BuildContext, Strategy, register
from worker.chunking.sentence import NAME as SENTENCE
from worker.chunking.sentence import SentenceChunker, SentenceParams


def _build_sentence(params: SentenceParams, _context: BuildContext) -> SentenceChunker:
    return SentenceChunker(params)


class LexicalParams(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """`lexical` takes no parameters: its cap and word lists are fixed by design."""


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
