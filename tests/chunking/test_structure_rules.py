"""The structure rules of the rule strategies (issue 21), on generated markdown and the corpus,
for ``sentence``, ``adaptive`` and ``lexical``.

Documents are built from blocks whose spans the generator knows (so the checks do not use the
reader under test): headings, paragraphs (hard-wrapped, some with an indented first line), lines
ending in ``:`` that introduce what follows, fenced code, tables and list items with
continuation lines. For every cap, in characters and in a model's tokens:

* a fenced block, a table or a list item within the cap lies in one chunk;
* no chunk holds only headings, and no chunk is under the minimum (an eighth of the cap),
  unless it is the document's only one, or joined with either neighbour it would pass the cap
  (the neighbours are whole blocks that cannot give it a part: the cap comes first, then whole
  blocks, then the minimum and headings; on the corpus see test_rules_hold_on_the_corpus);
* a paragraph's indented first line is never cut from the rest of its sentence (unless that
  sentence is too long for a chunk and is cut at words anyway);
* a block ending in ``:`` ends a chunk only when it and the next block together pass the cap,
  or no cut before it would leave the minimum.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.support.chunk_invariants import assert_all
from tests.support.corpus import gather
from tests.support.structure_oracle import heading_only, split_fences
from tests.support.token_counters import make_counter
from worker.chunking import registry
from worker.chunking.rules.adaptive import AdaptiveChunker
from worker.chunking.rules.lexical import LexicalChunker, LexicalParams
from worker.chunking.rules.sentence import SentenceChunker, SentenceParams
from worker.chunking.rules.sizing import CHARACTERS, Sizing
from worker.chunking.text.tokens import PieceCounter, TokenCounter, piece_counter
from worker.chunking.types import Chunk

WORDS = [
    "chunk", "stream", "kafka", "offset", "the", "a", "model", "token", "window", "index",
    "retrieval", "vector", "document", "partition", "consumer", "of", "and", "to", "is",
]  # fmt: skip


@dataclass(frozen=True)
class Block:
    kind: str  # heading, paragraph, intro, code, table, item
    text: str


words = st.lists(st.sampled_from(WORDS), min_size=1, max_size=12).map(" ".join)
sentence = words.map(lambda w: w[0].upper() + w[1:] + ".")


@st.composite
def paragraph(draw: st.DrawFn) -> Block:
    text = " ".join(draw(st.lists(sentence, min_size=1, max_size=6)))
    width = draw(st.integers(min_value=20, max_value=80))
    lines, line = [], ""
    for word in text.split(" "):
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    lines.append(line)
    if draw(st.booleans()):
        lines[0] = "  " + lines[0]  # an indented first line starts the paragraph
    return Block("paragraph", "\n".join(lines))


heading = st.builds(
    lambda level, title: Block("heading", "#" * level + " " + title.capitalize()),
    st.integers(min_value=1, max_value=4),
    words,
)
intro = words.map(lambda w: Block("intro", w.capitalize() + ":"))
code = st.lists(words.map(lambda w: "    x = " + repr(w)), min_size=1, max_size=12).map(
    lambda lines: Block("code", "```python\n" + "\n".join(lines) + "\n```")
)
table = st.lists(st.tuples(words, words), min_size=1, max_size=8).map(
    lambda rows: Block(
        "table",
        "| a | b |\n|---|---|\n" + "\n".join(f"| {x} | {y} |" for x, y in rows),
    )
)
item = st.tuples(words, st.lists(words, max_size=3)).map(
    lambda parts: Block("item", "- " + parts[0] + "".join("\n  " + w for w in parts[1]))
)


def _well_formed(parts: list[Block]) -> list[Block]:
    """Headings and ``:`` lines introduce something: each is followed by a paragraph, code, a
    table or a list item (two introductions in a row leave no cut that keeps both rules)."""
    kept: list[Block] = []
    for block, following in zip(parts, [*parts[1:], None], strict=True):
        if block.kind in ("heading", "intro") and (
            following is None or following.kind in ("heading", "intro")
        ):
            continue
        kept.append(block)
    return kept or [Block("paragraph", "Chunk.")]


blocks = st.lists(
    st.one_of(paragraph(), paragraph(), heading, intro, code, table, item), min_size=1, max_size=24
).map(_well_formed)


def document(parts: list[Block]) -> tuple[str, list[tuple[Block, int, int]]]:
    spans, text = [], ""
    previous = ""
    for block in parts:
        if previous == "item" and block.text.startswith("  "):
            # Indented text after a list item continues the item (CommonMark): not a new
            # paragraph with an indented first line.
            block = Block(block.kind, block.text.lstrip())
        previous = block.kind
        if text:
            text += "\n\n"
        start = len(text) + len(block.text) - len(block.text.lstrip())
        text += block.text
        spans.append((block, start, len(text)))
    return text, spans


def _inside(chunks: list[Chunk], start: int, end: int) -> bool:
    return any(c.start_index <= start and end <= c.end_index for c in chunks)


@dataclass(frozen=True)
class Under:
    """A chunker under test and its sizes: ``cap`` bounds every chunk, ``joins`` the chunks
    packing may join (adaptive's packing leaves room for its overlap), ``minimum``."""

    name: str
    chunk: Callable[[str], list[Chunk]]
    counter: TokenCounter
    cap: int
    joins: int
    minimum: int

    def size(self, text: str) -> int:
        if isinstance(self.counter, PieceCounter):
            return self.counter.count_exact(text)
        return len(text)


def under(name: str, cap: int, sizing: Sizing = CHARACTERS, overlap: int = 0) -> Under:
    """``name`` at a cap of ``cap`` in the unit of ``sizing``."""
    counter: TokenCounter = make_counter() if sizing.counter is None else sizing.counter
    if name == "adaptive":
        adaptive = AdaptiveChunker(
            max_size=cap, min_size=min(cap, 25), overlap=overlap, sizing=sizing
        )
        sizes = adaptive.sizes
        return Under(name, adaptive.chunk, counter, cap, sizes.cap, sizes.minimum)
    if name == "lexical":
        lexical = LexicalChunker(LexicalParams(chunk_size=cap), sizing)
        sizes = lexical.sizes
        return Under(name, _markdown(lexical.chunk), counter, cap, sizes.cap, sizes.minimum)
    sentence = SentenceChunker(SentenceParams(chunk_size=cap), sizing)
    sizes = sentence.sizes
    return Under(name, _markdown(sentence.chunk), counter, cap, sizes.cap, sizes.minimum)


def _markdown(chunk: Callable[..., list[Chunk]]) -> Callable[[str], list[Chunk]]:
    return lambda text: chunk(text, content_type="text/markdown")


def stranded(text: str, chunks: list[Chunk], k: int, under: Under) -> bool:
    """Whether chunk ``k`` joined with either neighbour would pass the cap packing joins to:
    the one case a chunk may stay under the minimum or of headings alone."""
    chunk = chunks[k]
    neighbours = [chunks[j] for j in (k - 1, k + 1) if 0 <= j < len(chunks)]
    return all(
        under.size(text[min(c.start_index, chunk.start_index) : max(c.end_index, chunk.end_index)])
        > under.joins
        for c in neighbours
    )


def check_rules(text: str, spans: list[tuple[Block, int, int]], under: Under) -> None:
    chunks = under.chunk(text)
    size, cap, minimum = under.size, under.cap, under.minimum
    assert_all(text, chunks, under.counter, cap)
    for block, start, end in spans:
        if block.kind in ("code", "table", "item") and size(text[start:end]) <= cap:
            assert _inside(chunks, start, end), (block.kind, text[start:end][:60])
    if len(chunks) == 1:
        return
    bare = heading_only(text, chunks)
    for k, chunk in enumerate(chunks):
        if chunk.token_count < minimum or chunk in bare:
            assert stranded(text, chunks, k, under), (chunk.token_count, minimum, chunk.text)
    ends = {c.end_index: c for c in chunks}
    for (block, start, end), following in zip(spans, [*spans[1:], None], strict=True):
        if block.kind == "paragraph" and block.text.startswith("  ") and "\n" in block.text:
            first_line_end = start + block.text.index("\n") - 2
            # The sentence the first line's break falls in: from the period before it (or the
            # paragraph's start) to the period after it.
            sentence_start = max(start, text.rfind(".", start, first_line_end) + 1)
            sentence_end = text.find(".", first_line_end) + 1
            sentence = text[sentence_start:sentence_end].strip()
            if text[first_line_end - 1] != "." and size(sentence) <= cap // 2:
                assert first_line_end not in ends, "an indented first line was cut off"
        if block.kind == "intro" and following is not None and end in ends:
            _, next_start, next_end = following
            before = size(text[ends[end].start_index : start].rstrip())
            assert (
                size(text[start:next_end]) > under.joins
                or size(text[next_start:next_end]) > under.joins
                or before < minimum
            ), "a line ending in ':' was cut from what it introduces"


STRATEGIES = ["sentence", "adaptive", "lexical"]


@settings(max_examples=250, deadline=None)
@given(blocks, st.integers(min_value=60, max_value=900), st.sampled_from(STRATEGIES))
# Found by hypothesis: taking units from a chunk must not leave it with its heading alone.
@example(
    [
        Block("paragraph", "Chunk chunk."),
        Block("heading", "# Chunk chunk chunk chunk chunk"),
        Block("item", "- chunk\n  chunk chunk"),
        Block("paragraph", "Chunk."),
    ],
    60,
    "sentence",
)
# The break after an indented first line inside a sentence too long for a chunk: cut at
# words like any other word gap.
@example(
    [
        Block("paragraph", "Chunk."),
        Block(
            "paragraph", "  Chunk. Chunk chunk chunk chunk stream\nchunk chunk chunk chunk chunk."
        ),
    ],
    60,
    "sentence",
)
# Found by hypothesis: adaptive's soft cap (density) ended a chunk at the glue after a line
# ending in ':', which only the hard cap may do.
@example(
    [
        Block("paragraph", "Chunk."),
        Block("table", "| a | b |\n|---|---|\n| chunk | chunk stream |"),
        Block("intro", "Stream chunk chunk chunk chunk chunk:"),
        Block("paragraph", "Chunk vector chunk."),
    ],
    122,
    "adaptive",
)
def test_rules_hold_in_characters(parts: list[Block], cap: int, name: str) -> None:
    text, spans = document(parts)
    check_rules(text, spans, under(name, cap))


@settings(max_examples=120, deadline=None)
@given(blocks, st.integers(min_value=60, max_value=900), st.integers(min_value=1, max_value=200))
# Found by hypothesis (CI): a short chunk of a table and a ':' line, joined to the chunk before
# it, left the line there and its table in the next chunk, though the two fit together.
@example(
    [
        Block("paragraph", "Chunk chunk."),
        Block("intro", "Chunk:"),
        Block("table", "| a | b |\n|---|---|\n| chunk | chunk |"),
        Block("table", "| a | b |\n|---|---|\n| chunk | chunk chunk |"),
        Block("intro", "Chunk:"),
        Block(
            "table",
            "| a | b |\n|---|---|\n| chunk | chunk |\n| chunk | chunk |\n"
            "| chunk | chunk chunk chunk |\n| chunk | chunk chunk chunk |\n"
            "| chunk | chunk chunk chunk chunk |\n"
            "| chunk | chunk chunk chunk chunk chunk chunk chunk |\n"
            "| chunk | chunk chunk chunk chunk chunk chunk chunk chunk chunk chunk |\n"
            "| chunk | chunk chunk chunk chunk chunk chunk chunk chunk chunk chunk chunk chunk |",
        ),
    ],
    416,
    3,
)
def test_rules_hold_with_adaptive_overlap(parts: list[Block], cap: int, overlap: int) -> None:
    text, spans = document(parts)
    check_rules(text, spans, under("adaptive", cap, overlap=overlap))


@settings(max_examples=80, deadline=None)
@given(blocks, st.integers(min_value=24, max_value=254), st.sampled_from(STRATEGIES))
def test_rules_hold_in_tokens(tokenizer_path: str, parts: list[Block], cap: int, name: str) -> None:
    text, spans = document(parts)
    check_rules(text, spans, under(name, cap, Sizing(piece_counter(tokenizer_path))))


MODEL = Path(__file__).resolve().parents[2] / ".cache" / "models" / "all-MiniLM-L6-v2"


@pytest.mark.parametrize("name", STRATEGIES)
@pytest.mark.parametrize("unit", ["character", "tokens"])
def test_rules_hold_on_the_corpus(unit: str, name: str) -> None:
    """The acceptance of issue 21 at the default sizes: no fenced block within the cap split,
    no heading-only chunk, no chunk under the minimum but a document's only one; except where
    the rules collide (joined with either neighbour, the chunk would pass the cap), counted
    and bounded here (docs/concepts/strategies.md states the precedence)."""
    if unit == "tokens" and not MODEL.is_dir():
        pytest.skip("no built model directory (scripts/bootstrap builds it)")
    params = {} if unit == "character" else {"tokenizer": str(MODEL)}
    chunker = registry.build(name, params).chunker
    assert isinstance(chunker, SentenceChunker | AdaptiveChunker | LexicalChunker)
    counter = chunker.sizing.counter
    cap = chunker.params.max_size if isinstance(chunker, AdaptiveChunker) else chunker.sizes.cap
    assert cap is not None
    tested = Under(
        name,
        _markdown(chunker.chunk),
        make_counter() if counter is None else counter,
        cap,
        chunker.sizes.cap,
        chunker.sizes.minimum,
    )
    docs = gather()
    assert len(docs) >= 50
    collisions = 0
    for doc in docs:
        chunks = tested.chunk(doc.text)
        assert not split_fences(doc.text, chunks, tested.size, cap), doc.name
        bare = heading_only(doc.text, chunks)
        if len(chunks) == 1:
            continue
        for k, chunk in enumerate(chunks):
            if chunk.token_count < tested.minimum or chunk in bare:
                assert stranded(doc.text, chunks, k, tested), (doc.name, chunk.text[:80])
                collisions += 1
    assert collisions <= 2, collisions


def test_the_api_reference_example_is_one_chunk() -> None:
    # examples/api-reference.md (843 characters) was 10 lexical chunks, "### Errors" and
    # "Request body:" among them: within the cap, a document is one chunk.
    path = Path(__file__).resolve().parents[2] / "examples" / "api-reference.md"
    text = path.read_text(encoding="utf-8")
    chunks = SentenceChunker().chunk(text, content_type="text/markdown")
    assert len(text) <= 1000
    assert [c.text for c in chunks] == [text.strip()]
    # lexical keeps its breaks where both sides are over the minimum; no crumb is left.
    chunks = LexicalChunker().chunk(text, content_type="text/markdown")
    assert len(chunks) <= 3
    assert min(c.token_count for c in chunks) >= LexicalChunker().sizes.minimum
    assert not heading_only(text, chunks)


@pytest.mark.parametrize("name", STRATEGIES)
def test_an_indented_first_line_starts_a_paragraph(name: str) -> None:
    # GPL-3 style: each paragraph's first line is indented, the rest flush left. The break
    # after the first line is a soft wrap, never a cut.
    para = (
        "  The licenses for most software and other practical works are designed\n"
        "to take away your freedom to share and change the works.  By contrast,\n"
        "the GNU General Public License is intended to guarantee your freedom to\n"
        "share and change all versions of a program."
    )
    text = "\n\n".join([para] * 6)
    chunks = under(name, 300).chunk(text)
    assert all(c.text.endswith(".") for c in chunks), [c.text[-30:] for c in chunks]
    assert all(c.text[0].isupper() for c in chunks)
