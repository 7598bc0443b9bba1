"""Shared fixtures: the real local Kafka broker (one per test session) and topic helpers."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.model_fixtures import (
    golden_dir,
    model_dir,
    source_dir,
    tiny_source,
    tokenizer_path,
)
from tests.support.network import free_port

REPO = Path(__file__).resolve().parent.parent
LOCAL_KAFKA = REPO / "deploy" / "kafka" / "local-kafka"
# The model fixtures are every test's (the chunking, semantic, model and broker tests need them).
__all__ = ["golden_dir", "model_dir", "source_dir", "tiny_source", "tokenizer_path"]


@pytest.fixture(scope="session")
def kafka_bootstrap(kafka_broker: tuple[str, Path | None]) -> str:
    return kafka_broker[0]


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path | None]]:
    """A real single-node KRaft broker on a free port, for the whole session:
    (bootstrap address, run dir).

    CHUNKSTREAM_TEST_BOOTSTRAP points the suite at an already running broker instead
    (its run dir is then unknown: None).
    """
    external = os.environ.get("CHUNKSTREAM_TEST_BOOTSTRAP")
    if external:
        yield external, None
        return
    run_dir = tmp_path_factory.mktemp("kafka")
    port = free_port()
    result = subprocess.run(
        [str(LOCAL_KAFKA), "start", "--port", str(port), "--dir", str(run_dir)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if result.returncode != 0:
        raise RuntimeError(f"local Kafka broker failed to start:\n{result.stderr}")
    try:
        yield result.stdout.strip().splitlines()[-1], run_dir
    finally:
        subprocess.run([str(LOCAL_KAFKA), "stop", "--dir", str(run_dir)], timeout=120)


@pytest.fixture
def topic_names() -> dict[str, str]:
    """Fresh topic and group names per test, so tests never see each other's records."""
    suffix = uuid.uuid4().hex[:8]
    return {
        "input_topic": f"documents-{suffix}",
        "output_topic": f"chunks-{suffix}",
        "dlq_topic": f"dlq-{suffix}",
        "group_id": f"group-{suffix}",
    }
