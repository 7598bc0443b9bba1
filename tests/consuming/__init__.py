"""Tests of worker.consuming: the consume loop, offsets, backpressure and unreadable batches
(over fake clients; the real broker's twins are in tests/broker)."""
