"""The whole-document passes of ``adaptive`` agree with the per-piece definitions."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.texts import any_text
from worker.chunking.text.density import DocumentProfile, density, local_density, word_hash
from worker.chunking.text.segment import FENCE, fence_lines

FIB = "def fib(n): return n if n < 2 else fib(n - 1) + fib(n - 2)"
FAIRY_TALE = "Once upon a time, a little princess lived in a castle with the king."


def test_window_density_keeps_the_documented_examples() -> None:
    assert local_density(FIB) >= 0.6
    assert local_density(FAIRY_TALE) <= 0.25
    assert local_density("") == 0.0
    # On a window of at most VOCABULARY_SPAN words the window formula is the exact one.
    for text in (FIB, FAIRY_TALE, "الخوارزميات والمستخدمين والتطبيقات الحاسوبية"):
        assert local_density(text) == density(text)


def test_prose_then_code_windows() -> None:
    prose = "The miller walked to the village every morning to sell his flour. " * 8
    code = "x = compute(a[i], b[j]); y = {k: v for k, v in pairs}\n" * 8
    text = prose + code
    profile = DocumentProfile(text)
    assert profile.density(0, 256) < profile.density(len(prose), len(prose) + 256)


def test_words_are_hashed_like_the_tables() -> None:
    profile = DocumentProfile("SELECT SELECT select")
    # two technical words in 20 characters saturate the technical term
    assert profile.density(0, 20) >= 0.4
    assert word_hash("in") != word_hash("fn")


def test_a_nul_character_changes_a_word() -> None:
    # Found by hypothesis: with code points hashed as they are, NUL added nothing, so "0" and
    # "0\x00" were one word to the document pass and two to `density`.
    assert word_hash("0") != word_hash("0\x00")
    assert DocumentProfile("0:0\x00").document_density == density("0:0\x00")


# Words whose decimals the two definitions count alike (density counts "1.2.3" once, the
# window formula every dot between digits); up to 120 words, past density()'s sample of 1,024
# characters only rarely.
WORDS = ["the", "The", "def", "SELECT", "select", "x=f(a);", "{k}", "3.14", "word", "\xa0", "مرحبا"]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(WORDS), max_size=120).map(" ".join).filter(lambda t: len(t) <= 1024)
)
def test_a_window_is_the_formula_on_its_own_text(text: str) -> None:
    # Every total is the window's own (its vocabulary too): the window formula is density()'s,
    # to one step of the rounding (the vocabulary term is 0.3 · distinct / words there and
    # 0.3 · (distinct / words) in density()).
    assert abs(DocumentProfile(text).density(0, len(text)) - density(text)) <= 1.01e-4
    assert local_density(text) == DocumentProfile(text).density(0, len(text))
    # ... and a window's density does not depend on the text before it.
    assert DocumentProfile("def f(x): return x; " * 9 + text).density(180, 180 + len(text)) == (
        local_density(text)
    )


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        any_text, st.lists(st.sampled_from(["```", "~~~", " ", "\t", "\n", "x", "`"])).map("".join)
    )
)
def test_fence_lines_match_the_pattern(text: str) -> None:
    assert fence_lines(text) == [m.start() for m in FENCE.finditer(text)]


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        any_text,
        st.lists(
            st.sampled_from(
                ["1.2.3.4", "3.14 ", "x = f(a);", "\x1c", "\xa0", "SELECT", "the", "The"]
            ),
            max_size=30,
        ).map(" ".join),
    )
)
def test_document_density_is_the_formula_on_the_whole_text(text: str) -> None:
    # density() reads up to 1,024 characters whole: on those it is the same computation.
    text = text[:1024]
    assert DocumentProfile(text).document_density == density(text)


@settings(max_examples=200, deadline=None)
@given(any_text, st.integers(min_value=1, max_value=600))
def test_profile_never_raises_and_stays_in_range(text: str, base: int) -> None:
    profile = DocumentProfile(text)
    for position in range(0, len(text) + 1, 7):
        assert 0.0 <= profile.density(position, min(len(text), position + base)) <= 1.0
