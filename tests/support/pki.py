"""Throwaway test PKI made with openssl at test time: a CA, a broker certificate it signs
(for 127.0.0.1 and localhost) in a PKCS12 keystore, and an unrelated second CA."""

from __future__ import annotations

import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Pki:
    ca_pem: Path
    other_ca_pem: Path
    keystore: Path
    keystore_password: str


def _openssl(*args: str, cwd: Path) -> None:
    result = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"openssl {args[0]} failed: {result.stderr}")


def _ca(directory: Path, name: str) -> None:
    _openssl(
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "2",
        "-subj", f"/CN={name}",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        cwd=directory,
    )  # fmt: skip


def make_pki(directory: Path) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    _ca(directory, "test-ca")
    _ca(directory, "other-ca")
    _openssl(
        "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", "broker.key", "-out", "broker.csr", "-subj", "/CN=localhost",
        cwd=directory,
    )  # fmt: skip
    (directory / "san.cnf").write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n"
    )
    _openssl(
        "x509", "-req", "-in", "broker.csr", "-CA", "test-ca.pem", "-CAkey", "test-ca.key",
        "-CAcreateserial", "-out", "broker.pem", "-days", "2", "-extfile", "san.cnf",
        cwd=directory,
    )  # fmt: skip
    password = secrets.token_hex(12)
    _openssl(
        "pkcs12", "-export", "-in", "broker.pem", "-inkey", "broker.key",
        "-certfile", "test-ca.pem", "-name", "broker", "-out", "broker.p12",
        "-passout", f"pass:{password}",
        cwd=directory,
    )  # fmt: skip
    return Pki(
        ca_pem=directory / "test-ca.pem",
        other_ca_pem=directory / "other-ca.pem",
        keystore=directory / "broker.p12",
        keystore_password=password,
    )
