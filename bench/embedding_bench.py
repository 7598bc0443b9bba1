"""Embedding throughput: arrival-order batches vs the token-budget batcher, fp32 and int8.

    .venv/bin/python -m bench.embedding_bench [--sentences 4096] [--rounds 3] [--slice 1024]
        [--concurrent-batches N] [--compare-concurrency N] [--optimizer]

Sentences are gathered at run time from the long descriptions of the installed packages
(tests/support/corpus.py), split with our own sentence splitter, filtered to prose, de-duplicated
and shuffled with a fixed seed (many documents interleave in a real worker). Nothing is committed.

Rows, all in this process on the same sentences:
  (a) batches of 32 in arrival order, fp32, called directly — the baseline and the reference
  (b) the asyncio Batcher, fp32: length-sorted, token budget, documents of 1-24 sentences
      submitted concurrently under the batcher's watermark (as a pausing consumer would)
  (c) the same Batcher on the per-channel int8 model
Rows (b) and (c) run ``--concurrent-batches`` batches at once (the batcher's default), sharing one
session whose intra-op threads are ``--threads`` divided among them. With
``--compare-concurrency N``, two more rows run (b) and (c) with N concurrent batches instead, on
the same slices — the same-run A/B behind the default.
With ``--optimizer``, two more rows run on the same slices: (b) and (c) on the graph after
onnxruntime's transformer optimizer (Attention, SkipLayerNormalization and BiasGelu fusions; exact
erf GELU, never FastGelu), the int8 one quantised from that graph (QAttention + MatMulInteger).

plus the fp32 GEMM ceiling: the rate this onnxruntime reaches on one layer's weight products
(2,048 token rows, no padding), scaled to the model's layers — what an encoder that was only
its MatMuls could do.

Other processes share this machine's two cores, so the work is cut into slices (``--slice``
sentences; each slice is also one batcher run, its sorting window) and the rows alternate
slice by slice; each (row, slice) keeps its fastest round, and a row's figure is the sum over
its slices. Contention only ever slows a run down, so the minimum is the least disturbed one.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from tests.support.corpus import gather
from worker.chunking.text.segment import split_sentences
from worker.inference.batcher import (
    DEFAULT_MAX_BATCH_SIZE,
    DEFAULT_MAX_BATCH_TOKENS,
    DEFAULT_MAX_WAIT_MS,
    DEFAULT_QUEUE_HIGH_TOKENS,
    DEFAULT_QUEUE_LOW_TOKENS,
    Batcher,
)
from worker.models.manifest import (
    INT8_MODEL_NAME,
    MODEL_NAME,
    TOKENIZER_NAME,
    read_manifest,
    sha256_file,
    write_manifest,
)
from worker.models.onnx_embedder import OnnxEmbedder
from worker.models.reference import default_location
from worker.runtime.resources import DEFAULT_CONCURRENT_BATCHES

ARRIVAL_BATCH = 32
ROWS = ["a", "b", "c", "bx", "cx", "bo", "co"]
ROW_LABELS = {
    "b": "(b) batcher fp32",
    "c": "(c) batcher int8",
    "bx": "(b) fp32, {n} concurrent batch(es)",
    "cx": "(c) int8, {n} concurrent batch(es)",
    "bo": "(b) fp32, transformer optimizer",
    "co": "(c) int8, transformer optimizer",
}
SEED = 0
_NOT_PROSE = ("```", "http", "|", "<", ">", "=", "::", "{", "}")


def gather_sentences(limit: int) -> list[str]:
    """Prose sentences from installed packages' descriptions, deduplicated, seeded shuffle."""
    seen: dict[str, None] = {}
    for doc in gather():
        for span in split_sentences(doc.text):
            sentence = " ".join(doc.text[span.start : span.end].split())
            if not 30 <= len(sentence) <= 600 or len(sentence.split()) < 5:
                continue
            if any(marker in sentence for marker in _NOT_PROSE):
                continue
            if sum(c.isalpha() for c in sentence) < 0.7 * len(sentence):
                continue
            seen.setdefault(sentence)
    sentences = list(seen)
    random.Random(SEED).shuffle(sentences)
    return sentences[:limit]


def as_documents(sentences: list[str]) -> list[list[str]]:
    """Cut the stream into documents of 1-24 sentences (seeded), submitted as one request each."""
    rng = random.Random(SEED + 1)
    documents, start = [], 0
    while start < len(sentences):
        size = rng.randint(1, 24)
        documents.append(sentences[start : start + size])
        start += size
    return documents


