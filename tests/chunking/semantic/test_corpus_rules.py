"""Issue 21's acceptance on real documents: the installed packages' descriptions
(tests/support/corpus.py), chunked as the worker chunks them by default — the distilled static
boundary model, sizes in the transformer's tokens — keep every structure rule.

Read against the document's own blocks (``split_blocks`` of the whole text, not of a chunk):

* no chunk over the retrieval model's window (254 tokens);
* no fenced code block that fits the cap, with the headings that open it, cut in two;
* no chunk made of headings alone, none ending with a heading before the document ends;
* no chunk under the minimum (an eighth of the cap) unless it is the whole document.

For ``context`` the rules apply to the core (the kept context is whole units around it).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tests.support.corpus import gather
from tests.support.embedding import embed_batch
from tests.support.token_counters import make_counter
from worker.chunking import registry
from worker.chunking.text.markdown import Block, split_blocks
from worker.models.reference import describe
from worker.pipeline import chunk_document_sync

pytestmark = pytest.mark.model

MODELS = Path(__file__).resolve().parents[3] / ".cache" / "models"
WINDOW = 254


def opened_at(blocks: list[Block], block: Block) -> int:
    """Where ``block`` starts together with the headings right before it."""
    at = blocks.index(block)
    start = block.start
    while at > 0 and blocks[at - 1].kind == "heading":
        at -= 1
        start = blocks[at].start
    return start


@pytest.mark.parametrize("name", ["semantic", "sdpm", "context"])
def test_the_corpus_keeps_the_structure_rules(name: str) -> None:
    from worker.models.loading import load_backend

    static = MODELS / "all-MiniLM-L6-v2-static"
    transformer = MODELS / "all-MiniLM-L6-v2"
    if not (static / "manifest.json").is_file():
        pytest.fail(f"no static model at {static}: run scripts/bootstrap")
    boundary = describe(static, "boundary")
    backend = load_backend(boundary)
    context = registry.BuildContext(boundary=boundary, retrieval=describe(transformer, "retrieval"))
    built = registry.build(name, {}, context)
    counter = make_counter(str(transformer / "tokenizer.json"))
    minimum = WINDOW // 8
    broken: Counter[str] = Counter()
    examples: dict[str, str] = {}
    docs = gather()
    assert len(docs) >= 50
    for doc in docs:
        text = doc.text
        chunks = chunk_document_sync(
            built, text, doc.content_type, lambda t: embed_batch(backend, t)
        )
        blocks = split_blocks(text)
        for chunk in chunks:
            start, end = (
                chunk.metadata["core"]
                if name == "context"
                else (
                    chunk.start_index,
                    chunk.end_index,
                )
            )
            found: list[str] = []
            if counter.count(chunk.text) > WINDOW or chunk.token_count > WINDOW:
                found.append("over the window")
            inside = [b for b in blocks if b.end > start and b.start < end]
            for block in inside:
                cut = block.start < start or block.end > end
                fenced = text.startswith(("```", "~~~"), block.start)
                # With the headings that open it: a heading never stands alone, so a fence
                # whose headings and body together pass the cap may be cut
                # (docs/concepts/strategies.md).
                fits = counter.count(text[opened_at(blocks, block) : block.end]) <= WINDOW
                if block.kind == "code" and fenced and cut and fits:
                    found.append("fence cut below the cap")
            if len(chunks) > 1 and inside and all(b.kind == "heading" for b in inside):
                found.append("heading-only")
            last = inside[-1] if inside else None
            if last and last.kind == "heading" and last.end <= end < len(text.rstrip()):
                found.append("ends with a heading")
            if len(chunks) > 1 and counter.count(text[start:end]) < minimum:
                found.append("under the minimum")
            for kind in found:
                broken[kind] += 1
                examples.setdefault(kind, f"{doc.name}: {text[start:end][:200]!r}")
    assert not broken, (dict(broken), examples)
