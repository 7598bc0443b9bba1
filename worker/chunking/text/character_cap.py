"""The hard cap in characters beside the cap in tokens: no chunk holds more text than the
model's window could, whatever the tokenizer makes of it.

A chunk sized in tokens has an exact token count, but tokens do not bound characters: a
BERT-family tokenizer reads a run of letters and digits longer than its word limit (a hash, a
hex dump, Thai without spaces, a row of emoji) as one unknown token, and whitespace as none.
Such a run was one chunk of any length, and in the worker an event over the record limit: the
whole document dead-lettered. So every strategy that sizes in tokens also caps characters:

    characters = CHARACTERS_PER_TOKEN × the model's window (in tokens)

(without a known window: the chunk cap's, at least :data:`.tokens.DEFAULT_WINDOW`'s). Ordinary
text of any script spends a token on a few characters, so its chunks reach their token cap long
before this one and are cut exactly as they were; only text that costs far fewer tokens than
its length is cut by it. A chunk over it is cut (:meth:`CharacterCap.pieces`) at its last word
end within the cap, else inside the run between grapheme clusters (:mod:`.word_cuts`), each
piece also within the token cap (cutting a run can make it cost more tokens than it did whole)
and counted exactly. In characters the cap is already one: nothing more is needed.

docs/concepts/strategies.md ("Sizes") states the rule for users.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from worker.chunking.text.graphemes import floor_boundary
from worker.chunking.text.tokens import DEFAULT_WINDOW
from worker.chunking.text.word_cuts import piece_end
from worker.chunking.types import Chunk, Metadata

CHARACTERS_PER_TOKEN = 16
"""Characters a chunk may hold per token of the window: several times what real text spends
on a token (the benchmarks' corpora never come near it: tests/chunking/test_character_cap.py
checks that their chunks are untouched), small enough that a chunk stays a retrievable size."""

_SPACE = re.compile(r"\s+")
_SOLID = re.compile(r"\S")


def characters_for(window: int | None, cap: int) -> int:
    """The character cap of chunks of at most ``cap`` tokens for a model of ``window``
    (module docstring)."""
    return CHARACTERS_PER_TOKEN * (window if window is not None else max(cap, DEFAULT_WINDOW))


@dataclass(frozen=True)
class CharacterCap:
    """At most ``characters`` per chunk; ``count`` gives a text's exact tokens."""

    characters: int
    count: Callable[[str], int]

    def pieces(self, text: str, start: int, end: int, tokens: int) -> list[tuple[int, int, int]]:
        """``text[start:end]`` (stripped) as stripped pieces in order, each at most
        :attr:`characters` long and ``tokens`` in count (but a grapheme cluster over it, alone),
        with its count. Cut at the last word end that fits, else inside the word."""
        pieces: list[tuple[int, int, int]] = []
        at = start
        while True:
            stop, count = self._stop(text, at, end, tokens)
            pieces.append((at, stop, count))
            solid = _SOLID.search(text, stop, end)
            if solid is None:
                return pieces
            at = solid.start()

    def _stop(self, text: str, at: int, end: int, tokens: int) -> tuple[int, int]:
        """Where the piece from ``at`` (not a space) ends, and its count."""
        limit = min(end, at + self.characters)
        stop = end if limit == end else _last_word_end(text, at, limit)
        if stop is None:  # one run reaches past the cap: cut inside it, between clusters
            snapped = floor_boundary(text, limit, at)
            stop = limit if snapped is None else snapped
        count = self.count(text[at:stop])
        if count <= tokens:
            return stop, count
        # Over the token cap: a run cut short can cost more tokens than it did whole. The
        # last word end whose prefix fits (counts grow with whole words), else inside the first.
        ends = [m.start() for m in _SPACE.finditer(text, at + 1, stop)]
        first = ends[0] if ends else stop
        fitting = None
        low, high = 0, len(ends) - 1
        while low <= high:
            middle = (low + high) // 2
            count = self.count(text[at : ends[middle]])
            if count <= tokens:
                fitting, low = (ends[middle], count), middle + 1
            else:
                high = middle - 1
        if fitting is not None:
            return fitting

        def size(a: int, b: int) -> int:
            return self.count(text[a:b])

        stop = piece_end(size, text, at, first, tokens)
        return stop, size(at, stop)


def _last_word_end(text: str, at: int, limit: int) -> int | None:
    """The last place in ``(at, limit]`` where a word ends (whitespace follows it), found from
    the right (``limit`` < the text's length; ``text[at]`` is not a space)."""
    window = text[at : limit + 1]
    head = window.rstrip()
    if len(head) < len(window):
        return at + len(head)
    parts = window.rsplit(None, 1)
    return at + len(parts[0]) if len(parts) == 2 else None


Relabel = Callable[[Metadata, str], Metadata]
"""The metadata of a piece of a chunk cut for the character cap, from the chunk's (a copy)
and the piece's text: what a strategy says about a chunk's own text (its length, its
keywords) said again of the piece."""


def _unchanged(metadata: Metadata, text: str) -> Metadata:
    return metadata


def cap_chunks(
    text: str,
    chunks: list[Chunk],
    cap: CharacterCap | None,
    tokens: int,
    relabel: Relabel = _unchanged,
) -> list[Chunk]:
    """``chunks`` (contiguous, in order) with each one over the character cap cut into its
    :meth:`CharacterCap.pieces`; the pieces keep the chunk's metadata (``relabel``-ed) and
    every ``chunk_index`` follows the new order. The same list when none is over the cap."""
    if cap is None or all(c.end_index - c.start_index <= cap.characters for c in chunks):
        return chunks
    capped: list[Chunk] = []
    for chunk in chunks:
        if chunk.end_index - chunk.start_index <= cap.characters:
            capped.append(_indexed(chunk, len(capped)))
            continue
        for start, end, count in cap.pieces(text, chunk.start_index, chunk.end_index, tokens):
            piece = text[start:end]
            metadata = _renumbered(relabel(dict(chunk.metadata), piece), len(capped))
            capped.append(Chunk(piece, start, end, count, chunk.strategy, metadata))
    return capped


def _renumbered(metadata: Metadata, index: int) -> Metadata:
    if "chunk_index" in metadata:
        metadata["chunk_index"] = index
    return metadata


def _indexed(chunk: Chunk, index: int) -> Chunk:
    if chunk.metadata.get("chunk_index", index) == index:
        return chunk
    return Chunk(
        chunk.text,
        chunk.start_index,
        chunk.end_index,
        chunk.token_count,
        chunk.strategy,
        _renumbered(dict(chunk.metadata), index),
        chunk.spans,
    )
