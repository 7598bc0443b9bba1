"""Throughput of the rule-based strategies beside common recursive splitters.

    .venv/bin/python -m bench.chunking_bench [--repeat 5] [--only NAME...] [--clock thread|wall]
    .venv/bin/python -m bench.chunking_bench --profile adaptive|lexical

Every splitter chunks the same corpus (tests/support/corpus.py) in this process at a 1,500-character
size, but ``sentence`` at its default of 1,000 (its compiled core and its Python twin, a row
each). Passes are interleaved (each pass times every splitter once, in turn) so that load from
other work on a shared machine falls on all of them alike; the best of ``--repeat`` passes is
kept. Every splitter runs on this one thread, so the default clock is this thread's CPU time
(``time.thread_time``): on a machine shared with other work it does not count the time the
thread waited for a core, which wall time does (``--clock wall``). The table gives MB/s
(UTF-8 bytes of input per second), its inverse in CPU-seconds per MB, chunks per second, and
the ratio to LangChain's RecursiveCharacterTextSplitter (``split_text``: strings only). One
more LangChain row gives the like-for-like output: ``create_documents`` with
``add_start_index`` returns objects with metadata and a start offset, as our chunks carry.
Peers that are not installed (``pip install -e '.[bench]'``) are skipped.
``CHUNKSTREAM_PURE_PYTHON=1`` times the Python twins instead of the compiled cores.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
from collections.abc import Callable

from tests.support.corpus import Document, describe, gather
from worker.chunking.rules.adaptive import AdaptiveChunker
from worker.chunking.rules.lexical import LexicalChunker
from worker.chunking.rules.sentence import SentenceChunker, SentenceParams
from worker.chunking.types import ContentType

SIZE = 1500
SENTENCE_SIZE = 1000
"""`sentence` is timed at its default size, the one issue 23 compares with the Quix peer."""
Splitter = Callable[[Document], int]


def _ours() -> dict[str, Splitter]:
    adaptive = AdaptiveChunker()
    lexical = LexicalChunker()

    def run_adaptive(doc: Document) -> int:
        return len(adaptive.chunk(doc.text))

    def run_lexical(doc: Document) -> int:
        kind: ContentType = "text/markdown" if doc.content_type == "text/markdown" else "text/plain"
        return len(lexical.chunk(doc.text, content_type=kind))

    sentence = SentenceChunker(SentenceParams(chunk_size=SENTENCE_SIZE))

    def run_sentence(doc: Document) -> int:
        return len(sentence.chunk(doc.text))

    def run_sentence_twin(doc: Document) -> int:
        return len(sentence.chunk_reference(doc.text))

    return {
        "adaptive": run_adaptive,
        "lexical": run_lexical,
        f"sentence ({SENTENCE_SIZE})": run_sentence,
        f"sentence ({SENTENCE_SIZE}), Python twin": run_sentence_twin,
    }


def _peers() -> dict[str, Splitter]:
    peers: dict[str, Splitter] = {}
    try:
        from langchain_text_splitters import RecursiveCharacterTextSplitter

        langchain = RecursiveCharacterTextSplitter(chunk_size=SIZE, chunk_overlap=0)
        peers["langchain recursive"] = lambda doc: len(langchain.split_text(doc.text))
        with_offsets = RecursiveCharacterTextSplitter(
            chunk_size=SIZE, chunk_overlap=0, add_start_index=True
        )
        peers["langchain recursive, documents + start_index"] = lambda doc: len(
            with_offsets.create_documents([doc.text])
        )
    except ImportError:
        pass
    try:
        import semchunk

        semchunker = semchunk.chunkerify(len, SIZE)
        peers["semchunk"] = lambda doc: len(semchunker(doc.text))
    except ImportError:
        pass
    try:
        from chonkie import RecursiveChunker

        chonkie = RecursiveChunker(tokenizer="character", chunk_size=SIZE)
        peers["chonkie recursive"] = lambda doc: len(chonkie.chunk(doc.text))
    except ImportError:
        pass
    return peers


CLOCKS: dict[str, Callable[[], float]] = {"thread": time.thread_time, "wall": time.perf_counter}


def measure(split: Splitter, docs: list[Document], repeat: int) -> tuple[float, int]:
    """Best wall time over ``repeat`` passes, and the number of chunks of one pass."""
    best = float("inf")
    count = 0
    for _ in range(repeat):
        seconds, count = _one_pass(split, docs, time.perf_counter)
        best = min(best, seconds)
    return best, count


def _one_pass(
    split: Splitter, docs: list[Document], clock: Callable[[], float]
) -> tuple[float, int]:
    began = clock()
    count = sum(split(doc) for doc in docs)
    return clock() - began, count


def measure_all(
    splitters: dict[str, Splitter],
    docs: list[Document],
    repeat: int,
    clock: Callable[[], float] = time.thread_time,
) -> dict[str, tuple[float, int]]:
    """Best time and chunk count per splitter, the passes interleaved across splitters."""
    results = {name: (float("inf"), 0) for name in splitters}
    for _ in range(repeat):
        for name, split in splitters.items():
            seconds, count = _one_pass(split, docs, clock)
            results[name] = (min(results[name][0], seconds), count)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--profile", choices=["adaptive", "lexical"])
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="thread")
    parser.add_argument(
        "--only", nargs="+", metavar="NAME", help="time only these splitters (names as printed)"
    )
    args = parser.parse_args()
    docs = gather()
    size_mb = sum(len(d.text.encode()) for d in docs) / 1e6
    print(f"corpus: {describe(docs)}")
    splitters = {**_ours(), **_peers()}
    if args.profile:
        profiler = cProfile.Profile()
        profiler.runcall(measure, splitters[args.profile], docs, 1)
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
        return 0
    if args.only:
        splitters = {name: splitters[name] for name in args.only}
    results = measure_all(splitters, docs, args.repeat, CLOCKS[args.clock])
    print(f"clock: {args.clock}, best of {args.repeat} interleaved passes")
    baseline = results.get("langchain recursive", (0.0, 0))[0]
    print(
        "\n| splitter | MB/s | CPU-s/MB | chunks | chunks/s | vs LangChain |"
        "\n|---|---:|---:|---:|---:|---:|"
    )
    for name, (seconds, count) in results.items():
        ratio = f"{baseline / seconds:.2f}×" if baseline else "n/a"
        print(
            f"| {name} | {size_mb / seconds:.1f} | {seconds / size_mb:.4f} | {count:,} "
            f"| {count / seconds:,.0f} | {ratio} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
