"""The state changelog's records: a state that fits one record is written as every release
wrote it, a larger one splits into parts and a head that join back to it, and a part's key is
never a document's."""

from __future__ import annotations

import os

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from worker.wire.state_record import (
    DIGEST_BYTES,
    DocumentState,
    decode_state,
    encode_state,
    head_of,
    is_head,
    join_parts,
    part_bytes,
    part_key,
    split_key,
    split_state,
)


@pytest.mark.parametrize(
    "state",
    [
        DocumentState(7, None, os.urandom(32)),
        DocumentState(2**40, "v-3", os.urandom(16 * 300), retracted=os.urandom(48)),
        DocumentState(9, 4, b"", deleted=True, retracted=os.urandom(160)),
    ],
)
def test_a_state_that_fits_one_record_is_written_as_before_split_states(
    state: DocumentState,
) -> None:
    """The five-element array earlier releases wrote, byte for byte (the msgpack library's
    encoding of it), so the contract's state topic does not change; it decodes to itself."""
    before = msgpack.packb(
        [state.offset, state.version, state.chunk_ids, state.deleted, state.retracted],
        use_bin_type=True,
    )
    assert encode_state(state) == before
    assert decode_state(before) == state


@pytest.mark.parametrize(
    ("ids", "retracted"),
    [(5000, 0), (0, 3000), (1023, 1), (1024, 1024), (4097, 2500), (16_384, 16_384)],
)
def test_a_large_state_splits_into_parts_and_a_head_that_join_back_to_it(
    ids: int, retracted: int
) -> None:
    limit = 64 * 1024
    room = part_bytes(limit)
    state = DocumentState(12, 3, os.urandom(16 * ids), retracted=os.urandom(16 * retracted))
    whole, values = split_state(state, room)
    if 16 * (ids + retracted) <= room:
        assert (whole, values) == (state, [])
        return
    assert len(values) == -(-16 * (ids + retracted) // room)
    assert all(len(v) <= room + 16 for v in values)  # framing: a few bytes per part
    assert len(whole.digests) == len(values)
    head = head_of(whole)
    assert is_head(head)
    assert not is_head(whole)
    assert len(encode_state(head)) < 64 + DIGEST_BYTES * len(values)
    # The head as the changelog carries it, then its parts, give the state back.
    joined = join_parts(decode_state(encode_state(head)), values)
    assert (joined.chunk_ids, joined.retracted) == (state.chunk_ids, state.retracted)
    assert joined == whole
    assert joined.ids == state.ids


def test_a_parts_digest_is_of_its_value_and_its_states_record() -> None:
    """The same ids in a state of another record name other parts (a later state never names a
    part an earlier one did); the same record done again names the same parts."""
    ids = os.urandom(16 * 3000)
    room = part_bytes(64 * 1024)
    first, _ = split_state(DocumentState(5, None, ids), room)
    again, _ = split_state(DocumentState(5, None, ids), room)
    later, _ = split_state(DocumentState(6, None, ids), room)
    assert first.parts == again.parts
    assert not set(first.digests) & set(later.digests)


@given(st.text(min_size=0, max_size=40), st.binary(min_size=DIGEST_BYTES, max_size=DIGEST_BYTES))
def test_a_parts_key_is_never_a_documents_key(doc_id: str, digest: bytes) -> None:
    assert split_key(part_key(doc_id, digest)) == (doc_id, digest)
    assert split_key(doc_id.encode()) == (doc_id, None)  # whatever the id ends with


def test_part_size_leaves_room_at_every_record_limit() -> None:
    """At the default record limit a part holds 16,384 ids; at any limit, at most a third of
    the value's room; above the default, no more than at it."""
    for limit in (64 * 1024, 100_000, 1024 * 1024, 8 * 1024 * 1024):
        value_room = limit - 1024  # worker.kafka.publisher's overhead per record
        room = part_bytes(value_room)
        assert room % 16 == 0
        assert 0 < room <= value_room // 3
    assert part_bytes(1024 * 1024 - 1024) == 16_384 * 16
    assert part_bytes(8 * 1024 * 1024) == part_bytes(1024 * 1024)  # capped: well below 1 MB
