"""The fault campaign's ``ci`` plan under both guarantees (tests/support/campaign.py): a 3-member
group through every kind of fault, judged by librdkafka, the msgpack library and a stock sink's
rules. The seed is random per run and printed first (``CHUNKSTREAM_CAMPAIGN_SEED`` repeats one);
the long plan over many seeds is `.venv/bin/python -m bench.fault_campaign`."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.campaign import FAULTS, PLANS, run_one, table
from tests.support.private_broker import PrivateBroker

pytestmark = pytest.mark.kafka

SEED = int(os.environ.get("CHUNKSTREAM_CAMPAIGN_SEED") or random.randrange(1 << 31))


@pytest.fixture(scope="module")
def campaign_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateBroker]:
    broker = PrivateBroker(tmp_path_factory.mktemp("campaign-broker"))
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("guarantee", ["at-least-once", "exactly-once"])
async def test_the_sink_equals_the_documents_through_every_fault(
    guarantee: str, campaign_broker: PrivateBroker, tmp_path: Path
) -> None:
    print(f"\ncampaign seed {SEED} (CHUNKSTREAM_CAMPAIGN_SEED={SEED} repeats it)")
    outcome = await run_one(campaign_broker, tmp_path, PLANS["ci"], SEED, guarantee)
    report = f"seed {SEED}\n" + table([outcome]) + "".join(f"\n- {n}" for n in outcome.notes)
    print(report)
    assert set(outcome.faults) == set(FAULTS), report  # every kind of fault happened
    assert outcome.events > 0, report
    assert outcome.tombstones > 0, report  # edits and deletes retracted something
    assert outcome.stale == 0, report
    assert outcome.missing == 0, report
    assert outcome.wrong_text == 0, report
    if guarantee == "exactly-once":
        assert outcome.duplicates == 0, report
    assert outcome.dead_letters == 0, report
    assert outcome.committed_to_end, report
    assert outcome.exits_ok, report
    assert outcome.documents > 50, report  # the comparison means something
