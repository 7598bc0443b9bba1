"""A private broker with SASL_SSL and the worker's settings to reach it, for the security
tests."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import kafka_io
from tests.support.pki import Pki
from tests.support.private_broker import PrivateBroker

USER = "chunker"


@dataclass(frozen=True)
class SecureBroker:
    broker: PrivateBroker
    sasl_bootstrap: str
    pki: Pki
    password: str


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
            cwd=kafka_io.REPO,
        )


async def run_to_exit(env: dict[str, str], log: Path, timeout_s: float = 90) -> int:
    """The worker's exit status; a worker still running after timeout_s fails the test."""
    proc = spawn(env, log)
    try:
        return await asyncio.to_thread(proc.wait, timeout_s)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the worker kept running instead of exiting (log: {log})")
    finally:
        proc.kill()
        proc.wait(10)


def fatal_line(log: Path) -> str:
    """The last line the worker printed: where a fatal error's one-line message lands."""
    lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    assert lines, "the worker printed nothing"
    return lines[-1]


async def create_topics(sb: SecureBroker, names: dict[str, str]) -> None:
    # Topics are created by an operator over the broker's internal plaintext listener.
    await kafka_io.create(kafka_io.make_settings(sb.broker.bootstrap, names), partitions=2)
