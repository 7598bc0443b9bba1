"""The chunking commands: ``chunk`` (files offline, one JSON object per chunk), ``settings``
(the table of every setting) and ``schema`` (the event schemas under ``schemas/``).

``chunk`` streams: it reads one document, chunks it, prints its chunks (one line each) and
flushes, then moves to the next, so output starts with the first document and nothing holds
more than one document at a time. Before anything is printed every path is opened once, so a
missing path or a directory fails with no output; a file that turns out not to be UTF-8
stops the run at that file: the chunks of the files before it stay printed, each document's
lines complete, and the exit status is 1.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from worker.cli.inputs import CONTENT_TYPES, STDIN, check_openable, read_document
from worker.errors import CommandError, ConfigError

if TYPE_CHECKING:
    from worker.chunking import registry
    from worker.chunking.types import Chunk
    from worker.config import Settings
    from worker.models.reference import ModelRef

SubParsers = argparse._SubParsersAction

OFFSETS_NOTE = """\
output: one JSON object per chunk, per document in the order given, as each is chunked:
  doc_id (the path as given; "-" for stdin), index, text, start_index, end_index,
  token_count, strategy, metadata (and spans where a chunk is not one slice:
  [{"start": s, "end": e}, ...], as chunk events carry them).
  start_index/end_index are character offsets into the file's own text: UTF-8 decoded,
  line ends kept as they are (CRLF stays CRLF). A UTF-8 byte-order mark is not text: it is
  dropped, and offset 0 is the first character after it."""


def _epilog() -> str:
    from worker.cli.strategy_params import strategies_help

    return f"{strategies_help(_sizing_context())}\n\n{OFFSETS_NOTE}"


def _sizing_context() -> registry.BuildContext:
    """The retrieval model ``chunk`` sizes with, as :func:`run_chunk` resolves it (for the
    effective defaults in the help); none when it cannot be resolved, so the help still
    prints (a run says why)."""
    from worker.chunking.contract import BuildContext
    from worker.errors import ModelNotBuilt
    from worker.inference.serving import build_context

    try:
        return build_context("sentence")  # a strategy without a boundary model
    except (ModelNotBuilt, ConfigError):
        return BuildContext()


def add_commands(sub: SubParsers[argparse.ArgumentParser]) -> None:
    chunk = sub.add_parser(
        "chunk",
        help="chunk files offline; one JSON object per chunk",
        description="Chunk files (or stdin) with one strategy, as the worker would, and print "
        "each chunk as a JSON line. Embedding strategies use the same model and batch bounds "
        "as the worker (CHUNKSTREAM_MODEL_DIR, CHUNKSTREAM_MAX_BATCH_TOKENS, ...).",
        lazy_epilog=_epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    chunk.add_argument("--strategy", default="sentence", help="strategy name (default sentence)")
    chunk.add_argument(
        "--param",
        action="append",
        metavar="NAME=VALUE",
        help="one strategy parameter (repeatable; the parameters are listed below)",
    )
    chunk.add_argument(
        "--model", default=None, help="boundary model directory (embedding strategies)"
    )
    chunk.add_argument(
        "--content-type",
        choices=CONTENT_TYPES,
        default=None,
        help="how to read every input (default: text/markdown for .md, .markdown and .mdx "
        "files, else text/plain)",
    )
    chunk.add_argument("files", nargs="+", metavar="FILE", help=f"a UTF-8 file; {STDIN} is stdin")
    chunk.set_defaults(func=run_chunk)

    settings = sub.add_parser("settings", help="print the table of every setting")
    settings.set_defaults(func=run_settings)

    schema = sub.add_parser("schema", help="write JSON Schemas and the AsyncAPI document")
    schema.add_argument("--out", default="schemas", help="directory (default ./schemas)")
    schema.add_argument(
        "--check", action="store_true", help="fail if a file is missing or out of date"
    )
    schema.set_defaults(func=run_schema)


def parse_param_flags(items: Sequence[str] | None) -> dict[str, str]:
    """Repeated ``--param NAME=VALUE`` → ``{name: value}`` (values stay text; the strategy's
    parameter Struct converts and checks them). One parameter per flag: a value may hold
    commas or ``=``."""
    params: dict[str, str] = {}
    for item in items or ():
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ConfigError(f"--param {item!r} is not NAME=VALUE (e.g. --param chunk_size=500)")
        params[name.strip()] = value.strip()
    return params


def run_chunk(args: argparse.Namespace) -> int:
    from worker.chunking import registry
    from worker.cli.strategy_params import parse_strategy_params
    from worker.inference.serving import build_context, build_strategy, inference_settings

    strategy = registry.get(args.strategy)
    params = parse_param_flags(args.param)
    parse_strategy_params(strategy, params)  # before any model check or file read
    check_openable(args.files)
    # A strategy may name its model (`context`'s embedding_model); --model wins.
    named = args.model or params.get("embedding_model")
    settings = inference_settings()
    # The roles resolved exactly as the worker resolves them: same models, same chunks.
    context = build_context(args.strategy, settings, model_dir=named)
    built = build_strategy(args.strategy, params, context)
    return asyncio.run(
        chunk_files(built, args.files, args.content_type, settings, context.boundary)
    )


async def chunk_files(
    built: registry.BuiltStrategy,
    names: Sequence[str],
    content_type: str | None,
    settings: Settings,
    boundary: ModelRef | None,
) -> int:
    """Each document read, chunked and printed in turn (module docstring)."""
    from worker.inference.serving import open_batcher
    from worker.pipeline import chunk_document

    out = sys.stdout
    async with contextlib.AsyncExitStack() as stack:
        embed = None
        if built.needs_model:
            # The worker's batcher, with the worker's bounds: no inference batch ever holds
            # more than max_batch_tokens, however long the document.
            batcher = await stack.enter_async_context(open_batcher(settings, model=boundary))
            embed = batcher.submit
        for name in names:
            document = read_document(name, content_type)
            chunks = await chunk_document(built, document.text, document.content_type, embed)
            del document  # the chunks hold their own text; the document's can go
            for index, chunk in enumerate(chunks):
                out.write(msgspec.json.encode(chunk_record(name, index, chunk)).decode() + "\n")
            out.flush()
    return 0


def chunk_record(doc_id: str, index: int, chunk: Chunk) -> dict[str, Any]:
    record: dict[str, Any] = {
        "doc_id": doc_id,
        "index": index,
        "text": chunk.text,
        "start_index": chunk.start_index,
        "end_index": chunk.end_index,
        "token_count": chunk.token_count,
        "strategy": chunk.strategy,
        "metadata": chunk.metadata,
    }
    if chunk.spans is not None:
        # The chunk events' shape (ChunkSpan): [{"start": s, "end": e}, ...]. Imported here:
        # the model commands share this module and the image's model stage has no wire room.
        from worker.wire.events import ChunkSpan

        record["spans"] = [ChunkSpan(s.start, s.end) for s in chunk.spans]
    return record


def run_settings(args: argparse.Namespace) -> int:
    from worker.config import settings_table

    print(settings_table())
    return 0


def run_schema(args: argparse.Namespace) -> int:
    from worker.wire import schema

    out = Path(args.out)
    if not args.check:
        for path in schema.write(out):
            print(path)
        return 0
    if not out.is_dir():
        raise CommandError(
            f"schema --check: no directory {out} (from {Path.cwd()}); run it in the checkout "
            "or name the directory with --out"
        )
    differing = schema.drift(out)
    missing = [name for name in differing if not (out / name).exists()]
    stale = [name for name in differing if name not in missing]
    if differing:
        found = [f"missing from {out}: {', '.join(missing)}"] if missing else []
        found += [f"out of date in {out}: {', '.join(stale)}"] if stale else []
        raise CommandError(f"schemas {'; '.join(found)}; run `chunkstream schema --out {out}`")
    print("schemas up to date")
    return 0
