"""The local copy of the document-state changelog in an embedded SQLite file: a cache rebuilt
from Kafka, never the source of truth (the :class:`~worker.state.store.StateStore` the worker runs
on).

Invariants:

- The changelog topic (compacted, co-partitioned with the input: worker.state.changelog) is the
  truth;
  this store only answers "what does partition p remember of document d" quickly without
  holding millions of documents in memory. Memory is SQLite's page cache (bounded below), the
  data is on disk.
- A partition's rows are trusted only when they were restored from the changelog on
  assignment, or when a *checkpoint* says up to which changelog offset they reflect it. A
  checkpoint is written only when the partition is let go cleanly (every state write acked and
  applied), and deleted as soon as the partition is taken again, so a crash between the two
  leaves no checkpoint and the next assignment restores from the beginning (as Kafka Streams
  does with its ``.checkpoint`` file under at-least-once).
- A split state (worker.wire.state_record) is kept whole when the worker writes it, and as its
  head and its parts when a restore reads it: the parts come before their head in the changelog,
  but compaction may leave a later copy of a part behind the head, so the head is joined with its
  parts when it is read (:meth:`SqliteStateStore.get`), once the restore has read everything.
- One process owns a store file at a time (an exclusive lock); a second process pointed at the
  same directory gets a fresh file of its own.
- A fresh file lives in a temporary directory that is the process's alone: removed when the
  store closes, and — since a killed process cannot remove anything — swept by the next
  process that makes one, once no process holds its lock. Without this every pod restart (and
  every test run) left megabytes behind in the temporary directory for good.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from worker.state.key_filter import KeyFilter
from worker.wire.state_record import (
    DocumentState,
    decode_state,
    encode_state,
    is_head,
    join_parts,
    split_key,
)

# SQLite's page cache, the store's memory: negative = KiB (SQLite's convention).
CACHE_KIB = 16 * 1024
# Writes wait in memory and go to SQLite together, in one transaction: a transaction per
# document costs a noticeable share of a small document's whole way.
PENDING_WRITES = 1024

_Row = tuple[int, str, int, int, bytes]
_PART_TABLE = """
    CREATE TABLE IF NOT EXISTS part (
        part INTEGER NOT NULL, doc_id TEXT NOT NULL, digest BLOB NOT NULL, value BLOB NOT NULL,
        PRIMARY KEY (part, doc_id, digest)
    ) WITHOUT ROWID;
"""
_CHECKPOINT_TABLE = """
    CREATE TABLE IF NOT EXISTS checkpoint (
        part INTEGER PRIMARY KEY, next_offset INTEGER NOT NULL, written_at REAL NOT NULL
    );
