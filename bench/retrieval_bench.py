"""What a retriever finds in each chunker's chunks: QuAC questions over long documents.

    .venv/bin/python -m bench.retrieval_bench --split tune|report
        [--chunker SPEC ...] [--param NAME:KEY=VALUE ...] [--json out.json]

Data: bench/support/qa_dataset.py (QuAC validation sections with their highlighted answers, packed
into documents of ≥ 12,000 characters; a fixed ``tune``/``report`` split by section hash). Chunkers:
bench/support/retrieval_chunkers.py — every chunkstream strategy at its defaults (embedding
strategies on the worker's default boundary model, through ``chunk_document`` and the batcher),
LangChain's recursive splitter at 400 and 1,000 characters, both without overlap (ours never
overlap, so the chunk counts and the 2,000-character budget compare like for like; LangChain's
default overlap of 200 is one ``--chunker langchain:chunk_size=1000,chunk_overlap=200`` away),
chonkie's SemanticChunker at its defaults. ``--param sentence:chunk_size=500`` changes a default
row; ``--chunker SPEC`` (repeatable) replaces the list.

Retrieval: every chunk of the documents kept (all of them in one index) and every question are
embedded by the same retrieval model (default: the worker's, the fp32 ONNX all-MiniLM-L6-v2 that
goes out with ``include_embeddings``), through ``open_batcher`` like the worker
(bench/support/retrieval_runtime.py resolves both models); a text over the model's window is
truncated by the model, as in production. The ``--top-k`` (5) chunks of highest
cosine similarity are retrieved for each question.

Metrics per chunker (bench/support/retrieval_metrics.py has the exact definitions), each computed
per question and then averaged over questions:

* recall / precision / IoU of the characters of the top-k chunks against the reference answer's
  characters;
* recall at a budget: chunks taken in rank order until ``--budget`` (2,000) characters, the last
  one cut to what still fits;
* reference rule (``--reference``): ``first`` (default) scores against the first annotator's
  span, the answer given in the dialog; the other annotators' spans are often short fragments
  of it, and taking the best of four would reward small chunks that happen to hold one.
  ``best`` takes, per metric, the best score over all references;
* chunks: how many, mean characters, mean tokens (the retrieval model's tokenizer, without
  [CLS]/[SEP]), and the share over the model's window (more than ``max_seq_length`` − 2 = 254
  tokens for all-MiniLM-L6-v2: the rest of such a chunk never reaches its vector);
* seconds to chunk and to embed (informational: the machine is shared).

Sample size: ``--max-docs`` (default 60) keeps a fixed-seed sample of the split's documents, so
that one split runs in about a quarter of an hour on a shared 2-core machine (embedding every
chunk of every chunker with the fp32 transformer is the cost); ``--max-docs 0`` takes them all.
``--turns 1`` scores only each dialog's opening question (the follow-ups lean on the dialog
before them, "did he ever return to play?", and are harder for every chunker alike).
``--max-questions N`` scores a fixed-seed sample of the kept documents' questions (all their
chunks are still indexed).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
from numpy.typing import NDArray

from bench.support import qa_dataset
from bench.support.retrieval_chunkers import (
    Chunker,
    Piece,
    chunker_specs,
    make,
)
from bench.support.retrieval_metrics import Located, Scores, budget_recall, score, top_k
from bench.support.retrieval_runtime import batchers, resolve_models
from tests.support.splits import SPLITS

SEED = 20261201
BUDGET_DEPTH = 400  # chunks ranked per question for the budget (2,000 chars need ≥ 5 chars each)


class Row(msgspec.Struct):
    chunker: str
    questions: int
    recall: float
    precision: float
    iou: float
    budget_recall: float
    chunks: int
    mean_chars: float
    mean_tokens: float
    over_window: float
    chunk_seconds: float
    embed_seconds: float
    # 95 % half-widths (1.96 standard errors over questions) of IoU and of recall at the budget.
    iou_pm: float = 0.0
    budget_recall_pm: float = 0.0
    # Per question, in the order of ``questions_scored`` of the JSON: for paired comparisons.
    per_question_iou: list[float] = msgspec.field(default_factory=list)
    per_question_budget_recall: list[float] = msgspec.field(default_factory=list)


async def chunk_all(
    chunker: Chunker, docs: Sequence[qa_dataset.QADocument], in_flight: int
) -> list[list[Piece]]:
    gate = asyncio.Semaphore(in_flight)

    async def one(doc: qa_dataset.QADocument) -> list[Piece]:
        async with gate:
            return await chunker.run(doc.text)

    return list(await asyncio.gather(*(one(d) for d in docs)))


def token_counts(tokenizer: Any, texts: Sequence[str]) -> NDArray[np.int64]:
    encodings = tokenizer.encode_batch(list(texts), add_special_tokens=False)
    return np.array([len(e.ids) for e in encodings], dtype=np.int64)


def question_scores(
    ranked: list[Located],
    doc_id: str,
    refs: Sequence[qa_dataset.Reference],
    rule: str,
    k: int,
    budget: int,
) -> tuple[Scores, float]:
    """Scores of the first ``k`` of ``ranked`` and recall at ``budget`` (reading ``ranked``
    as far as the budget goes), for the reference(s) ``rule`` picks."""
    chosen = refs[:1] if rule == "first" else refs
    all_scores = [score(ranked[:k], doc_id, (r.start, r.end)) for r in chosen]
    budgets = [budget_recall(ranked, doc_id, (r.start, r.end), budget) for r in chosen]
    best = Scores(
        recall=max(s.recall for s in all_scores),
        precision=max(s.precision for s in all_scores),
        iou=max(s.iou for s in all_scores),
    )
    return best, max(budgets)


async def evaluate(args: argparse.Namespace) -> tuple[list[Row], list[str]]:
    """The table's rows, and the ids of the questions scored (the per-question order)."""
    from tokenizers import Tokenizer

    docs = qa_dataset.load(args.split, target_chars=args.target_chars)
    if args.max_docs and args.max_docs < len(docs):
        docs = sorted(random.Random(SEED).sample(docs, args.max_docs), key=lambda d: d.doc_id)
    asked = [
        (doc.doc_id, q)
        for doc in docs
        for q in doc.questions
        if qa_dataset.turn_of(q) <= args.turns
    ]
    if args.max_questions and args.max_questions < len(asked):
        asked = random.Random(SEED).sample(asked, args.max_questions)
    print(
        f"split {args.split}: {len(docs)} documents, {sum(len(d.text) for d in docs):,} chars, "
        f"{sum(len(d.questions) for d in docs)} questions ({len(asked)} scored); "
        f"reference rule {args.reference}",
        flush=True,
    )
    models = resolve_models(args.boundary_model, args.retrieval_model)
    print(
        f"boundary model {models.boundary_dir}, retrieval model {models.retrieval_dir} "
        f"(window {models.window} tokens)",
        flush=True,
    )
    tokenizer = Tokenizer.from_file(str(models.retrieval_tokenizer))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    window = models.window
    rows: list[Row] = []
    async with batchers(models) as (boundary_batcher, retriever):
        question_vectors = await retriever.submit([q.text for _, q in asked])
        for spec in chunker_specs(args.chunker, args.param):
            chunker = make(spec, models.context, models.boundary_dir, boundary_batcher.submit)
            began = time.perf_counter()
            per_doc = await chunk_all(chunker, docs, args.in_flight)
            chunk_seconds = time.perf_counter() - began
            located = [
                Located(doc.doc_id, piece.ranges)
                for doc, pieces in zip(docs, per_doc, strict=True)
                for piece in pieces
            ]
            texts = [piece.text for pieces in per_doc for piece in pieces]
            began = time.perf_counter()
            vectors = await retriever.submit(texts)
            embed_seconds = time.perf_counter() - began
            # The budget may need more than k chunks (small chunks): rank enough to fill it.
            depth = max(args.top_k, BUDGET_DEPTH)
            ranked_ids = top_k(question_vectors, vectors, depth)
            per_question = np.zeros((len(asked), 4))
            unfilled = 0
            for n, ((doc_id, question), ids) in enumerate(zip(asked, ranked_ids, strict=True)):
                ranked = [located[i] for i in ids]
                unfilled += sum(c.length for c in ranked) < args.budget and len(ids) < len(texts)
                s, b = question_scores(
                    ranked, doc_id, question.references, args.reference, args.top_k, args.budget
                )
                per_question[n] = (s.recall, s.precision, s.iou, b)
            if unfilled:
                print(
                    f"  warning: {unfilled} questions' {depth} best chunks hold less than the "
                    f"budget",
                    flush=True,
                )
            tokens = token_counts(tokenizer, texts)
            mean = per_question.mean(axis=0)
            half_width = 1.96 * per_question.std(axis=0, ddof=1) / np.sqrt(len(asked))
            row = Row(
                chunker=chunker.label,
                questions=len(asked),
                recall=float(mean[0]),
                precision=float(mean[1]),
                iou=float(mean[2]),
                budget_recall=float(mean[3]),
                chunks=len(texts),
                mean_chars=float(np.mean([len(t) for t in texts])),
                mean_tokens=float(tokens.mean()),
                over_window=float((tokens > window).mean()),
                chunk_seconds=chunk_seconds,
                embed_seconds=embed_seconds,
                iou_pm=float(half_width[2]),
                budget_recall_pm=float(half_width[3]),
                per_question_iou=per_question[:, 2].round(4).tolist(),
                per_question_budget_recall=per_question[:, 3].round(4).tolist(),
            )
            rows.append(row)
            print(
                f"  {row.chunker}: done ({chunk_seconds:.1f} s + {embed_seconds:.1f} s)", flush=True
            )
    return rows, [q.qid for _, q in asked]


