"""Kafka at the edge: the only place that constructs clients, the topics the worker needs,
whether Kafka can be reached (decided without I/O in ``connectivity``, watched in
``reachability``), the producer replaced when it can no longer deliver, and the publisher that
writes a document's records in order to one partition.
"""
