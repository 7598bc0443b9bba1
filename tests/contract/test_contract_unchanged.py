"""The contract holds byte for byte: for the fixed input of :mod:`tests.contract.capture` (a real
corpus with edits, deletes and bad records), every strategy's worker, run as a process on the
real broker, writes the same chunk events, tombstones, dead letters, documents-topic records
and state records as the commit named in ``golden.json`` did (wall-clock times aside).

``golden.json`` was captured from the commit before the package moved into rooms, by the same
worker-independent harness. When a change *means* to change the contract (a new field, a new
chunking), capture again from the new commit and say so in its message:

    .venv/bin/python -m tests.contract.capture --bootstrap HOST:PORT --commit SHA \\
        --out tests/contract/golden.json
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from tests.contract import capture

pytestmark = pytest.mark.kafka

GOLDEN = json.loads((Path(__file__).parent / "golden.json").read_text(encoding="utf-8"))


def test_the_golden_covers_every_run_and_the_same_corpus() -> None:
    assert sorted(GOLDEN["runs"]) == sorted(capture.run_name(s, e) for s, e in capture.RUNS)
    assert GOLDEN["documents"] == len(capture.corpus())


@pytest.mark.parametrize(("strategy", "encoding"), capture.RUNS)
def test_every_topic_is_byte_identical_to_the_golden(
    kafka_bootstrap: str, strategy: str, encoding: str, tmp_path: Path
) -> None:
    log = tmp_path / "worker.log"
    got = asyncio.run(
        capture.capture(capture.REPO, sys.executable, kafka_bootstrap, strategy, encoding, log)
    )
    want = GOLDEN["runs"][capture.run_name(strategy, encoding)]
    assert got["chunks"]["records"] > 1000  # the run chunked the corpus
    assert got == want


def test_the_digest_sees_a_changed_byte() -> None:
    """The comparison can fail: one byte of one value moves the digest, a time does not."""
    import msgpack

    event = {"doc_id": "d", "text": "abc", "produced_at": msgpack.Timestamp(1, 0)}
    later = {**event, "produced_at": msgpack.Timestamp(2, 0)}
    other = {**event, "text": "abd"}
    rows: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes]]]] = [
        (0, b"k", bytes(msgpack.packb(e)), []) for e in (event, later, other)
    ]
    one, two, three = (capture.digest([r], "msgpack", "x" * 8, timed=True) for r in rows)
    assert one == two
    assert one != three
