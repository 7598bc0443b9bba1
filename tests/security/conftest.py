"""The security tests' module-scoped SASL_SSL brokers: one open to every authenticated user, one
with Kafka's ACL authorizer, where a user may do only what an ACL grants."""

from __future__ import annotations

import secrets
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from tests.support.network import free_port
from tests.support.pki import make_pki
from tests.support.private_broker import PrivateBroker, kafka_tool
from tests.support.secure_broker import USER, SecureBroker

# KRaft's authorizer. The PLAINTEXT and CONTROLLER listeners (the tests' operator, and the
# broker's own controller traffic) authenticate nobody: their principal, ANONYMOUS, is the
# super user; the worker's SASL user gets only its ACLs.
AUTHORIZER = (
    "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users=User:ANONYMOUS",
)


def sasl_broker(base: Path, extra: Sequence[str] = ()) -> Iterator[SecureBroker]:
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
                *extra,
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


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    yield from sasl_broker(tmp_path_factory.mktemp("sasl"))


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    yield from sasl_broker(tmp_path_factory.mktemp("sasl-acl"), AUTHORIZER)
