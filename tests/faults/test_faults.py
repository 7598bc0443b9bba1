"""The fault suite's short profile in CI: every scenario of tests/support/faults.py, on a private
broker (the broker-restart and freeze scenarios must not disturb the session broker).

The full table: `.venv/bin/python -m tests.support.faults` (see docs/operating/outages.md)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.faults import PROFILES, SCENARIOS, table
from tests.support.private_broker import PrivateBroker

pytestmark = pytest.mark.kafka


@pytest.fixture(scope="module")
def fault_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateBroker]:
    broker = PrivateBroker(tmp_path_factory.mktemp("fault-broker"))
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.mark.timeout(400)
@pytest.mark.parametrize("name", list(SCENARIOS))
async def test_scenario_loses_nothing(
    name: str, fault_broker: PrivateBroker, tmp_path: Path
) -> None:
    row = await SCENARIOS[name](fault_broker, tmp_path, PROFILES["short"], random.Random(name))
    report = table([row]) + "".join(f"\n- {note}" for note in row.notes)
    assert row.lost == 0, report
    assert row.bad_replays == 0, report
    assert row.unexpected_dead_letters == 0, report
    assert row.violations == 0, report
    assert row.committed_to_end, report
    assert row.faults + row.poison > 0, "no fault was injected"
