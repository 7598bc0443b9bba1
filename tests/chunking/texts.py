"""Hypothesis strategies for documents that stress segmentation.

Random unicode alone rarely produces sentence marks next to spaces or markdown at the start
of a line, so texts are drawn from fragments that matter (terminators, abbreviations,
markdown markers, Arabic, CJK, emoji, combining marks, zero-width characters, CRLF, NUL)
mixed with arbitrary unicode.
"""

from __future__ import annotations

from hypothesis import strategies as st

FRAGMENTS = [
    " ", "  ", "\n", "\n\n", "\r\n", "\r", "\t", "\x00", "\u200b", "\u200d", "\ufeff",
    ".", ". ", "! ", "? ", "…", "... ", "。", "！", "？", "؟", "۔", "؛", "،",
    "e.g. ", "Dr. ", "U.S. ", "3.14", "v1.2.3", "https://x.io/a?b=c", "a@b.org",
    '"', "“", "”", "(", ")", "é", "e\u0301", "👩‍💻", "🇫🇷",
    "hello", "world", "This", "However, ", "For example, ", "def f(x):", "return x;",
    "مرحبا", "الخوارزميات", "中文文本", "한국어",
    "# ", "## Title\n", "Title\n===\n", "- item\n", "  - nested\n", "1. first\n",
    "```\ncode\n```\n", "```py\nx = 1\n\ny = 2\n", "    indented code\n", "> quote\n",
    "| a | b |\n|---|---|\n| 1 | 2 |\n", "---\n", "***\n", "<div>\n", "</div>\n",
    "---\ntitle: x\n---\n", "<!-- c -->\n", ":\n",
]  # fmt: skip

fragments = st.sampled_from(FRAGMENTS)
words = st.text(min_size=1, max_size=12)

documents = st.lists(st.one_of(fragments, fragments, words), max_size=80).map("".join)
"""Texts up to a few hundred characters built from the fragments above and random unicode."""

raw_unicode = st.text(max_size=300)
"""Arbitrary unicode, surrogates excluded (a Python ``str`` from JSON never holds one)."""

any_text = st.one_of(documents, raw_unicode)
