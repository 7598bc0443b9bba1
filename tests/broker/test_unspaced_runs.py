"""A document holding a run of megabytes without a space (a hex dump) goes through the worker
on the real broker as chunks within the character cap, not as a dead letter.

Before the character cap such a run was one unknown token to the retrieval model's tokenizer,
so the whole run was one chunk, whose event passed the record limit: the document was
dead-lettered ``output_record_too_large`` (issue 46)."""

from __future__ import annotations

import random

import pytest

from tests.support import kafka_io
from worker.chunking.text.character_cap import CHARACTERS_PER_TOKEN
from worker.wire.events import DocumentEvent

pytestmark = pytest.mark.kafka

WINDOW = 254  # the default retrieval model's


@pytest.mark.timeout(600)
@pytest.mark.parametrize("strategy", ["sentence", "semantic"])
async def test_a_multi_megabyte_hex_run_is_chunked_not_dead_lettered(
    kafka_bootstrap: str, topic_names: dict[str, str], strategy: str
) -> None:
    digits = random.Random(3).randbytes(1_500_000).hex()  # three million characters
    text = f"# Firmware dump\n\nThe image follows.\n\n{digits}\n\nEnd of the dump."
    ordinary = "A plain document. It has two sentences."
    docs = [
        DocumentEvent(id="dump", text=text, content_type="text/markdown"),
        DocumentEvent(id="plain", text=ordinary),
    ]
    settings = kafka_io.make_settings(kafka_bootstrap, topic_names, strategy=strategy)
    await kafka_io.create(settings, partitions=2)
    await kafka_io.produce_raw(
        kafka_bootstrap, settings.input_topic, kafka_io.encode_documents(docs)
    )
    await kafka_io.run_worker_to_end(settings, timeout_s=300)

    assert await kafka_io.dead_letters(kafka_bootstrap, settings.dlq_topic) == []
    events = await kafka_io.chunk_events(kafka_bootstrap, settings.output_topic)
    dump = sorted((e for e in events if e.doc_id == "dump"), key=lambda e: e.index)
    assert [e.index for e in dump] == list(range(len(dump)))
    assert len(dump) >= len(digits) // (CHARACTERS_PER_TOKEN * WINDOW)
    for event in dump:
        assert len(event.text) <= CHARACTERS_PER_TOKEN * WINDOW
        assert event.text == text[event.start_index : event.end_index]
        assert event.token_count <= WINDOW
    solid = "".join("".join(e.text.split()) for e in dump)
    assert solid == "".join(text.split())  # every character, once, in order
    assert [e.text for e in events if e.doc_id == "plain"] == [ordinary]
