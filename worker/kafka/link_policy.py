"""Reaching Kafka, decided without doing any I/O: which failures stop the worker at start-up,
how long to wait before the next attempt, and when a failure is news worth a log line. The
I/O is :mod:`worker.kafka.link` (and the classification of a connection error,
:func:`worker.kafka.clients.classify_connection`); time and randomness are passed in, like
:mod:`worker.inference.batch_policy`.

The split (docs/operating/outages.md, "Broker outages"):

- *Fatal at start-up* (exit status 2, one line naming the setting): the broker answers and
  refuses the worker's own configuration — SASL authentication failed, the SASL mechanism is not
  offered, the broker's certificate is not trusted, the TLS handshake fails. A retry cannot fix
  them, and a crash loop with the reason in ``kubectl logs`` is the loudest place to say so
  before anything is consumed. (A wrongly laid out state topic is fatal too: :mod:`worker.app`
  checks it once connected. Missing topics are waited for: worker.kafka.startup_topics.)
- *Transient*: everything that says "Kafka is not there (yet)" — refused, unresolvable name,
  timeout, unreachable network, a connection closed, a broker that accepts connections but
  does not serve yet. The worker waits, unready, and tries again.
- *Once the worker has connected*, every failure is transient: what worked before and fails
  now is an outage or a rotation in progress (a new password whose file the kubelet has not
  refreshed yet), not a configuration to refuse.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Callable
from dataclasses import dataclass


class Kind(enum.Enum):
    """What went wrong, as an operator would name it (the value is what readiness shows)."""

    REFUSED = "connection refused"
    NAME = "name not resolved"
    TIMEOUT = "timed out"
    NETWORK = "network unreachable"
    CLOSED = "connection closed"
    NOT_SERVING = "not serving"  # accepts connections, but bootstrap or the check fails
    AUTHENTICATION = "authentication failed"
    MECHANISM = "SASL mechanism not offered"
    TLS_TRUST = "certificate not trusted"
    TLS = "TLS handshake failed"
    OTHER = "error"


# The broker answered and refused our configuration: no retry can fix it before a restart.
FATAL_AT_START = frozenset({Kind.AUTHENTICATION, Kind.MECHANISM, Kind.TLS_TRUST, Kind.TLS})
# Nothing that speaks Kafka is there: a cheap TCP probe tells when to try again.
UNREACHABLE = frozenset({Kind.REFUSED, Kind.NAME, Kind.TIMEOUT, Kind.NETWORK})

# Waits between attempts: doubling from INITIAL_S with ±JITTER, capped. Kafka not being there
# is watched at most PROBE_CAP_S apart (a TCP connect, or a broker just coming up, costs the
# broker next to nothing), so the worker is ready within seconds of the port accepting
# connections; a broker that answers and refuses us is asked at most every ATTEMPT_CAP_S.
INITIAL_S = 0.5
PROBE_CAP_S = 2.0
ATTEMPT_CAP_S = 30.0
JITTER = 0.2


@dataclass(frozen=True)
class Failure:
    kind: Kind
    detail: str  # one sentence naming the settings to check; never a secret

    @property
    def fatal_at_start(self) -> bool:
        return self.kind in FATAL_AT_START

    def describe(self) -> str:
        return f"unreachable: {self.kind.value}: {self.detail}"


def cap_for(kind: Kind) -> float:
    """The longest wait before the next attempt after a failure of ``kind``."""
    return PROBE_CAP_S if kind in UNREACHABLE or kind is Kind.NOT_SERVING else ATTEMPT_CAP_S


class Backoff:
    """Capped exponential backoff with jitter; the cap follows the failure's kind. The worker's
    one backoff: reaching Kafka, restoring state (worker.kafka.link.retrying) and
    publishing (worker.handling.handler) all wait by it."""

    def __init__(self, rand: Callable[[], float] = random.random) -> None:
        self._rand = rand
        self._step = 0

    def next(self, kind: Kind) -> float:
        base = min(cap_for(kind), INITIAL_S * 2.0**self._step)
        self._step = min(self._step + 1, 32)
        return base * (1.0 + JITTER * (2.0 * self._rand() - 1.0))

    def reset(self) -> None:
        self._step = 0


class Link:
    """Kafka as the worker saw it last: up, or down since when and why. Says which changes are
    news: the first failure of a kind (not every retry of it), and the recovery."""

    def __init__(self) -> None:
        self.failure: Failure | None = None
        self.down_since: float | None = None
        self.ever_up = False
        self.failures = 0  # since the last recovery

    @property
    def up(self) -> bool:
        return self.ever_up and self.failure is None

    def readiness(self) -> str:
        if self.failure is not None:
            return self.failure.describe()
        return "ok" if self.ever_up else "connecting"

    def went_down(self, failure: Failure, now: float) -> bool:
        """Record a failed attempt; True when it is news (the first, or another kind)."""
        news = self.failure is None or self.failure.kind is not failure.kind
        if self.down_since is None:
            self.down_since = now
        self.failure = failure
        self.failures += 1
        return news

    def came_up(self, now: float) -> float | None:
        """Record a working connection; the seconds it was down, if it was (news then)."""
        was_down = self.down_since
        self.failure = None
        self.down_since = None
        self.failures = 0
        self.ever_up = True
        return None if was_down is None else max(0.0, now - was_down)
