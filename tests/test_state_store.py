"""The local copy of the state changelog (worker.state_store): an SQLite cache, per partition."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from worker.lifecycle import DocumentState
from worker.state_store import StateStore, encode_state, open_store

A = DocumentState(3, 1, bytes(16))
B = DocumentState(7, None, bytes(range(32)))
MARKER = DocumentState(9, None, b"", deleted=True)


def test_states_by_partition_and_document_pending_writes_read_back(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "s.sqlite")
    store.put(0, "doc", A)
    store.put(1, "doc", B)
    assert store.get(0, "doc") == A  # pending, not yet in SQLite
    assert store.get(1, "doc") == B
    assert store.get(2, "doc") is None
    store.flush()
    store.close()
    again = StateStore(tmp_path / "s.sqlite")  # what a process left behind
    assert again.get(0, "doc") == A
    assert again.count(0) == again.count(1) == 1


def test_remove_only_the_given_states_offset(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "s.sqlite")
    store.put(0, "doc", B)
    assert not store.remove(0, "doc", offset=3)  # a newer state stays
    assert store.get(0, "doc") == B
    assert store.remove(0, "doc", offset=7)
    assert store.get(0, "doc") is None


def test_apply_changelog_records_in_order_with_tombstones(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "s.sqlite")
    records = [
        ("a", encode_state(A)),
        ("b", encode_state(B)),
        ("a", None),  # a tombstone: forgotten
        ("c", encode_state(MARKER)),
        ("b", encode_state(A)),  # the later record of b wins
    ]
    assert store.apply(4, records) == 5
    assert store.get(4, "a") is None
    assert store.get(4, "b") == A
    assert store.count(4) == 1  # markers are not live documents
    assert store.markers(4) == [("c", 9)]


def test_checkpoints_are_per_partition_and_dropped_with_its_rows(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "s.sqlite")
    store.put(0, "doc", A)
    store.set_checkpoint(0, 42)
    store.set_checkpoint(1, 7)
    assert store.checkpoint(0) == 42
    store.clear_checkpoint(0)
    assert store.checkpoint(0) is None
    store.drop_partition(1)
    assert store.checkpoint(1) is None
    assert store.get(0, "doc") == A


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
            "import sys, time; from worker.state_store import open_store; "
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
