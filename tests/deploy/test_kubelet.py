"""Run the worker the way the kubelet runs the rendered Deployment: the image's ENTRYPOINT
with the container's args, the image's ENV plus the container's env (ConfigMap via envFrom,
downward API), TMPDIR and the working directory on a scratch "emptyDir", and the worker as
PID 1 of its own PID namespace (as in a container without an init). Probes are polled over
HTTP with the manifest's periods and thresholds; then SIGTERM, as on pod deletion: the process
must exit 0 within terminationGracePeriodSeconds with every offset committed.

Substituted (and only these): the bootstrap servers (the local test broker), fresh topic and
group names, the model directories (the image's ENV names where its build stage wrote each
model; here the same models made by the same commands in scripts/bootstrap) and the metrics
port (a free one: tests share the machine)."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import msgspec
import pytest

from tests.support import kafka_io
from tests.support import manifests as m
from tests.support.generated_docs import make_docs
from tests.support.network import free_port
from worker.config import load_settings

pytestmark = pytest.mark.kafka
POD = "chunkstream-7d9f8c6b5-x2x4q"


def probe(port: int, path: str, timeout_s: float) -> int | None:
    """HTTP status of a kubelet httpGet probe; None when nothing answers."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout_s) as r:
            return int(r.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except (urllib.error.URLError, OSError):
        return None


def model_info(port: int) -> str:
    """The chunkstream_model_info sample line(s) of /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    lines = text.splitlines()
    return "\n".join(line for line in lines if line.startswith("chunkstream_model_info"))


def metric(port: int, name: str) -> float:
    """Sum of every sample of ``name`` (all label sets); 0 when none was recorded yet."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith((name + " ", name + "{"))
    )


def child_of(pid: int, timeout_s: float = 10) -> int:
    """The process `unshare --fork` started (the container's PID 1, seen from here)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        if children:
            return int(children[0])
        time.sleep(0.05)
    raise TimeoutError("unshare started no child")


def namespaced_pid(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("NSpid:"):
            return int(line.split()[-1])
    raise AssertionError("no NSpid")


async def test_rendered_deployment_runs_probes_and_stops_like_under_the_kubelet(
    kafka_bootstrap: str, topic_names: dict[str, str], tmp_path: Path
) -> None:
    objs = m.render("base")
    deployment = m.one(objs, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    c = m.container(objs)
    grace = pod["terminationGracePeriodSeconds"]

    # The command line: ENTRYPOINT + args (Kubernetes `command` would replace ENTRYPOINT).
    argv = c.get("command") or m.image_entrypoint()
    argv = [*argv, *c.get("args", [])]
    assert argv == ["chunkstream", "run"]
    executable = shutil.which(argv[0], path=str(m.BIN))
    assert executable is not None

    # The environment: image ENV, then the container's (the kubelet's order).
    scratch = tmp_path / "tmp"  # the emptyDir mounted at /tmp (TMPDIR, WORKDIR)
    scratch.mkdir()
    image_env = m.image_env()
    env = {**image_env, **m.container_env(objs, POD)}
    assert image_env["TMPDIR"] == "/tmp"
    # The state emptyDir, at the path CHUNKSTREAM_STATE_DIR names.
    state_mount = next(vm for vm in c["volumeMounts"] if vm["name"] == "state")
    assert env["CHUNKSTREAM_STATE_DIR"] == state_mount["mountPath"]
    state_volume = tmp_path / "state"
    state_volume.mkdir()
    port = free_port()
    env.update(
        PATH=f"{m.BIN}:/usr/bin:/bin",
        HOME="/nonexistent",
        LANG="C.UTF-8",
        TMPDIR=str(scratch),
        CHUNKSTREAM_STATE_DIR=str(state_volume),
        # This checkout's code, not another the venv's editable install points at (a worktree).
        **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"},
        CHUNKSTREAM_BOOTSTRAP_SERVERS=kafka_bootstrap,
        CHUNKSTREAM_METRICS_PORT=str(port),
        **m.local_models(env),
        **{f"CHUNKSTREAM_{k.upper()}": v for k, v in topic_names.items()},
    )
    settings = load_settings({}, env=env)
    assert settings.strategy == "semantic"
    assert settings.model_int8  # applies to the transformer (retrieval), not the static model
    assert settings.client_id == POD
    await kafka_io.create(settings, partitions=3)
    docs = make_docs(24, seed=3, prefix="kubelet")
    # The last one large (800 KB, under the base's 1 MiB document limit): seconds of work for
    # either boundary model (the static default chunks ~460 KB/s on one core, docs/benchmarks.md),
    # so the SIGTERM sent once every document is taken in lands while it is in flight and the
    # drain has to finish it. (Small documents alone are done by the static model in
    # milliseconds, before the signal.)
    filler = "\n\n".join(d.text for d in make_docs(800, seed=4, prefix="filler"))
    assert len(filler) > 800_000
    docs[-1] = msgspec.structs.replace(docs[-1], text=filler[:800_000])
    assert len(docs[-1].text.encode()) < settings.max_document_bytes
    await kafka_io.produce_raw(
        kafka_bootstrap, settings.input_topic, kafka_io.encode_documents(docs[:12])
    )

    log_path = tmp_path / "worker.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(  # noqa: ASYNC220 - starting it does not block
            ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child", executable, *argv[1:]],
            env=env,
            cwd=scratch,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        worker_pid = child_of(proc.pid)
        assert namespaced_pid(worker_pid) == 1, "the worker must run as PID 1"
        started = time.monotonic()

        # startupProbe: every periodSeconds, up to failureThreshold failures.
        startup: dict[str, Any] = c["startupProbe"]
        assert startup["httpGet"]["path"] == "/healthz"  # liveness: Kafka may be slow to join
        for _ in range(startup["failureThreshold"]):
            if probe(port, startup["httpGet"]["path"], startup["timeoutSeconds"]) == 200:
                break
            assert proc.poll() is None, log_path.read_text()[-3000:]
            await asyncio.sleep(startup["periodSeconds"])
        else:
            raise AssertionError(f"startup probe failed {startup['failureThreshold']} times")
        # Liveness passes; readiness (model loaded, group joined) follows, probed every
        # periodSeconds as the kubelet does (it would keep probing; 60 tries bound the test).
        live = c["livenessProbe"]
        assert probe(port, live["httpGet"]["path"], live["timeoutSeconds"]) == 200
        ready = c["readinessProbe"]
        for _ in range(60):
            if probe(port, ready["httpGet"]["path"], ready["timeoutSeconds"]) == 200:
                break
            assert proc.poll() is None, log_path.read_text()[-3000:]
            await asyncio.sleep(ready["periodSeconds"])
        else:
            raise AssertionError("readiness never passed")
        ready_after = time.monotonic() - started
        # Boundaries come from the static model the image's ENV names (the product default).
        assert 'variant="static"' in model_info(port), model_info(port)

        # More documents while running; SIGTERM as soon as all are taken in, most still in
        # flight: the drain must finish them before the final commit.
        await kafka_io.produce_raw(
            kafka_bootstrap, settings.input_topic, kafka_io.encode_documents(docs[12:])
        )
        deadline = time.monotonic() + 60
        while metric(port, "chunkstream_documents_consumed_total") < len(docs):
            assert time.monotonic() < deadline, "the worker did not take the documents in"
            await asyncio.sleep(0.05)
        completed_at_term = metric(port, "chunkstream_documents_completed_total")
        os.kill(worker_pid, signal.SIGTERM)  # to the container's PID 1, as the runtime does
        term_at = time.monotonic()
        await asyncio.sleep(1.0)
        # Draining: readiness is withdrawn (or the server is already gone).
        assert probe(port, "/readyz", 2) in (503, None)
        code = await asyncio.to_thread(proc.wait, grace)
        took = time.monotonic() - term_at
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    output = log_path.read_text(errors="replace")
    assert code == 0, output[-3000:]
    assert took < grace
    assert ready_after < startup["periodSeconds"] * startup["failureThreshold"]
    stopped = kafka_io.log_events(log_path, "stopped")
    assert stopped, output[-3000:]
    assert stopped[-1]["documents"] == len(docs)
    assert completed_at_term < len(docs), "SIGTERM came after the work was done: no drain seen"

    # Offsets committed to the end of every partition, every document chunked.
    end = await kafka_io.end_offsets(kafka_bootstrap, settings.input_topic)
    committed = await kafka_io.committed_offsets(kafka_bootstrap, settings.group_id)
    assert {tp: committed.get(tp) for tp in end} == end
    events = await kafka_io.chunk_events(kafka_bootstrap, settings.output_topic)
    assert {e.doc_id for e in events} == {d.id for d in docs}
    assert all(e.strategy == "semantic" for e in events)
    # The state store was kept on the state volume (where a container restart finds it), not
    # in the in-memory TMPDIR.
    assert list(state_volume.glob("*/store.sqlite")), sorted(state_volume.rglob("*"))
    assert not list(scratch.glob("chunkstream-state-*"))
