"""Seam precision/recall/F1 and speed of `semantic` and `sdpm`, static and transformer boundary
models, this tree beside another (the code before a change), on one seam set in one run.

    PYTHONPATH=. .venv/bin/python bench/semantic_seams.py [--split heldout|tune]
        [--baseline DIR] [--param NAME:KEY=VALUE ...] [--rounds 3] [--min-seconds 2]

Seams: bench/seams.py's ``seam_split`` (``heldout`` is reported; ``tune`` is for choosing
parameters). Each strategy runs at its defaults (``--param`` overrides one) with
``BuildContext(boundary=…, retrieval=the transformer)``, as the worker and the CLI build it, on
the default static boundary model and on the fp32 transformer, through
``worker.pipeline.chunk_document_sync`` and the batcher's ``embed_batch``.

``--baseline DIR``: a checkout of other code (e.g. ``git archive main worker | tar -x -C DIR``)
chunks the same documents in a subprocess with ``PYTHONPATH=DIR`` (only APIs both have are
used), so before and after are measured on the same documents, models and machine, in turn.

Speed: MB/s over the seam set, each (strategy, model) timed once per round for ``--rounds``
rounds (rounds interleave the rows; a static row repeats the set until ``--min-seconds``), the
median kept. × fp32 is the ratio to the transformer row of the same strategy and tree.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

STRATEGIES = ("semantic", "sdpm")
MODELS = ("static", "fp32")


def chunk_starts(request: dict[str, Any]) -> dict[str, Any]:
    """For each (strategy, model): every document's chunk starts and the median seconds per
    pass. Uses only APIs that the code before issue 21 also has."""
    from worker.chunking import registry
    from worker.inference.batcher import embed_batch
    from worker.models.loading import load_backend
    from worker.models.reference import describe, find
    from worker.pipeline import chunk_document_sync

    docs: list[str] = request["docs"]
    transformer = find("retrieval", None)
    refs = {
        "static": find("boundary", None),
        "fp32": describe(transformer.directory, "boundary"),
    }
    backends = {name: load_backend(ref) for name, ref in refs.items()}
    rows: dict[str, Any] = {}
    runs = []
    for strategy in STRATEGIES:
        for model in MODELS:
            context = registry.BuildContext(boundary=refs[model], retrieval=transformer)
            built = registry.build(strategy, request["params"].get(strategy, {}), context)
            backend = backends[model]

            def run(built: Any = built, backend: Any = backend) -> list[list[int]]:
                embed = lambda texts: embed_batch(backend, texts)  # noqa: E731
                return [
                    [c.start_index for c in chunk_document_sync(built, d, "text/plain", embed)]
                    for d in docs
                ]

            runs.append((f"{strategy}/{model}", run))
    for key, run in runs:
        rows[key] = {"starts": run(), "seconds": []}  # warms each session up too
    for _ in range(request["rounds"]):
        for key, run in runs:
            passes, began = 0, time.perf_counter()
            while True:
                run()
                passes += 1
                elapsed = time.perf_counter() - began
                if elapsed >= request["min_seconds"]:
                    break
            rows[key]["seconds"].append(elapsed / passes)
    return {
        k: {"starts": v["starts"], "seconds": statistics.median(v["seconds"])}
        for k, v in rows.items()
    }


def main() -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench.seams import SPLITS, Scores, score, seam_split
    from worker.chunking.text.segment import split_paragraphs

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", choices=SPLITS, default="heldout")
    parser.add_argument("--baseline", type=Path, default=None)
    parser.add_argument("--param", action="append", default=[], help="STRATEGY:KEY=VALUE")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--min-seconds", type=float, default=2.0)
    args = parser.parse_args()
    params: dict[str, dict[str, str]] = {}
    for item in args.param:
        strategy, _, assignment = item.partition(":")
        key, _, value = assignment.partition("=")
        params.setdefault(strategy, {})[key] = value

    docs = seam_split(args.split)
    size = sum(len(d.text.encode()) for d in docs)
    load = os.getloadavg()
    print(
        f"{time.strftime('%Y-%m-%d %H:%M')}; split {args.split}: {len(docs)} documents, "
        f"{sum(len(d.seams) for d in docs)} seams, {size / 1e6:.3f} MB; load average "
        f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; params {params or 'defaults'}"
    )
    request = {
        "docs": [d.text for d in docs],
        "params": params,
        "rounds": args.rounds,
        "min_seconds": args.min_seconds,
    }
    trees: list[tuple[str, dict[str, Any]]] = []
    if args.baseline is not None:
        baseline = subprocess.run(
            [sys.executable, __file__, "--chunk-only"],
            input=json.dumps({**request, "params": {}}),
            capture_output=True,
            text=True,
            check=True,
            env={
                **os.environ,
                "PYTHONPATH": str(args.baseline.resolve()),
                # The other tree is no checkout: it finds the models where this one does.
                "CHUNKSTREAM_MODEL_PATH": str(
                    Path(__file__).resolve().parents[1] / ".cache/models"
                ),
            },
        )
        trees.append((f"before ({args.baseline})", json.loads(baseline.stdout)))
    trees.append(("this tree", chunk_starts(request)))

    paragraphs = Scores(0, 0, 0)
    for doc in docs:
        cuts = [s.start for s in split_paragraphs(doc.text)]
        paragraphs = paragraphs + score(doc.text, doc.seams, cuts)
    print("| code | strategy | boundary model | P | R | F1 | chunks | MB/s | × fp32 |")
    print("|---|---|---|---|---|---|---|---|---|")
    for label, rows in trees:
        for strategy in STRATEGIES:
            reference = size / 1e6 / rows[f"{strategy}/fp32"]["seconds"]
            for model in MODELS:
                row = rows[f"{strategy}/{model}"]
                total = Scores(0, 0, 0)
                for doc, starts in zip(docs, row["starts"], strict=True):
                    total = total + score(doc.text, doc.seams, starts)
                mbps = size / 1e6 / row["seconds"]
                chunks = sum(len(s) for s in row["starts"])
                print(
                    f"| {label} | {strategy} | {model} | {total.precision:.3f} | "
                    f"{total.recall:.3f} | {total.f1:.3f} | {chunks} | {mbps:.4f} | "
                    f"{mbps / reference:.0f}× |"
                )
    print(
        f"| – | cut at every paragraph | none | {paragraphs.precision:.3f} | "
        f"{paragraphs.recall:.3f} | {paragraphs.f1:.3f} | | | |"
    )
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--chunk-only"]:
        print(json.dumps(chunk_starts(json.loads(sys.stdin.read()))))
        raise SystemExit(0)
    raise SystemExit(main())
