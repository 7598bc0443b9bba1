"""Tests of worker.wire: the event contract, its codecs, schemas, ids and trace context."""
