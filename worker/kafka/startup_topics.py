"""The topics a worker needs before it joins its group: which are missing, and the state changelog
created when it is (the way Kafka Streams creates its internal topics).

Invariants:

- A missing topic is something to wait for, not a configuration error: the broker often comes up
  before the topics do (an operator's topic resources, a chart's job, a compose file), and an
  exit would put the pod into a crash loop whose back-off grows to minutes. :class:`TopicsMissing`
  names the topics and the settings naming them; the start-up loop waits and tries again
  (worker.kafka.link), unready meanwhile.
- The state changelog is the worker's own, as a Kafka Streams application's changelogs are its
  own: when it is missing and ``create_state_topic`` allows it, the worker creates it once the
  input topic exists, compacted, with the input's partition count (co-partitioned) and the
  input's replication factor, and a record limit no lower than the worker's. Another replica
  creating it at the same moment is no error, and neither is a refusal by the ACLs: the worker
  then waits for it like any other topic, saying how to grant or switch off the creation (a
  topic operator may be about to create it).
"""

from __future__ import annotations

import logging
from typing import Any

from aiokafka.errors import (
    ClusterAuthorizationFailedError,
    TopicAlreadyExistsError,
    TopicAuthorizationFailedError,
    for_code,
)

from worker.config import Settings, state_topic
from worker.kafka.clients import COMPACTED, create_topic_like, topics_used

log = logging.getLogger(__name__)

_REFUSED = (TopicAuthorizationFailedError.errno, ClusterAuthorizationFailedError.errno)
# Kafka's default max.message.bytes: a topic created without one accepts records this large.
BROKER_DEFAULT_MAX_MESSAGE_BYTES = 1_048_588


class TopicsMissing(Exception):
    """Topics the worker needs do not exist (yet)."""

    def __init__(self, topics: dict[str, str], note: str = "") -> None:
        self.topics = topics  # name → the setting that names it
        names = ", ".join(sorted(topics))
        settings = "/".join(f"CHUNKSTREAM_{topics[t]}" for t in sorted(topics))
        super().__init__(
            f"topics missing: {names} (named by {settings}; create them with `chunkstream "
            f"topics`, or wait for whatever creates them){note}"
        )


async def check_topics(consumer: Any, settings: Settings) -> None:
    """Raise :class:`TopicsMissing` unless every topic the worker uses exists; create the
    state changelog first when it is missing and that is allowed."""
    existing = await consumer.topics()
    needed = {t.name: t.setting for t in topics_used(settings)}
    missing = {name: setting for name, setting in needed.items() if name not in existing}
    changelog = state_topic(settings) if settings.document_lifecycle else None
    creatable = (
        changelog in missing and settings.create_state_topic and settings.input_topic not in missing
    )
    note = ""
    # Created, it is still missing from this attempt's metadata: the next attempt (at once)
    # finds it and checks it like any other.
    if creatable and not await create_state_topic(settings):
        note = (
            "; creating the state topic was refused by the broker's ACLs (Create on the "
            "topic or the cluster): grant it (docs/operating/security.md), or set "
            "CHUNKSTREAM_CREATE_STATE_TOPIC=false where something else creates it"
        )
    if missing:
        raise TopicsMissing(missing, note)


async def create_state_topic(settings: Settings) -> bool:
    """Create the state changelog like the input topic: its partition count and replication
    factor; compacted; taking records as large as the worker sends. False if the broker's ACLs
    refuse it (something else may still create it: a topic operator racing the worker)."""
    name = state_topic(settings)
    config = dict(COMPACTED)
    if settings.max_record_bytes > BROKER_DEFAULT_MAX_MESSAGE_BYTES:
        config["max.message.bytes"] = str(settings.max_record_bytes)
    created = await create_topic_like(settings, name, settings.input_topic, config)
    code = created.error_code
    if code == TopicAlreadyExistsError.errno:
        return True  # another replica, or an operator, was first
    if code in _REFUSED:
        return False
    if code != 0:
        raise for_code(code)(f"creating the state topic {name}")
    log.info(
        "state topic created",
        extra={"topic": name, "partitions": created.partitions, "replication": created.replication},
    )
    return True
