"""The worker against a real broker's SASL_SSL listener (SCRAM-SHA-512 over TLS).

The PKI is generated at test time (openssl), the SCRAM credential is created with Kafka's own
`kafka-configs` tool (kafka.admin.ConfigCommand from the broker jars), and the worker runs as
a real process configured only through the environment, its password read from a file.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import msgspec
import pytest

from tests.faults.broker import PrivateBroker, free_port, kafka_tool
from tests.kafka import helpers
from tests.kafka.test_worker_kafka import check_complete, make_docs
from tests.security.pki import Pki, make_pki

pytestmark = pytest.mark.kafka

USER = "chunker"


@dataclass(frozen=True)
class SecureBroker:
    broker: PrivateBroker
    sasl_bootstrap: str
    pki: Pki
    password: str


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    base = tmp_path_factory.mktemp("sasl")
    pki = make_pki(base / "pki")
    broker = PrivateBroker(base / "broker")
    sasl_port = free_port()
    broker.write_extra(
        "\n".join(
            [
                "listeners=PLAINTEXT://127.0.0.1:{p},CONTROLLER://127.0.0.1:{c},"
                "SASL_SSL://127.0.0.1:{s}",
                "advertised.listeners=PLAINTEXT://127.0.0.1:{p},SASL_SSL://127.0.0.1:{s}",
                "sasl.enabled.mechanisms=SCRAM-SHA-512",
                "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config="
                "org.apache.kafka.common.security.scram.ScramLoginModule required;",
                "ssl.keystore.type=PKCS12",
                f"ssl.keystore.location={pki.keystore}",
                f"ssl.keystore.password={pki.keystore_password}",
                f"ssl.key.password={pki.keystore_password}",
                "ssl.client.auth=none",
            ]
        ).format(p=broker.port, c=broker.controller_port, s=sasl_port)
        + "\n"
    )
    broker.start()
    try:
        password = "pw-" + secrets.token_hex(16)
        kafka_tool(
            "kafka.admin.ConfigCommand",
            "--bootstrap-server", broker.bootstrap,
            "--alter", "--entity-type", "users", "--entity-name", USER,
            "--add-config", f"SCRAM-SHA-512=[iterations=4096,password={password}]",
        )  # fmt: skip
        yield SecureBroker(broker, f"127.0.0.1:{sasl_port}", pki, password)
    finally:
        broker.stop()


def secure_env(
    sb: SecureBroker,
    names: dict[str, str],
    tmp_path: Path,
    *,
    password: str | None = None,
    cafile: Path | None = None,
    metrics_port: int = 0,
) -> dict[str, str]:
    """The worker's whole configuration as environment variables; the password in a file."""
    secret = tmp_path / "kafka-password"
    secret.write_text((sb.password if password is None else password) + "\n")
    secret.chmod(0o600)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHUNKSTREAM_")}
    env.update(
        {
            "CHUNKSTREAM_BOOTSTRAP_SERVERS": sb.sasl_bootstrap,
            "CHUNKSTREAM_SECURITY_PROTOCOL": "SASL_SSL",
            "CHUNKSTREAM_SASL_MECHANISM": "SCRAM-SHA-512",
            "CHUNKSTREAM_SASL_USERNAME": USER,
            "CHUNKSTREAM_SASL_PASSWORD_FILE": str(secret),
            "CHUNKSTREAM_SSL_CAFILE": str(cafile or sb.pki.ca_pem),
            "CHUNKSTREAM_METRICS_HOST": "127.0.0.1",
            "CHUNKSTREAM_METRICS_PORT": str(metrics_port),
            "CHUNKSTREAM_COMMIT_INTERVAL_MS": "200",
            "CHUNKSTREAM_LOG_LEVEL": "DEBUG",  # the noisiest level must not leak either
            **{f"CHUNKSTREAM_{k.upper()}": v for k, v in names.items()},
        }
    )
    return env


def spawn(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as fh:
        return subprocess.Popen(
            [sys.executable, "-m", "worker.cli", "run"],
            env=env,
            stdout=fh,
            stderr=subprocess.STDOUT,
            cwd=helpers.REPO,
        )


async def create_topics(sb: SecureBroker, names: dict[str, str]) -> None:
    # Topics are created by an operator over the broker's internal plaintext listener.
    await helpers.create(helpers.make_settings(sb.broker.bootstrap, names), partitions=2)


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return str(response.read().decode())


async def test_worker_processes_documents_over_sasl_ssl(
    secure_broker: SecureBroker, topic_names: dict[str, str], tmp_path: Path
) -> None:
    sb = secure_broker
    await create_topics(sb, topic_names)
    docs = make_docs(40, seed=21)
    await helpers.produce_raw(
        sb.broker.bootstrap, topic_names["input_topic"], helpers.encode_documents(docs)
    )
    log = tmp_path / "worker.log"
    port = free_port()
    proc = spawn(secure_env(sb, topic_names, tmp_path, metrics_port=port), log)
    try:
        await helpers.wait_committed_to_end(
            sb.broker.bootstrap, topic_names["group_id"], topic_names["input_topic"], 90
        )
        metrics = await asyncio.to_thread(scrape, port)
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(proc.wait, 60) == 0
    finally:
        proc.kill()
    events = await helpers.chunk_events(sb.broker.bootstrap, topic_names["output_topic"])
    check_complete(docs, events)
    banner = helpers.log_events(log, "starting")[-1]["config"]
    assert banner["security_protocol"] == "SASL_SSL"
    assert banner["sasl_password"] == "***"
    output = log.read_text(errors="replace")
    assert sb.password not in output, "the SASL password leaked into the log"
    assert sb.password not in metrics, "the SASL password leaked into the metrics"
    assert "documents_completed" in metrics or "chunkstream" in metrics


async def run_to_exit(env: dict[str, str], log: Path, timeout_s: float = 90) -> int:
    proc = spawn(env, log)
    try:
        return await asyncio.to_thread(proc.wait, timeout_s)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the worker hung instead of exiting (log: {log})")
    finally:
        proc.kill()
        proc.wait(10)


def fatal_line(log: Path) -> str:
    lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    assert lines, "the worker printed nothing"
    return lines[-1]


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
