"""The state changelog's record: what the worker remembers of one document, as it goes over
Kafka (msgpack, an array: fields only ever appended with defaults). Part of the wire contract
(``schemas/``'s DocumentState), owned here so that the schema and the state room share one
definition.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

# Chunk ids are 32 hex digits; the state keeps the ID_BYTES they spell.
ID_BYTES = 16


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

    @property
    def ids(self) -> list[str]:
        return ids_from_bytes(self.chunk_ids)

    @property
    def retracted_ids(self) -> list[str]:
        return ids_from_bytes(self.retracted)


def ids_to_bytes(ids: Sequence[str]) -> bytes:
    return bytes.fromhex("".join(ids))  # one call: the same bytes as id by id


def ids_from_bytes(data: bytes) -> list[str]:
    return [data[i : i + ID_BYTES].hex() for i in range(0, len(data), ID_BYTES)]


_DECODE = msgspec.msgpack.Decoder(DocumentState)
_ENCODE = msgspec.msgpack.Encoder().encode


def encode_state(state: DocumentState) -> bytes:
    """The changelog record's value."""
    return _ENCODE(state)


def decode_state(value: bytes) -> DocumentState:
    return _DECODE.decode(value)