def table(rows: Sequence[Row], k: int, budget: int) -> str:
    lines = [
        f"| chunker | recall@{k} | precision@{k} | IoU@{k} | recall@{budget:,} chars "
        "| chunks | mean chars | mean tokens | over window | chunk s | embed s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.chunker} | {r.recall:.3f} | {r.precision:.3f} | {r.iou:.3f} ±{r.iou_pm:.3f} | "
            f"{r.budget_recall:.3f} ±{r.budget_recall_pm:.3f} | {r.chunks} | "
            f"{r.mean_chars:.0f} | {r.mean_tokens:.0f} | "
            f"{r.over_window:.1%} | {r.chunk_seconds:.1f} | {r.embed_seconds:.1f} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", choices=SPLITS, required=True)
    parser.add_argument("--chunker", action="append", help="replaces the default list")
    parser.add_argument("--param", action="append", default=[], help="NAME:KEY=VALUE,...")
    parser.add_argument("--top-k", type=int, default=5)
    parser.add_argument("--budget", type=int, default=2000)
    parser.add_argument("--reference", choices=("first", "best"), default="first")
    parser.add_argument("--max-docs", type=int, default=60, help="0: every document")
    parser.add_argument("--max-questions", type=int, default=0, help="0: every question")
    parser.add_argument(
        "--turns", type=int, default=3, help="1: only each dialog's opening question"
    )
    parser.add_argument("--target-chars", type=int, default=12_000)
    parser.add_argument("--in-flight", type=int, default=8, help="documents chunked at once")
    parser.add_argument("--boundary-model", help="default: the worker's boundary model")
    parser.add_argument("--retrieval-model", help="default: the worker's retrieval model")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows, scored = asyncio.run(evaluate(args))
    print()
    print(table(rows, args.top_k, args.budget))
    print(f"\n± : 95 % half-width over the {len(scored)} questions (1.96 standard errors).")
    if args.json:
        report = {
            "args": {k: str(v) for k, v in vars(args).items()},
            "questions_scored": scored,
            "rows": rows,
        }
        args.json.write_bytes(msgspec.json.format(msgspec.json.encode(report)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
