"""How a rule strategy measures its chunks: characters, or the tokens of a model.

The unit comes from the strategy's ``tokenizer`` parameter (``"character"``, a
``tokenizer.json``, or a model directory, whose window then caps every chunk), or, when that
is unset, from the retrieval model the worker embeds chunks with (its tokenizer and window):
a chunk sized in that model's tokens reaches its vector whole. The registry's factories
resolve the parameter (they may read a model directory; this room may not) and hand the
result here as a :class:`Sizing`.
"""

from __future__ import annotations

from dataclasses import dataclass

from worker.chunking.text.character_cap import CharacterCap, characters_for
from worker.chunking.text.tokens import CHARACTER, DEFAULT_WINDOW, PieceCounter, piece_counter
from worker.chunking.text.units import piece_sums

SENTENCE_TOKENS = 96
"""``sentence``'s default size in tokens (the worker's default strategy): of the sizes 64,
96, 128, 192 and 254 (the window), the one that retrieved the most at a fixed context budget
on the retrieval benchmark's tune split, and still ahead of the window on the report split,
which it was not chosen on (``python -m bench.retrieval_bench``; docs/benchmarks.md)."""
DEFAULT_CHARACTERS = 1000
"""The default cap in characters (``tokenizer="character"`` and no retrieval model);
``lexical``'s is its own (``text/lexicon.py``)."""


@dataclass(frozen=True)
class AdaptiveSizes:
    """``adaptive``'s four sizes: the window its density is read from, the target of the
    densest text, the cap (the target of the sparsest text), the overlap."""

    base_size: int
    min_size: int
    max_size: int | None
    """None: the unit's default cap (the model's window in tokens)."""
    overlap: int


ADAPTIVE_CHARACTERS = AdaptiveSizes(base_size=512, min_size=100, max_size=1500, overlap=128)
"""The design's defaults, in characters."""
ADAPTIVE_TOKENS = AdaptiveSizes(base_size=128, min_size=25, max_size=None, overlap=32)
"""The same in tokens: a quarter of each (English prose runs about four characters to a
WordPiece token), the cap the model's window (254 for all-MiniLM-L6-v2: a quarter of 1,500
would pass it)."""


@dataclass(frozen=True)
class Sizing:
    """A strategy's unit: ``counter`` None for characters; ``window`` the most tokens the
    model that embeds the chunks reads (None: no window)."""

    counter: PieceCounter | None = None
    window: int | None = None

    @property
    def unit(self) -> str:
        return CHARACTER if self.counter is None else self.counter.unit

    def cap(
        self,
        requested: int | None,
        characters: int = DEFAULT_CHARACTERS,
        tokens: int | None = None,
    ) -> int:
        """The hard cap: the requested size (or the default of the unit: ``characters`` in
        characters; in tokens ``tokens``, else the window, else
        :data:`..text.tokens.DEFAULT_WINDOW`), at most the window."""
        if requested is None:
            if self.counter is None:
                requested = characters
            elif tokens is not None:
                requested = tokens
            else:
                requested = DEFAULT_WINDOW if self.window is None else self.window
        return requested if self.window is None else min(requested, self.window)

    def character_cap(self, cap: int) -> CharacterCap | None:
        """The hard cap in characters of chunks of at most ``cap`` in this unit (None in
        characters, where ``cap`` is one already): :mod:`..text.character_cap`."""
        if self.counter is None:
            return None
        return CharacterCap(characters_for(self.window, cap), piece_sums(self.counter))

    def adaptive_defaults(self) -> AdaptiveSizes:
        return ADAPTIVE_CHARACTERS if self.counter is None else ADAPTIVE_TOKENS


CHARACTERS = Sizing()


def own_sizing(tokenizer: str | None) -> Sizing:
    """The unit a chunker built without the registry reads from its own ``tokenizer``
    parameter: characters, or a ``tokenizer.json`` (no window). A model directory and the
    retrieval model are resolved by the registry's factories, which may read a model's
    manifest (worker/chunking/strategies.py)."""
    if tokenizer is None or tokenizer == CHARACTER:
        return CHARACTERS
    return Sizing(piece_counter(tokenizer))
