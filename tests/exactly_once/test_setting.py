"""CHUNKSTREAM_PROCESSING_GUARANTEE: at-least-once by default, exactly-once on request, and any
other value refused at start-up with a message naming the setting."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support.network import free_port
from tests.support.paths import REPO
from worker.config import exactly_once, load_settings
from worker.errors import ConfigError


def test_the_default_is_at_least_once() -> None:
    settings = load_settings({}, env={})
    assert settings.processing_guarantee == "at-least-once"
    assert not exactly_once(settings)


def test_exactly_once_from_the_environment_and_from_the_flag() -> None:
    from_env = load_settings({}, env={"CHUNKSTREAM_PROCESSING_GUARANTEE": "exactly-once"})
    from_flag = load_settings({"processing_guarantee": "exactly-once"}, env={})
    assert exactly_once(from_env)
    assert exactly_once(from_flag)


def test_exactly_once_commits_every_100_ms_unless_an_interval_is_set() -> None:
    """Kafka Streams' commit.interval.ms default under exactly-once is 100 ms (30 s otherwise):
    output is readable only once its transaction commits."""
    eos = {"CHUNKSTREAM_PROCESSING_GUARANTEE": "exactly-once"}
    assert load_settings({}, env={}).commit_interval_ms == 1000
    assert load_settings({}, env=eos).commit_interval_ms == 100
    assert load_settings({"processing_guarantee": "exactly-once"}, env={}).commit_interval_ms == 100
    chosen = {**eos, "CHUNKSTREAM_COMMIT_INTERVAL_MS": "1000"}
    assert load_settings({}, env=chosen).commit_interval_ms == 1000
    flag = load_settings({"commit_interval_ms": "2500"}, env=eos)
    assert flag.commit_interval_ms == 2500


@pytest.mark.parametrize("value", ["exactly_once", "EXACTLY-ONCE", "at-most-once", "eos"])
def test_another_value_is_refused_naming_the_setting(value: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings({}, env={"CHUNKSTREAM_PROCESSING_GUARANTEE": value})
    assert "CHUNKSTREAM_PROCESSING_GUARANTEE (--processing-guarantee)" in str(info.value)


def test_the_worker_refuses_to_start_with_a_bad_value() -> None:
    """`chunkstream run` itself: it exits before any Kafka client is made (the broker address
    below has nothing listening, so a worker that got that far would wait for it instead)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHUNKSTREAM_")}
    env["CHUNKSTREAM_BOOTSTRAP_SERVERS"] = f"127.0.0.1:{free_port()}"
    env["CHUNKSTREAM_PROCESSING_GUARANTEE"] = "twice"
    env["CHUNKSTREAM_METRICS_PORT"] = "0"
    result = subprocess.run(
        [sys.executable, "-m", "worker.cli", "run"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "CHUNKSTREAM_PROCESSING_GUARANTEE" in result.stdout + result.stderr
