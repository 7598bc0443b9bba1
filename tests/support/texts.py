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


# Word pools that make long documents: many distinct words (the core's vocabulary table
# grows), repeats near and far (the 50-word window), technical and stop words, decimals,
# code punctuation, fences, Arabic complex words and sentence marks of every script.
VOCABULARY = [f"w{i}x" for i in range(700)] + [
    "the", "The", "and", "def", "SELECT", "API", "json", "3.14", "v1.2.3", "{", "};", "=",
    "e.g.", "Dr.", "U.S.", "1.", "...", "…", "?", "!", ".", "\n", "\n\n", "```\n", "~~~\n",
    "الخوارزميات", "والمستخدمين", "مرحبا", "؟", "۔", "؛", "،", "。", "！", "？", "”", '"',
    "\u0670", "\u064b", "\u3000", "\xa0", "\t", "\r\n", "\x00", "\ud800",
    # case and digit rules outside ASCII: KELVIN SIGN lower-cases to "k" (U.K. is an
    # abbreviation), U+0130 does not lower-case to ASCII, Arabic-Indic digits are digits
    "U.\u212a.", "\u212ao.", "\u0130.", "\n\u0661.", "\n\u0661\u0662\u0663\u0664.", "\u00c9.",
]  # fmt: skip


long_documents = st.lists(st.sampled_from(VOCABULARY + FRAGMENTS), min_size=50, max_size=1500).map(
    " ".join
)


surrogate_text = st.text(
    alphabet=st.characters(codec=None, exclude_categories=()), max_size=200
).map(lambda t: t + "\ud83d. Next \udc00 one.")


# Each text hinges on one sentence-end decision (abbreviations, initials, list numbers,
# lower-case continuations, ellipses in quotes, closers), inside and outside ASCII.
DECISIONS = [
    "Visit the U.\u212a. Then go home. It is late.",
    "Visit the U.K. Then go home. It is late.",
    "Items:\n\u0661. First thing here\n\u0662. Second thing here",
    "Items:\n12. First thing here\n1234. Second thing here",
    "The \u0130. Next one. And \u212ao. Done. \u00c9. End.",
    "Dr. Who met J. R. R. Tolkien. e.g. this. Fig. 3 shows it. See p. 4.",
    'He said "wait... and see" and left. "Really?" she asked. Yes!',
    "\u201cWell\u2026 maybe\u201d. Then: (done.) [ok!] Next\u2019s turn.",
    "Version 3.14 and v1.2.3 at https://x.io/a.b?c=d. Mail a@b.org. Fine.",
    "中文。「引用！」啊？مرحبا؟ نعم۔ 한국어. Done",
]
