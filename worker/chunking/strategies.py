"""Imports every built-in strategy module so that each registers itself with the registry."""

from pathlib import Path

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
from worker.chunking.rules.sizing import CHARACTERS, Sizing
from worker.chunking.text.tokens import CHARACTER, piece_counter


def _retrieval_model(context: BuildContext) -> tuple[str, int] | None:
    """The tokenizer path and window of the model that embeds the chunks, when the context
    names one (the lead's BuildContext reference; read by name so that this module works
    before and after it lands)."""
    model = getattr(context, "retrieval_model", None)
    if model is None:
        return None
    return str(model.tokenizer_path), int(model.window)


def sizing(tokenizer: str | None, context: BuildContext) -> Sizing:
    """A rule strategy's unit from its ``tokenizer`` parameter: ``"character"``, a
    ``tokenizer.json``, a model directory (its tokenizer, and its window as a cap), or unset:
    the retrieval model's tokens and window when the context has one, else characters."""
    if tokenizer is None:
        retrieval = _retrieval_model(context)
        if retrieval is None:
            return CHARACTERS
        path, window = retrieval
        return Sizing(piece_counter(path), window)
    if tokenizer == CHARACTER:
        return CHARACTERS
    if Path(tokenizer).is_dir():
        model = load_model_window(tokenizer)
        return Sizing(piece_counter(model.counter.unit), model.cap)
    return Sizing(piece_counter(tokenizer))


def _build_sentence(params: SentenceParams, context: BuildContext) -> SentenceChunker:
    return SentenceChunker(params, sizing(params.tokenizer, context))


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
