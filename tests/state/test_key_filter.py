"""The Bloom filter in front of the state store (worker.state.key_filter), and the store's answers
with it: never a stored state missed, whatever happened to the store."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worker.state.key_filter import KeyFilter
from worker.state.sqlite_store import SqliteStateStore
from worker.wire.state_record import DocumentState, encode_state


def test_every_added_key_is_found_and_few_others_are() -> None:
    rng = random.Random(7)
    keys = [(rng.randrange(12), f"doc-{rng.getrandbits(64):x}") for _ in range(200_000)]
    seen = KeyFilter()
    for partition, doc_id in keys:
        seen.add(partition, doc_id)
    assert all(seen.may_hold(p, d) for p, d in keys)
    strangers = [(p, d + "-other") for p, d in keys[:100_000]]
    false = sum(seen.may_hold(p, d) for p, d in strangers)
    # Two bits of 2**24 per key, 200,000 keys: (1 - e^(-2*2e5/2**24))^2 = 0.06 %.
    assert false / len(strangers) < 0.005


operations = st.lists(
    st.tuples(
        st.sampled_from(["put", "flush", "remove", "apply", "tombstone", "reopen"]),
        st.integers(0, 2),
        st.sampled_from(["a", "b", "c", "doc", "é"]),
        st.integers(0, 50),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(ops=operations)
def test_the_store_answers_like_a_dictionary(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, int, str, int]]
) -> None:
    path = tmp_path_factory.mktemp("store") / "s.sqlite"
    store = SqliteStateStore(path)
    model: dict[tuple[int, str], DocumentState] = {}
    for op, partition, doc_id, offset in ops:
        state = DocumentState(offset, None, bytes([offset]) * 16)
        if op == "put":
            store.put(partition, doc_id, state)
            model[(partition, doc_id)] = state
        elif op == "flush":
            store.flush()
        elif op == "remove":
            store.remove(partition, doc_id)
            model.pop((partition, doc_id), None)
        elif op == "apply":
            store.apply(partition, [(doc_id.encode(), encode_state(state))])
            model[(partition, doc_id)] = state
        elif op == "tombstone":
            store.apply(partition, [(doc_id.encode(), None)])
            model.pop((partition, doc_id), None)
        else:  # another process opens what this one left behind
            store.close()
            store = SqliteStateStore(path)
        for (p, d), expected in model.items():
            assert store.get(p, d) == expected
    for p in range(3):
        for d in ["a", "b", "c", "doc", "é", "never"]:
            assert store.get(p, d) == model.get((p, d))
