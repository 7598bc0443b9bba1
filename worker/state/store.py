"""The state store the worker runs on: what it asks of the local copy of the state changelog.

The changelog topic is the truth; a store is a cache of it that answers "what does partition p
remember of document d" without holding every document in memory, plus a checkpoint per
partition saying up to which changelog offset its rows reflect the topic (written only on a
clean hand-over, cleared when the partition is taken again). ``open_store`` gives the SQLite
one (:mod:`worker.state.sqlite_store`); another store implements this Protocol.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

from worker.wire.state_record import DocumentState


class StateStore(Protocol):
    """Document states by (partition, document id), with per-partition checkpoints. Writes may
    wait in memory until :meth:`flush`; reads see them at once."""

    def close(self) -> None: ...

    def flush(self) -> None: ...

    def get(self, partition: int, doc_id: str) -> DocumentState | None:
        """The document's state whole: a split state's ids joined from its parts."""

    def put(
        self, partition: int, doc_id: str, state: DocumentState, encoded: bytes | None = None
    ) -> None:
        """``encoded``: the state's ``encode_state`` bytes when the caller has them."""

    def remove(self, partition: int, doc_id: str, *, offset: int | None = None) -> bool:
        """Forget a document (only the state of ``offset`` when given: a newer one stays);
        whether anything was removed."""

    def apply(
        self,
        partition: int,
        records: Iterable[tuple[bytes, bytes | None]],
        seen: Callable[[str, DocumentState | None], None] | None = None,
    ) -> int:
        """Apply changelog records (key, value) in order (a null value removes the document or
        the part); how many. A key is a document's or a part's (worker.wire.state_record
        ``split_key``). ``seen`` is told each document's record, decoded."""

    def drop_partition(self, partition: int) -> None:
        """Forget every row and the checkpoint of a partition."""

    def count(self, partition: int) -> int:
        """The live (not deleted) documents of a partition."""

    def live_between(self, partition: int, low: int, high: int) -> list[tuple[str, DocumentState]]:
        """The live documents whose state came from an input offset in ``[low, high)``, whole."""

    def markers(self, partition: int) -> list[tuple[str, int]]:
        """The delete markers of a partition: (document id, offset of the delete)."""

    def checkpoint(self, partition: int) -> int | None: ...

    def checkpoint_written(self, partition: int) -> float | None:
        """When the partition's checkpoint was written (seconds since the epoch)."""

    def set_checkpoint(
        self, partition: int, next_offset: int, *, written_at: float | None = None
    ) -> None:
        """Vouch that every row of the partition reflects the changelog up to ``next_offset``."""

    def clear_checkpoint(self, partition: int) -> None: ...
