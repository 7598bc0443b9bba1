"""What the source designs promise and a user of them would look for first (issue 16): every
phrase of lexical's ladder can fire, and adaptive's chunks carry language, content type and a
character count, in the compiled core and its Python definition alike."""

from __future__ import annotations

import pytest

from worker.chunking.rules.adaptive import AdaptiveChunker
from worker.chunking.rules.lexical import OPENING_RULES, LexicalChunker, LexicalParams
from worker.chunking.text.density import detect_language

# A cap of 400 characters (minimum 50): the paragraphs below are each over the minimum, so a
# break between two of them stands (under the minimum it is joined over: minimum_size).
SMALL = LexicalParams(chunk_size=400)
CHUNKERS = [LexicalChunker(SMALL).chunk, LexicalChunker(SMALL).chunk_reference]


@pytest.mark.parametrize(
    ("rule", "phrase"), [(rule, phrase) for rule, phrases in OPENING_RULES for phrase in phrases]
)
def test_every_ladder_phrase_fires(rule: str, phrase: str) -> None:
    # A first paragraph, then one that opens with the phrase and shares nothing else with it:
    # the phrase's own rule must decide (merge, or for transitions a new chunk).
    text = (
        "Gardening needs patience and regular watering during summer months.\n\n"
        f"{phrase.capitalize()} quantum chromodynamics describes strong interactions between "
        "colored quarks inside hadrons, mediated by gluon exchange at high energies."
    )
    for chunk in CHUNKERS:
        chunks = chunk(text, content_type="text/plain")
        if rule == "transition_break":
            assert len(chunks) == 2, phrase
        else:
            assert len(chunks) == 1, phrase
            assert chunks[0].metadata["merge_reasons"] == [rule], phrase


@pytest.mark.parametrize(
    ("phrase", "rule"),
    [("That is", "elaboration"), ("Such as", "example"), ("This means", "cause_effect")],
)
def test_longer_phrases_beat_their_first_word(phrase: str, rule: str) -> None:
    text = f"First block about apples.\n\n{phrase} something unrelated to fruit follows here."
    for chunk in CHUNKERS:
        assert chunk(text)[0].metadata["merge_reasons"] == [rule]
    text = "First block about apples.\n\nThis alone still refers back to the block before."
    for chunk in CHUNKERS:
        assert chunk(text)[0].metadata["merge_reasons"] == ["reference_continuity"]


def test_adaptive_language_content_type_and_characters() -> None:
    text = (
        "Plain narrative words about a walk in the park on a quiet afternoon.\n\n"
        "```python\ndef f(x):\n    return {x: [x * 2 for x in range(10)]}\n```\n"
    )
    chunker = AdaptiveChunker(min_size=20, max_size=80, overlap=0)
    for chunks in (chunker.chunk(text), chunker.chunk_reference(text)):
        kinds = [c.metadata["content_type"] for c in chunks]
        assert kinds[0] == "prose"
        assert "code" in kinds
        code = [c for c in chunks if c.metadata["content_type"] == "code"]
        assert all(c.text.startswith(("```", "def", "return", "    ")) for c in code)
        assert all(c.metadata["char_count"] == len(c.text) for c in chunks)
        assert {c.metadata["language"] for c in chunks} == {"en"}
    arabic = "تعمل الخوارزميات على معالجة البيانات بسرعة كبيرة في الأنظمة الحديثة"
    for chunks in (AdaptiveChunker().chunk(arabic), AdaptiveChunker().chunk_reference(arabic)):
        assert chunks[0].metadata["language"] == "ar"
    assert AdaptiveChunker(language="en").chunk(arabic)[0].metadata["language"] == "en"


def test_detect_language() -> None:
    assert detect_language("plain English") == "en"
    assert detect_language("مرحبا بالعالم and words") == "ar"
    assert detect_language("English text with one word مرحبا in Arabic") == "en"
    assert detect_language("中文文本") == "en"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # a thematic break starts a section and joins the block after it (the structure rule
        # of every strategy: before issue 21 it ended the chunk before it)
        (
            "Paragraph one is here and long enough.\n\n---\n\nParagraph two is here as well.",
            ["Paragraph one is here and long enough.", "---\n\nParagraph two is here as well."],
        ),
        (
            "# Title of it all\n\n***\n\n## Under the rule\n\nSome text under it.",
            ["# Title of it all\n\n***\n\n## Under the rule\n\nSome text under it."],
        ),
        (
            "```\ncode, code and code\n```\n\n___\n\nProse after the rule line.",
            ["```\ncode, code and code\n```", "___\n\nProse after the rule line."],
        ),
    ],
)
def test_a_thematic_break_joins_what_follows(text: str, expected: list[str]) -> None:
    for chunk in (
        LexicalChunker(LexicalParams(chunk_size=160)).chunk,
        LexicalChunker(LexicalParams(chunk_size=160)).chunk_reference,
    ):
        chunks = chunk(text, content_type="text/markdown")
        assert [c.text for c in chunks] == expected
        for c in chunks:
            if "thematic_break" in c.metadata["block_types"] and len(c.metadata["block_types"]) > 1:
                assert "structural_boundary" in c.metadata["merge_reasons"]


def test_a_thematic_break_never_breaks_the_cap() -> None:
    prose = "word " * 299 + "end."  # 1,499 characters: the break does not fit after it
    text = f"{prose}\n\n---\n\nAfter the break."
    for chunk in (LexicalChunker().chunk, LexicalChunker().chunk_reference):
        chunks = chunk(text, content_type="text/markdown")
        assert all(len(c.text) <= 1500 for c in chunks)
        assert [c.text for c in chunks] == [prose, "---\n\nAfter the break."]
