"""Compressed topics on the real broker: every codec read, the configured codec written (checked
in the broker's own log segments), and a batch the worker cannot read handled in the open."""

from __future__ import annotations

import asyncio
import json
import signal
import struct
from pathlib import Path

import pytest

from tests.support import kafka_io
from tests.support.codecs import _shadow_cramjam, _wait_partition_committed, produce_compressed
from tests.support.generated_docs import check_complete, make_docs
from tests.support.kafka_io import run_worker_until
from tests.support.network import free_port, http_get, scrape, total
from worker.app import Worker
from worker.config import Settings, state_topic

pytestmark = pytest.mark.kafka

CODECS = ("gzip", "snappy", "lz4", "zstd")
# The compression field of a record batch's attributes (Kafka's own numbering).
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def segment_codecs(data_dir: Path, topic: str) -> list[int]:
    """The compression id of every record batch of ``topic`` as the broker stored it."""
    codecs = []
    for segment in sorted(data_dir.glob(f"{topic}-*/*.log")):
        raw = segment.read_bytes()
        pos = 0
        while pos + 23 <= len(raw):
            (length,) = struct.unpack_from(">i", raw, pos + 8)
            (attributes,) = struct.unpack_from(">h", raw, pos + 21)
            codecs.append(attributes & 0x07)
            pos += 12 + length
    return codecs


@pytest.mark.parametrize("output_codec", ["none", *CODECS])
async def test_every_input_codec_is_read_and_the_output_codec_is_written(
    kafka_broker: tuple[str, Path | None], topic_names: dict[str, str], output_codec: str
) -> None:
    bootstrap, run_dir = kafka_broker
    settings = kafka_io.make_settings(bootstrap, topic_names, compression_type=output_codec)
    await kafka_io.create(settings)
    docs = make_docs(40, seed=14)
    encoded = kafka_io.encode_documents(docs)
    for i, codec in enumerate(CODECS):
        await produce_compressed(
            bootstrap, settings.input_topic, encoded[i * 10 : i * 10 + 10], codec
        )
    done = asyncio.ensure_future(
        kafka_io.wait_committed_to_end(bootstrap, settings.group_id, settings.input_topic)
    )
    assert await run_worker_until(Worker(settings), done) == 0
    assert check_complete(docs, await kafka_io.chunk_events(bootstrap, settings.output_topic)) == {}
    if run_dir is not None:  # an external broker's log segments are not ours to read
        stored = segment_codecs(run_dir / "data", settings.output_topic)
        assert stored, "no batches found in the output topic's segments"
        assert set(stored) == {CODEC_IDS[output_codec]}
        assert set(segment_codecs(run_dir / "data", settings.input_topic)) == {
            CODEC_IDS[c] for c in CODECS
        }
        # The state changelog is random chunk ids: written uncompressed whatever the codec.
        assert settings.document_lifecycle
        state = segment_codecs(run_dir / "data", state_topic(settings))
        assert state, "no batches found in the state changelog's segments"
        assert set(state) == {CODEC_IDS["none"]}


