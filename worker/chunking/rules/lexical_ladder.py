"""The merge ladder of ``lexical``: for each gap between two blocks, why the block after it
continues the chunk before it, or None (a break).

Blocks are those of :func:`..text.structure.read_blocks`. The structure rules come first, as
in every rule strategy: a heading glues to what follows it (``heading_section``), a thematic
break too (``structural_boundary``), a block ending in ``:`` introduces the next
(``definition_expansion``), a heading or thematic break starts a section (a break), and a list
item continues the list of the item before it (``list_continuation``: the design's lists were
one block). Every other gap goes down the ladder, first match deciding: the longest opening
phrase of the block after it (a transition breaks, the others merge), a question before it, a
short paragraph, then the keywords it shares with the chunk so far. "The chunk so far" is the
run of blocks since the last break, as far back as the cap reaches (every block of the run
that starts within the cap before this one, and the one just before): so a verdict depends on
the text near the gap, never on where a size limit once cut, and an edit changes only the
verdicts near it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from functools import partial

from worker.chunking.rules.lexical_words import DocumentWords, keyword_set
from worker.chunking.text import lexicon
from worker.chunking.text.structure import (
    GLUE,
    HEADING,
    HTML,
    ITEM,
    ITEM_BLOCK,
    PARAGRAPH,
    QUOTE,
    RULE,
    SECTION,
    gap_level,
)

LADDER = (
    "reference_continuity",
    "elaboration",
    "example",
    "cause_effect",
    "contrast_continuation",
    "question_answer",
    "definition_expansion",
    "short_paragraph",
    "list_continuation",
    "keyword_overlap",
)
"""Merge reasons of the ladder in the order they are tried, after transition_break."""
TRANSITION_BREAK = "transition_break"
STRUCTURAL = "structural_boundary"
"""A thematic break joined to the block after it."""
HEADING_SECTION = "heading_section"
"""A heading joined to the section it opens."""
DEFINITION = "definition_expansion"
QUESTION = "question_answer"
SHORT = "short_paragraph"
LIST = "list_continuation"
KEYWORD = "keyword_overlap"

OPENING_RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (TRANSITION_BREAK, lexicon.TRANSITION_PHRASES),
    *lexicon.LADDER_PHRASES.items(),
)
"""Every prefix rule with its phrases, in ladder order."""
# Every phrase of every prefix rule in one pattern, longest first (ties: ladder order), each
# in a group named after its position: the longest phrase a block opens with decides, so that
# "that is" is elaboration and "this means" cause_effect although "that"/"this" open
# reference_continuity, which comes first. A phrase must end at a word edge ("so" does not
# match "some"); re.ASCII keeps case folding to ASCII letters.
_BY_LENGTH = sorted(
    ((phrase, rule) for rule, phrases in OPENING_RULES for phrase in phrases),
    key=lambda pair: -len(pair[0]),
)
_OPENING = re.compile(
    "|".join(
        rf"(?P<p{i}>{re.escape(phrase)}(?![A-Za-z0-9]))" for i, (phrase, _) in enumerate(_BY_LENGTH)
    ),
    re.IGNORECASE | re.ASCII,
)
_RULE_OF_GROUP = {f"p{i}": rule for i, (_, rule) in enumerate(_BY_LENGTH)}
LEAD_WINDOW = 120
"""Characters at a block's start in which its list/quote markers and first words are read."""
# List bullets, quote marks and emphasis before a block's first word.
_LEAD_MARKERS = re.compile(r"(?:[\s>*+\-_#]|\d{1,9}[.)])*")
_PROSE = (PARAGRAPH, ITEM_BLOCK, QUOTE, HTML)
"""Blocks whose opening words the prefix rules read (not code, tables, headings)."""

Block = tuple[int, int, int]
"""kind, start, end (structure.read_blocks)."""


def opening(text: str, start: int, end: int) -> str:
    """The prefix rule (``transition_break`` included) of the longest phrase that
    ``text[start:end]`` opens with, after its list and quote markers; "" for none."""
    window_end = min(end, start + LEAD_WINDOW)
    lead = _LEAD_MARKERS.match(text, start, window_end).end()  # type: ignore[union-attr]
    match = _OPENING.match(text, lead, window_end)
    return _RULE_OF_GROUP[match.lastgroup or ""] if match is not None else ""