@dataclass
class Run:
    label: str
    seconds: float
    texts: int
    real_tokens: int
    padded_tokens: int
    vectors: NDArray[np.float32]
    inference_seconds: float

    @property
    def tokens_per_second(self) -> float:
        return self.real_tokens / self.seconds

    @property
    def sentences_per_second(self) -> float:
        return self.texts / self.seconds

    @property
    def padding_ratio(self) -> float:
        return self.padded_tokens / self.real_tokens


def run_arrival_order(embedder: OnnxEmbedder, sentences: list[str]) -> Run:
    lengths = embedder.token_lengths(sentences)
    padded = sum(
        max(lengths[i : i + ARRIVAL_BATCH]) * len(lengths[i : i + ARRIVAL_BATCH])
        for i in range(0, len(lengths), ARRIVAL_BATCH)
    )
    started = time.perf_counter()
    vectors = np.vstack(
        [
            embedder.embed(sentences[i : i + ARRIVAL_BATCH])
            for i in range(0, len(sentences), ARRIVAL_BATCH)
        ]
    )
    seconds = time.perf_counter() - started
    return Run(
        "(a) arrival order, 32", seconds, len(sentences), sum(lengths), padded, vectors, seconds
    )


async def _through_batcher(
    batcher: Batcher, documents: list[list[str]], has_room: asyncio.Event
) -> list[NDArray[np.float32]]:
    tasks = []
    for document in documents:
        await has_room.wait()  # what the consumer does: pause until drained
        tasks.append(asyncio.create_task(batcher.submit(document)))
        await asyncio.sleep(0)  # let the batcher's loop see the new request
    return list(await asyncio.gather(*tasks))


def run_batcher(
    label: str,
    embedder: OnnxEmbedder,
    sentences: list[str],
    args: argparse.Namespace,
    concurrent_batches: int,
) -> Run:
    documents = as_documents(sentences)

    async def main() -> tuple[float, list[NDArray[np.float32]], Batcher]:
        has_room = asyncio.Event()
        has_room.set()
        batcher = Batcher(
            embedder,
            max_batch_tokens=args.max_batch_tokens,
            max_batch_size=args.max_batch_size,
            max_wait_ms=args.max_wait_ms,
            queue_high_tokens=args.queue_high_tokens,
            queue_low_tokens=args.queue_low_tokens,
            concurrent_batches=concurrent_batches,
            on_watermark=lambda over: has_room.clear() if over else has_room.set(),
        )
        started = time.perf_counter()
        async with batcher:
            results = await _through_batcher(batcher, documents, has_room)
        return time.perf_counter() - started, results, batcher

    seconds, results, batcher = asyncio.run(main())
    stats = batcher.stats
    return Run(
        label,
        seconds,
        stats.texts,
        stats.real_tokens,
        stats.padded_tokens,
        np.vstack(results),
        stats.inference_seconds,
    )


def combine(parts: list[Run]) -> Run:
    """One row's slices, added up in slice order."""
    return Run(
        parts[0].label,
        sum(p.seconds for p in parts),
        sum(p.texts for p in parts),
        sum(p.real_tokens for p in parts),
        sum(p.padded_tokens for p in parts),
        np.vstack([p.vectors for p in parts]),
        sum(p.inference_seconds for p in parts),
    )


