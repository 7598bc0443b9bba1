"""How much text the boundary model sees at once, and cutting longer text into windows.

An encoder truncates its input at its window, so a sentence longer than that would be judged
on its first part only. Boundary decisions must see the whole text: a unit that does not fit is
cut at word boundaries into windows that do, each window is embedded, and the unit's vector is
the length-weighted mean of its windows (see :mod:`.units`).

The window comes from the boundary model's reference (:class:`worker.models.reference.ModelRef`,
resolved once by the caller): counted with the model's own ``tokenizer.json``, capped at the
model's own window. Without a model reference (a library caller with its own embedder) it is
counted in characters for a 256-token model. Both rely on one property of the BERT-family
WordPiece tokenizers the engine builds: a token never covers less than one character, so a text
of ``n`` characters has at most ``n`` tokens. That makes the character fallback safe (if
pessimistic), and lets the tokenizer path skip counting every text no longer than the window.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from worker.chunking.semantic.sizing import load_unit
from worker.chunking.text.segment import split_to_cap
from worker.chunking.text.tokens import CharacterCounter, TokenCounter, count_each
from worker.chunking.types import Span

if TYPE_CHECKING:
    from worker.models.reference import ModelRef

# [CLS] and [SEP] take two places of the model's window.
SPECIAL_TOKENS = 2
# all-MiniLM-L6-v2's window, used when no model is known.
FALLBACK_MAX_SEQ_LENGTH = 256
# A model that reads any length (a model2vec directory with max_length null) still gets units
# cut somewhere: far beyond any sentence.
_UNBOUNDED = 1 << 40


@dataclass(frozen=True)
class ModelWindow:
    """Texts of at most ``cap`` units of ``counter`` fit the model without truncation."""

    counter: TokenCounter
    cap: int

    def pieces(self, text: str, span: Span) -> list[Span]:
        """``span`` as is when it fits the model, else cut at words into pieces that do."""
        # At most one token per character (module docstring): short texts need no count.
        if span.end - span.start <= self.cap:
            return [span]
        return split_to_cap(text, span, self.counter, self.cap)

    def pieces_of_many(self, text: str, spans: Sequence[Span]) -> list[list[Span]]:
        """:meth:`pieces` of every span, the spans that might not fit counted in one call (the
        usual answer is that they fit: one count, not one call, each)."""
        out = [[span] for span in spans]
        longer = [i for i, span in enumerate(spans) if span.end - span.start > self.cap]
        if not longer:
            return out
        sizes = count_each(self.counter, [text[spans[i].start : spans[i].end] for i in longer])
        for i, size in zip(longer, sizes, strict=True):
            if size > self.cap:
                out[i] = split_to_cap(text, spans[i], self.counter, self.cap)
        return out


def character_window(max_seq_length: int = FALLBACK_MAX_SEQ_LENGTH) -> ModelWindow:
    """A window in characters: safe for any WordPiece model of that ``max_seq_length``."""
    return ModelWindow(CharacterCounter(), max(1, max_seq_length - SPECIAL_TOKENS))


def window_of(model: ModelRef | None) -> ModelWindow:
    """The window of the boundary model ``model`` (the character window without one)."""
    if model is None:
        return character_window()
    window = model.window
    # The sizing unit's counter: it remembers words, so cutting long units costs sums.
    counter = load_unit(str(model.tokenizer))
    return ModelWindow(counter, _UNBOUNDED if window is None else window)
