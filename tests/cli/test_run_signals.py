"""`chunkstream run` stopped by SIGTERM as early as it can catch it (a pod deleted while it
starts): exit 0, whether the signal lands while its modules load or once the worker runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.support.network import free_port
from tests.support.paths import REPO
from tests.support.processes import catches


def test_a_sigterm_caught_while_starting_exits_0(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHUNKSTREAM_")}
    # Nothing listens there: the worker would wait for Kafka for as long as it runs.
    env["CHUNKSTREAM_BOOTSTRAP_SERVERS"] = f"127.0.0.1:{free_port()}"
    env["CHUNKSTREAM_METRICS_PORT"] = "0"
    log = tmp_path / "worker.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "worker.cli", "run"], env=env, cwd=REPO, stdout=out,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not catches(proc.pid, signal.SIGTERM):  # the first moment it can
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "SIGTERM never caught"
            time.sleep(0.001)
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    output = log.read_text()
    assert code == 0, output[-3000:]
    # Caught while the worker's modules were still loading (they take far longer than the
    # millisecond between the handler's appearance and the signal), and honoured after.
    assert '"message":"signal received while starting: stopping"' in output, output[-3000:]
    assert '"message":"stopped"' in output
