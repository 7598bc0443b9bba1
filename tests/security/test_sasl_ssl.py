"""The worker against a real broker's SASL_SSL listener (SCRAM-SHA-512 over TLS).

The PKI is generated at test time (openssl), the SCRAM credential is created with Kafka's own
`kafka-configs` tool (kafka.admin.ConfigCommand from the broker jars), and the worker runs as
a real process configured only through the environment, its password read from a file.
"""

from __future__ import annotations

import asyncio
import secrets
import signal
import urllib.request
from pathlib import Path

import msgspec
import pytest

from tests.support import kafka_io
from tests.support.generated_docs import check_complete, make_docs
from tests.support.network import free_port
from tests.support.secure_broker import (
    USER,
    SecureBroker,
    create_topics,
    fatal_line,
    run_to_exit,
    secure_env,
    spawn,
)

pytestmark = pytest.mark.kafka


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return str(response.read().decode())


async def test_worker_processes_documents_over_sasl_ssl(
    secure_broker: SecureBroker, topic_names: dict[str, str], tmp_path: Path
) -> None:
    sb = secure_broker
    await create_topics(sb, topic_names)
    docs = make_docs(40, seed=21)
    await kafka_io.produce_raw(
        sb.broker.bootstrap, topic_names["input_topic"], kafka_io.encode_documents(docs)
    )
    log = tmp_path / "worker.log"
    port = free_port()
    proc = spawn(secure_env(sb, topic_names, tmp_path, metrics_port=port), log)
    try:
        await kafka_io.wait_committed_to_end(
            sb.broker.bootstrap, topic_names["group_id"], topic_names["input_topic"], 90
        )
        metrics = await asyncio.to_thread(scrape, port)
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(proc.wait, 60) == 0
    finally:
        proc.kill()
    events = await kafka_io.chunk_events(sb.broker.bootstrap, topic_names["output_topic"])
    check_complete(docs, events)
    banner = kafka_io.log_events(log, "starting")[-1]["config"]
    assert banner["security_protocol"] == "SASL_SSL"
    assert banner["sasl_password"] == "***"
    output = log.read_text(errors="replace")
    assert sb.password not in output, "the SASL password leaked into the log"
    assert sb.password not in metrics, "the SASL password leaked into the metrics"
    assert "documents_completed" in metrics or "chunkstream" in metrics


async def test_wrong_password_fails_fast_with_a_clear_error(
    secure_broker: SecureBroker, topic_names: dict[str, str], tmp_path: Path
) -> None:
    sb = secure_broker
    await create_topics(sb, topic_names)
    wrong = "wrong-" + secrets.token_hex(8)
    log = tmp_path / "worker.log"
    code = await run_to_exit(secure_env(sb, topic_names, tmp_path, password=wrong), log)
    assert code == 2, "a refused connection at start-up is a configuration error (exit 2)"
    last = fatal_line(log)
    assert "authentication failed" in last.lower(), last
    assert "CHUNKSTREAM_SASL_USERNAME" in last, last
    assert "CHUNKSTREAM_SASL_PASSWORD" in last, last
    text = log.read_text(errors="replace")
    assert wrong not in text, "the (wrong) password leaked into the log"
    assert sb.password not in text


async def test_untrusted_ca_fails_fast_with_a_clear_error(
    secure_broker: SecureBroker, topic_names: dict[str, str], tmp_path: Path
) -> None:
    sb = secure_broker
    await create_topics(sb, topic_names)
    log = tmp_path / "worker.log"
    env = secure_env(sb, topic_names, tmp_path, cafile=sb.pki.other_ca_pem)
    code = await run_to_exit(env, log)
    assert code == 2, "a refused connection at start-up is a configuration error (exit 2)"
    last = fatal_line(log)
    assert "certificate" in last.lower(), last
    assert "CHUNKSTREAM_SSL_CAFILE" in last, last
    assert sb.password not in log.read_text(errors="replace")


def test_banner_masks_a_password_given_inline() -> None:
    from worker.config import load_settings, redacted

    secret = "inline-" + secrets.token_hex(8)
    settings = load_settings(
        env={
            "CHUNKSTREAM_SECURITY_PROTOCOL": "SASL_SSL",
            "CHUNKSTREAM_SASL_MECHANISM": "SCRAM-SHA-512",
            "CHUNKSTREAM_SASL_USERNAME": USER,
            "CHUNKSTREAM_SASL_PASSWORD": secret,
        }
    )
    assert secret not in msgspec.json.encode(redacted(settings)).decode()
    assert secret not in repr(redacted(settings))
