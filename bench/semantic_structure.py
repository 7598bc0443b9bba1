"""Issue 21's structure counts on the corpus, for the embedding strategies, before and after.

    PYTHONPATH=. .venv/bin/python bench/semantic_structure.py [--baseline DIR]

Every installed package description (bench/corpus.py) is chunked by `semantic`, `sdpm` and
`context` at their defaults on the default static boundary model, built as the worker builds
them (``BuildContext(boundary, retrieval)``); ``--baseline DIR`` runs other code on the same
documents (bench/semantic_runs.py). Counted per chunk, read from the chunk's own text (for
`context`, the whole chunk text, context included), so that any code can be measured alike:

* over the window: more than 254 tokens of the transformer (all-MiniLM-L6-v2, without
  ``[CLS]``/``[SEP]``): the rest never reaches the chunk's vector;
* unbalanced fence: an odd number of fence lines (``` or ~~~ opening a line); and of those,
  the ones that cut a fenced block (of the document's own blocks) that fits 254 tokens — a
  block over the window has to be cut;
* heading-only: every markdown block of the chunk is a heading;
* under the minimum: fewer than 31 tokens (an eighth of 254), in a document of more than one
  chunk.

docs/semantic.md ("Structure on the corpus") has the table; tests/semantic/test_corpus_rules.py
holds the rules on the document's own blocks.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.corpus import gather
from bench.semantic_runs import chunk_all, chunk_in_tree, job_key
from worker.chunking.text.markdown import split_blocks
from worker.chunking.text.tokens import make_counter
from worker.models.reference import find

STRATEGIES = ("semantic", "sdpm", "context")
WINDOW = 254
MINIMUM = WINDOW // 8
_FENCE = re.compile(r"^[ \t]{0,3}(?:```|~~~)", re.MULTILINE)


def counts(texts: list[str], results: list[list[list[Any]]], counter: Any) -> dict[str, int]:
    found = {"chunks": 0, "over": 0, "fence": 0, "fits": 0, "headings": 0, "small": 0}
    for text, chunks in zip(texts, results, strict=True):
        fences = [
            (b.start, b.end)
            for b in split_blocks(text)
            if b.kind == "code" and text.startswith(("```", "~~~"), b.start)
        ]
        small_fences = [(a, b) for a, b in fences if counter.count(text[a:b]) <= WINDOW]
        for start, end, spans in chunks:
            body = text[start:end] if spans is None else "\n".join(text[a:b] for a, b in spans)
            size = counter.count(body)
            blocks = split_blocks(body)
            found["chunks"] += 1
            found["over"] += size > WINDOW
            odd = len(_FENCE.findall(body)) % 2
            found["fence"] += odd
            pieces = spans or [[start, end]]
            found["fits"] += odd and any(
                a < lo < b or a < hi < b for a, b in small_fences for lo, hi in pieces
            )
            found["headings"] += bool(blocks) and all(b.kind == "heading" for b in blocks)
            found["small"] += len(chunks) > 1 and size < MINIMUM
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, default=None)
    args = parser.parse_args()
    docs = gather()
    texts = [d.text for d in docs]
    request = {
        "docs": [[d.text, d.content_type] for d in docs],
        "jobs": [{"strategy": s, "model": "static"} for s in STRATEGIES],
    }
    counter = make_counter(str(find("retrieval", None).tokenizer))
    print(f"{time.strftime('%Y-%m-%d %H:%M')}; {len(docs)} documents, static boundary model")
    print("| code | strategy | chunks | over 254 tokens | unbalanced fence | of a block that "
          "fits | heading-only | under 31 tokens |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    trees = [("before", chunk_in_tree(args.baseline, request))] if args.baseline else []
    trees.append(("this tree", chunk_all(request)))
    for label, results in trees:
        for strategy in STRATEGIES:
            found = counts(
                texts, results[job_key({"strategy": strategy, "model": "static"})], counter
            )
            print(
                f"| {label} | {strategy} | {found['chunks']} | {found['over']} | "
                f"{found['fence']} | {found['fits']} | {found['headings']} | {found['small']} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
