"""Reaching Kafka: the retry policy and the link's state (worker/kafka/link_policy.py, pure), the
classification of connection errors, and the start-up wait (worker/kafka/link.py) driven
with
stand-ins for the network. The real broker: tests/broker/test_kafka_outage.py."""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import ssl
from collections.abc import Sequence

import pytest
from aiokafka.errors import (
    KafkaConnectionError,
    SaslAuthenticationFailed,
    UnsupportedSaslMechanismError,
)

from worker.config import load_settings
from worker.errors import ConfigError
from worker.kafka import clients as kafka
from worker.kafka import link as kafka_link
from worker.kafka import link_policy
from worker.kafka.link_policy import (
    ATTEMPT_CAP_S,
    FATAL_AT_START,
    INITIAL_S,
    JITTER,
    PROBE_CAP_S,
    Backoff,
    Failure,
    Kind,
    Link,
)
from worker.observability.metrics import Metrics


def test_backoff_doubles_to_the_cap_of_the_kind() -> None:
    middle = Backoff(rand=lambda: 0.5)  # no jitter
    assert [middle.next(Kind.AUTHENTICATION) for _ in range(8)] == [
        0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0,
    ]  # fmt: skip
    # Nothing listening: probed at most PROBE_CAP_S apart, so the worker notices a broker that
    # comes back within seconds, however long it was gone.
    probe = Backoff(rand=lambda: 0.5)
    assert [probe.next(Kind.REFUSED) for _ in range(5)] == [0.5, 1.0, 2.0, 2.0, 2.0]
    for _ in range(40):
        assert probe.next(Kind.NOT_SERVING) == PROBE_CAP_S
    assert probe.next(Kind.TLS) == ATTEMPT_CAP_S  # the same counter, another cap
    probe.reset()
    assert probe.next(Kind.TLS) == INITIAL_S


def test_backoff_jitter_stays_within_its_band() -> None:
    low, high = Backoff(rand=lambda: 0.0), Backoff(rand=lambda: 0.999999)
    for _ in range(10):
        assert low.next(Kind.TIMEOUT) >= 0.0
    assert low.next(Kind.TIMEOUT) == pytest.approx(PROBE_CAP_S * (1 - JITTER))
    for _ in range(10):
        high.next(Kind.OTHER)
    assert high.next(Kind.OTHER) == pytest.approx(ATTEMPT_CAP_S * (1 + JITTER), rel=1e-5)


def test_what_is_fatal_at_start() -> None:
    assert {Kind.AUTHENTICATION, Kind.MECHANISM, Kind.TLS_TRUST, Kind.TLS} == FATAL_AT_START
    for kind in Kind:
        assert Failure(kind, "x").fatal_at_start == (kind in FATAL_AT_START)


def test_link_says_which_failures_are_news() -> None:
    link = Link()
    assert not link.up
    assert link.readiness() == "connecting"
    refused = Failure(Kind.REFUSED, "nobody listens")
    assert link.went_down(refused, now=10.0)  # the first: news
    assert not link.went_down(refused, now=12.0)  # the same kind again: not news
    assert link.readiness() == "unreachable: connection refused: nobody listens"
    assert link.went_down(Failure(Kind.TIMEOUT, "slow"), now=14.0)  # another kind: news
    assert link.failures == 3
    assert link.came_up(now=19.5) == pytest.approx(9.5)  # down since the first failure
    assert link.up
    assert link.readiness() == "ok"
    assert link.came_up(now=20.0) is None  # already up: nothing to say
    assert link.went_down(refused, now=30.0)  # a new outage: news again
    assert not link.up


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (ConnectionRefusedError(errno.ECONNREFUSED, "refused"), Kind.REFUSED),
        (socket.gaierror(socket.EAI_NONAME, "Name or service not known"), Kind.NAME),
        (TimeoutError(), Kind.TIMEOUT),
        (OSError(errno.EHOSTUNREACH, "No route to host"), Kind.NETWORK),
        (ConnectionResetError(errno.ECONNRESET, "reset"), Kind.CLOSED),
        (KafkaConnectionError("Connection at x closed"), Kind.CLOSED),
        (SaslAuthenticationFailed("bad"), Kind.AUTHENTICATION),
        (UnsupportedSaslMechanismError("no"), Kind.MECHANISM),
        (ssl.SSLCertVerificationError("unknown ca"), Kind.TLS_TRUST),
        (ssl.SSLError("wrong version number"), Kind.TLS),
        (ValueError("?"), Kind.OTHER),
    ],
)
def test_connection_errors_are_classified(error: BaseException, kind: Kind) -> None:
    settings = load_settings({"bootstrap_servers": "kafka:9092"}, env={})
    failure = kafka._failure(settings, error)
    assert failure.kind is kind
    assert "CHUNKSTREAM_" in failure.detail  # names what to check