"""


class SqliteStateStore:
    """Document states by (partition, document id), with per-partition checkpoints, in one
    SQLite file (a :class:`~worker.state.store.StateStore`)."""

    def __init__(self, path: Path, *, temporary: Path | None = None) -> None:
        self.path = path
        # A directory of this process's own, removed on close (see open_store).
        self._temporary = temporary
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        for pragma in (
            "journal_mode=WAL",  # a killed process leaves a readable file behind
            "synchronous=OFF",  # a cache: the changelog is the durable copy
            f"cache_size=-{CACHE_KIB}",
            "temp_store=FILE",
        ):
            self._db.execute(f"PRAGMA {pragma}")
        self._db.executescript(
            """
            CREATE TABLE IF NOT EXISTS state (
                part INTEGER NOT NULL, doc_id TEXT NOT NULL, offset INTEGER NOT NULL,
                deleted INTEGER NOT NULL, value BLOB NOT NULL, PRIMARY KEY (part, doc_id)
            ) WITHOUT ROWID;
            """
            + _PART_TABLE
            + _CHECKPOINT_TABLE
        )
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(checkpoint)")}
        if "written_at" not in columns:
            # A file from before checkpoints were dated: none of them can be trusted to be
            # recent enough (worker.state.changelog), so they go, and the next restores read all.
            self._db.executescript("DROP TABLE checkpoint;" + _CHECKPOINT_TABLE)
        self._counts: dict[int, int] = {}
        # (partition, document) → row to write, or None to delete; read before SQLite.
        self._pending: dict[tuple[int, str], _Row | None] = {}
        # Every key a row was ever written for (worker.state.key_filter): a new document's lookup
        # needs no query. A file left by an earlier process brings its keys along.
        self._written = KeyFilter()
        for partition, doc_id in self._db.execute("SELECT part, doc_id FROM state"):
            self._written.add(partition, doc_id)
        # Documents with part rows (restored split states): a write of theirs makes them stale.
        self._parted = set(self._db.execute("SELECT DISTINCT part, doc_id FROM part"))

    def close(self) -> None:
        self.flush()
        self._db.close()
        if self._temporary is not None:
            shutil.rmtree(self._temporary, ignore_errors=True)

    def flush(self) -> None:
        """Write the pending changes in one transaction."""
        if not self._pending:
            return
        pending, self._pending = self._pending, {}
        self._db.execute("BEGIN")
        try:
            self._upsert_many([row for row in pending.values() if row is not None])
            self._db.executemany(
                "DELETE FROM state WHERE part = ? AND doc_id = ?",
                [key for key, row in pending.items() if row is None],
            )
            self._forget_parts([key for key in pending if key in self._parted])
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    # -- documents --------------------------------------------------------------------------

    def get(self, partition: int, doc_id: str) -> DocumentState | None:
        key = (partition, doc_id)
        if key in self._pending:
            waiting = self._pending[key]
            return None if waiting is None else decode_state(waiting[4])
        if not self._written.may_hold(partition, doc_id):
            return None  # never written: certainly not in the file
        row = self._db.execute(
            "SELECT value FROM state WHERE part = ? AND doc_id = ?", (partition, doc_id)
        ).fetchone()
        return None if row is None else self._whole(partition, doc_id, decode_state(row[0]))

    def _whole(self, partition: int, doc_id: str, state: DocumentState) -> DocumentState:
        """``state`` with its ids, joined from its parts when it is a head."""
        if not is_head(state):
            return state
        found = dict(
            self._db.execute(
                "SELECT digest, value FROM part WHERE part = ? AND doc_id = ?",
                (partition, doc_id),
            )
        )
        missing = [d for d in state.digests if d not in found]
        if missing:
            raise StateIncomplete(
                f"the state of {doc_id!r} (partition {partition}) names {len(missing)} parts "
                "that its changelog does not hold: written by something else, or records were "
                "deleted from the topic"
            )
        return join_parts(state, [found[d] for d in state.digests])

    def _forget_parts(self, keys: list[tuple[int, str]]) -> None:
        """Drop the part rows of documents whose state was written or removed since."""
        if keys:
            self._db.executemany("DELETE FROM part WHERE part = ? AND doc_id = ?", keys)
            self._parted.difference_update(keys)

    def put(
        self, partition: int, doc_id: str, state: DocumentState, encoded: bytes | None = None
    ) -> None:
        """``encoded``: the state's :func:`encode_state` bytes when the caller has them."""
        self._pending[(partition, doc_id)] = (
            partition,
            doc_id,
            state.offset,
            int(state.deleted),
            encode_state(state) if encoded is None else encoded,
        )
        self._counts.pop(partition, None)
        if len(self._pending) >= PENDING_WRITES:
            self.flush()

    def remove(self, partition: int, doc_id: str, *, offset: int | None = None) -> bool:
        """Forget a document (only the state of ``offset`` when given: a newer one stays)."""
        self.flush()
        if offset is None:
            cursor = self._db.execute(
                "DELETE FROM state WHERE part = ? AND doc_id = ?", (partition, doc_id)
            )
        else:
            cursor = self._db.execute(
                "DELETE FROM state WHERE part = ? AND doc_id = ? AND offset = ?",
                (partition, doc_id, offset),
            )
        self._counts.pop(partition, None)
        if cursor.rowcount > 0 and (partition, doc_id) in self._parted:
            self._forget_parts([(partition, doc_id)])
        return cursor.rowcount > 0

    def apply(
        self,
        partition: int,
        records: Iterable[tuple[bytes, bytes | None]],
        seen: Callable[[str, DocumentState | None], None] | None = None,
    ) -> int:
        """Apply changelog records (key, value) in order (a null value removes the document or
        the part), in one transaction; returns how many. ``seen`` is told each document's
        record, decoded (a split state's head as it is, not its parts)."""
        self.flush()
        upserts: list[_Row] = []
        applied = 0
        self._db.execute("BEGIN")
        try:
            for key, value in records:
                applied += 1
                doc_id, part = split_key(key)
                if part is not None:
                    self._apply_part(partition, doc_id, part, value)
                    continue
                if value is None:
                    if upserts:
                        self._upsert_many(upserts)
                        upserts = []
                    self._db.execute(
                        "DELETE FROM state WHERE part = ? AND doc_id = ?", (partition, doc_id)
                    )
                    if seen is not None:
                        seen(doc_id, None)
                    continue
                state = decode_state(value)
                if seen is not None:
                    seen(doc_id, state)
                upserts.append((partition, doc_id, state.offset, int(state.deleted), value))
            if upserts:
                self._upsert_many(upserts)
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._counts.pop(partition, None)
        return applied

    def _apply_part(self, partition: int, doc_id: str, digest: bytes, value: bytes | None) -> None:
        if value is None:
            self._db.execute(
                "DELETE FROM part WHERE part = ? AND doc_id = ? AND digest = ?",
                (partition, doc_id, digest),
            )
            return
        self._db.execute(
            "INSERT OR REPLACE INTO part VALUES (?, ?, ?, ?)", (partition, doc_id, digest, value)
        )
        self._parted.add((partition, doc_id))

    def _upsert_many(self, rows: list[_Row]) -> None:
        written = self._written
        for row in rows:
            written.add(row[0], row[1])
        self._db.executemany(
            "INSERT INTO state VALUES (?, ?, ?, ?, ?) ON CONFLICT (part, doc_id) DO UPDATE SET"
            " offset = excluded.offset, deleted = excluded.deleted, value = excluded.value",
            rows,
        )

    def drop_partition(self, partition: int) -> None:
        self.flush()
        self._db.execute("DELETE FROM state WHERE part = ?", (partition,))
        self._db.execute("DELETE FROM part WHERE part = ?", (partition,))
        self._db.execute("DELETE FROM checkpoint WHERE part = ?", (partition,))
        self._parted = {key for key in self._parted if key[0] != partition}
        self._counts.pop(partition, None)

    def count(self, partition: int) -> int:
        cached = self._counts.get(partition)
        if cached is None:
            self.flush()
            (cached,) = self._db.execute(
                "SELECT count(*) FROM state WHERE part = ? AND deleted = 0", (partition,)
            ).fetchone()
            self._counts[partition] = cached
        return cached

    def live_between(self, partition: int, low: int, high: int) -> list[tuple[str, DocumentState]]:
        """The live (not deleted) documents of a partition whose state came from an input
        offset in ``[low, high)``: a scan of the partition's rows (rare: worker.state.documents's
        ``resend_lost``)."""
        self.flush()
        rows = self._db.execute(
            "SELECT doc_id, value FROM state WHERE part = ? AND deleted = 0 "
            "AND offset >= ? AND offset < ?",
            (partition, low, high),
        )
        return [
            (doc_id, self._whole(partition, doc_id, decode_state(value)))
            for doc_id, value in rows.fetchall()
        ]

    def markers(self, partition: int) -> list[tuple[str, int]]:
        """The delete markers of a partition: (document id, offset of the delete)."""
        self.flush()
        return list(
            self._db.execute(
                "SELECT doc_id, offset FROM state WHERE part = ? AND deleted = 1", (partition,)
            )
        )

    # -- checkpoints ------------------------------------------------------------------------

    def checkpoint(self, partition: int) -> int | None:
        row = self._db.execute(
            "SELECT next_offset FROM checkpoint WHERE part = ?", (partition,)
        ).fetchone()
        return None if row is None else int(row[0])

    def checkpoint_written(self, partition: int) -> float | None:
        """When the partition's checkpoint was written (seconds since the epoch)."""
        row = self._db.execute(
            "SELECT written_at FROM checkpoint WHERE part = ?", (partition,)
        ).fetchone()
        return None if row is None else float(row[0])

    def set_checkpoint(
        self, partition: int, next_offset: int, *, written_at: float | None = None
    ) -> None:
        self.flush()  # the checkpoint vouches for every row of the partition
        self._db.execute(
            "INSERT INTO checkpoint VALUES (?, ?, ?) ON CONFLICT (part) DO UPDATE SET"
            " next_offset = excluded.next_offset, written_at = excluded.written_at",
            (partition, next_offset, time.time() if written_at is None else written_at),
        )

    def clear_checkpoint(self, partition: int) -> None:
        self._db.execute("DELETE FROM checkpoint WHERE part = ?", (partition,))


