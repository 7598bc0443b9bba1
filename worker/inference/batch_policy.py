"""The micro-batching policy: which waiting texts form the next batch, and when. No I/O.

Fed with ``add(key, length, now)`` and polled with ``next_batch(now)``; time is passed in, so
tests drive it with plain numbers. The asyncio driver (:mod:`worker.inference.batcher`) and the
synchronous adapter both sit on top of it.

Packing: waiting texts are kept sorted by token length, and cut greedily into consecutive groups
whose *padded* size — longest length × count — stays within ``max_batch_tokens`` (and at most
``max_batch_size`` texts). Neighbours in length order pad each other least. A group is emitted
when it is full, or when the oldest waiting text has waited ``max_wait`` seconds — then the group
holding that text goes, full or not, so no text waits much longer than ``max_wait`` plus one
inference.
"""

from __future__ import annotations

import bisect
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True, slots=True)
class _Waiting(Generic[K]):
    key: K
    length: int
    arrived: float


@dataclass(frozen=True, slots=True)
class Batch(Generic[K]):
    """Keys of the texts to run together, shortest first, with their token lengths."""

    keys: list[K]
    lengths: list[int]

    @property
    def padded_length(self) -> int:
        return max(self.lengths)

    @property
    def real_tokens(self) -> int:
        return sum(self.lengths)

    @property
    def padded_tokens(self) -> int:
        return self.padded_length * len(self.lengths)


class BatchPolicy(Generic[K]):
    """Token-budget, length-sorted batching with a deadline for the oldest waiting text."""

    def __init__(self, *, max_batch_tokens: int, max_batch_size: int, max_wait: float) -> None:
        if max_batch_tokens < 1 or max_batch_size < 1:
            raise ValueError("max_batch_tokens and max_batch_size must be at least 1")
        if max_wait < 0:
            raise ValueError("max_wait must not be negative")
        self.max_batch_tokens = max_batch_tokens
        self.max_batch_size = max_batch_size
        self.max_wait = max_wait
        self._seq = 0
        # Arrival order (dicts keep insertion order): the first entry is the oldest text.
        self._waiting: dict[int, _Waiting[K]] = {}
        self._seq_of: dict[K, int] = {}
        # (length, seq) ascending: the packing order.
        self._by_length: list[tuple[int, int]] = []
        self._tokens = 0

    @property
    def queued_texts(self) -> int:
        return len(self._waiting)

    @property
    def queued_tokens(self) -> int:
        return self._tokens

    def add(self, key: K, length: int, now: float) -> None:
        if key in self._seq_of:
            raise ValueError(f"key {key!r} is already waiting")
        length = max(1, length)  # an empty text still occupies a row ([CLS] [SEP] at least)
        self._seq += 1
        self._waiting[self._seq] = _Waiting(key, length, now)
        self._seq_of[key] = self._seq
        bisect.insort(self._by_length, (length, self._seq))
        self._tokens += length

    def remove(self, keys: Iterable[K]) -> int:
        """Forget waiting texts (their request was cancelled or failed); returns how many."""
        removed = 0
        for key in keys:
            seq = self._seq_of.pop(key, None)
            if seq is None:
                continue
            item = self._waiting.pop(seq)
            del self._by_length[bisect.bisect_left(self._by_length, (item.length, seq))]
            self._tokens -= item.length
            removed += 1
        return removed

    def next_deadline(self) -> float | None:
        """When the oldest waiting text is due, or None when nothing waits."""
        oldest = next(iter(self._waiting.values()), None)
        return None if oldest is None else oldest.arrived + self.max_wait

    def next_batch(self, now: float, *, flush: bool = False) -> Batch[K] | None:
        """The batch to run now, removed from the queue; None if waiting is better.

        ``flush`` treats every text as due (shutdown, or a caller that has everything at once).
        """
        if not self._waiting:
            return None
        groups = self._groups()
        oldest_seq, oldest = next(iter(self._waiting.items()))
        oldest_pos = bisect.bisect_left(self._by_length, (oldest.length, oldest_seq))
        holding_oldest = next(g for g in groups if g[0] <= oldest_pos < g[1])

        due = flush or now >= oldest.arrived + self.max_wait
        if due or self._is_full(holding_oldest):
            return self._take(holding_oldest)
        full = [g for g in groups if self._is_full(g)]
        if not full:
            return None
        # Of the full groups, serve the one whose earliest text arrived first.
        earliest = min(full, key=lambda g: min(seq for _, seq in self._by_length[g[0] : g[1]]))
        return self._take(earliest)

    def _groups(self) -> list[tuple[int, int]]:
        """Greedy cut of the length-sorted queue into ``[start, end)`` groups within budget."""
        groups = []
        start = 0
        n = len(self._by_length)
        while start < n:
            end = start + 1  # one text always forms a batch, even one over the token budget
            while (
                end < n
                and end - start < self.max_batch_size
                and self._by_length[end][0] * (end - start + 1) <= self.max_batch_tokens
            ):
                end += 1
            groups.append((start, end))
            start = end
        return groups

    def _is_full(self, group: tuple[int, int]) -> bool:
        """No text as long as the group's longest could still join it.

        A group the greedy cut closed only because the *next, longer* text did not fit is not
        full: a later text of similar length would still fit in, and waiting for it is cheap.
        """
        start, end = group
        count = end - start
        if count >= self.max_batch_size:
            return True
        return self._by_length[end - 1][0] * (count + 1) > self.max_batch_tokens

    def _take(self, group: tuple[int, int]) -> Batch[K]:
        start, end = group
        taken = self._by_length[start:end]
        del self._by_length[start:end]
        keys, lengths = [], []
        for length, seq in taken:
            item = self._waiting.pop(seq)
            del self._seq_of[item.key]
            keys.append(item.key)
            lengths.append(length)
            self._tokens -= length
        return Batch(keys, lengths)


@dataclass
class Watermark:
    """Hysteresis on a queue level: *over* from ``high`` up, back *under* at ``low`` or below.

    The gap keeps a consumer from pausing and resuming its partitions on every batch.
    """

    high: int
    low: int
    over: bool = False

    def __post_init__(self) -> None:
        if not 0 <= self.low <= self.high:
            raise ValueError(f"need 0 <= low ({self.low}) <= high ({self.high})")

    def update(self, level: int) -> bool:
        """Feed the current level; True when the state flipped."""
        if not self.over and level >= self.high:
            self.over = True
            return True
        if self.over and level <= self.low:
            self.over = False
            return True
        return False
