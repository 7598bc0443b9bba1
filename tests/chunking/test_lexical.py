from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.chunk_invariants import assert_all
from tests.support.texts import any_text
from tests.support.token_counters import make_counter
from worker.chunking import registry
from worker.chunking._native import PURE_PYTHON_ENV
from worker.chunking.rules import lexical
from worker.chunking.rules.lexical import LADDER, LexicalChunker, LexicalParams, primary_reason
from worker.chunking.types import Chunk, RuleChunker

CHARS = make_counter()
VOCABULARY = {
    "initial",
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
    "structural_boundary",
    "heading_section",
    "minimum_size",
}
# Long enough not to be a short paragraph, with no keyword in common with what follows.
OPENER = (
    "Gardens reward patience: tomatoes ripen slowly under summer light, basil thrives beside "
    "them, and careful watering keeps roots healthy through dry weeks."
)


# A cap of 600 characters: each paragraph here is over its minimum (75), so the ladder's
# verdict between two of them decides alone (under the minimum, a break is joined over).
PARAMS = LexicalParams(chunk_size=600)
CHUNKER = LexicalChunker(PARAMS)


@pytest.fixture(scope="module", params=["native", "reference"], autouse=True)
def _path(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every test here runs on the compiled core and on the Python reference (the seam's
    switch off)."""
    if request.param == "native" and lexical.compiled() is None:
        pytest.skip("the compiled lexical core is not built")
    with pytest.MonkeyPatch.context() as patch:
        if request.param == "reference":
            patch.setenv(PURE_PYTHON_ENV, "1")
        yield


def chunks_of(text: str, content_type: str = "text/plain") -> list[Chunk]:
    chunks = CHUNKER.chunk(text, content_type=content_type)  # type: ignore[arg-type]
    assert_all(text, chunks, CHARS, CHUNKER.sizes.cap)
    for chunk in chunks:
        assert chunk.metadata["primary_merge_reason"] in VOCABULARY
        assert set(chunk.metadata["merge_reasons"]) <= VOCABULARY - {"initial"}
    return chunks


def merged_by(second: str, first: str = OPENER) -> list[str]:
    chunks = chunks_of(f"{first}\n\n{second}")
    if len(chunks) == 1:
        return list(chunks[0].metadata["merge_reasons"])
    return []


SECOND = (
    "engines need regular maintenance to keep running smoothly across many winters ahead, "
    "and mechanics check belts, filters, pumps and hoses every season."
)


@pytest.mark.parametrize(
    ("opening", "reason"),
    [
        ("This means", "cause_effect"),  # the longest phrase decides: not "This"
        ("THESE", "reference_continuity"),
        ("In other words,", "elaboration"),
        ("Furthermore,", "elaboration"),
        ("For example,", "example"),
        ("for instance", "example"),
        ("Therefore", "cause_effect"),
        ("As a result,", "cause_effect"),
        ("However,", "contrast_continuation"),
        ("On the other hand,", "contrast_continuation"),
    ],
)
def test_prefix_rules(opening: str, reason: str) -> None:
    assert merged_by(f"{opening} {SECOND}") == [reason]


def test_prefix_must_end_at_a_word_edge() -> None:
    assert merged_by(f"Someday {SECOND}") == []
    assert merged_by(f"Thistles {SECOND}") == []


def test_transition_breaks_even_when_another_rule_would_merge() -> None:
    assert merged_by(f"Finally, gardens {SECOND}") == []
    assert merged_by(f"In conclusion, this {SECOND}") == []


def test_question_answer() -> None:
    assert merged_by(f"Yes, {SECOND}", first=OPENER + " Why do gardens need so much care?") == [
        "question_answer"
    ]


def test_a_line_ending_in_a_colon_joins_what_it_introduces() -> None:
    assert merged_by(f"Engines {SECOND}", first="The engine works as follows:") == [
        "definition_expansion"
    ]
    # However long the lead-in (the design asked for 200 characters at most): the structure
    # rule of every strategy, checked before the ladder.
    long_lead = OPENER + " " + OPENER + " And the rest of it goes like so:"
    assert merged_by(f"Finally, engines {SECOND}", first=long_lead) == ["definition_expansion"]


def test_short_paragraph() -> None:
    assert merged_by("Engines rumble.") == ["short_paragraph"]


def test_list_continuation_needs_a_shared_keyword() -> None:
    text = f"{OPENER}\n\n- tomatoes in pots are simpler to move around\n- everything else"
    assert chunks_of(text, "text/markdown")[0].metadata["merge_reasons"] == ["list_continuation"]
    unrelated = (
        f"{OPENER}\n\n- engines in garages are simpler to move around on wheels\n"
        "- everything else waits for the mechanic"
    )
    chunks = chunks_of(unrelated, "text/markdown")
    assert len(chunks) == 2
    # The list's next item continues it, as the design's lists were one block.
    assert chunks[1].metadata["merge_reasons"] == ["list_continuation"]


def test_keyword_overlap() -> None:
    second = (
        "Summer watering of tomatoes depends on soil drainage, weather forecasts and mulch, "
        "and experienced growers adjust the schedule whenever clouds linger for days."
    )
    assert merged_by(second) == ["keyword_overlap"]


def test_no_rule_starts_a_new_chunk() -> None:
    chunks = chunks_of(f"{OPENER}\n\nEngines {SECOND}")
    assert [c.metadata["primary_merge_reason"] for c in chunks] == ["initial", "initial"]
    assert [c.metadata["merge_reasons"] for c in chunks] == [[], []]


def test_size_cap_comes_first() -> None:
    paragraph = "This " + "garden tomatoes " * 30
    text = "\n\n".join([paragraph.strip()] * 3)
    chunks = chunks_of(text)
    assert len(chunks) >= 2
    assert all(len(c.text) <= CHUNKER.sizes.cap for c in chunks)
    assert {r for c in chunks for r in c.metadata["merge_reasons"]} <= {"reference_continuity"}


def test_over_long_block_is_split_to_the_cap() -> None:
    text = "word " * 1000
    chunks = chunks_of(text)
    assert len(chunks) >= 4


MARKDOWN = (
    "# Guide\n\nIntro about gardens.\n\n## Setup\n\nInstall the tools first.\n\n"
    "```sh\npip install garden\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n"
    "### Deep\n\nDetails here. This is more.\n"
)


def test_headings_join_their_sections_code_and_tables_stay_whole() -> None:
    chunker = LexicalChunker(LexicalParams(chunk_size=100))
    chunks = chunker.chunk(MARKDOWN, content_type="text/markdown")
    assert_all(MARKDOWN, chunks, CHARS, 100)
    assert [c.text for c in chunks] == [
        "# Guide\n\nIntro about gardens.",
        "## Setup\n\nInstall the tools first.",
        "```sh\npip install garden\n```",
        "| a | b |\n|---|---|\n| 1 | 2 |",
        "### Deep\n\nDetails here. This is more.",
    ]
    kinds = [c.metadata["content_type"] for c in chunks]
    assert kinds == ["semantic", "semantic", "code_block", "table", "semantic"]
    assert [c.metadata["primary_merge_reason"] for c in chunks] == [
        "heading_section", "heading_section", "initial", "initial", "heading_section"
    ]  # fmt: skip
    code = chunks[2]
    assert code.metadata["heading_path"] == ["Guide", "Setup"]
    last = chunks[-1]
    assert last.metadata["heading_path"] == ["Guide", "Setup", "Deep"]
    assert (last.metadata["section_heading"], last.metadata["section_level"]) == ("Deep", 3)
    assert chunks[1].metadata["heading_path"] == ["Guide", "Setup"]


def test_a_small_document_is_not_cut_into_crumbs() -> None:
    # At the default cap (1,500 characters, minimum 187) the same document is one chunk:
    # every run of blocks is under the minimum, so each break is joined over.
    chunker = LexicalChunker()
    (chunk,) = chunker.chunk(MARKDOWN, content_type="text/markdown")
    assert chunk.text == MARKDOWN.strip()
    assert chunk.metadata["merge_reasons"] == ["heading_section", "minimum_size"]
    assert chunk.metadata["heading_path"] == ["Guide"]


def test_sibling_heading_replaces_the_previous_one() -> None:
    chunks = chunks_of("# A\n\n## B\n\n## C\n\ntext", "text/markdown")
    assert chunks[-1].metadata["heading_path"] == ["A", "C"]


def test_lists_merge_into_semantic_chunks_with_metadata() -> None:
    text = "Tomatoes need:\n\n- tomatoes want sun\n- water\n\nThis keeps tomatoes happy."
    (chunk,) = chunks_of(text, "text/markdown")
    meta = chunk.metadata
    assert meta["content_type"] == "semantic"
    assert meta["block_types"] == ["paragraph", "list"]
    assert meta["has_list"] is True
    assert meta["paragraph_count"] == 2
    assert meta["merge_reasons"] == [
        "definition_expansion", "list_continuation", "reference_continuity"
    ]  # fmt: skip
    assert meta["primary_merge_reason"] == "definition_expansion"
    assert 0 < meta["keyword_density"] <= 1
    assert meta["avg_block_length"] > 0


def test_primary_reason_ties_sort_by_name() -> None:
    assert primary_reason([]) == "initial"
    assert primary_reason(["short_paragraph", "example"]) == "example"
    assert primary_reason(["short_paragraph", "example", "short_paragraph"]) == "short_paragraph"


def test_ladder_vocabulary() -> None:
    assert set(LADDER) | {"initial", "structural_boundary", "heading_section", "minimum_size"} == (
        VOCABULARY
    )
    assert set(lexical.REASONS) == VOCABULARY | {"transition_break"}


def test_registered() -> None:
    built = registry.build("lexical")
    assert isinstance(built.chunker, RuleChunker)
    assert built.chunker.chunk("Hello.", content_type="text/markdown")[0].strategy == "lexical"
    with pytest.raises(registry.InvalidParameters):
        registry.build("lexical", {"max_chars": 10})


@settings(max_examples=150, deadline=None)
@given(any_text, st.sampled_from(["text/plain", "text/markdown"]))
def test_lexical_invariants(text: str, content_type: str) -> None:
    chunks = chunks_of(text, content_type)
    assert CHUNKER.chunk(text, content_type=content_type) == chunks  # type: ignore[arg-type]
