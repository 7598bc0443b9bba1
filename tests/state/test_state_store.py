"""The local copy of the state changelog (worker.state.store): an SQLite cache, per partition."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from worker.state.sqlite_store import SWEEP_AFTER_S, TEMPORARY_PREFIX, SqliteStateStore, open_store
from worker.wire.state_record import (
    DocumentState,
    encode_state,
    head_of,
    part_bytes,
    part_key,
    split_state,
)

A = DocumentState(3, 1, bytes(16))
B = DocumentState(7, None, bytes(range(32)))
MARKER = DocumentState(9, None, b"", deleted=True)


def test_states_by_partition_and_document_pending_writes_read_back(tmp_path: Path) -> None:
    store = SqliteStateStore(tmp_path / "s.sqlite")
    store.put(0, "doc", A)
    store.put(1, "doc", B)
    assert store.get(0, "doc") == A  # pending, not yet in SQLite
    assert store.get(1, "doc") == B
    assert store.get(2, "doc") is None
    store.flush()
    store.close()
    again = SqliteStateStore(tmp_path / "s.sqlite")  # what a process left behind
    assert again.get(0, "doc") == A
    assert again.count(0) == again.count(1) == 1


def test_a_store_file_of_the_release_before_split_states_opens_with_its_rows(
    tmp_path: Path,
) -> None:
    """A kept state directory from before split states: its tables (no part table) and rows
    (five-field states) are read as they are, and split states are then kept beside them."""
    path = tmp_path / "s.sqlite"
    db = sqlite3.connect(path)
    db.executescript(
        """
        CREATE TABLE state (
            part INTEGER NOT NULL, doc_id TEXT NOT NULL, offset INTEGER NOT NULL,
            deleted INTEGER NOT NULL, value BLOB NOT NULL, PRIMARY KEY (part, doc_id)
        ) WITHOUT ROWID;
        CREATE TABLE checkpoint (
            part INTEGER PRIMARY KEY, next_offset INTEGER NOT NULL, written_at REAL NOT NULL
        );
        """
    )
    old = DocumentState(7, 2, bytes(range(32)), retracted=bytes(16))
    db.execute("INSERT INTO state VALUES (0, 'doc', 7, 0, ?)", (encode_state(old),))
    db.execute("INSERT INTO checkpoint VALUES (0, 12, ?)", (time.time(),))
    db.commit()
    db.close()
    store = SqliteStateStore(path)
    assert store.get(0, "doc") == old
    assert store.checkpoint(0) == 12
    big = DocumentState(9, 3, os.urandom(16 * 20_000))
    whole, parts = split_state(big, part_bytes(1024 * 1024 - 1024))
    records = [(part_key("big", d), v) for d, v in zip(whole.digests, parts, strict=True)]
    records.append((b"big", encode_state(head_of(whole))))
    store.apply(0, records)
    assert store.get(0, "big") == whole
    assert store.get(0, "doc") == old


def test_remove_only_the_given_states_offset(tmp_path: Path) -> None:
    store = SqliteStateStore(tmp_path / "s.sqlite")
    store.put(0, "doc", B)
    assert not store.remove(0, "doc", offset=3)  # a newer state stays
    assert store.get(0, "doc") == B
    assert store.remove(0, "doc", offset=7)
    assert store.get(0, "doc") is None


def test_apply_changelog_records_in_order_with_tombstones(tmp_path: Path) -> None:
    store = SqliteStateStore(tmp_path / "s.sqlite")
    records = [
        (b"a", encode_state(A)),
        (b"b", encode_state(B)),
        (b"a", None),  # a tombstone: forgotten
        (b"c", encode_state(MARKER)),
        (b"b", encode_state(A)),  # the later record of b wins
    ]
    assert store.apply(4, records) == 5
    assert store.get(4, "a") is None
    assert store.get(4, "b") == A
    assert store.count(4) == 1  # markers are not live documents
    assert store.markers(4) == [("c", 9)]


def test_checkpoints_are_per_partition_and_dropped_with_its_rows(tmp_path: Path) -> None:
    store = SqliteStateStore(tmp_path / "s.sqlite")
    store.put(0, "doc", A)
    store.set_checkpoint(0, 42)
    store.set_checkpoint(1, 7)
    assert store.checkpoint(0) == 42
    store.clear_checkpoint(0)
    assert store.checkpoint(0) is None
    store.drop_partition(1)
    assert store.checkpoint(1) is None
    assert store.get(0, "doc") == A


def test_checkpoints_are_dated_and_a_file_without_dates_trusts_none(tmp_path: Path) -> None:
    store = SqliteStateStore(tmp_path / "s.sqlite")
    before = time.time()
    store.set_checkpoint(0, 42)
    written = store.checkpoint_written(0)
    assert written is not None
    assert before <= written <= time.time()
    store.set_checkpoint(0, 43, written_at=1000.0)
    assert (store.checkpoint(0), store.checkpoint_written(0)) == (43, 1000.0)
    store.close()
    # A store file of an earlier release: checkpoints without a date, which restore cannot
    # tell from one written before a delete marker's tombstone was compacted away.
    old = sqlite3.connect(tmp_path / "old.sqlite")
    old.executescript(
        "CREATE TABLE checkpoint (part INTEGER PRIMARY KEY, next_offset INTEGER NOT NULL);"
        "INSERT INTO checkpoint VALUES (0, 42);"
    )
    old.close()
    reopened = SqliteStateStore(tmp_path / "old.sqlite")
    assert reopened.checkpoint(0) is None
    reopened.set_checkpoint(0, 7)
    assert reopened.checkpoint(0) == 7
    reopened.close()


def test_a_kept_directory_is_reused_unless_another_process_holds_it(tmp_path: Path) -> None:
    first = open_store(str(tmp_path), "group/with:odd chars")
    first.put(0, "doc", A)
    first.set_checkpoint(0, 5)
    assert first.path.parent.parent == tmp_path
    # Another process holding the directory's lock makes us use a fresh store of our own.
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from worker.state.sqlite_store import open_store; "
            f"open_store({str(tmp_path)!r}, 'other'); print('held', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        second = open_store(str(tmp_path), "other")
        assert second.path.parent.parent != tmp_path
        assert second.checkpoint(0) is None
    finally:
        holder.kill()
        holder.wait()
        assert holder.stdout is not None
        holder.stdout.close()


def test_an_unreadable_store_file_is_rebuilt(tmp_path: Path) -> None:
    directory = tmp_path / "g"
    directory.mkdir()
    (directory / "store.sqlite").write_bytes(b"not a database" * 100)
    store = open_store(str(tmp_path), "g")
    assert store.get(0, "doc") is None
    store.put(0, "doc", A)
    assert store.get(0, "doc") == A


def _hold_temporary_store(scratch: Path) -> subprocess.Popen[str]:
    """A process that opens a temporary store under ``scratch`` and keeps running."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import pathlib, time; from worker.state.sqlite_store import open_store; "
            f"s = open_store(None, 'g', scratch=pathlib.Path({str(scratch)!r})); "
            "print(s.path.parent, flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None
    return holder