class StateIncomplete(RuntimeError):
    """A split state whose parts are not all in the changelog (never written so by the worker:
    a head goes out only once its parts are acknowledged)."""


def open_store(
    state_dir: str | None, group_id: str, *, scratch: Path | None = None
) -> SqliteStateStore:
    """The store of this process: in ``state_dir`` (reused across restarts, checkpoints and
    all) when it names one that no other process holds; else in a fresh temporary directory
    under ``scratch`` (the system's temporary directory unless given)."""
    if state_dir:
        directory = Path(state_dir) / _safe(group_id)
        directory.mkdir(parents=True, exist_ok=True)
        lock = _try_lock(directory / LOCK_FILE)
        if lock is not None:
            # The lock lives as long as the process (the descriptor is never closed).
            return _open_or_rebuild(directory / "store.sqlite")
    return _temporary_store(Path(scratch or tempfile.gettempdir()))


LOCK_FILE = "store.lock"
TEMPORARY_PREFIX = "chunkstream-state-"
# A temporary directory younger than this is never swept: its maker may not hold its lock yet.
SWEEP_AFTER_S = 60.0


def _try_lock(path: Path) -> int | None:
    """An exclusive lock on ``path`` (its descriptor), or None if another process holds it."""
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _temporary_store(scratch: Path) -> SqliteStateStore:
    sweep_abandoned(scratch)
    directory = Path(tempfile.mkdtemp(prefix=TEMPORARY_PREFIX, dir=scratch))
    # Held until the process ends (closing the store removes the directory, lock file too).
    if _try_lock(directory / LOCK_FILE) is None:  # pragma: no cover - a fresh directory
        raise RuntimeError(f"cannot lock the fresh state directory {directory}")
    return SqliteStateStore(directory / "store.sqlite", temporary=directory)


def sweep_abandoned(scratch: Path) -> list[Path]:
    """Remove the temporary store directories under ``scratch`` that no living process holds
    (their process was killed before it could remove them); return them."""
    removed = []
    for directory in scratch.glob(f"{TEMPORARY_PREFIX}*"):
        lock_path = directory / LOCK_FILE
        try:
            if time.time() - directory.stat().st_mtime < SWEEP_AFTER_S or not lock_path.exists():
                continue  # too young to judge, or not made by this code
            lock = _try_lock(lock_path)
        except OSError:
            continue  # gone meanwhile, or not ours to open
        if lock is None:
            continue  # its process is alive
        try:
            shutil.rmtree(directory, ignore_errors=True)
            removed.append(directory)
        finally:
            os.close(lock)
    return removed


def _open_or_rebuild(path: Path) -> SqliteStateStore:
    """A store file left by an earlier process, or a new one if it cannot be read: it is only a
    cache, and without a checkpoint nothing in it is trusted anyway."""
    try:
        store = SqliteStateStore(path)
        store.count(-1)
        return store
    except sqlite3.DatabaseError:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        return SqliteStateStore(path)


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "group"
