"""The worker's topics are one list (worker.kafka.clients.topics_used): creating them, checking
them at start-up and learning the written ones' metadata all read it."""

from __future__ import annotations

from worker.config import load_settings
from worker.kafka.clients import topics_used, worker_topics, written_topics


def test_the_topics_follow_the_settings() -> None:
    bare = load_settings({}, env={"CHUNKSTREAM_DOCUMENT_LIFECYCLE": "false"})
    assert worker_topics(bare, 6) == (
        {"documents": 6, "chunks": 6, "documents.dlq": 1},
        {},
    )
    assert written_topics(bare) == ["chunks", "documents.dlq"]

    full = load_settings(
        {},
        env={
            "CHUNKSTREAM_GROUP_ID": "g",
            "CHUNKSTREAM_DOCUMENTS_TOPIC": "doc-chunks",
        },
    )
    compacted = {"cleanup.policy": "compact"}
    assert worker_topics(full, 3) == (
        {
            "documents": 3,
            "chunks": 3,
            "documents.dlq": 1,
            "g-document-state-changelog": 3,
            "doc-chunks": 3,
        },
        {"g-document-state-changelog": compacted, "doc-chunks": compacted},
    )
    assert written_topics(full) == [
        "chunks",
        "documents.dlq",
        "g-document-state-changelog",
        "doc-chunks",
    ]


def test_each_topic_names_the_setting_that_names_it() -> None:
    """The start-up check's message names a topic's variable: it must be the real one."""
    settings = load_settings(
        {},
        env={
            "CHUNKSTREAM_INPUT_TOPIC": "in",
            "CHUNKSTREAM_OUTPUT_TOPIC": "out",
            "CHUNKSTREAM_DLQ_TOPIC": "dead",
            "CHUNKSTREAM_STATE_TOPIC": "kept",
            "CHUNKSTREAM_DOCUMENTS_TOPIC": "docs",
        },
    )
    assert {t.setting: t.name for t in topics_used(settings)} == {
        "INPUT_TOPIC": "in",
        "OUTPUT_TOPIC": "out",
        "DLQ_TOPIC": "dead",
        "STATE_TOPIC": "kept",
        "DOCUMENTS_TOPIC": "docs",
    }