def verdicts(
    text: str,
    blocks: Sequence[Block],
    before: Sequence[int],
    cap: int,
    words: DocumentWords | None,
) -> list[str | None]:
    """For each block but the first, the reason it merges with the blocks before it, or None
    for a break (``[0]`` is None). ``before[i]``: the size of the text before block ``i``, in
    the unit of ``cap``."""
    found: list[str | None] = [None] * len(blocks)
    keywords: dict[int, frozenset[object]] = {}

    def keywords_of(i: int) -> frozenset[object]:
        if i not in keywords:
            _, start, end = blocks[i]
            if words is not None:
                keywords[i] = words.keywords(start, end)
            else:
                keywords[i] = frozenset(keyword_set(text[start:end]))
        return keywords[i]

    window = _Window(keywords_of)
    for i in range(1, len(blocks)):
        window.move_start(before, i, cap)
        reason = _reason(text, blocks, i, partial(window.shared, i))
        found[i] = reason
        if reason is None:
            window.restart(i)
        else:
            window.run.append(i)
    return found


class _Window:
    """The chunk so far for each gap: the blocks of the run since the last break that start
    within the cap before the block after the gap (and always the block just before it), with
    their keywords counted. Blocks are counted when a gap first needs the keywords and
    uncounted as the window's start moves past them, each once per run, so the whole pass is
    linear in the document (the compiled core keeps the same counts)."""

    def __init__(self, keywords_of: Callable[[int], frozenset[object]]) -> None:
        self.keywords_of = keywords_of
        self.run = [0]
        self.first = 0
        """The window is ``run[first:]``; ``first`` only moves forward, as the size before
        the block after the gap grows."""
        self.counted = 0
        """``run[counted_from:counted]`` have their keywords in ``counts``."""
        self.counted_from = 0
        self.counts: Counter[object] = Counter()

    def restart(self, i: int) -> None:
        self.run = [i]
        self.first = self.counted = self.counted_from = 0
        self.counts.clear()

    def move_start(self, before: Sequence[int], i: int, cap: int) -> None:
        while self.first < len(self.run) - 1 and before[i] - before[self.run[self.first]] > cap:
            self.first += 1

    def shared(self, i: int) -> int:
        """How many of block ``i``'s keywords the window's blocks hold."""
        for k in range(self.counted_from, min(self.first, self.counted)):
            for word in self.keywords_of(self.run[k]):
                if self.counts[word] == 1:
                    del self.counts[word]
                else:
                    self.counts[word] -= 1
        self.counted_from = self.first
        self.counted = max(self.counted, self.first)
        for k in range(self.counted, len(self.run)):
            self.counts.update(self.keywords_of(self.run[k]))
        self.counted = len(self.run)
        return sum(1 for word in self.keywords_of(i) if word in self.counts)


def _reason(
    text: str, blocks: Sequence[Block], i: int, shared_keywords: Callable[[], int]
) -> str | None:
    previous, block = blocks[i - 1], blocks[i]
    level = gap_level(previous, block, text)
    if level == GLUE:
        if previous[0] == HEADING:
            return HEADING_SECTION
        return STRUCTURAL if previous[0] == RULE else DEFINITION
    if level == SECTION:
        return None
    if level == ITEM:
        return LIST
    kind, start, end = block
    if kind in _PROSE:
        rule = opening(text, start, end)
        if rule == TRANSITION_BREAK:
            return None
        if rule:
            return rule
    if text[previous[2] - 1] == "?":
        return QUESTION
    if kind == PARAGRAPH and end - start <= lexicon.SHORT_PARAGRAPH_CHARS:
        return SHORT
    shared = shared_keywords()
    if kind == ITEM_BLOCK and shared >= lexicon.LIST_KEYWORD_OVERLAP_MIN:
        return LIST
    if shared >= lexicon.KEYWORD_OVERLAP_MIN:
        return KEYWORD
    return None
