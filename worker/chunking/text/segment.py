"""Sentence segmentation and hard-cap splitting, with exact character offsets.

Every function returns :class:`Span` ranges into the text it was given. Spans never include
leading or trailing whitespace, never overlap, come in document order, and together cover every
non-whitespace character (whitespace is what ``str.isspace`` says it is).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Sequence
from typing import Final

from worker.chunking.text import terminators
from worker.chunking.text.tokens import CharacterCounter, TokenCounter, count_each
from worker.chunking.text.word_cuts import cut_word
from worker.chunking.types import Span

# Words that end in a period without ending the sentence. Lower case, without the final dot.
# "etc" is left out on purpose: it ends sentences far more often than it sits inside one.
ABBREVIATIONS = frozenset(
    {
        "al", "approx", "apr", "aug", "ave", "ca", "cf", "ch", "co", "corp", "dec", "dept",
        "dr", "e.g", "eq", "est", "feb", "fig", "figs", "gen", "gov", "i.e", "inc", "jan",
        "jr", "jul", "jun", "lt", "ltd", "mar", "min", "mr", "mrs", "ms", "mt", "no", "nos",
        "nov", "oct", "op", "p", "pp", "prof", "ref", "rev", "sec", "sen", "sep", "sept", "sgt",
        "sr", "st", "u.k", "u.s", "u.s.a", "v", "viz", "vol", "vols", "vs",
    }
)  # fmt: skip


def _set(chars: str) -> str:
    """``chars`` as the inside of a regex character class."""
    return "".join(re.escape(c) for c in chars)


# One pass finds every place a sentence may end; the exceptions are then checked only at
# those places. Latin terminators must be followed by whitespace (or the end), which is what
# keeps decimals (3.14), versions (v1.2.3), URLs, e-mail addresses and "?"/"!" inside URLs
# whole. CJK and Arabic marks end a sentence with or without a following space.
_CANDIDATE_BODY = rf"""
      (?P<line>\r\n?|[\n\u2028\u2029])
    | [{_set(terminators.CJK)}]+[{_set(terminators.CJK_CLOSERS)}]*
    | [{_set(terminators.ARABIC)}]+
    | (?P<latin>[{_set(terminators.LATIN)}]+)[{_set(terminators.LATIN_CLOSERS)}]*(?=\s|\Z)
