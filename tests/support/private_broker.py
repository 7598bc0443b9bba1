"""A private local Kafka broker (its own run dir and ports) that a test may stop, restart,
freeze and thaw without disturbing the session broker other tests use."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from tests.support.network import free_port

REPO = Path(__file__).resolve().parents[2]
LOCAL_KAFKA = REPO / "deploy" / "kafka" / "local-kafka"
LIBS = Path(os.environ.get("CHUNKSTREAM_KAFKA_CACHE", REPO / ".cache" / "kafka")) / "libs"


class PrivateBroker:
    """``deploy/kafka/local-kafka`` on a run dir of its own; the data dir survives restarts."""

    def __init__(self, run_dir: Path, *, extra_properties: str | None = None) -> None:
        self.run_dir = run_dir
        self.port = free_port()
        self.controller_port = free_port()
        run_dir.mkdir(parents=True, exist_ok=True)
        if extra_properties is not None:
            (run_dir / "extra.properties").write_text(extra_properties)

    def write_extra(self, properties: str) -> None:
        """Broker settings merged over local-kafka's own (see its ``extra.properties``)."""
        (self.run_dir / "extra.properties").write_text(properties)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        result = subprocess.run(
            [
                str(LOCAL_KAFKA), "start", "--dir", str(self.run_dir),
                "--port", str(self.port), "--controller-port", str(self.controller_port),
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )  # fmt: skip
        if result.returncode != 0:
            raise RuntimeError(f"private broker failed to start:\n{result.stderr[-4000:]}")

    def stop(self) -> None:
        self.thaw()  # a frozen JVM cannot handle SIGTERM
        subprocess.run(
            [str(LOCAL_KAFKA), "stop", "--dir", str(self.run_dir)],
            capture_output=True,
            timeout=120,
        )

    def pid(self) -> int | None:
        path = self.run_dir / "broker.pid"
        if not path.exists():
            return None
        pid = int(path.read_text().strip())
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return None
        return pid if b"kafka.Kafka" in cmdline else None

    def freeze(self) -> None:
        pid = self.pid()
        assert pid is not None, "no broker to freeze"
        os.kill(pid, signal.SIGSTOP)

    def thaw(self) -> None:
        pid = self.pid()
        if pid is not None:
            os.kill(pid, signal.SIGCONT)


def kafka_tool(main_class: str, *args: str, timeout: float = 120) -> str:
    """Run one of Kafka's own command-line tools from the broker jars."""
    result = subprocess.run(
        ["java", "-Xmx256m", "-cp", str(LIBS / "*"), main_class, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if result.returncode != 0:
        raise RuntimeError(f"{main_class} failed:\n{result.stdout[-2000:]}{result.stderr[-2000:]}")
    return result.stdout