# -- the start-up wait, with the network replaced -----------------------------------------------


@pytest.fixture
def fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(link_policy, "INITIAL_S", 0.001)
    monkeypatch.setattr(link_policy, "PROBE_CAP_S", 0.004)
    monkeypatch.setattr(link_policy, "ATTEMPT_CAP_S", 0.004)


def link_with(
    monkeypatch: pytest.MonkeyPatch,
    reachability: Sequence[Failure | None],
    classified: Failure | None,
) -> kafka_link.KafkaLink:
    """A link whose TCP probe answers ``reachability`` in turn (then: reachable) and whose
    classification of a failed attempt is ``classified``."""
    answers = iter(reachability)

    async def reachable(settings: object) -> Failure | None:
        return next(answers, None)

    async def classify(settings: object) -> Failure | None:
        return classified

    monkeypatch.setattr(kafka_link, "reachable", reachable)
    monkeypatch.setattr(kafka_link, "classify_connection", classify)
    settings = load_settings({"bootstrap_servers": "kafka:9092"}, env={})
    return kafka_link.KafkaLink(settings, Metrics(), asyncio.Event())


async def test_start_up_waits_logging_each_kind_once(
    monkeypatch: pytest.MonkeyPatch, fast: None, caplog: pytest.LogCaptureFixture
) -> None:
    refused, timeout = Failure(Kind.REFUSED, "r"), Failure(Kind.TIMEOUT, "t")
    link = link_with(monkeypatch, [refused] * 5 + [timeout] * 3, None)
    attempts = 0

    async def attempt() -> str:
        nonlocal attempts
        attempts += 1
        if attempts < 3:  # accepts connections, does not serve yet
            raise KafkaConnectionError("Unable to bootstrap")
        return "session"

    with caplog.at_level(logging.INFO, logger="worker.kafka.link"):
        assert await link.connect(attempt) == "session"
    assert attempts == 3
    down = [r for r in caplog.records if r.getMessage() == "kafka unreachable"]
    assert [r.kind for r in down] == ["refused", "timeout", "not_serving"]  # type: ignore[attr-defined]
    up = [r for r in caplog.records if r.getMessage() == "kafka reachable"]
    assert len(up) == 1
    assert up[0].failed_attempts == 10  # type: ignore[attr-defined]
    assert link.up
    total = link._metrics.kafka_connection_failures
    assert total.labels("refused")._value.get() == 5
    assert total.labels("not_serving")._value.get() == 2


async def test_a_refusing_broker_is_fatal_before_the_first_connection_only(
    monkeypatch: pytest.MonkeyPatch, fast: None
) -> None:
    auth = Failure(Kind.AUTHENTICATION, "SASL authentication failed: check CHUNKSTREAM_SASL_…")
    link = link_with(monkeypatch, [], auth)

    async def refused() -> str:
        raise KafkaConnectionError("Unable to bootstrap")

    with pytest.raises(ConfigError, match="SASL authentication failed"):
        await link.connect(refused)
    # Once it has connected, the same answer is an outage (a rotation in progress): waited out.
    link.state.came_up(0.0)
    calls = 0

    async def refused_twice() -> str:
        nonlocal calls
        calls += 1
        if calls <= 2:
            raise KafkaConnectionError("Unable to bootstrap")
        return "session"

    assert await link.connect(refused_twice) == "session"


async def test_a_stop_request_ends_the_wait(monkeypatch: pytest.MonkeyPatch, fast: None) -> None:
    link = link_with(monkeypatch, [Failure(Kind.REFUSED, "r")] * 10_000, None)

    async def never() -> str:
        raise AssertionError("nothing listens: no attempt is made")

    waiting = asyncio.create_task(link.connect(never))
    await asyncio.sleep(0.05)
    link._stopping.set()
    assert await asyncio.wait_for(waiting, 5) is None


def test_the_password_attribute_aiokafka_reads_for_each_connection() -> None:
    """worker.kafka.clients.renew_password writes it: aiokafka must still read it by this name."""
    import inspect

    from aiokafka.client import AIOKafkaClient

    source = inspect.getsource(AIOKafkaClient)
    assert "sasl_plain_password=self._sasl_plain_password" in source
