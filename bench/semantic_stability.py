"""Edit stability of the embedding strategies: after a one-paragraph edit, which chunks get new ids?

    PYTHONPATH=. .venv/bin/python bench/semantic_stability.py [--documents 8] [--edits 10]
        [--model static|fp32] [--baseline DIR] [--strategy semantic ...] [--chars 30000]

Chunk ids are content-addressed (issue 19: a hash of the document id, the strategy's
fingerprint, the chunk's text and its occurrence among equal texts), so a chunk of the new
version keeps its id exactly when the old version had a chunk with the same text (as often).

Documents: installed package descriptions (bench/corpus.py) concatenated in a fixed order into
documents of at least ``--chars`` characters (about 50 chunks of 254 tokens), markdown. Edits,
drawn with a fixed seed, each of one paragraph — a markdown paragraph block (``split_blocks``),
so that no edit opens or closes a code fence and turns the rest of the document inside out:
*replace* a paragraph of the middle 80 % with a prose paragraph of another package, *insert*
one before it, *delete* it, *append* one at the end, *truncate* after a block of the second
half.

Per strategy and edit kind:

* re-ided: new-version chunks whose id the old version does not have, in % of all chunks;
* beyond the edit: re-ided chunks that do not touch the edited region (its characters, or for a
  deletion or truncation the place where text went, whitespace around it included), in % of all
  chunks; then the most such chunks on one side of the edit, its 95th percentile over edits and
  the share of edits with at most one on each side (issue 19's bound for the rule strategies);
* re-embedded: bytes of re-ided chunks, in % of the version's bytes (what a sink that skips
  known ids embeds again; with ids that change on every version it is 100 %).

``--baseline DIR`` runs the same edits with the code in DIR (e.g. ``git archive main worker |
tar -x -C DIR``) in a subprocess: before and after on the same documents and edits.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.corpus import gather
from bench.seams import prose_paragraphs
from bench.semantic_runs import chunk_all, chunk_in_tree, job_key
from worker.chunking.text.markdown import split_blocks

KINDS = ("replace", "insert", "delete", "append", "truncate")


@dataclass(frozen=True)
class Version:
    text: str
    region: tuple[int, int]  # the edited characters in the new text ([p, p] for a removal)
    kind: str
    base: int  # index of the original document


def documents(min_chars: int, count: int) -> list[str]:
    """Package descriptions concatenated in name order into ``count`` documents."""
    docs: list[str] = []
    current: list[str] = []
    for doc in gather():
        if doc.content_type != "text/markdown":
            continue
        current.append(doc.text.strip())
        if sum(len(t) for t in current) >= min_chars:
            docs.append("\n\n".join(current))
            current = []
            if len(docs) == count:
                break
    return docs


def edits(texts: list[str], per_document: int, seed: int) -> list[Version]:
    rng = random.Random(seed)
    donors = [p for doc in gather() for p in prose_paragraphs(doc.text)]
    versions: list[Version] = []
    for base, text in enumerate(texts):
        blocks = split_blocks(text)
        paragraphs = [b for b in blocks if b.kind == "paragraph"]
        middle = paragraphs[len(paragraphs) // 10 : len(paragraphs) - len(paragraphs) // 10]
        for n in range(per_document):
            kind = KINDS[n % len(KINDS)]
            donor = rng.choice(donors)
            target = rng.choice(middle)
            if kind == "replace":
                new = text[: target.start] + donor + text[target.end :]
                region = (target.start, target.start + len(donor))
            elif kind == "insert":
                new = text[: target.start] + donor + "\n\n" + text[target.start :]
                region = (target.start, target.start + len(donor))
            elif kind == "delete":
                following = next((b for b in blocks if b.start > target.start), None)
                end = following.start if following is not None else len(text)
                new = text[: target.start] + text[end:]
                region = (target.start, target.start)
            elif kind == "append":
                new = text.rstrip() + "\n\n" + donor + "\n"
                region = (len(text.rstrip()) + 2, len(text.rstrip()) + 2 + len(donor))
            else:
                cut = rng.choice(blocks[len(blocks) // 2 :])
                new = text[: cut.end] + "\n"
                region = (cut.end, cut.end)
            versions.append(Version(new, region, kind, base))
    return versions


def chunk_texts(text: str, chunks: list[list[Any]]) -> list[tuple[str, int, int]]:
    out = []
    for start, end, spans in chunks:
        body = text[start:end] if spans is None else "\n".join(text[a:b] for a, b in spans)
        out.append((body, start, end))
    return out


def ids(texts: list[tuple[str, int, int]]) -> list[tuple[str, int]]:
    """Content-addressed identity: the text and its occurrence among equal texts."""
    seen: Counter[str] = Counter()
    out = []
    for body, _, _ in texts:
        out.append((body, seen[body]))
        seen[body] += 1
    return out


@dataclass
class Outcome:
    chunks: int
    reided: int
    beyond: int
    worst_side: int
    ok: bool
    bytes_reembedded: int
    bytes_total: int


def compare(
    old: list[tuple[str, int, int]], new: list[tuple[str, int, int]], v: Version
) -> Outcome:
    known = set(ids(old))
    text = v.text
    low, high = v.region
    # The region with the whitespace around it: a chunk that ends right before it touches it.
    while low > 0 and text[low - 1].isspace():
        low -= 1
    while high < len(text) and text[high].isspace():
        high += 1
    left = right = beyond = reided = 0
    re_bytes = total_bytes = 0
    for (body, start, end), key in zip(new, ids(new), strict=True):
        size = len(body.encode())
        total_bytes += size
        if key in known:
            continue
        reided += 1
        re_bytes += size
        touches = start <= high and end >= low
        if not touches:
            beyond += 1
            if end < low:
                left += 1
            else:
                right += 1
    return Outcome(
        len(new), reided, beyond, max(left, right), left <= 1 and right <= 1, re_bytes, total_bytes
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, default=8)
    parser.add_argument("--edits", type=int, default=10, help="per document (kinds in turn)")
    parser.add_argument("--chars", type=int, default=30_000)
    parser.add_argument("--model", choices=("static", "fp32"), default="static")
    parser.add_argument("--strategy", action="append", default=None)
    parser.add_argument("--baseline", type=Path, default=None)
    parser.add_argument("--seed", type=int, default=20261201)
    args = parser.parse_args()
    strategies = args.strategy or ["semantic", "sdpm", "context"]

    texts = documents(args.chars, args.documents)
    versions = edits(texts, args.edits, args.seed)
    load = os.getloadavg()
    print(
        f"{time.strftime('%Y-%m-%d %H:%M')}; {len(texts)} documents "
        f"({statistics.mean(len(t) for t in texts):,.0f} characters on average), "
        f"{len(versions)} edits, boundary model {args.model}; load average {load[0]:.1f}"
    )
    request = {
        "docs": [[t, "text/markdown"] for t in texts]
        + [[v.text, "text/markdown"] for v in versions],
        "jobs": [{"strategy": s, "model": args.model} for s in strategies],
    }
    trees = []
    if args.baseline is not None:
        trees.append(("before", chunk_in_tree(args.baseline, request)))
    trees.append(("this tree", chunk_all(request)))
    print(
        "| code | strategy | edit | chunks | re-ided % | beyond the edit % | most on one side | "
        "p95 on one side | edits ≤ 1 each side | re-embedded bytes % |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for label, results in trees:
        for strategy in strategies:
            rows = results[job_key({"strategy": strategy, "model": args.model})]
            originals = [chunk_texts(t, rows[i]) for i, t in enumerate(texts)]
            outcomes: dict[str, list[Outcome]] = {k: [] for k in KINDS}
            for n, v in enumerate(versions):
                new = chunk_texts(v.text, rows[len(texts) + n])
                outcomes[v.kind].append(compare(originals[v.base], new, v))
            for kind in (*KINDS, "all"):
                got = [o for k in KINDS for o in outcomes[k]] if kind == "all" else outcomes[kind]
                chunks = sum(o.chunks for o in got)
                sides = sorted(o.worst_side for o in got)
                p95 = sides[min(len(sides) - 1, int(0.95 * len(sides)))]
                reembedded = sum(o.bytes_reembedded for o in got) / sum(o.bytes_total for o in got)
                print(
                    f"| {label} | {strategy} | {kind} | {chunks / len(got):.1f} | "
                    f"{100 * sum(o.reided for o in got) / chunks:.1f} | "
                    f"{100 * sum(o.beyond for o in got) / chunks:.1f} | {max(sides)} | {p95} | "
                    f"{sum(o.ok for o in got)}/{len(got)} | "
                    f"{100 * reembedded:.1f} |"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
