"""Memory of the embedding strategies per input byte: what worker/runtime/resources.py's bound
needs.

    PYTHONPATH=. .venv/bin/python -m bench.calibration.semantic_memory [--sizes 130000 1000000]
        [--model static|int8|fp32] [--strategy semantic ...]

For each strategy and document (tests/support/long_document.py's generated markdown at each size,
and the largest installed package description) one document goes through plan → embed (the batcher's
``embed_batch``, the rows the worker's batcher would hold) → assemble under ``tracemalloc``, and
the peak of traced memory over the whole document is divided by its UTF-8 bytes. The
*expansion* of docs/operating/sizing.md adds 3 for the raw record, the decoded text and the
encoded events.
tracemalloc sees Python objects and numpy arrays, not the tokenizer's Rust allocations (those are
the model backend's, the same for every strategy); peak RSS is measured by
tests/chunking/semantic/test_memory.py and docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

from tests.support.corpus import gather
from tests.support.embedding import embed_batch
from tests.support.long_document import long_markdown
from worker.chunking import registry
from worker.models.loading import load_backend
from worker.models.reference import describe, find

RECORD_TEXT_EVENTS = 3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[130_000, 1_000_000])
    parser.add_argument("--model", choices=("static", "int8", "fp32"), default="static")
    parser.add_argument("--strategy", action="append", default=None)
    args = parser.parse_args()
    strategies = args.strategy or ["semantic", "sdpm", "context"]
    transformer = find("retrieval", None)
    if args.model == "static":
        boundary = find("boundary", None)
    else:
        boundary = describe(transformer.directory, "boundary", int8=args.model == "int8")
    backend = load_backend(boundary)
    documents = [(f"generated {size:,} B", long_markdown(size)) for size in args.sizes]
    largest = max(gather(), key=lambda d: len(d.text))
    documents.append((f"{largest.name} (largest description)", largest.text))
    print(f"{time.strftime('%Y-%m-%d %H:%M')}; boundary model {args.model}, sizes in the "
          "transformer's tokens")  # fmt: skip
    print("| strategy | document | bytes | texts embedded | peak traced MB | per input byte "
          "| expansion (+3) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for name in strategies:
        built = registry.build(
            name, {}, registry.BuildContext(boundary=boundary, retrieval=transformer)
        )
        chunker = built.chunker
        for label, text in documents:
            size = len(text.encode())
            tracemalloc.start()
            plan = chunker.plan(text, content_type="text/markdown")  # type: ignore[union-attr]
            vectors = embed_batch(backend, list(plan.texts))
            chunks = chunker.assemble(plan, vectors)  # type: ignore[union-attr]
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            texts = len(plan.texts)
            del plan, vectors, chunks
            print(
                f"| {name} | {label} | {size:,} | {texts:,} | {peak / 1e6:.1f} | "
                f"{peak / size:.1f} | {peak / size + RECORD_TEXT_EVENTS:.1f} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
