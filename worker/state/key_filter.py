"""A Bloom filter of document keys: "certainly never stored" without asking the store.

Why: the document lifecycle asks the state store for every document it handles, and in a
stream of new documents the answer is nearly always "nothing". SQLite answers that in a few
microseconds, but it releases the GIL around every query, and taking it back waits out the
interpreter's switch interval whenever another thread (a chunking thread on a large document)
holds it: in the worker the lookups were then the largest single cost the lifecycle adds per
document (bench/e2e_bench.py; docs/benchmarks.md). RocksDB puts a Bloom filter in front of its
tables for the same question.

Invariants: a key added is always found (``may_hold`` is True); a key never added is found
with a small probability (false positives only cost the lookup they would have made anyway).
Keys are never removed (a Bloom filter cannot forget), so the share of false positives grows
with every key the process has seen: ``BITS`` keep it small up to millions of documents and
give no wrong answer at any size. Python's ``hash`` is salted per process: the filter lives and
dies with the process, and is rebuilt from the store's keys when a store file is reopened.
"""

from __future__ import annotations

BITS = 1 << 24
_MASK = BITS - 1


class KeyFilter:
    """Two bit positions per key, both taken from one 64-bit ``hash``."""

    __slots__ = ("_bits",)

    def __init__(self) -> None:
        self._bits = bytearray(BITS // 8)

    def add(self, partition: int, doc_id: str) -> None:
        bits = self._bits
        h = hash((partition, doc_id))
        low, high = h & _MASK, (h >> 32) & _MASK
        bits[low >> 3] |= 1 << (low & 7)
        bits[high >> 3] |= 1 << (high & 7)

    def may_hold(self, partition: int, doc_id: str) -> bool:
        bits = self._bits
        h = hash((partition, doc_id))
        low, high = h & _MASK, (h >> 32) & _MASK
        return bool(bits[low >> 3] >> (low & 7) & 1 and bits[high >> 3] >> (high & 7) & 1)
