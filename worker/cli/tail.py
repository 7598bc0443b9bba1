"""``chunkstream tail``'s records, one line each, decoded as what the topic carries (the
command's parser and its connection: :mod:`worker.cli.kafka_tools`).

What a topic carries is its role in the settings, the ``CHUNKSTREAM_*`` variables the worker
reads (:func:`worker.kafka.clients.topics_used`): the input topic DocumentEvents (with
``CHUNKSTREAM_INPUT_FORMAT=row``, table rows, shown as the documents the worker maps them
onto, or with the reason it would dead-letter them), the output topic ChunkEvents, the
dead-letter topic DeadLetterEvents, the documents topic DocumentChunksEvents, the state
changelog the worker's state records. A topic the settings do not name is read record by
record, by shape: a value is the first of ChunkEvent, DeadLetterEvent, DocumentChunksEvent and
DocumentEvent whose required fields it has (no two share theirs, so at most one fits), else a
state record (a msgpack array). By shape rather than refusing, or assuming chunk events:
``tail`` is often run without the worker's environment (a laptop, another namespace, a renamed
topic), and a guess checked on every record is right for every record of ours and says so for
the others.

A null value is a tombstone, printed with its key (and, on the chunk topic, the document the
``chunkstream-doc-id`` header names). A value that is not what the topic carries is printed as
undecodable, with the reason, and the tail goes on. ``--max N`` prints exactly N records: the
limit is counted record by record, not between fetched batches. ``--json`` prints one JSON
object per record: the event as the contract defines it, a state record with its ids as hex, a
tombstone as ``{"tombstone": true, "key": …}``, an undecodable record as
``{"undecodable": true, …}``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

import msgspec

from worker.errors import DocumentError, Undecodable
from worker.wire.codec import DOC_ID_HEADER, decode_as
from worker.wire.events import ChunkEvent, DeadLetterEvent, DocumentChunksEvent, DocumentEvent
from worker.wire.rows import RowMapping, decode_row
from worker.wire.state_record import (
    DocumentState,
    decode_part,
    decode_state,
    ids_from_bytes,
    split_key,
)

if TYPE_CHECKING:
    from worker.config import Settings

Event: TypeAlias = ChunkEvent | DeadLetterEvent | DocumentChunksEvent | DocumentEvent
Decoded: TypeAlias = Event | DocumentState
# What a topic carries: an event type, or table rows mapped onto documents.
Carried: TypeAlias = type[Event] | type[DocumentState] | RowMapping

# What each of the worker's topics carries, by the setting that names the topic.
CARRIED_BY_ROLE: dict[str, Carried] = {
    "INPUT_TOPIC": DocumentEvent,
    "OUTPUT_TOPIC": ChunkEvent,
    "DLQ_TOPIC": DeadLetterEvent,
    "DOCUMENTS_TOPIC": DocumentChunksEvent,
    "STATE_TOPIC": DocumentState,
}
BY_SHAPE: tuple[type[Event], ...] = (
    ChunkEvent,
    DeadLetterEvent,
    DocumentChunksEvent,
    DocumentEvent,
)
PREVIEW_CHARS = 100
IDS_SHOWN = 4  # of a DocumentChunksEvent's ids, which may be tens of thousands


class Record(Protocol):
    """What tail reads of a fetched record (aiokafka's ConsumerRecord)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes]]


class RecordSource(Protocol):
    async def getmany(
        self, *partitions: Any, timeout_ms: int = 0, max_records: int | None = None
    ) -> dict[Any, list[Any]]: ...


def carried_by(topic: str, settings: Settings) -> Carried | None:
    """What ``topic`` carries by its role in ``settings``, or None: a topic they do not name."""
    from worker.handling.handler import row_mapping
    from worker.kafka.clients import topics_used

    for used in topics_used(settings):
        if used.name == topic:
            rows = row_mapping(settings) if used.setting == "INPUT_TOPIC" else None
            return rows or CARRIED_BY_ROLE[used.setting]
    return None


def decode(value: bytes, headers: Sequence[tuple[str, bytes]], carried: Carried | None) -> Decoded:
    """``value`` as ``carried`` (None: by shape); a :class:`DocumentError` if it is not."""
    if isinstance(carried, RowMapping):  # the worker's size limit is not tail's to apply
        return decode_row(value, headers, carried, max_bytes=len(value))
    if carried is DocumentState:
        return _state(value)
    if carried is not None:
        return decode_as(value, headers, carried)
    for event_type in BY_SHAPE:
        try:
            return decode_as(value, headers, event_type)
        except DocumentError:
            continue
    try:
        return _state(value)
    except DocumentError:
        names = ", ".join(t.__name__ for t in BY_SHAPE)
        raise Undecodable(f"none of {names} or a state record") from None


def _state(value: bytes) -> DocumentState:
    try:
        return decode_state(value)
    except msgspec.DecodeError as exc:  # ValidationError is a DecodeError
        raise Undecodable(f"not a state record: {exc}") from None


def line_of(record: Record, carried: Carried | None, as_json: bool) -> str:
    """One record as tail prints it."""
    headers = list(record.headers)
    key = None if record.key is None else record.key.decode(errors="replace")
    if record.value is None:
        owner = dict(headers).get(DOC_ID_HEADER)
        doc_id = None if owner is None else owner.decode(errors="replace")
        if as_json:
            shown = {"tombstone": True, "key": key, **({"doc_id": doc_id} if doc_id else {})}
            return msgspec.json.encode(shown).decode()
        return f"TOMBSTONE {key}" + (f" of {doc_id}" if doc_id else "")
    part = _state_part(record.key, record.value, carried, as_json)
    if part is not None:
        return part
    try:
        decoded = decode(record.value, headers, carried)
    except DocumentError as exc:
        where = f"{record.topic}/{record.partition}@{record.offset}"
        if as_json:
            undecodable = {
                "undecodable": True,
                "topic": record.topic,
                "partition": record.partition,
                "offset": record.offset,
                "bytes": len(record.value),
                "error": str(exc),
            }
            return msgspec.json.encode(undecodable).decode()
        return f"UNDECODABLE {where} ({len(record.value)} bytes): {exc}"
    if as_json:
        return _json(decoded, key)
    return describe(decoded, key)


def _state_part(
    key: bytes | None, value: bytes, carried: Carried | None, as_json: bool
) -> str | None:
    """A part of a split state (worker.wire.state_record: its key is the document id, 0xFF and
    a digest) as tail shows it; None for any other record."""
    if carried not in (DocumentState, None) or key is None:
        return None
    try:
        doc_id, digest = split_key(key)
        part = decode_part(value) if digest is not None else None
    except (UnicodeDecodeError, msgspec.DecodeError):
        return None
    if digest is None or part is None:
        return None
    ids, retracted = ids_from_bytes(part.chunk_ids), ids_from_bytes(part.retracted)
    if as_json:
        shown = {"key": doc_id, "part": digest.hex(), "chunk_ids": ids, "retracted": retracted}
        return msgspec.json.encode(shown).decode()
    return (
        f"STATE PART {digest.hex()} of {doc_id}: {len(ids)} chunk ids, {len(retracted)} retracted"
    )


def _json(decoded: Decoded, key: str | None) -> str:
    if isinstance(decoded, DocumentState):  # an array with ids as bytes on the wire
        state = {
            "key": key,
            "offset": decoded.offset,
            "version": decoded.version,
            "deleted": decoded.deleted,
            "chunk_ids": decoded.ids,
            "retracted": decoded.retracted_ids,
            **({"parts": [d.hex() for d in decoded.digests]} if decoded.parts else {}),
        }
        return msgspec.json.encode(state).decode()
    return msgspec.json.encode(decoded).decode()


def describe(decoded: Decoded, key: str | None) -> str:
    """One readable line of a decoded record."""
    if isinstance(decoded, ChunkEvent):
        return (
            f"{decoded.doc_id} #{decoded.index + 1}/{decoded.count} "
            f"[{decoded.start_index}:{decoded.end_index}] {decoded.token_count} tok "
            f"{decoded.strategy}: {_preview(decoded.text)}"
        )
    if isinstance(decoded, DeadLetterEvent):
        source = decoded.source
        return (
            f"DEAD LETTER {source.topic}/{source.partition}@{source.offset} "
            f"{decoded.error_kind}: {decoded.error_message}"
        )
    if isinstance(decoded, DocumentChunksEvent):
        version = "" if decoded.doc_version is None else f" version {decoded.doc_version}"
        ids = decoded.chunk_ids
        listed = " ".join(ids[:IDS_SHOWN]) + (" ..." if len(ids) > IDS_SHOWN else "")
        return f"CHUNKS OF {decoded.doc_id}{version}: {len(ids)} {decoded.strategy} chunks {listed}"
    if isinstance(decoded, DocumentEvent):
        return (
            f"DOCUMENT {decoded.id} {decoded.content_type} {len(decoded.text)} chars: "
            f"{_preview(decoded.text)}"
        )
    deleted = " (deleted)" if decoded.deleted else ""
    retracted = f", {len(decoded.retracted_ids)} retracted" if decoded.retracted else ""
    version = "" if decoded.version is None else f" version {decoded.version}"
    if decoded.parts:  # a split state's head: its ids are in its parts
        held = f"its ids in {len(decoded.digests)} parts"
    else:
        held = f"{len(decoded.ids)} chunk ids{retracted}"
    return f"STATE {key} from offset {decoded.offset}{version}{deleted}: {held}"


def _preview(text: str) -> str:
    preview = text.replace("\n", "⏎ ")
    if len(preview) > PREVIEW_CHARS:
        preview = preview[: PREVIEW_CHARS - 3] + "..."
    return preview


async def print_records(
    source: RecordSource,
    show: Callable[[Record], str],
    *,
    limit: int | None,
    idle_timeout_s: float | None,
) -> int:
    """Lines of ``source``'s records on stdout until ``limit`` records (exactly) or
    ``idle_timeout_s`` seconds without one; how many were printed."""
    shown = 0
    idle_since = time.monotonic()
    while limit is None or shown < limit:
        left = None if limit is None else limit - shown
        batch = await source.getmany(timeout_ms=200, max_records=left)
        records = [record for records in batch.values() for record in records]
        if not records:
            if idle_timeout_s is not None and time.monotonic() - idle_since >= idle_timeout_s:
                break
            continue
        idle_since = time.monotonic()
        # A fetch may bring more than was asked for: the limit is counted per record.
        for record in records[:left]:
            print(show(record), flush=True)
            shown += 1
    return shown
