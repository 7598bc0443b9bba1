"""``chunkstream_backlog_seconds`` against the measured drain time (issue 20, item 3), on the
real broker: for 1 KB and for 1 MiB documents, a worker process warms up on a backlog (until
half of it is committed: its cost per byte measured on this stream), the estimate is read
from its ``/metrics`` at that point, and the wall time from that point until everything is
committed must be within a factor of 2 of it — what KEDA's threshold in seconds relies on.

Backlogs are sized for a drain of about a minute on the 2-core development machine, so that
start-up (joining, restoring state) and the noise of a shared machine do not dominate; the
factor of 2 is the issue's tolerance. Half, not less: a fresh worker speeds up for its first
tens of seconds (1 KB documents: 400 documents/s in its first 10 s, 1,100 by 20 s, on a fresh
private broker, 2026-12-01), and on a fast machine a 30 % warm-up ends inside that transient
(CI: estimate 2.5× the drain); KEDA reads workers that have been running. More
configurations (semantic on the static model, embeddings on, lexical, 64 KB):
bench/calibration/backlog.py, figures in docs/benchmarks.md.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.backlog_drain import CASES, calibrate, table

pytestmark = pytest.mark.kafka


@pytest.mark.timeout(1200)
@pytest.mark.parametrize(("name", "documents"), [("1KB-sentence", 16_000), ("1MiB-sentence", 100)])
async def test_the_backlog_estimate_is_within_2x_of_the_drain_time(
    kafka_bootstrap: str, tmp_path: Path, name: str, documents: int
) -> None:
    result = await calibrate(
        kafka_bootstrap, CASES[name], tmp_path, warmup_share=0.5, documents_override=documents
    )
    print("\n" + table([result]))
    assert result.backlog_documents > documents // 3  # the reading came early enough
    assert 0.5 <= result.ratio <= 2.0, table([result])
