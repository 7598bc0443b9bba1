"""A flood of multi-MB documents through a real `chunkstream run` process given a memory
budget: the worker derives its in-flight window from the budget, pauses, is never killed, never
stalls, and its peak resident memory (the kernel's VmHWM, not a sample) stays under the budget.

No cgroup is created (the CI machine's cgroups belong to whoever runs it); the budget is the
setting a pod gets from its memory limit, and the kernel's own high-water mark is the check.
Nothing here is timed: the deadline of `wait_committed_to_end` only turns a stall into a
failure."""

from __future__ import annotations

import random
import signal
from pathlib import Path

import pytest

from tests.support import kafka_io
from tests.support.generated_docs import check_complete
from tests.support.network import free_port
from worker.runtime.resources import EXPANSION
from worker.wire.events import DocumentEvent

REPO = Path(__file__).resolve().parents[2]
MiB = 1 << 20


def prose(size: int, seed: int) -> str:
    paragraphs = [
        block.strip()
        for path in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
        for block in path.read_text(encoding="utf-8").split("\n\n")
        if len(block.strip()) > 80 and not block.strip().startswith("|")
    ]
    rng = random.Random(seed)
    parts: list[str] = []
    total = 0
    while total < size:
        parts.append(rng.choice(paragraphs))
        total += len(parts[-1].encode()) + 2
    return "\n\n".join(parts)[:size]


def vm_hwm(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM")


@pytest.mark.kafka
@pytest.mark.slow
async def test_multi_mb_flood_under_a_memory_budget(
    kafka_bootstrap: str, topic_names: dict[str, str], tmp_path: Path
) -> None:
    budget = 384 * MiB
    docs = [
        DocumentEvent(id=f"big-{i}", text=prose(2 * MiB + i * 64 * 1024, seed=i)) for i in range(24)
    ]
    flood = sum(len(d.text.encode()) for d in docs)
    settings = kafka_io.make_settings(
        kafka_bootstrap,
        topic_names,
        strategy="sentence",
        metrics_port=free_port(),
        memory_budget=budget,
        max_document_bytes=4 * MiB,
    )
    await kafka_io.create(settings)
    await kafka_io.produce_raw(
        kafka_bootstrap, settings.input_topic, kafka_io.encode_documents(docs)
    )

    log = tmp_path / "worker.log"
    proc = kafka_io.worker_process(settings, log)
    try:
        await kafka_io.wait_committed_to_end(
            kafka_bootstrap, settings.group_id, settings.input_topic, timeout_s=600
        )
        peak = vm_hwm(proc.pid)
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code == 0, log.read_text()[-3000:]  # drained and exited: never OOM-killed

    (budget_line,) = kafka_io.log_events(log, "budget")
    window = budget_line["max_in_flight_bytes"]
    assert budget_line["memory_source"] == "setting"
    assert budget_line["memory_bound_bytes"] <= budget
    # The window was derived from the budget, and taking the flood in whole would not fit.
    assert 0 < window < flood
    assert EXPANSION["sentence"] * flood > budget
    pauses = sum(e["pauses"] for e in kafka_io.log_events(log, "backpressure"))
    assert pauses, "the window never filled: the test proves nothing"
    print(f"flood {flood >> 20} MiB, window {window >> 20} MiB, peak RSS {peak >> 20} MiB")
    assert peak <= budget, f"peak RSS {peak >> 20} MiB above the {budget >> 20} MiB budget"

    events = await kafka_io.chunk_events(kafka_bootstrap, settings.output_topic)
    check_complete(docs, events)
    assert not await kafka_io.dead_letters(kafka_bootstrap, settings.dlq_topic)


POD_320 = 320 * MiB
STATIC_MODEL = REPO / ".cache/models/all-MiniLM-L6-v2-static"


@pytest.mark.kafka
@pytest.mark.slow
@pytest.mark.parametrize(
    ("strategy", "model", "count", "document_bytes", "max_document_bytes"),
    [
        # A rule strategy: no model loaded; 1 MiB documents, the base's document limit.
        ("sentence", None, 64, 900 * 1024, MiB),
        # The image's default boundary model (static) under the embedding strategy: its
        # reserve, the retrieval tokenizer it sizes in (issue 21) and ~160 bytes per input
        # byte leave room for documents up to 128 KiB.
        ("semantic", STATIC_MODEL, 24, 100 * 1024, 128 * 1024),
    ],
)
async def test_a_320_mib_pod_starts_and_holds_a_flood(
    kafka_bootstrap: str,
    topic_names: dict[str, str],
    tmp_path: Path,
    strategy: str,
    model: Path | None,
    count: int,
    document_bytes: int,
    max_document_bytes: int,
) -> None:
    """Acceptance (issue 20): with a rule strategy, and with the static boundary model, a worker
    given a 320 MiB pod's memory budget starts (its bound, planned for the models it really
    loads, fits) and works off a flood far larger than the budget with its peak resident memory
    (the kernel's VmHWM) inside 320 MiB. Before issue 20 the bound reserved the transformer for
    any model and refused to start below ~615 MiB."""
    if model is not None and not (model / "manifest.json").is_file():
        pytest.fail(f"no static model in {model}: run scripts/bootstrap")
    docs = [
        DocumentEvent(id=f"pod-{i}", text=prose(document_bytes + i * 1024, seed=100 + i))
        for i in range(count)
    ]
    flood = sum(len(d.text.encode()) for d in docs)
    overrides: dict[str, object] = {"strategy": strategy}
    if model is not None:
        overrides["model_dir"] = str(model)
    settings = kafka_io.make_settings(
        kafka_bootstrap,
        topic_names,
        metrics_port=free_port(),
        memory_budget=POD_320,
        max_document_bytes=max_document_bytes,
        **overrides,
    )
    await kafka_io.create(settings)
    await kafka_io.produce_raw(
        kafka_bootstrap, settings.input_topic, kafka_io.encode_documents(docs)
    )

    log = tmp_path / "worker.log"
    proc = kafka_io.worker_process(settings, log)
    try:
        await kafka_io.wait_committed_to_end(
            kafka_bootstrap, settings.group_id, settings.input_topic, timeout_s=600
        )
        peak = vm_hwm(proc.pid)
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code == 0, log.read_text()[-3000:]

    (budget_line,) = kafka_io.log_events(log, "budget")
    assert budget_line["models"] == ([] if model is None else ["static"])
    assert budget_line["memory_bound_bytes"] <= POD_320
    assert 0 < budget_line["max_in_flight_bytes"] < flood
    assert EXPANSION[strategy] * flood > POD_320  # the flood does not fit whole
    pauses = sum(e["pauses"] for e in kafka_io.log_events(log, "backpressure"))
    assert pauses, "the window never filled: the test proves nothing"
    print(
        f"{strategy}: flood {flood >> 20} MiB, window {budget_line['max_in_flight_bytes'] >> 10} "
        f"KiB, bound {budget_line['memory_bound_bytes'] >> 20} MiB, peak RSS {peak >> 20} MiB"
    )
    assert peak <= POD_320, f"peak RSS {peak >> 20} MiB above the 320 MiB pod"

    events = await kafka_io.chunk_events(kafka_bootstrap, settings.output_topic)
    check_complete(docs, events)
    assert not await kafka_io.dead_letters(kafka_bootstrap, settings.dlq_topic)
