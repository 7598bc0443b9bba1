"""The state changelog's records: what the worker remembers of one document, as it goes over
Kafka (msgpack, arrays: fields only ever appended with defaults). Part of the wire contract
(``schemas/``'s DocumentState and DocumentStatePart), owned here so that the schema and the state
room share one definition.

A state whose ids fit :func:`part_bytes` goes out as one record keyed by the document id, as
every release wrote it. A larger one (a document of tens of thousands of chunks) is split
(:func:`split_state`): its ids go out in *parts*, each keyed by the document id, the byte 0xFF and
the digest of its value and its state's input offset, then a *head* keyed by the document id
that names the parts' digests in order. 0xFF never occurs in UTF-8, so a part's key is never a
document's. A part's key changes with its content and its record, so no write overwrites a part
another head names with anything else: a head's parts stay in the compacted log until a later
head no longer names them (worker.state.writing).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import msgspec

# Chunk ids are 32 hex digits; the state keeps the ID_BYTES they spell.
ID_BYTES = 16
# A part's digest, in its key and in the head's ``parts``.
DIGEST_BYTES = 16
PART_MARK = b"\xff"
# Most id bytes a record of the state holds: a third of the room a record leaves for its value
# keeps a part far from the limit, with its key and framing, at any CHUNKSTREAM_MAX_RECORD_BYTES;
# capped so that a state splits well below the broker's default max.message.bytes whatever
# the setting.
_MAX_PART_BYTES = 16_384 * ID_BYTES


class DocumentState(msgspec.Struct, frozen=True, array_like=True):
    """What the worker remembers of one document (the changelog record's value, msgpack)."""

    offset: int  # input offset of the record this state came from
    version: str | int | None  # the document's version field then
    chunk_ids: bytes  # the ids of its chunk events, ID_BYTES each, in index order
    deleted: bool = False  # a delete marker: kept until no replay can reach its offset
    # The chunk ids that record tombstoned (ID_BYTES each): doing it again after a crash must
    # tombstone them again, and by then the state before it is gone. Empty for most records
    # (a new document retracts nothing); states written before this field decode with it empty.
    retracted: bytes = b""
    # The digests (DIGEST_BYTES each) of the parts holding this state's ids, in order, when
    # they did not fit one record; empty for most states and for states written before this
    # field. A head read from the changelog has them and no ids of its own (:func:`is_head`);
    # the store gives the state whole, its ids joined from its parts, with ``parts`` kept so the
    # next write knows which parts it replaces.
    parts: bytes = b""

    @property
    def ids(self) -> list[str]:
        return ids_from_bytes(self.chunk_ids)

    @property
    def retracted_ids(self) -> list[str]:
        return ids_from_bytes(self.retracted)

    @property
    def digests(self) -> list[bytes]:
        return [self.parts[i : i + DIGEST_BYTES] for i in range(0, len(self.parts), DIGEST_BYTES)]


class DocumentStatePart(msgspec.Struct, frozen=True, array_like=True):
    """A slice of a split state's ids (the value of a part record, msgpack): the head joins its
    parts' ``chunk_ids``, then their ``retracted``, in the order it names them."""

    chunk_ids: bytes
    retracted: bytes = b""


def ids_to_bytes(ids: Sequence[str]) -> bytes:
    return bytes.fromhex("".join(ids))  # one call: the same bytes as id by id


def ids_from_bytes(data: bytes) -> list[str]:
    return [data[i : i + ID_BYTES].hex() for i in range(0, len(data), ID_BYTES)]


_DECODE = msgspec.msgpack.Decoder(DocumentState)
_DECODE_PART = msgspec.msgpack.Decoder(DocumentStatePart)
_ENCODE = msgspec.msgpack.Encoder().encode


def encode_state(state: DocumentState) -> bytes:
    """The changelog record's value. A state that is not split is written without ``parts``,
    byte for byte as releases before split states wrote it."""
    if state.parts:
        return _ENCODE(state)
    return _ENCODE((state.offset, state.version, state.chunk_ids, state.deleted, state.retracted))


def decode_state(value: bytes) -> DocumentState:
    return _DECODE.decode(value)


def decode_part(value: bytes) -> DocumentStatePart:
    return _DECODE_PART.decode(value)


def part_bytes(max_value_bytes: int) -> int:
    """The most id bytes one record of the state carries, for record values of at most
    ``max_value_bytes`` (the publisher's ``max_value_bytes``)."""
    return min(_MAX_PART_BYTES, max_value_bytes // 3 // ID_BYTES * ID_BYTES)


def part_key(doc_id: str, digest: bytes) -> bytes:
    return doc_id.encode() + PART_MARK + digest


def split_key(key: bytes) -> tuple[str, bytes | None]:
    """A changelog key as (document id, the part's digest or None for a state or a head).
    Raises UnicodeDecodeError for a key that is neither."""
    if len(key) > DIGEST_BYTES and key[-DIGEST_BYTES - 1] == PART_MARK[0]:
        return key[: -DIGEST_BYTES - 1].decode(), key[-DIGEST_BYTES:]
    return key.decode(), None


def is_head(state: DocumentState) -> bool:
    """A state as the changelog holds it when it was split: its ids are in its parts."""
    return bool(state.parts) and not state.chunk_ids and not state.retracted


def split_state(state: DocumentState, max_bytes: int) -> tuple[DocumentState, list[bytes]]:
    """The state as it is remembered (``parts`` set when it is split) and the values of its part
    records in order (none when its ids fit ``max_bytes``, a multiple of ID_BYTES). The head to
    send is :func:`head_of` the former."""
    ids, retracted = state.chunk_ids, state.retracted
    if len(ids) + len(retracted) <= max_bytes:
        return (state if not state.parts else msgspec.structs.replace(state, parts=b"")), []
    values = []
    joined = ids + retracted
    for start in range(0, len(joined), max_bytes):
        end = start + max_bytes
        own = joined[start : min(end, len(ids))] if start < len(ids) else b""
        theirs = joined[max(start, len(ids)) : end] if end > len(ids) else b""
        values.append(_ENCODE(DocumentStatePart(own, theirs)))
    parts = b"".join(digest(state.offset, value) for value in values)
    return msgspec.structs.replace(state, parts=parts), values


def head_of(state: DocumentState) -> DocumentState:
    """The head record of a split state: everything but its ids."""
    return msgspec.structs.replace(state, chunk_ids=b"", retracted=b"")


def digest(offset: int, value: bytes) -> bytes:
    """A part's digest: of its value and its state's input offset, so that only a state of the
    same record (done again) ever names a part another state named."""
    salt = offset.to_bytes(16, "big", signed=True)
    return hashlib.blake2b(value, digest_size=DIGEST_BYTES, salt=salt).digest()


def join_parts(head: DocumentState, values: Sequence[bytes]) -> DocumentState:
    """The whole state from its head and its parts' values, in the head's order."""
    parts = [decode_part(value) for value in values]
    return msgspec.structs.replace(
        head,
        chunk_ids=b"".join(p.chunk_ids for p in parts),
        retracted=b"".join(p.retracted for p in parts),
    )