def _backdate(directory: Path) -> None:
    old = time.time() - 10 * SWEEP_AFTER_S
    os.utime(directory, (old, old))


def test_a_temporary_store_is_removed_when_it_closes(tmp_path: Path) -> None:
    store = open_store(None, "g", scratch=tmp_path)
    store.put(0, "doc", A)
    assert store.get(0, "doc") == A
    directory = store.path.parent
    assert directory.parent == tmp_path
    assert directory.is_dir()
    store.close()
    assert not directory.exists()
    assert list(tmp_path.iterdir()) == []


def test_a_killed_process_temporary_store_is_swept_by_the_next_one(tmp_path: Path) -> None:
    killed = _hold_temporary_store(tmp_path)
    alive = _hold_temporary_store(tmp_path)
    try:
        assert killed.stdout is not None
        assert alive.stdout is not None
        killed_dir = Path(killed.stdout.readline().strip())
        alive_dir = Path(alive.stdout.readline().strip())
        killed.send_signal(signal.SIGKILL)
        killed.wait()
        foreign = tmp_path / f"{TEMPORARY_PREFIX}not-ours"  # no lock file: not made by us
        foreign.mkdir()
        for directory in (killed_dir, alive_dir, foreign):
            assert directory.is_dir()
            _backdate(directory)
        young = _hold_temporary_store(tmp_path)  # lock free once killed, but too young
        assert young.stdout is not None
        young_dir = Path(young.stdout.readline().strip())
        young.send_signal(signal.SIGKILL)
        young.wait()
        young.stdout.close()
        now = time.time()  # touched just before the sweep: a full SWEEP_AFTER_S of margin
        os.utime(young_dir, (now, now))

        store = open_store(None, "g", scratch=tmp_path)
        assert not killed_dir.exists()  # its process is gone: swept
        assert alive_dir.is_dir()  # its process holds the lock
        assert foreign.is_dir()  # not ours to judge
        assert young_dir.is_dir()  # may not be locked yet by its maker
        store.close()
    finally:
        for process in (killed, alive):
            process.kill()
            process.wait()
            assert process.stdout is not None
            process.stdout.close()
