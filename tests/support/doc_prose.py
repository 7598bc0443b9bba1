"""Prose paragraphs from documentation sources (reStructuredText and Markdown), as plain text,
and the filter every seam set's paragraphs pass (:func:`prose_paragraphs`, the standard library's
docstrings and the installed packages' descriptions too: tests/support/seams.py).

What is kept is what a reader would read as running text: headings, directives and their
bodies, literal blocks (after ``::``), fenced code, HTML and Markdown headings go; inline markup
(roles, literals, links, emphasis, substitutions) is reduced to its text. The paragraphs left
then pass :func:`prose_paragraphs` (long enough, mostly letters, no code,
lists or tables), which also joins hard-wrapped lines. Rough on purpose: a paragraph the
cleanup gets wrong is usually dropped by that filter, and the text is a benchmark's, not a
product's.
"""

from __future__ import annotations

import re

from tests.support.paragraphs import split_paragraphs
from worker.chunking.text.segment import split_sentences

_LETTERS = re.compile(r"[^\W\d_]")
# Code, shell prompts, tables, indented blocks, headings, list items, directives.
_CODEY = re.compile(r"```|>>>|\$ |\|\s*-|^\s{4}|[{}<>=]{2}|^\s*(?:[-*+#:]|\.\.)", re.M)

# A line of one repeated punctuation character: a reST section over- or underline.
_RULE = re.compile(r"^\s*([=\-~^\"'`#*+_.:])\1{2,}\s*$")

_RST_INLINE = (
    (re.compile(r":[\w:.+-]+:`~?([^`<]*?)\s*<[^>]*>`"), r"\1"),  # :role:`text <target>`
    (re.compile(r":[\w:.+-]+:`[~!]?([^`]*)`"), r"\1"),  # :role:`target`
    (re.compile(r"``([^`]*)``"), r"\1"),  # ``literal``
    (re.compile(r"`([^`<]*?)\s*<[^>]*>`__?"), r"\1"),  # `text <url>`_
    (re.compile(r"`([^`]*)`__?"), r"\1"),  # `reference`_
    (re.compile(r"`([^`]*)`"), r"\1"),  # `interpreted`
    (re.compile(r"\*\*([^*]+)\*\*"), r"\1"),
    (re.compile(r"(?<!\w)\*([^*\s][^*]*)\*"), r"\1"),
    (re.compile(r"\|([^|\s][^|]*)\|_?"), r"\1"),  # |substitution|
)
_MD_INLINE = (
    (re.compile(r"```.*?```", re.S), ""),
    (re.compile(r"^\s*#.*$", re.M), ""),
    (re.compile(r"<[^>]+>"), ""),
    (re.compile(r"!?\[([^\]]*)\]\([^)]*\)"), r"\1"),
    (re.compile(r"\{[^}]*\}`([^`]*)`"), r"\1"),  # MyST roles
    (re.compile(r"`([^`]*)`"), r"\1"),
    (re.compile(r"\*\*([^*]+)\*\*"), r"\1"),
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


def rst_text(source: str) -> str:
    """reStructuredText without headings, directives or literal blocks, inline markup as text."""
    out: list[str] = []
    skip_deeper_than: int | None = None  # inside a directive or literal block at this indent
    for line in source.splitlines():
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if skip_deeper_than is not None:
            if not stripped or indent > skip_deeper_than:
                continue
            skip_deeper_than = None
        if _RULE.match(line):
            if out and out[-1].strip():
                out.pop()  # the heading's title line
            continue
        if stripped == ".." or stripped.startswith(".. "):
            skip_deeper_than = indent
            continue
        if stripped.endswith("::"):
            out.append(line.rstrip()[:-1] if stripped != "::" else "")
            skip_deeper_than = indent
            continue
        out.append(line)
    text = "\n".join(out)
    for pattern, replacement in _RST_INLINE:
        text = pattern.sub(replacement, text)
    return text


def markdown_text(source: str) -> str:
    """Markdown without code, headings or HTML; links and literals as their text."""
    text = source
    for pattern, replacement in _MD_INLINE:
        text = pattern.sub(replacement, text)
    return text


def doc_paragraphs(name: str, source: str) -> list[str]:
    """The prose paragraphs of one documentation file (kind by its extension)."""
    text = markdown_text(source) if name.endswith(".md") else rst_text(source)
    return prose_paragraphs(text)
