"""Grapheme clusters and runs without spaces, the kinds a cut inside a word must keep whole
(tests of worker/chunking/text/graphemes.py and of the character cap)."""

from __future__ import annotations

import string

from hypothesis import strategies as st

CLUSTERS = [
    "a", "Z", "7", "é", "ß", "日", "本", "ก", "ع", "Я", "\U0001f642",
    "e\u0301",  # a letter and a combining acute
    "a\u0308\u0323",  # two marks
    "\u0915\u093f",  # Devanagari KA with the vowel sign I (a spacing mark)
    "\U0001f44d\U0001f3fd",  # thumbs up, medium skin tone
    "\u2764\ufe0f",  # a heart with the emoji variation selector
    "\U0001f468\u200d\U0001f469\u200d\U0001f467",  # a family: a ZWJ sequence
    "\U0001f469\U0001f3fd\u200d\U0001f4bb",  # a technologist with a skin tone
    "\U0001f1e9\U0001f1ea",  # the flag of Germany
    "\U0001f1ef\U0001f1f5",  # the flag of Japan
    "\u1112\u1161\u11ab",  # a Hangul syllable spelled in jamo (L V T)
    "\u1100\u1161",  # L V
    "\ud55c",  # a precomposed Hangul syllable
    "\U0001f3f4\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f",  # England's flag
]  # fmt: skip
"""Clusters the rules must find exactly (no virama, no code point unknown to Python 3.11)."""

INGREDIENTS = [
    *CLUSTERS,
    "\r\n", "\r", "\n", "\u200d", "\u200c", "\ufe0f", "\u0301", "\u094d", "\u0915", "\u0937",
    "\u1100", "\u1161", "\u11a8", "\uac00", "\U0001f1e6", "\U0001f3fb", "\u0600", "\u0e33",
    "\u0e01", " ",
]  # fmt: skip
"""Pieces of clusters too, alone and in odd orders (marks after spaces, lone indicators,
jamo out of order, conjuncts)."""

HEX = "0123456789abcdef"
BASE64 = string.ascii_letters + string.digits + "+/"


def unspaced_runs(min_size: int = 1, max_size: int = 400) -> st.SearchStrategy[str]:
    """A run without spaces: hex, base64, CJK, Thai, emoji or clusters of every kind."""
    alphabets = [
        st.text(HEX, min_size=min_size, max_size=max_size),
        st.text(BASE64, min_size=min_size, max_size=max_size),
        st.text("日本語中文字漢", min_size=min_size, max_size=max_size),
        st.text("กขคงจฉชซ", min_size=min_size, max_size=max_size),
        st.lists(st.sampled_from(CLUSTERS), min_size=min_size, max_size=max_size).map("".join),
    ]
    return st.one_of(alphabets)


WORDS = ["The", "hash", "is:", "done.", "Then", "it", "ends!", "\n\n", "\n", "# Title\n", "-"]


def documents_with_runs(max_run: int = 400) -> st.SearchStrategy[str]:
    """Words, line breaks and headings with unspaced runs between them."""
    return st.lists(
        st.one_of(st.sampled_from(WORDS), unspaced_runs(max_size=max_run)), min_size=1, max_size=24
    ).map(" ".join)