"""
# Every alternative starts with one of these characters. Stating it as a leading look-ahead
# changes no match, but lets the regex engine skip ordinary text in a tight loop instead of
# trying each alternative at every position (about three times faster on prose).
_CANDIDATE_FIRST = _set(terminators.LINE_BREAKS + terminators.ALL)
CANDIDATE = re.compile(f"(?=[{_CANDIDATE_FIRST}])(?:{_CANDIDATE_BODY})", re.VERBOSE)
CLAUSE_CANDIDATE = re.compile(f"(?=[{_CANDIDATE_FIRST}،])(?:{_CANDIDATE_BODY}|،)", re.VERBOSE)

_INITIALISM = re.compile(r"(?:[A-Za-z]\.)+[A-Za-z]|[A-Za-z]")
_WORD = re.compile(r"\S+")
_OPENERS = "([{\"'“‘«"


def _strip(text: str, start: int, end: int) -> Span | None:
    """The span ``[start, end)`` without surrounding whitespace, or None when it is all space."""
    piece = text[start:end]
    left = piece.lstrip()
    if not left:
        return None
    inner_start = start + len(piece) - len(left)
    return Span(inner_start, inner_start + len(left.rstrip()))


def _word_before(text: str, end: int) -> tuple[str, int]:
    """The whitespace-free run ending at ``end`` (openers stripped) and where that run starts."""
    start = end
    limit = max(0, end - 40)
    while start > limit and not text[start - 1].isspace():
        start -= 1
    return text[start:end].lstrip(_OPENERS), start


def _inside_open_quote(text: str, sentence_start: int, at: int) -> bool:
    piece = text[sentence_start:at]
    return piece.count('"') % 2 == 1 or piece.count("“") > piece.count("”")


def is_false_stop(text: str, match: re.Match[str], sentence_start: int) -> bool:
    """True when a Latin terminator at ``match`` does not end the sentence."""
    return false_stop_at(
        text, match.start("latin"), match.end("latin"), match.end(), sentence_start
    )


def false_stop_at(text: str, mark_start: int, mark_end: int, end: int, sentence_start: int) -> bool:
    """:func:`is_false_stop` by offsets: the terminator run is ``text[mark_start:mark_end]``,
    the candidate (closing quotes/brackets included) ends at ``end``."""
    # Followed by a lower-case word: an abbreviation we do not know, or a quote that runs on
    # ('"Really?" she asked').
    rest = text[end : end + 8].lstrip()
    if rest and rest[0].islower():
        return True
    mark = text[mark_start:mark_end]
    if "…" in mark or ".." in mark:
        return _inside_open_quote(text, sentence_start, mark_start)
    if mark != ".":
        return False
    word, word_start = _word_before(text, mark_start)
    if word.lower() in ABBREVIATIONS or _INITIALISM.fullmatch(word):
        return True
    # "1." at the start of a line numbers a list item, it does not end a sentence.
    line_start = word_start == 0 or text[word_start - 1] in "\r\n"
    return line_start and word.isdigit() and len(word) <= 3


LINE_BREAKS: Final = "\r\n\u2028\u2029"
"""The characters that end a line (segment.CANDIDATE's ``line`` alternative)."""
_LINE_END = "\r\n\u2028\u2029 \t"  # what may follow a list marker on its line


def opens_block(text: str, at: int, end: int) -> bool:
    """Whether the line starting at ``at`` (``text`` read below ``end``) opens a markdown
    block that keeps its lines: a heading ``#``, a quote ``>``, a table row ``|``, a setext
    underline ``=``, a bullet ``- * +`` followed by a space or the line's end, an ordered item
    (1–9 ASCII digits, ``.`` or ``)``, then a space or the line's end), a fence or thematic
    break (three of ``` ` ~ - * _ ```), or an HTML tag (``<`` then a letter, ``/``, ``!``, ``?``).
    """
    c = text[at]
    if c in "#>|=":
        return True
    following = text[at + 1] if at + 1 < end else ""
    if c in "-*+" and (not following or following in _LINE_END):
        return True
    if c in "`~-*_" and at + 3 <= end and text[at + 1] == c and text[at + 2] == c:
        return True
    tag = following in "/!?" or (following.isascii() and following.isalpha())
    if c == "<" and following and tag:
        return True
    digits = at
    while digits < end and digits - at < 10 and "0" <= text[digits] <= "9":
        digits += 1
    if not 1 <= digits - at <= 9 or digits >= end or text[digits] not in ".)":
        return False
    return digits + 1 == end or text[digits + 1] in _LINE_END


def soft_line_break(
    text: str, at: int, *, start: int = 0, end: int | None = None, in_code: bool = False
) -> bool:
    """Whether the line break at ``at`` is a hard wrap inside a paragraph, read as a space.

    ``text`` is read in ``[start, end)`` (``start`` counts as a line start). A break is soft
    when it is ``\n``, ``\r``, ``\r\n`` or U+2028 (never U+2029, a paragraph separator),
    outside code (``in_code``: a fenced block), and both the line before and the line after
    are flush-left text: not blank, not indented (indentation is code or a nested list) and
    not opening a block (:func:`opens_block`: lists, headings, quotes, tables, fences…). The
    two characters of ``\r\n`` get the same answer.
    """
    end = len(text) if end is None else end
    c = text[at]
    if in_code or c == "\u2029":
        return False
    after = at + 1
    if c == "\r" and after < end and text[after] == "\n":
        after += 1
    elif c == "\n" and at > start and text[at - 1] == "\r":
        at -= 1
    if after >= end or text[after].isspace() or opens_block(text, after, end):
        return False
    line = at
    while line > start and text[line - 1] not in LINE_BREAKS:
        line -= 1
    return line < at and not text[line].isspace() and not opens_block(text, line, end)


FENCE = re.compile(r"^[ \t]*(?:```|~~~)", re.MULTILINE)


def fence_lines(text: str) -> list[int]:
    """Start offsets of code-fence lines in document order (openers and closers alternate).

    The lines :data:`FENCE` matches, found with ``str.find`` (a fence opens a line after at
    most spaces and tabs) rather than by trying the pattern at every line start.
    """
    lines: set[int] = set()
    for marker in ("```", "~~~"):
        at = text.find(marker)
        while at >= 0:
            line_start = text.rfind("\n", 0, at) + 1
            if not text[line_start:at].strip(" \t"):
                lines.add(line_start)
            at = text.find(marker, at + 3)
    return sorted(lines)


def split_sentences(text: str, *, clauses: bool = False, soft_wraps: bool = False) -> list[Span]:
    """Sentences of ``text`` as spans without surrounding whitespace.

    Boundaries: ``. ! ? …`` followed by whitespace (closing quotes and brackets stay with their
    sentence), CJK ``。！？``, Arabic ``؟ ۔ ؛`` and line breaks. With ``clauses=True`` the
    Arabic comma ``،`` also ends a piece. Not boundaries: known abbreviations (e.g., Dr., U.S.),
    initials, list numbers at the start of a line, decimals, versions, URLs, e-mail addresses,
    a terminator followed by a lower-case word, and an ellipsis inside an open quote. With
    ``soft_wraps=True`` a line break that :func:`soft_line_break` calls soft (hard-wrapped
    prose, outside fenced code) is whitespace, not a boundary. The end of the text always
    ends the last sentence.
    """
    pattern = CLAUSE_CANDIDATE if clauses else CANDIDATE
    fences = fence_lines(text) if soft_wraps else []
    spans: list[Span] = []
    start = 0
    for match in pattern.finditer(text):
        if match.group("line") is not None:
            at = match.start()
            if soft_wraps and soft_line_break(text, at, in_code=bisect_right(fences, at) % 2 == 1):
                continue
            end = at
        elif match.group("latin") is not None and is_false_stop(text, match, start):
            continue
        else:
            end = match.end()
        span = _strip(text, start, end)
        if span is not None:
            spans.append(span)
        start = match.end()
    span = _strip(text, start, len(text))
    if span is not None:
        spans.append(span)
    return spans


def split_words(text: str, span: Span) -> list[Span]:
    """Whitespace-separated words inside ``span``."""
    return [Span(m.start(), m.end()) for m in _WORD.finditer(text, span.start, span.end)]


def _split_characters(text: str, span: Span, counter: TokenCounter, cap: int) -> list[Span]:
    """Cut a span with no usable word boundary into pieces of at most ``cap`` units, between
    grapheme clusters (:func:`.word_cuts.cut_word`: the last resort; a cluster whose own count
    passes the cap, an emoji worth four byte-level tokens under a cap of two, is emitted
    alone: no smaller piece exists)."""
    count = None if isinstance(counter, CharacterCounter) else counter.count
    return [Span(a, b) for a, b, _ in cut_word(count, text, span.start, span.end, cap)]


def pack_spans(text: str, spans: Sequence[Span], counter: TokenCounter, cap: int) -> list[Span]:
    """Greedily join consecutive spans into contiguous groups of at most ``cap`` units.

    Each group is ``text[first.start:last.end]`` (the whitespace between the spans included).
    Every span must itself fit the cap. With a tokenizer the running sum is only an estimate
    (a merge across a boundary can change the count), so each group is counted exactly and
    shortened until it fits.
    """
    groups: list[Span] = []
    count = len(spans)
    if isinstance(counter, CharacterCounter):
        i = 0
        while i < count:
            start = spans[i].start
            j = i + 1
            while j < count and spans[j].end - start <= cap:
                j += 1
            groups.append(Span(start, spans[j - 1].end))
            i = j
        return groups
    # The spans and the gaps between them counted up front, in one call each where the counter
    # can (a memory of words answers most of it): the same counts as one by one.
    sizes = count_each(counter, [text[s.start : s.end] for s in spans])
    gaps = count_each(counter, [text[spans[k - 1].end : spans[k].start] for k in range(1, count)])
    i = 0
    while i < count:
        start = spans[i].start
        total = sizes[i]
        j = i + 1
        while j < count:
            grown = total + gaps[j - 1] + sizes[j]
            if grown > cap:
                break
            total = grown
            j += 1
        while j - 1 > i and counter.count(text[start : spans[j - 1].end]) > cap:
            j -= 1
        groups.append(Span(start, spans[j - 1].end))
        i = j
    return groups


def split_to_cap(text: str, span: Span, counter: TokenCounter, cap: int) -> list[Span]:
    """Split ``span`` into contiguous pieces of at most ``cap`` units each.

    A span within the cap comes back unchanged. Otherwise it is cut at word boundaries, and a
    single word over the cap at characters.
    """
    if cap < 1:
        raise ValueError(f"cap must be >= 1, got {cap}")
    if isinstance(counter, CharacterCounter):
        if span.end - span.start <= cap:
            return [span]
    elif counter.count(text[span.start : span.end]) <= cap:
        return [span]
    pieces: list[Span] = []
    words = split_words(text, span)
    if isinstance(counter, CharacterCounter):
        sizes = [word.end - word.start for word in words]
    else:
        sizes = count_each(counter, [text[word.start : word.end] for word in words])
    for word, size in zip(words, sizes, strict=True):
        if size <= cap:
            pieces.append(word)
        else:
            pieces.extend(_split_characters(text, word, counter, cap))
    return pack_spans(text, pieces, counter, cap)
