"""A request the broker's ACLs refuse: not transient, so never retried.

Kafka's clients treat an authorization failure as non-retriable (Kafka Streams stops on one):
only a new grant fixes it. Retried, it would keep the worker alive and stalled, partitions
paused or documents retrying forever, with a warning per try. So the worker stops with a
configuration error (exit status 2) naming what was refused and the page that lists the ACLs
it needs, after draining and committing what it can.
"""

from __future__ import annotations

from aiokafka.errors import (
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailed,
)

from worker.errors import ConfigError

_REFUSED_ON = {
    TopicAuthorizationFailedError: "a topic",
    GroupAuthorizationFailedError: "the consumer group (CHUNKSTREAM_GROUP_ID)",
    ClusterAuthorizationFailedError: "the cluster",
    TransactionalIdAuthorizationFailed: "a transactional id (exactly-once: the prefix "
    "chunkstream-<group id>-)",
}


class PermissionRefused(ConfigError):
    """The broker's ACLs refuse the worker's user something it needs, at start-up or later."""


def refused(exc: BaseException) -> PermissionRefused | None:
    """``exc`` (or what caused it) as a :class:`PermissionRefused`, or None if it is not an
    authorization failure."""
    seen: BaseException | None = exc
    while seen is not None:
        for kind, what in _REFUSED_ON.items():
            if isinstance(seen, kind):
                return PermissionRefused(
                    f"the broker's ACLs refuse the worker's user (CHUNKSTREAM_SASL_USERNAME) on "
                    f"{what}: {seen!r}; grant what docs/operating/security.md#acls lists"
                )
        seen = seen.__cause__
    return None
