"""A rotated SASL password reaches a running worker without a restart (issue 20, item 6).

The credential is changed on the broker and in the password file (replaced the way the kubelet
updates a mounted Secret: a new file renamed over the old), then the broker is restarted so
that every connection of the worker must authenticate again. The worker keeps running and
finishes the documents produced after the rotation: its clients' next connections use the
file's new content. (Before, the file was read once at start-up, and every reconnect failed
authentication for as long as the worker ran.)
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
from pathlib import Path

import pytest

from tests.support import kafka_io
from tests.support.generated_docs import check_complete, make_docs
from tests.support.network import free_port
from tests.support.private_broker import kafka_tool
from tests.support.secure_broker import USER, SecureBroker, create_topics, secure_env, spawn

pytestmark = pytest.mark.kafka


def rotate(sb: SecureBroker, password_file: Path, new_password: str) -> None:
    kafka_tool(
        "kafka.admin.ConfigCommand",
        "--bootstrap-server", sb.broker.bootstrap,
        "--alter", "--entity-type", "users", "--entity-name", USER,
        "--add-config", f"SCRAM-SHA-512=[iterations=4096,password={new_password}]",
    )  # fmt: skip
    fresh = password_file.with_name(".kafka-password.new")
    fresh.write_text(new_password + "\n")
    fresh.chmod(0o600)
    os.replace(fresh, password_file)


@pytest.mark.timeout(600)
async def test_a_rotated_password_file_is_used_without_a_restart(
    secure_broker: SecureBroker, topic_names: dict[str, str], tmp_path: Path
) -> None:
    sb = secure_broker
    await create_topics(sb, topic_names)
    before, after = make_docs(30, seed=41, prefix="before"), make_docs(30, seed=42, prefix="after")
    await kafka_io.produce_raw(
        sb.broker.bootstrap, topic_names["input_topic"], kafka_io.encode_documents(before)
    )
    log = tmp_path / "worker.log"
    env = secure_env(sb, topic_names, tmp_path, metrics_port=free_port())
    proc = spawn(env, log)
    new_password = "pw-" + secrets.token_hex(16)
    try:
        await kafka_io.wait_committed_to_end(
            sb.broker.bootstrap, topic_names["group_id"], topic_names["input_topic"], 120
        )
        password_file = Path(env["CHUNKSTREAM_SASL_PASSWORD_FILE"])
        await asyncio.to_thread(rotate, sb, password_file, new_password)
        await kafka_io.wait_for_log(log, "SASL password file changed: new connections use it", 60)
        # Every connection must authenticate again, now with the new password only.
        await asyncio.to_thread(sb.broker.stop)
        await asyncio.to_thread(sb.broker.start)
        await kafka_io.produce_raw(
            sb.broker.bootstrap, topic_names["input_topic"], kafka_io.encode_documents(after)
        )
        await kafka_io.wait_committed_to_end(
            sb.broker.bootstrap, topic_names["group_id"], topic_names["input_topic"], 240
        )
        assert proc.poll() is None, "the worker exited"
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(proc.wait, 60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    events = await kafka_io.chunk_events(sb.broker.bootstrap, topic_names["output_topic"])
    check_complete(before + after, events)
    text = log.read_text(errors="replace")
    assert sb.password not in text
    assert new_password not in text
