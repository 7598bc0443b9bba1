"""Consuming the input topic: the consume loop and what it decides with.

The loop fetches, starts documents, pauses and resumes partitions under backpressure, commits
the contiguous prefix of finished offsets, drains on revoke and shutdown, holds what the client
had buffered at a pause (``prefetch``) and skips record batches the client cannot read. The
client is reached through the small Protocol in ``client``.
"""
