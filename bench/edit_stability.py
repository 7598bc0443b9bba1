"""How many chunk ids a one-paragraph edit changes, per strategy (issue 19).

    .venv/bin/python -m bench.edit_stability [--edits 40] [--chunks 50] [--seed 1]
        [--only sentence adaptive lexical "sentence, greedy (before)"] [--tokenizer DIR]

Chunk ids are content-addressed (doc id, strategy fingerprint, the chunk's text and its
occurrence number among identical texts of the document), so a chunk keeps its id across
versions exactly when a chunk with the same text and occurrence number exists in both. For
each strategy, documents of about ``--chunks`` chunks are made from tests/support/corpus.py (corpus
documents joined in order until the strategy cuts them into that many), and each gets random
one-paragraph edits in its middle third (replace a paragraph with one from elsewhere in the
corpus, insert one, delete one), plus appends and truncations at the end. Both versions are
chunked; a new version's chunk is *re-ided* when its (text, occurrence) is not among the old
version's. Chunks that overlap the edited region (widened by two characters, so a deletion
touches the chunks on both sides of it) are the ones that must change; the rest, left and
right of the edit, should not. Reported per strategy:

* within bound: the share of edits that re-id at most one chunk beyond the touching ones on
  each side (issue 19's acceptance);
* mean and max of the chunks re-ided beyond the touching ones;
* re-embedded bytes: the UTF-8 bytes of the re-ided chunks over the bytes of every chunk of the
  new version, which is what a sink re-embeds today (every id is new on every version).

"sentence, greedy (before)" is the packing before issues 19/21 (segment.split_sentences, then
greedy packing up to the cap), for comparison.
"""

from __future__ import annotations

import argparse
import random
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from tests.support.corpus import Document, gather
from tests.support.paragraphs import split_paragraphs
from worker.chunking import registry
from worker.chunking.text.segment import (
    fence_lines,
    pack_spans,
    split_sentences,
    split_to_cap,
)
from worker.chunking.text.tokens import CharacterCounter
from worker.chunking.types import Chunk, EmbeddingChunker, RuleChunker

Spans = list[tuple[int, int, str]]  # start, end, text
Chunker = Callable[[str], Spans]


def _spans(chunks: list[Chunk]) -> Spans:
    return [(c.start_index, c.end_index, c.text) for c in chunks]


def _markdown_spans(chunker: RuleChunker | EmbeddingChunker) -> Chunker:
    assert isinstance(chunker, RuleChunker)  # the rule strategies need no model

    def spans(text: str) -> Spans:
        return _spans(chunker.chunk(text, content_type="text/markdown"))

    return spans


def chunkers(tokenizer: str | None) -> dict[str, Chunker]:
    extra = {} if tokenizer is None else {"tokenizer": tokenizer}
    built = {
        name: registry.build(name, extra if name == "sentence" else {}).chunker
        for name in ("sentence", "adaptive", "lexical")
    }
    made = {name: _markdown_spans(chunker) for name, chunker in built.items()}
    counter = CharacterCounter()

    def greedy(text: str) -> Spans:
        sentences = split_sentences(text, soft_wraps=True)
        pieces = [p for s in sentences for p in split_to_cap(text, s, counter, 1000)]
        return [
            (s.start, s.end, text[s.start : s.end]) for s in pack_spans(text, pieces, counter, 1000)
        ]

    if tokenizer is None:
        made["sentence, greedy (before)"] = greedy
    return made


def keys(spans: Spans) -> Counter[tuple[str, int]]:
    """(text, occurrence number) of every chunk: what its content-addressed id hashes."""
    seen: Counter[str] = Counter()
    out: Counter[tuple[str, int]] = Counter()
    for _, _, text in spans:
        out[(text, seen[text])] += 1
        seen[text] += 1
    return out


@dataclass
class Tally:
    edits: int = 0
    within: int = 0
    beyond: list[int] = field(default_factory=list)
    reembedded: int = 0
    total: int = 0

    def add(self, old: Spans, new: Spans, region: tuple[int, int]) -> None:
        before = keys(old)
        seen: Counter[str] = Counter()
        start, end = region
        left = right = 0
        for a, b, text in new:
            key = (text, seen[text])
            seen[text] += 1
            size = len(text.encode())
            self.total += size
            if before[key] > 0:
                continue
            self.reembedded += size
            if b <= start:
                left += 1
            elif a >= end:
                right += 1
        self.edits += 1
        self.within += left <= 1 and right <= 1
        self.beyond.append(left + right)


