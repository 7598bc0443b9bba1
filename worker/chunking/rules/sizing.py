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

from worker.chunking.text.tokens import CHARACTER, PieceCounter, piece_counter

DEFAULT_TOKENS = 254
"""The default cap in tokens when no window says otherwise: all-MiniLM-L6-v2's window (256
less [CLS] and [SEP]). Provisional until the retrieval benchmark picks a size (docs/chunking.md,
"Sizes")."""
DEFAULT_CHARACTERS = 1000
"""The default cap in characters (``tokenizer="character"`` and no retrieval model)."""


@dataclass(frozen=True)
class Sizing:
    """A strategy's unit: ``counter`` None for characters; ``window`` the most tokens the
    model that embeds the chunks reads (None: no window)."""

    counter: PieceCounter | None = None
    window: int | None = None

    @property
    def unit(self) -> str:
        return CHARACTER if self.counter is None else self.counter.unit

    def cap(self, requested: int | None) -> int:
        """The hard cap: the requested size (or the default of the unit), at most the window."""
        if requested is None:
            requested = DEFAULT_CHARACTERS if self.counter is None else DEFAULT_TOKENS
            if self.window is not None:
                requested = self.window
        return requested if self.window is None else min(requested, self.window)


CHARACTERS = Sizing()


def own_sizing(tokenizer: str | None) -> Sizing:
    """The unit a chunker built without the registry reads from its own ``tokenizer``
    parameter: characters, or a ``tokenizer.json`` (no window). A model directory and the
    retrieval model are resolved by the registry's factories, which may read a model's
    manifest (worker/chunking/strategies.py)."""
    if tokenizer is None or tokenizer == CHARACTER:
        return CHARACTERS
    return Sizing(piece_counter(tokenizer))
