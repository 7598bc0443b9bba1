"""The reference sink: what a stock Kafka sink does with the chunk topic, into embedded SQLite.

It applies exactly two rules, the ones Kafka sinks share (Elasticsearch's
``behavior.on.null.values=delete``, MongoDB's ``delete.on.null.values``, the Qdrant sink):
a record with a value **upserts** it under its key, a record with a null value **deletes** the
key. Nothing else — no knowledge of documents, versions or chunkstream's state — so when it
ends up holding exactly the current documents' chunks, a stock sink does too.

Like a Kafka Connect sink task, it commits the group's offsets only after the rows they cover
are written, so a restarted sink resumes without losing or re-ordering anything.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from aiokafka import AIOKafkaConsumer

from worker.errors import DocumentError
from worker.wire.codec import decode_as
from worker.wire.events import ChunkEvent


@dataclass(frozen=True)
class SinkRow:
    key: str
    doc_id: str | None  # from the value, for reading; the sink itself never uses it
    index: int | None
    text: str | None


class SinkStore:
    """Rows by record key: upsert on a value, delete on a null value."""

    def __init__(self, path: Path) -> None:
        self._db = sqlite3.connect(path, isolation_level=None)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS records (key TEXT PRIMARY KEY, value BLOB NOT NULL,"
            " doc_id TEXT, idx INTEGER, text TEXT) WITHOUT ROWID"
        )

    def close(self) -> None:
        self._db.close()

    def apply(self, records: list[tuple[bytes, bytes | None, list[tuple[str, bytes]]]]) -> None:
        """Apply records in order, in one transaction."""
        self._db.execute("BEGIN")
        try:
            for key, value, headers in records:
                name = key.decode()
                if value is None:
                    self._db.execute("DELETE FROM records WHERE key = ?", (name,))
                    continue
                doc_id, index, text = _readable(value, headers)
                self._db.execute(
                    "INSERT INTO records VALUES (?, ?, ?, ?, ?) ON CONFLICT (key) DO UPDATE SET"
                    " value = excluded.value, doc_id = excluded.doc_id, idx = excluded.idx,"
                    " text = excluded.text",
                    (name, value, doc_id, index, text),
                )
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    def rows(self) -> list[SinkRow]:
        return [
            SinkRow(key, doc_id, index, text)
            for key, doc_id, index, text in self._db.execute(
                "SELECT key, doc_id, idx, text FROM records ORDER BY doc_id, idx, key"
            )
        ]

    def keys(self) -> set[str]:
        return {key for (key,) in self._db.execute("SELECT key FROM records")}


def _readable(
    value: bytes, headers: list[tuple[str, bytes]]
) -> tuple[str | None, int | None, str | None]:
    """The document id, index and text of a chunk event, when it is one (for display)."""
    try:
        event = decode_as(value, headers, ChunkEvent)
    except DocumentError:
        return None, None, None
    return event.doc_id, event.index, event.text


async def run_sink(
    consumer: AIOKafkaConsumer,
    store: SinkStore,
    *,
    idle_timeout_s: float | None,
    commit: bool = True,
) -> int:
    """Consume until idle for ``idle_timeout_s`` (forever when None); returns records applied.
    ``consumer`` is started and subscribed (``commit``: in a group, auto-commit off) or
    assigned (no commits)."""
    applied = 0
    idle_since = time.monotonic()
    while True:
        batch = await consumer.getmany(timeout_ms=200, max_records=5000)
        records = [
            (r.key, r.value, list(r.headers))
            for partition_records in batch.values()
            for r in partition_records
            if r.key is not None  # an unkeyed record cannot be upserted by key
        ]
        if records:
            store.apply(records)
            applied += len(records)
            if commit:  # after the rows are written: at least once, in order
                await consumer.commit()
            idle_since = time.monotonic()
        elif idle_timeout_s is not None and time.monotonic() - idle_since > idle_timeout_s:
            return applied
        else:
            await asyncio.sleep(0)