def make_gemm_session(
    hidden: int, intermediate: int, threads: int | None
) -> tuple[Callable[[], object], int]:
    """One layer's six weight products (Q, K, V, attention out, FFN up, FFN down) as a session
    over 2,048 token rows; returns the call and the row count."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    rows = 2048
    rng = np.random.default_rng(0)
    shapes = [(hidden, hidden)] * 4 + [(hidden, intermediate), (intermediate, hidden)]
    nodes, inits, inputs = [], [], []
    for i, (k, n) in enumerate(shapes):
        inputs.append(helper.make_tensor_value_info(f"x{i}", TensorProto.FLOAT, [rows, k]))
        inits.append(
            numpy_helper.from_array(rng.standard_normal((k, n)).astype(np.float32), f"w{i}")
        )
        nodes.append(helper.make_node("MatMul", [f"x{i}", f"w{i}"], [f"y{i}"]))
    outputs = [
        helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, [rows, n])
        for i, (_, n) in enumerate(shapes)
    ]
    graph = helper.make_graph(nodes, "gemm", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    options = ort.SessionOptions()
    if threads is not None:
        options.intra_op_num_threads = threads
    session = ort.InferenceSession(
        model.SerializeToString(), sess_options=options, providers=["CPUExecutionProvider"]
    )
    feed = {
        f"x{i}": rng.standard_normal((rows, k)).astype(np.float32)
        for i, (k, _) in enumerate(shapes)
    }
    session.run(None, feed)
    return (lambda: session.run(None, feed)), rows


def build_optimized(model_dir: Path, out_dir: Path) -> Path:
    """``model_dir``'s fp32 graph through onnxruntime's transformer optimizer, plus its int8.

    Written to ``out_dir`` with a manifest, so ``OnnxEmbedder.load`` opens it like a build.
    """
    import msgspec
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers.fusion_options import FusionOptions
    from onnxruntime.transformers.optimizer import optimize_model

    from worker.model_making.source import default_source_dir, read_source

    config = read_source(default_source_dir()).config
    options = FusionOptions("bert")
    options.enable_gelu_approximation = False  # keep exact GELU: BiasGelu is erf, FastGelu tanh
    optimized = optimize_model(
        str(model_dir / MODEL_NAME),
        model_type="bert",
        num_heads=config.num_heads,
        hidden_size=config.hidden_size,
        optimization_options=options,
        opt_level=0,  # the session applies its own level when it opens the model
    )
    fused = {op: n for op, n in optimized.get_fused_operator_statistics().items() if n}
    if fused.get("Attention") != config.num_layers or "FastGelu" in fused:
        raise RuntimeError(f"unexpected fusions: {fused}")
    print(f"optimizer fusions: {fused}")
    out_dir.mkdir(parents=True, exist_ok=True)
    optimized.save_model_to_file(str(out_dir / MODEL_NAME))
    quantize_dynamic(
        out_dir / MODEL_NAME,
        out_dir / INT8_MODEL_NAME,
        per_channel=True,
        weight_type=QuantType.QInt8,
        op_types_to_quantize=["MatMul", "Attention"],
        # Shape inference cannot type the com.microsoft ops' outputs; they are all float.
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )
    (out_dir / TOKENIZER_NAME).write_bytes((model_dir / TOKENIZER_NAME).read_bytes())
    files = [MODEL_NAME, INT8_MODEL_NAME, TOKENIZER_NAME]
    manifest = msgspec.structs.replace(
        read_manifest(model_dir), files={name: sha256_file(out_dir / name) for name in files}
    )
    write_manifest(out_dir, manifest)
    return out_dir


def _timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def cosine_to(reference: NDArray[np.float32], vectors: NDArray[np.float32]) -> tuple[float, float]:
    cos = np.sum(reference * vectors, axis=1) / (
        np.linalg.norm(reference, axis=1) * np.linalg.norm(vectors, axis=1)
    )
    return float(cos.mean()), float(cos.min())


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", type=Path, default=default_location("retrieval"))
    parser.add_argument("--sentences", type=int, default=4096)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--slice", type=int, default=1024, help="sentences per timed slice")
    parser.add_argument(
        "--threads",
        type=int,
        default=2,
        help="onnxruntime intra-op threads of (a) and the ceiling; batcher rows divide them "
        "among their concurrent batches",
    )
    parser.add_argument("--concurrent-batches", type=int, default=DEFAULT_CONCURRENT_BATCHES)
    parser.add_argument(
        "--compare-concurrency",
        type=int,
        metavar="N",
        help="add rows bx/cx: (b) and (c) with N concurrent batches",
    )
    parser.add_argument("--max-batch-tokens", type=int, default=DEFAULT_MAX_BATCH_TOKENS)
    parser.add_argument("--max-batch-size", type=int, default=DEFAULT_MAX_BATCH_SIZE)
    parser.add_argument("--max-wait-ms", type=float, default=DEFAULT_MAX_WAIT_MS)
    parser.add_argument("--queue-high-tokens", type=int, default=DEFAULT_QUEUE_HIGH_TOKENS)
    parser.add_argument("--queue-low-tokens", type=int, default=DEFAULT_QUEUE_LOW_TOKENS)
    parser.add_argument("--only", choices=ROWS, action="append", help="rows to run")
    parser.add_argument(
        "--optimizer",
        action="store_true",
        help="add rows bo/co: the graph after onnxruntime's transformer optimizer",
    )
    args = parser.parse_args()

    from worker.model_making.build import ensure_model

    ensure_model(None, args.model, int8=True)
    args.sentence_list = gather_sentences(args.sentences)
    if len(args.sentence_list) < min(args.sentences, 4000):
        print(f"only {len(args.sentence_list)} sentences gathered; need 4,000", file=sys.stderr)
        return 1
    sessions: dict[tuple[Path, bool, int], OnnxEmbedder] = {}

    def embedder(model_dir: Path, int8: bool, concurrent_batches: int) -> OnnxEmbedder:
        """One session per model and thread count, shared by every row that can share it."""
        threads = max(1, args.threads // concurrent_batches)
        key = (model_dir, int8, threads)
        if key not in sessions:
            sessions[key] = OnnxEmbedder.load(model_dir, int8=int8, intra_op_threads=threads)
        return sessions[key]

    default_rows = ["a", "b", "c"]
    if args.compare_concurrency is not None:
        default_rows += ["bx", "cx"]
    if args.optimizer:
        default_rows += ["bo", "co"]
    rows = args.only or default_rows
    concurrency = dict.fromkeys(rows, args.concurrent_batches)
    concurrency["a"] = 1
    for row in ("bx", "cx"):
        concurrency[row] = args.compare_concurrency or args.concurrent_batches
    fp32 = embedder(args.model, False, 1)
    embedders = {row: embedder(args.model, row.startswith("c"), concurrency[row]) for row in rows}
    if any(row in ("bo", "co") for row in rows):
        optimized_dir = build_optimized(args.model, Path(tempfile.mkdtemp(prefix="optimized-")))
        for row in ("bo", "co"):
            embedders[row] = embedder(optimized_dir, row == "co", concurrency[row])
    lengths = fp32.token_lengths(args.sentence_list)
    print(
        f"{len(lengths)} sentences, {sum(lengths):,} tokens (mean {np.mean(lengths):.1f}, "
        f"median {np.median(lengths):.0f}, max {max(lengths)}), {args.threads} intra-op threads; "
        f"batcher: {args.concurrent_batches} concurrent batch(es), "
        f"{args.max_batch_tokens} tokens, ≤{args.max_batch_size} texts, "
        f"{args.max_wait_ms} ms, queue {args.queue_high_tokens}/{args.queue_low_tokens}; "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    for row in rows:  # warm every session up
        embedders[row].embed(args.sentence_list[:64])

    parts = [
        args.sentence_list[i : i + args.slice]
        for i in range(0, len(args.sentence_list), args.slice)
    ]
    gemm, gemm_rows = make_gemm_session(fp32.dimension, 4 * fp32.dimension, args.threads)
    best: dict[tuple[str, int], Run] = {}
    one_layer = float("inf")
    for round_number in range(args.rounds):
        totals = dict.fromkeys(rows, 0.0)
        for index, part in enumerate(parts):
            for row in rows:
                if row == "a":
                    run = run_arrival_order(fp32, part)
                else:
                    label = ROW_LABELS[row].format(n=concurrency[row])
                    run = run_batcher(label, embedders[row], part, args, concurrency[row])
                totals[row] += run.seconds
                if (row, index) not in best or run.seconds < best[row, index].seconds:
                    best[row, index] = run
        one_layer = min(one_layer, *(_timed(gemm) for _ in range(5)))
        print(
            f"  round {round_number + 1}: "
            + ", ".join(f"{row} {seconds:.1f} s" for row, seconds in totals.items())
        )
    print(f"  load average at the end: {os.getloadavg()[0]:.2f}")
    ceiling = gemm_rows / (one_layer * fp32.manifest.num_layers)
    combined = {row: combine([best[row, i] for i in range(len(parts))]) for row in rows}

    reference = combined["a"].vectors if "a" in combined else None
    base = combined["a"].tokens_per_second if "a" in combined else None
    print()
    print(
        "| run | tokens/s | sentences/s | padding ratio | cosine vs (a) mean / min "
        "| vs (a) | of ceiling |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        run = combined[row]
        cos = (
            "—"
            if reference is None
            else "{:.5f} / {:.5f}".format(*cosine_to(reference, run.vectors))
        )
        ratio = "—" if base is None else f"{run.tokens_per_second / base:.2f}×"
        print(
            f"| {run.label} | {run.tokens_per_second:,.0f} | {run.sentences_per_second:,.1f} | "
            f"{run.padding_ratio:.2f} | {cos} | {ratio} | {run.tokens_per_second / ceiling:.0%} |"
        )
    print(f"| fp32 GEMM ceiling (MatMuls only, no padding) | {ceiling:,.0f} | | | | | 100% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
