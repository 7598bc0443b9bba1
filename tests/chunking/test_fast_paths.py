"""The speed-ups compute the same numbers as the plain definitions they replace."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.texts import any_text
from worker.chunking.rules.lexical import LexicalChunker
from worker.chunking.rules.lexical_words import (
    DocumentWords,
    keyword_count,
    keyword_set,
    word_count,
)
from worker.chunking.text import lexicon
from worker.chunking.text.density import density
from worker.chunking.types import ContentType

_GLUE = ",;:!?\"'`()[]{}<>=*|\\/+-%&^~@#$"
_UNGLUE = str.maketrans(_GLUE, " " * len(_GLUE))
_ARABIC_COMPLEX = re.compile(
    r"(?:[\u0620-\u064a\u066e-\u06d3\u06fa-\u06ff][\u064b-\u065f\u0670]*){7,}"
)
ascii_text = st.text(alphabet=st.characters(max_codepoint=127), max_size=400)
texts = st.one_of(any_text, ascii_text, st.text(max_size=200))


def reference_density(sample: str) -> float:
    """The documented formula, word by word (samples of at most 1,024 characters)."""
    words = sample.translate(_UNGLUE).split()
    if not words:
        return 0.0
    chars = len(sample)
    hits = sum(word in lexicon.TECH_WORDS for word in words)
    hits += sum(sample.count(ch) for ch in lexicon.CODE_PUNCTUATION)
    hits += len(re.findall(r"[0-9]\.[0-9]", sample))
    tech = min(hits / max(chars / 100, 1), 1.0)
    unique = len({w for w in words if w not in lexicon.STOP_WORDS_ANY_CASE}) / len(words)
    average = sum(len(w) for w in words) / len(words)
    arabic = min(len(_ARABIC_COMPLEX.findall(sample)) / max(chars / 200, 1), 1.0)
    score = 0.4 * tech + 0.3 * unique + 0.2 * min(average / 10, 1.0) + 0.1 * arabic
    return round(min(max(score, 0.0), 1.0), 4)


@settings(max_examples=400, deadline=None)
@given(
    st.one_of(
        texts,
        st.lists(
            st.sampled_from(["1.2.3.4", "3.14 ", "x = f(a);", "\x1c", "\xa0", "SELECT"]),
            max_size=30,
        ).map(" ".join),
    )
)
def test_density_matches_the_formula(text: str) -> None:
    sample = text[:1024]
    assert density(sample) == reference_density(sample)


@settings(max_examples=400, deadline=None)
@given(texts)
def test_keyword_count_matches_the_regex(text: str) -> None:
    found = re.findall(rf"[^\W\d_]{{{lexicon.KEYWORD_MIN_LETTERS},}}", text.lower())
    assert keyword_count(text) == sum(w not in lexicon.STOP_WORDS for w in found)


@settings(max_examples=400, deadline=None)
@given(texts)
def test_keyword_set_matches_the_regex(text: str) -> None:
    found = re.findall(rf"[^\W\d_]{{{lexicon.KEYWORD_MIN_LETTERS},}}", text.lower())
    assert keyword_set(text) == frozenset(found) - lexicon.STOP_WORDS


@settings(max_examples=400, deadline=None)
@given(texts)
def test_word_count_matches_split(text: str) -> None:
    assert word_count(text) == len(text.split())


_prose_words = st.sampled_from(
    ["garden", "Gardens", "tomatoes", "this", "These", "about", "ABOUT", "water", "é", "—", "🙂"]
)
_documents = st.one_of(
    any_text,
    st.lists(st.one_of(_prose_words, st.sampled_from([" ", "\n\n", ". ", "\n- ", "# "]))).map(
        "".join
    ),
)


@settings(max_examples=300, deadline=None)
@given(_documents, st.sampled_from(["text/plain", "text/markdown"]))
def test_document_words_match_the_block_reading(text: str, content_type: ContentType) -> None:
    """The whole-document keyword path of the Python reference gives the chunks its per-block
    path gives (the reference: the compiled core is compared with it elsewhere)."""
    chunker = LexicalChunker()
    fast = chunker.chunk_reference(text, content_type=content_type)
    original = DocumentWords.of
    try:
        DocumentWords.of = classmethod(lambda cls, text: None)  # type: ignore[assignment,method-assign]
        plain = chunker.chunk_reference(text, content_type=content_type)
    finally:
        DocumentWords.of = original  # type: ignore[method-assign]
    assert fast == plain
