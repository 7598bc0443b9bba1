"""The chunkers the retrieval benchmark compares, each as "text → pieces with their ranges".

Ours are built by name with ``worker.chunking.registry.build`` and run through
``worker.pipeline.chunk_document`` with the boundary model's ``Batcher.submit`` as the embed
function: the worker's own dispatch and batching. Peers:

* LangChain's ``RecursiveCharacterTextSplitter`` (sizes in characters, ``add_start_index``);
* chonkie's ``SemanticChunker`` at its defaults, given our boundary model through chonkie's
  ``BaseEmbeddings`` interface (its own default model comes from a model hub this machine does
  not reach) and that model's tokenizer, so its ``chunk_size`` counts the same tokens as ours.
  It runs on a thread and embeds through the same boundary batcher.

A spec names a chunker and its parameters: ``sentence``, ``sentence:chunk_size=500``,
``langchain:chunk_size=400,chunk_overlap=0``, ``chonkie-semantic``. Values are read as JSON
when they parse (numbers, booleans), else as strings.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
from numpy.typing import NDArray

from bench.support.retrieval_metrics import Range
from worker.chunking import registry
from worker.pipeline import chunk_document

OUR_STRATEGIES = ("sentence", "adaptive", "lexical", "semantic", "sdpm", "context")
EmbedFn = Callable[[Sequence[str]], Awaitable[NDArray[np.float32]]]


class Piece(msgspec.Struct, frozen=True):
    text: str  # what is embedded
    ranges: tuple[Range, ...]  # which document characters it holds


ChunkFn = Callable[[str], Awaitable[list[Piece]]]


class Chunker(msgspec.Struct, frozen=True):
    label: str
    run: ChunkFn


def parse_spec(spec: str) -> tuple[str, dict[str, Any]]:
    name, _, rest = spec.partition(":")
    params: dict[str, Any] = {}
    for item in filter(None, rest.split(",")):
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"chunker spec {spec!r}: {item!r} is not key=value")
        try:
            params[key.strip()] = json.loads(value)
        except ValueError:
            params[key.strip()] = value
    return name.strip(), params


def label_of(name: str, params: dict[str, Any]) -> str:
    return name + "".join(f" {k}={v}" for k, v in params.items())


def make(spec: str, context: registry.BuildContext, boundary_dir: Path, embed: EmbedFn) -> Chunker:
    """The chunker ``spec`` names; ours built with ``context``, embedding through ``embed`` (the
    boundary model's batcher, whose directory ``boundary_dir`` also gives chonkie its tokenizer)."""
    name, params = parse_spec(spec)
    if name in OUR_STRATEGIES:
        return Chunker(label_of(name, params), _ours(name, params, context, embed))
    if name == "langchain":
        settings = {"chunk_size": 1000, "chunk_overlap": 0} | params
        return Chunker(label_of("langchain recursive", settings), _langchain(settings))
    if name == "chonkie-semantic":
        return Chunker(label_of("chonkie semantic", params), _chonkie(params, boundary_dir, embed))
    raise ValueError(
        f"unknown chunker {name!r} (ours: {', '.join(OUR_STRATEGIES)}; "
        "peers: langchain, chonkie-semantic)"
    )


def _ours(
    name: str, params: dict[str, Any], context: registry.BuildContext, embed: EmbedFn
) -> ChunkFn:
    built = registry.build(name, params, context)

    async def run(text: str) -> list[Piece]:
        chunks = await chunk_document(built, text, "text/plain", embed)
        pieces = []
        for chunk in chunks:
            spans = chunk.spans or ()
            ranges = tuple((s.start, s.end) for s in spans) or (
                (chunk.start_index, chunk.end_index),
            )
            pieces.append(Piece(chunk.text, ranges))
        return pieces

    return run


def _langchain(settings: dict[str, Any]) -> ChunkFn:
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    splitter = RecursiveCharacterTextSplitter(add_start_index=True, **settings)

    async def run(text: str) -> list[Piece]:
        pieces = []
        for doc in splitter.create_documents([text]):
            start = int(doc.metadata["start_index"])
            content = doc.page_content
            if text[start : start + len(content)] != content:
                raise AssertionError(f"langchain start_index {start} is not where its text is")
            pieces.append(Piece(content, ((start, start + len(content)),)))
        return pieces

    return run


def _chonkie(params: dict[str, Any], boundary_dir: Path, embed: EmbedFn) -> ChunkFn:
    from chonkie import SemanticChunker
    from chonkie.embeddings import BaseEmbeddings
    from tokenizers import Tokenizer

    loop_holder: list[asyncio.AbstractEventLoop] = []
    tokenizer = Tokenizer.from_file(str(boundary_dir / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()

    def embed_here(texts: Sequence[str]) -> NDArray[np.float32]:
        # chonkie is synchronous and runs on a thread: hand the texts to the batcher's loop.
        async def on_the_loop() -> NDArray[np.float32]:
            return await embed(list(texts))

        return asyncio.run_coroutine_threadsafe(on_the_loop(), loop_holder[0]).result()

    # chonkie is never analysed (pyproject.toml: the bench extra's peers), so its base is Any.
    class Adapter(BaseEmbeddings):  # type: ignore[misc]
        """chonkie's embeddings interface over the boundary model's batcher."""

        def embed(self, text: str) -> NDArray[np.float32]:
            row: NDArray[np.float32] = embed_here([text])[0]
            return row

        def embed_batch(self, texts: list[str]) -> list[NDArray[np.float32]]:
            return list(embed_here(texts))

        @property
        def dimension(self) -> int:
            return int(embed_here(["dimension"]).shape[1])

        def get_tokenizer(self) -> Any:
            return tokenizer

    chunker = SemanticChunker(embedding_model=Adapter(), **params)
    # Its own thread, not the loop's default executor: the batcher measures large submissions
    # there, and chonkie threads blocked on their embeddings must not hold every worker of it.
    own_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="chonkie")

    async def run(text: str) -> list[Piece]:
        loop = asyncio.get_running_loop()
        if not loop_holder:
            loop_holder.append(loop)
        chunks = await loop.run_in_executor(own_thread, chunker.chunk, text)
        return locate([c.text for c in chunks], text)

    return run


def locate(texts: Sequence[str], document: str) -> list[Piece]:
    """Pieces for chunk texts that are, in order, exact substrings of ``document``."""
    pieces, cursor = [], 0
    for chunk_text in texts:
        found = document.find(chunk_text, cursor)
        if found < 0:
            found = document.find(chunk_text)
        if found < 0:
            raise AssertionError(f"chunk text not found in its document: {chunk_text[:60]!r}")
        pieces.append(Piece(chunk_text, ((found, found + len(chunk_text)),)))
        cursor = found + len(chunk_text)
    return pieces


DEFAULT_CHUNKERS = (
    *OUR_STRATEGIES,
    "langchain:chunk_size=400,chunk_overlap=0",
    "langchain:chunk_size=1000,chunk_overlap=0",
    "chonkie-semantic",
)


def chunker_specs(chunkers: Sequence[str] | None, params: Sequence[str]) -> list[str]:
    specs = list(chunkers or DEFAULT_CHUNKERS)
    for override in params:
        name, extra = parse_spec(override)
        matched = False
        for n, spec in enumerate(specs):
            spec_name, spec_params = parse_spec(spec)
            if spec_name == name:
                merged = spec_params | extra
                specs[n] = (
                    name + (":" if merged else "") + ",".join(f"{k}={v}" for k, v in merged.items())
                )
                matched = True
        if not matched:
            raise SystemExit(f"--param {override!r}: no chunker {name!r} in the list")
    return specs
