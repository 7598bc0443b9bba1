"""Every registered chunking strategy, built through the registry as the worker builds it,
on arbitrary unicode and parameters drawn from each strategy's own documented ranges (read
from its parameter struct). Only the registry's documented StrategyError may escape (at
build time); chunking itself must not raise, and the chunk invariants must hold.

Embedding strategies get the small deterministic fake embedder of tests/support/fake_embedder.py.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.chunk_invariants import assert_chunks_exact, assert_covers
from tests.support.fake_embedder import embed
from tests.support.fuzz_profile import FUZZ
from tests.support.window_invariants import assert_windows
from worker.chunking import registry
from worker.chunking.text.lexicon import LEXICAL_MAX_CHARS
from worker.chunking.text.tokens import CharacterCounter
from worker.chunking.types import Chunk, ContentType, EmbeddingChunker, RuleChunker

COUNTER = CharacterCounter()
# The largest size parameter drawn: large enough for "everything in one chunk", small
# enough that the character-level cases stay fast.
SIZE_CAP = 3000
STRING_CHOICES: dict[str, list[Any]] = {
    "tokenizer": ["character"],
    "language": ["auto", "ar", "en"],
    "embedding_model": [None],
}

texts = st.one_of(
    st.text(max_size=400),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=2000),
    st.lists(
        st.sampled_from(
            ["Word", "word.", "Ünïcödé", "مرحبا.", "。", "😀", "e.g.", "3.14", "#", "- item",
             "```", "\n", "\n\n", " ", "\t", "\u200b", "\r\n", "?!", "...", "|a|b|"]
        ),
        max_size=300,
    ).map("".join),
)  # fmt: skip


def _field_strategy(name: str, info: msgspec.inspect.Type) -> st.SearchStrategy[Any]:
    if isinstance(info, msgspec.inspect.UnionType):
        return st.one_of([_field_strategy(name, t) for t in info.types])
    if isinstance(info, msgspec.inspect.NoneType):
        return st.none()
    if isinstance(info, msgspec.inspect.IntType):
        low = info.ge if info.ge is not None else (info.gt + 1 if info.gt is not None else 0)
        high = info.le if info.le is not None else max(low, SIZE_CAP)
        return st.integers(low, high)
    if isinstance(info, msgspec.inspect.FloatType):
        floor = info.ge if info.ge is not None else info.gt
        ceiling = info.le if info.le is not None else info.lt
        return st.floats(
            floor if floor is not None else -1e6,
            ceiling if ceiling is not None else 1e6,
            exclude_min=info.ge is None and info.gt is not None,
            exclude_max=info.le is None and info.lt is not None,
            allow_nan=False,
        )
    if isinstance(info, msgspec.inspect.StrType):
        return st.sampled_from(STRING_CHOICES[name])
    raise AssertionError(f"parameter {name}: no generator for {info}")


def params_for(name: str) -> st.SearchStrategy[dict[str, Any]]:
    """A subset of the strategy's parameters, each within its documented range."""
    info = msgspec.inspect.type_info(registry.get(name).params_type)
    assert isinstance(info, msgspec.inspect.StructType)
    fields = {f.name: _field_strategy(f.name, f.type) for f in info.fields}
    return st.fixed_dictionaries({}, optional=fields)


def cap_of(name: str, built: registry.BuiltStrategy, params: dict[str, Any]) -> int:
    if name == "lexical":
        return LEXICAL_MAX_CHARS
    if name == "adaptive":
        return int(built.chunker.params.max_size)  # type: ignore[union-attr]
    if name == "sentence":  # its default cap depends on the unit (rules/sizing.py)
        return int(built.chunker.sizes.cap)  # type: ignore[union-attr]
    if name in ("semantic", "sdpm"):  # chunk_size unset: the default of the sizing unit
        return int(built.chunker.bounds.cap)  # type: ignore[union-attr]
    if name == "context":
        return int(built.chunker.cap)  # type: ignore[union-attr]
    defaults = registry.get(name).params_type()
    return int(params.get("chunk_size", defaults.chunk_size))


def run(built: registry.BuiltStrategy, text: str, markdown: bool) -> list[Chunk]:
    ctype: ContentType = "text/markdown" if markdown else "text/plain"
    chunker = built.chunker
    if isinstance(chunker, EmbeddingChunker):
        plan = chunker.plan(text, content_type=ctype)
        return chunker.assemble(plan, embed(list(plan.texts)))
    assert isinstance(chunker, RuleChunker)
    return chunker.chunk(text, content_type=ctype)


def check(name: str, text: str, chunks: list[Chunk], cap: int) -> None:
    if name == "context":
        assert_windows(text, chunks, COUNTER, cap)
        return
    assert_chunks_exact(text, chunks)
    assert_covers(text, chunks)
    for chunk in chunks:
        assert len(chunk.text) <= cap, (name, len(chunk.text), cap)
        assert chunk.token_count >= 0
        assert chunk.strategy == name


def test_every_registered_strategy_is_fuzzed() -> None:
    assert set(registry.names()) == {
        "adaptive", "context", "lexical", "sdpm", "semantic", "sentence"
    }, "a new strategy: make sure its parameters have generators here"  # fmt: skip


@pytest.mark.parametrize("name", registry.names())
def test_strategy_on_arbitrary_text_and_parameters(name: str) -> None:
    @FUZZ
    @given(text=texts, params=params_for(name), markdown=st.booleans())
    def fuzz(text: str, params: dict[str, Any], markdown: bool) -> None:
        try:
            # No model dir: the character window, so the fake embedder is all there is.
            built = registry.build(name, params, registry.BuildContext())
        except registry.StrategyError:
            return  # documented: cross-field rules (min_size > max_size, core > chunk)
        chunks = run(built, text, markdown)
        check(name, text, chunks, cap_of(name, built, params))
        assert run(built, text, markdown) == chunks, "not deterministic"

    fuzz()
