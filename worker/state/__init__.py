"""Per-document state, the Kafka Streams way.

What a new version or a tombstone does given what is remembered (``decisions``, pure); the
state staged beside the outputs and applied once acked (``documents``); the local store behind
a small Protocol (``store``: SQLite, a cache of the compacted changelog); the changelog read
back on assignment (``changelog``, ``restores``); which restored states a previous owner may
not have finished (``unconfirmed``).
"""
