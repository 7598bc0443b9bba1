"""Tests of worker.state: per-document state, its store, changelog and unconfirmed states."""