async def test_a_batch_the_worker_cannot_read_pauses_its_partition_in_the_open(
    kafka_bootstrap: str, topic_names: dict[str, str], tmp_path: Path
) -> None:
    port = free_port()
    settings = kafka_io.make_settings(
        kafka_bootstrap, topic_names, compression_type="none", metrics_port=port
    )
    await kafka_io.create(settings, partitions=2)
    unreadable = make_docs(5, seed=1, prefix="lz4")
    readable = make_docs(12, seed=2, prefix="plain")
    await produce_compressed(
        kafka_bootstrap,
        settings.input_topic,
        kafka_io.encode_documents(unreadable),
        "lz4",
        partition=0,
    )
    await produce_compressed(
        kafka_bootstrap,
        settings.input_topic,
        kafka_io.encode_documents(readable),
        None,
        partition=1,
    )
    no_codec = {"PYTHONPATH": str(_shadow_cramjam(tmp_path))}
    log = tmp_path / "worker.log"

    # Asking to *write* a codec that is not installed is a configuration error at start-up.
    wrong = kafka_io.worker_process(
        _with(settings, compression_type="lz4"), tmp_path / "wrong.log", no_codec
    )
    assert await asyncio.to_thread(wrong.wait, 60) == 2
    assert "CHUNKSTREAM_COMPRESSION_TYPE" in (tmp_path / "wrong.log").read_text()

    proc = kafka_io.worker_process(settings, log, no_codec)
    try:
        line = await kafka_io.wait_for_log(
            log,
            "unreadable record batch: partition paused, "
            "nothing from it on is committed (a codec library "
            "missing from this install, or a corrupt batch)",
        )
        assert (line["topic"], line["partition"], line["offset"]) == (settings.input_topic, 0, 0)
        assert "lz4" in line["error"]
        assert line["level"] == "error"
        # The readable partition goes on to the end meanwhile.
        committed = await _wait_partition_committed(kafka_bootstrap, settings, 1, len(readable))
        assert committed.get(0, 0) == 0
        status, body = await http_get(port, "/readyz")
        assert status == 503, body
        assert json.loads(body)["unreadable_partitions"][0].startswith(
            f"{settings.input_topic}[0]@0: "
        )
        m = await scrape(port)
        assert m["chunkstream_unreadable_batches_total"][(("partition", "0"),)] >= 1
        assert total(m, "chunkstream_unreadable_partitions") == 1
        assert proc.poll() is None, "the worker must stay up, not crash-loop"
    finally:
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(proc.wait, 60) == 0
    assert (
        check_complete(
            readable, await kafka_io.chunk_events(kafka_bootstrap, settings.output_topic)
        )
        == {}
    )

    # With the codec installed, the same group picks up where it stopped: nothing was lost.
    done = asyncio.ensure_future(
        kafka_io.wait_committed_to_end(kafka_bootstrap, settings.group_id, settings.input_topic)
    )
    assert await run_worker_until(Worker(settings), done) == 0
    events = await kafka_io.chunk_events(kafka_bootstrap, settings.output_topic)
    assert check_complete(unreadable + readable, events) == {}


def _with(settings: Settings, **changes: str) -> Settings:
    import msgspec

    return msgspec.structs.replace(settings, **changes)


async def test_a_corrupt_batch_is_named_and_not_skipped(
    kafka_broker: tuple[str, Path | None], topic_names: dict[str, str]
) -> None:
    bootstrap, run_dir = kafka_broker
    if run_dir is None:
        pytest.skip("corrupting a batch needs the broker's data directory (own broker only)")
    settings = kafka_io.make_settings(bootstrap, topic_names)
    await kafka_io.create(settings, partitions=2)
    damaged, intact = make_docs(3, seed=5, prefix="bad"), make_docs(8, seed=6, prefix="ok")
    await produce_compressed(
        bootstrap, settings.input_topic, kafka_io.encode_documents(damaged), None, partition=0
    )
    await produce_compressed(
        bootstrap, settings.input_topic, kafka_io.encode_documents(intact), None, partition=1
    )
    # Flip one byte inside the first batch's records, as a failing disk would: the broker
    # serves log segments as they are, so the client's CRC check is what catches it.
    segment = run_dir / "data" / f"{settings.input_topic}-0" / "00000000000000000000.log"
    with segment.open("r+b") as fh:
        fh.seek(80)
        byte = fh.read(1)
        fh.seek(80)
        fh.write(bytes([byte[0] ^ 0xFF]))

    worker = Worker(settings)
    task = asyncio.create_task(worker.run())
    try:
        await _wait_partition_committed(bootstrap, settings, 1, len(intact))
        for _ in range(300):
            if worker.metrics.unreadable_partitions._value.get() == 1:
                break
            await asyncio.sleep(0.1)
        ready, checks = worker.readiness()
        assert ready is False
        stuck = checks["unreadable_partitions"]
        assert isinstance(stuck, list)
        assert len(stuck) == 1
        assert stuck[0].startswith(f"{settings.input_topic}[0]@0: CorruptRecordException")
        assert "Invalid CRC" in stuck[0]
        assert not task.done()
    finally:
        worker.request_stop()
    assert await task == 0
    committed = await kafka_io.committed_offsets(bootstrap, settings.group_id)
    assert {tp.partition: o for tp, o in committed.items()}.get(0, 0) == 0
    assert (
        check_complete(intact, await kafka_io.chunk_events(bootstrap, settings.output_topic)) == {}
    )
