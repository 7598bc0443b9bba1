"""Documents with known topic seams, and boundary precision/recall/F1 against them.

Each document is made of blocks of consecutive prose paragraphs, every block from the long
description of a different installed Python package (tests/support/corpus.py): the true seams are
where one package's text gives way to the next one's. Nothing is downloaded or committed; the same
environment yields the same documents.

Scores count a predicted boundary as correct when it lands within ``tolerance`` sentences of a
true seam (each seam matched at most once), sentences as :func:`split_sentences` finds them.

Two disjoint sets for work on the boundary rules (:func:`seam_split`): ``tune`` and ``report``
(tests/support/splits.py).
Their sources are the docstrings of the Python standard library (read with ``ast`` from the
interpreter's own ``Lib``, nothing imported), one source per top-level module or package:
unlike the installed packages, the same on every machine with the same Python, and large enough
for hundreds of seams. The split is by a hash of the source's name, so no source's text is in
both. Parameters are chosen on ``tune`` only; ``report`` is what gets reported. The standard
library is in no model's training corpus here (docs/semantic.md, "Training corpus").
"""

from __future__ import annotations

import ast
import hashlib
import re
import sysconfig
from bisect import bisect_left
from collections.abc import Sequence
from pathlib import Path

import msgspec

from tests.support.corpus import gather
from tests.support.splits import SPLITS, Split
from worker.chunking.text.segment import split_paragraphs, split_sentences

_LETTERS = re.compile(r"[^\W\d_]")
# Code, shell prompts, tables, indented blocks, headings, list items, directives.
_CODEY = re.compile(r"```|>>>|\$ |\|\s*-|^\s{4}|[{}<>=]{2}|^\s*(?:[-*+#:]|\.\.)", re.M)


class SeamDocument(msgspec.Struct, frozen=True):
    text: str
    seams: list[int]  # character offsets where a new source starts
    sources: list[str]


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


def prose_paragraphs(text: str) -> list[str]:
    """Paragraphs that read as prose: long enough, mostly letters, no code, links or lists."""
    kept = []
    for span in split_paragraphs(text):
        piece = text[span.start : span.end]
        if not 150 <= len(piece) <= 1500 or _CODEY.search(piece):
            continue
        if len(_LETTERS.findall(piece)) < 0.7 * len(piece):
            continue
        # Hard-wrapped lines are joined: every line break ends a sentence for the segmenter,
        # and a paragraph should read as the sentences its author wrote.
        piece = " ".join(piece.split())
        if len(split_sentences(piece)) < 2:
            continue
        kept.append(piece)
    return kept


def seam_documents(
    count: int = 12, blocks: int = 4, paragraphs_per_block: int = 2, min_chars: int = 500
) -> list[SeamDocument]:
    """``count`` documents of ``blocks`` blocks; each source package is used once."""
    sources: list[tuple[str, list[str]]] = []
    for doc in gather(min_chars):
        paragraphs = prose_paragraphs(doc.text)
        if len(paragraphs) >= paragraphs_per_block:
            sources.append((doc.name, paragraphs[:paragraphs_per_block]))
    documents = []
    for n in range(min(count, len(sources) // blocks)):
        picked = sources[n * blocks : (n + 1) * blocks]
        text, seams = "", []
        for i, (_, paragraphs) in enumerate(picked):
            if i:
                text += "\n\n"
                seams.append(len(text))
            text += "\n\n".join(paragraphs)
        documents.append(SeamDocument(text, seams, [name for name, _ in picked]))
    return documents


def split_of(source: str) -> Split:
    """The set a source package belongs to: two fifths ``tune``, three fifths ``report``."""
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
    """The documents of one set (``tune`` or ``report``, :func:`split_of`).

    Every source of the set (:func:`stdlib_sources`) gives blocks of one or two consecutive
    prose paragraphs (at most ``max_block_chars`` each, so that a block fits a 254-token chunk
    and the size cap does not decide where a block is cut), at most ``max_blocks_per_source`` of
    them. Each document takes one block from each of the ``blocks_per_document`` sources with
    the most blocks left (ties by name), until fewer sources than that have any: many seams from
    few sources, and no two blocks of one document from the same source.
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    queues: dict[str, list[str]] = {}
    for name, paragraphs in sorted(stdlib_sources().items()):
        if split_of(name) == split:
            blocks = _blocks(paragraphs, max_block_chars)
            if blocks:
                queues[name] = blocks[:max_blocks_per_source][::-1]  # pop() takes the first
    documents: list[SeamDocument] = []
    while sum(1 for q in queues.values() if q) >= blocks_per_document:
        picked = sorted((n for n, q in queues.items() if q), key=lambda n: (-len(queues[n]), n))
        picked = picked[:blocks_per_document]
        text, seams = "", []
        for i, name in enumerate(picked):
            if i:
                text += "\n\n"
                seams.append(len(text))
            text += queues[name].pop()
        documents.append(SeamDocument(text, seams, picked))
    return documents


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
