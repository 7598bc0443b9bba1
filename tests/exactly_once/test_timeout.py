"""The transaction timeout of a partition's producer follows the settings: never shorter than
a healthy transaction stays open (a commit interval, then the cut's wait for the documents in
flight), so the broker does not abort one the worker is about to commit."""

from __future__ import annotations

from worker.config import load_settings
from worker.kafka.clients import (
    TRANSACTION_MAX_TIMEOUT_MS,
    TRANSACTION_TIMEOUT_MS,
    make_producer,
    transaction_timeout_ms,
)


def test_the_default_settings_keep_the_floor() -> None:
    assert transaction_timeout_ms(load_settings({}, env={})) == TRANSACTION_TIMEOUT_MS


def test_a_long_commit_interval_lengthens_it_past_the_interval_and_the_drain() -> None:
    settings = load_settings({"commit_interval_ms": "120000", "drain_timeout_s": "30"}, env={})
    timeout = transaction_timeout_ms(settings)
    assert timeout > settings.commit_interval_ms + settings.drain_timeout_s * 1000
    assert timeout < TRANSACTION_MAX_TIMEOUT_MS


def test_it_stays_within_what_a_default_broker_accepts() -> None:
    settings = load_settings({"commit_interval_ms": str(3_600_000)}, env={})
    assert transaction_timeout_ms(settings) == TRANSACTION_MAX_TIMEOUT_MS


async def test_the_producer_asks_for_it() -> None:
    settings = load_settings({"commit_interval_ms": "120000"}, env={})
    producer = make_producer(settings, transactional_id="chunkstream-g-t-0")
    try:
        assert producer._txn_manager is not None
        assert producer._txn_manager.transaction_timeout_ms == transaction_timeout_ms(settings)
    finally:
        await producer.stop()  # never started: only closes its client
