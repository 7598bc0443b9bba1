"""Where a run of characters may be cut: between two user-perceived characters (Unicode's
extended grapheme clusters, UAX #29), never inside one.

A run with no whitespace in it (a hash, a base64 blob, CJK or Thai text, a row of emoji) is cut
at characters when it is over a cap. Such a cut must not split what a reader sees as one
character: a letter and its combining marks, an emoji with its skin-tone modifier or variation
selector, an emoji ZWJ sequence (a family, a profession), a flag (two regional indicators), a
Hangul syllable spelled in jamo, CR LF, an Indic conjunct (a consonant, a virama, a consonant).

:func:`is_boundary` states UAX #29's "do not break" rules from Python's own Unicode database,
and errs on the safe side where that database cannot tell: it never calls a place inside a
cluster a boundary, and it refuses a few places that are boundaries in fact (after any ZWJ,
after any sequence of marks holding a virama, next to a code point this Python's database
does not know), which only moves a cut back by a character or two.
"""

from __future__ import annotations

import unicodedata

_REGIONAL = (0x1F1E6, 0x1F1FF)
"""Regional indicators: a flag is two of them, so a run of them pairs from its start."""
_HANGUL_L = ((0x1100, 0x115F), (0xA960, 0xA97C))
"""Leading jamo: a syllable goes on after one."""
_HANGUL_VT = ((0x1160, 0x11FF), (0xD7B0, 0xD7FB))
"""Vowel and trailing jamo: they go on the syllable before them."""
_EXTEND_OTHER = ((0x200C, 0x200D), (0xFF9E, 0xFF9F), (0x1F3FB, 0x1F3FF), (0xE0020, 0xE007F))
"""Grapheme extenders that are not marks: ZWNJ and ZWJ, the half-width katakana voicing
marks, the emoji skin-tone modifiers, the tag characters of a subdivision flag."""
_SPACING_NOT_MARKS = frozenset({0x0E33, 0x0EB3})
"""Thai and Lao AM: letters to the database, spacing marks to the cluster rules."""
_PREPEND = frozenset(
    {
        0x0600, 0x0601, 0x0602, 0x0603, 0x0604, 0x0605, 0x06DD, 0x070F, 0x0890, 0x0891,
        0x08E2, 0x0D4E, 0x110BD, 0x110CD, 0x111C2, 0x111C3, 0x1193F, 0x11941, 0x11A3A,
        0x11A84, 0x11A85, 0x11A86, 0x11A87, 0x11A88, 0x11A89, 0x11D46, 0x11F02,
    }
)  # fmt: skip
"""Prepended concatenation marks (the Arabic number signs, ...): they start a cluster that the
next character goes on."""
_ZWJ = "\u200d"
_VIRAMA = 9
"""The canonical combining class of a virama (an Indic conjunct's linker)."""


def _within(code: int, ranges: tuple[tuple[int, int], ...]) -> bool:
    return any(low <= code <= high for low, high in ranges)


def _goes_on(char: str) -> bool:
    """Whether ``char`` never starts a cluster after a letter: a mark (extending or spacing),
    another extender, a vowel or trailing jamo, or an unassigned code point (unknown here)."""
    category = unicodedata.category(char)
    if category[0] == "M" or category == "Cn":
        return True
    code = ord(char)
    return code in _SPACING_NOT_MARKS or _within(code, _EXTEND_OTHER) or _within(code, _HANGUL_VT)


def _holds_on(char: str) -> bool:
    """Whether the cluster ``char`` is in never ends after it: a ZWJ (an emoji sequence goes
    on), a prepended mark, a leading jamo, or an unassigned code point."""
    code = ord(char)
    return (
        char == _ZWJ
        or code in _PREPEND
        or _within(code, _HANGUL_L)
        or unicodedata.category(char) == "Cn"
    )


def _regional(char: str) -> bool:
    return _REGIONAL[0] <= ord(char) <= _REGIONAL[1]


def is_boundary(text: str, at: int) -> bool:
    """Whether a cut between ``text[at - 1]`` and ``text[at]`` leaves every grapheme cluster
    whole (the text's two ends are boundaries)."""
    if at <= 0 or at >= len(text):
        return True
    before, after = text[at - 1], text[at]
    if before < "\x7f" and after < "\x7f":
        return not (before == "\r" and after == "\n")
    if _goes_on(after) or _holds_on(before):
        return False
    if _regional(before) and _regional(after):
        # A flag is two indicators: cut only after an even number of them.
        count = 1
        while at - count - 1 >= 0 and _regional(text[at - count - 1]):
            count += 1
        return count % 2 == 0
    if unicodedata.category(after)[0] == "L" and _goes_on(before):
        # An Indic conjunct: a consonant after a virama (and any extenders after it) goes on it.
        back = at - 1
        while back >= 0 and _goes_on(text[back]):
            if unicodedata.combining(text[back]) == _VIRAMA:
                return False
            back -= 1
    return True


def floor_boundary(text: str, at: int, low: int) -> int | None:
    """The last boundary after ``low`` and at most ``at``; None when the cluster holding
    ``at`` starts at or before ``low``."""
    while at > low:
        if is_boundary(text, at):
            return at
        at -= 1
    return None


def ceil_boundary(text: str, at: int, high: int) -> int:
    """The first boundary at or after ``at``, at most ``high`` (``high`` when none is
    before it)."""
    while at < high and not is_boundary(text, at):
        at += 1
    return at
