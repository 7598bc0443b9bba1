"""Kafka at the edge: the only place that constructs clients, the topics the worker needs (and
waits for at start-up), whether Kafka can be reached (decided without I/O in ``link_policy``,
waited for and watched in ``link``), the member's standing in its group and the fence on its
writes (``membership``), the producer replaced when it can no longer deliver, and the publisher
that writes a document's records in order to one partition.
"""
