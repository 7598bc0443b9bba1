from __future__ import annotations

import pytest
from hypothesis import given, settings

from tests.support.chunk_invariants import assert_spans_exact
from tests.support.markdown_headings import heading_text
from tests.support.paragraphs import split_paragraphs
from tests.support.texts import any_text
from worker.chunking.text.markdown import Block, split_blocks
from worker.chunking.types import Span


def blocks(text: str) -> list[tuple[str, str]]:
    found = split_blocks(text)
    assert_spans_exact(text, [Span(b.start, b.end) for b in found])
    return [(b.kind, text[b.start : b.end]) for b in found]


def test_atx_headings_with_levels() -> None:
    text = "# One\n## Two ##\n###### Six\n####### seven is text"
    found = split_blocks(text)
    assert [(b.kind, b.level) for b in found] == [
        ("heading", 1),
        ("heading", 2),
        ("heading", 6),
        ("paragraph", 0),
    ]
    assert [heading_text(text, b) for b in found[:3]] == ["One", "Two", "Six"]


def test_setext_headings() -> None:
    text = "Title\n=====\n\nSub\ntitle\n---\n"
    found = split_blocks(text)
    assert [(b.kind, b.level) for b in found] == [("heading", 1), ("heading", 2)]
    assert heading_text(text, found[1]) == "Sub title"


def test_paragraphs_are_separated_by_blank_lines() -> None:
    assert blocks("one\nstill one\n\n  two\n") == [
        ("paragraph", "one\nstill one"),
        ("paragraph", "two"),
    ]


def test_nested_list_with_loose_items_is_one_block() -> None:
    text = "- a\n- b\n  - nested\n\n    more of b\n* c\n\nafter"
    assert blocks(text) == [
        ("list", "- a\n- b\n  - nested\n\n    more of b\n* c"),
        ("paragraph", "after"),
    ]


def test_ordered_list() -> None:
    assert blocks("1. one\n2) two\n10. ten") == [("list", "1. one\n2) two\n10. ten")]


def test_list_interrupts_paragraph_but_only_ordered_from_one() -> None:
    assert blocks("Steps:\n- a\n- b") == [("paragraph", "Steps:"), ("list", "- a\n- b")]
    assert blocks("In 2024\n2. is not a list") == [("paragraph", "In 2024\n2. is not a list")]


def test_fenced_code_keeps_blank_lines_and_markers() -> None:
    code = "```python\n# not a heading\n\n- not a list\n```"
    assert blocks(f"Intro\n{code}\nafter") == [
        ("paragraph", "Intro"),
        ("code", code),
        ("paragraph", "after"),
    ]


def test_tilde_fence_and_unclosed_fence() -> None:
    assert blocks("~~~\nx\n~~~\n\n```\nopen to the end\n\nstill code") == [
        ("code", "~~~\nx\n~~~"),
        ("code", "```\nopen to the end\n\nstill code"),
    ]


def test_indented_code() -> None:
    assert blocks("para\n\n    code line\n\n    more code\nback") == [
        ("paragraph", "para"),
        ("code", "code line\n\n    more code"),
        ("paragraph", "back"),
    ]


def test_gfm_table() -> None:
    table = "| a | b |\n|:--|--:|\n| 1 | 2 |\n| 3 | 4 |"
    assert blocks(f"Intro text\n{table}\n\nafter") == [
        ("paragraph", "Intro text"),
        ("table", table),
        ("paragraph", "after"),
    ]


def test_pipe_without_delimiter_row_is_text() -> None:
    assert blocks("a | b\nc | d") == [("paragraph", "a | b\nc | d")]


def test_block_quote_and_thematic_breaks() -> None:
    assert blocks("> quoted\n> more\n\n---\n\n* * *\n___") == [
        ("blockquote", "> quoted\n> more"),
        ("thematic_break", "---"),
        ("thematic_break", "* * *"),
        ("thematic_break", "___"),
    ]


@pytest.mark.parametrize("fence", ["---", "+++"])
def test_front_matter_at_the_start(fence: str) -> None:
    text = f"{fence}\ntitle: x\n{fence}\n\nBody"
    assert blocks(text) == [("front_matter", f"{fence}\ntitle: x\n{fence}"), ("paragraph", "Body")]


def test_front_matter_fence_later_is_a_break() -> None:
    assert blocks("Body\n\n---\ntitle: x\n---") == [
        ("paragraph", "Body"),
        ("thematic_break", "---"),
        ("heading", "title: x\n---"),
    ]


def test_html_blocks() -> None:
    text = '<p align="center">\n  <img src="x.png">\n</p>\n\n<!-- a\n\ncomment -->\n\ntext'
    assert blocks(text) == [
        ("html", '<p align="center">\n  <img src="x.png">\n</p>'),
        ("html", "<!-- a\n\ncomment -->"),
        ("paragraph", "text"),
    ]


def test_crlf_offsets_are_exact() -> None:
    text = "# T\r\n\r\npara\r\nline\r\n\r\n- x\r\n"
    assert blocks(text) == [("heading", "# T"), ("paragraph", "para\r\nline"), ("list", "- x")]


def test_block_is_a_value() -> None:
    assert split_blocks("# x") == [Block("heading", 0, 3, 1)]
    assert split_blocks("") == []


def test_plain_paragraphs() -> None:
    text = "one\ntwo\n\n \t\nthree\r\n\r\nfour  "
    assert [text[s.start : s.end] for s in split_paragraphs(text)] == [
        "one\ntwo",
        "three",
        "four",
    ]


@settings(max_examples=200, deadline=None)
@given(any_text)
def test_blocks_are_exact_and_lose_nothing(text: str) -> None:
    found = split_blocks(text)
    assert_spans_exact(text, [Span(b.start, b.end) for b in found])
    assert split_blocks(text) == found
    for block in found:
        assert (block.level > 0) == (block.kind == "heading")


@settings(max_examples=150, deadline=None)
@given(any_text)
def test_paragraphs_are_exact_and_lose_nothing(text: str) -> None:
    assert_spans_exact(text, split_paragraphs(text))