def paragraphs(text: str) -> list[tuple[int, int]]:
    """Blank-line separated paragraphs outside fenced code and holding no fence line: an edit
    that opens or closes a fence changes what every later line is, not one paragraph."""
    fences = fence_lines(text)
    return [
        (s.start, s.end)
        for s in split_paragraphs(text)
        if bisect_right(fences, s.start) % 2 == 0
        and not any(s.start <= f < s.end for f in fences)
        and "```" not in text[s.start : s.end]
        and "~~~" not in text[s.start : s.end]
    ]


def documents(chunk: Chunker, docs: list[Document], target: int, limit: int) -> list[str]:
    """Corpus documents joined in order into texts of about ``target`` chunks."""
    made: list[str] = []
    current: list[str] = []
    for doc in docs:
        current.append(doc.text.strip())
        text = "\n\n".join(current)
        if len(chunk(text)) >= target:
            made.append(text)
            current = []
            if len(made) >= limit:
                break
    return made


def edit(text: str, rng: random.Random, pool: list[str], kind: str) -> tuple[str, tuple[int, int]]:
    """The edited text and the edited region in it."""
    spans = paragraphs(text)
    middle = spans[len(spans) // 3 : max(len(spans) // 3 + 1, 2 * len(spans) // 3)]
    a, b = rng.choice(middle)
    other = rng.choice(pool)
    if kind == "replace":
        new = text[:a] + other + text[b:]
        region = (a, a + len(other))
    elif kind == "insert":
        new = text[:a] + other + "\n\n" + text[a:]
        region = (a, a + len(other) + 2)
    elif kind == "delete":
        new = text[:a] + text[b:].lstrip("\n")
        region = (a, a)
    elif kind == "append":
        new = text + "\n\n" + other
        region = (len(text), len(new))
    else:  # truncate: drop the last paragraphs (up to a tenth of them)
        cut = spans[-rng.randint(1, max(1, len(spans) // 10))][0]
        new = text[:cut].rstrip()
        region = (len(new), len(new))
    return new, (max(0, region[0] - 2), region[1] + 2)


KINDS = ("replace", "insert", "delete", "append", "truncate")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edits", type=int, default=40, help="edits of each kind per document")
    parser.add_argument("--chunks", type=int, default=50)
    parser.add_argument("--documents", type=int, default=8)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--only", nargs="+", metavar="NAME")
    parser.add_argument("--tokenizer", help="sentence in this model's tokens (a model directory)")
    args = parser.parse_args()
    docs = gather()
    pool = [doc.text[a:b] for doc in docs for a, b in paragraphs(doc.text) if 80 <= b - a <= 1200]
    made = chunkers(args.tokenizer)
    if args.only:
        made = {name: made[name] for name in args.only}
    print(
        f"{len(docs)} corpus documents; {args.edits} edits of each kind ({', '.join(KINDS)}) "
        f"per document; seed {args.seed}"
    )
    print(
        "\n| strategy | documents | chunks/doc | edits | within bound | mean beyond | max beyond "
        "| re-embedded bytes |\n|---|---:|---:|---:|---:|---:|---:|---:|"
    )
    for name, chunk in made.items():
        rng = random.Random(args.seed)
        texts = documents(chunk, docs, args.chunks, args.documents)
        tally = Tally()
        sizes = []
        for text in texts:
            old = chunk(text)
            sizes.append(len(old))
            for kind in KINDS:
                for _ in range(args.edits):
                    new_text, region = edit(text, rng, pool, kind)
                    tally.add(old, chunk(new_text), region)
        mean = sum(tally.beyond) / max(1, len(tally.beyond))
        worst = max(tally.beyond, default=0)
        print(
            f"| {name} | {len(texts)} | {sum(sizes) / max(1, len(sizes)):.0f} | {tally.edits} "
            f"| {tally.within / max(1, tally.edits):.1%} | {mean:.2f} | {worst} "
            f"| {tally.reembedded / max(1, tally.total):.1%} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
