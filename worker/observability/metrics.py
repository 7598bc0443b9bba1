"""Prometheus metrics (one registry, every family defined here) and their recording points.

Names: prefix ``chunkstream_``, base units (seconds, bytes), ``_total`` on counters. Labels
are bounded: strategy names (a closed registry), dead-letter kinds (a closed set), partitions
of our own input topic. Histogram buckets are defined once, below.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, NamedTuple

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
)

from worker._version import __version__

if TYPE_CHECKING:
    from worker.runtime.resources import Budgets

# Buckets in one place (TEI-style): seconds for latencies, counts for batch shapes.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
LOOP_LAG_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)
BATCH_TEXT_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
BATCH_TOKEN_BUCKETS = (16, 64, 256, 512, 1024, 2048, 4096, 8192, 16384)
# Restoring a partition's document state from its changelog: seconds to minutes.
RESTORE_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)


class Totals(NamedTuple):
    """What a worker did since it started, read from its counters (the ``stopped`` log line)."""

    documents: int  # input records finished: completed, deleted, skipped or dead-lettered
    chunks: int  # chunk events acknowledged
    dead_letters: int
    rebalances: int  # partition assignments received


def _total(counter: Counter) -> int:
    """A counter's value summed over all its label values."""
    return int(
        sum(
            sample.value
            for family in counter.collect()
            for sample in family.samples
            if sample.name.endswith("_total")
        )
    )


class Metrics:
    """All families on a private registry, so tests and several workers in one process
    never collide on the global default registry."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry(auto_describe=True)
        p = "chunkstream_"
        self.build_info = Info(p + "build", "Worker version", registry=r)
        self.build_info.info({"version": __version__})
        self.model_info = Info(
            p + "model",
            "Embedding models in use, one per role (none if none)",
            ["role"],
            registry=r,
        )
        # Budgets the worker derived its threads and in-flight window from
        # (worker/runtime/resources.py).
        self.cpu_budget = Gauge(
            p + "cpu_budget_cores",
            "CPU cores the worker may use (cgroup quota or affinity)",
            registry=r,
        )
        self.inference_threads = Gauge(
            p + "inference_threads",
            "Inference threads in all: per batch × concurrent batches (0: no model loaded)",
            registry=r,
        )
        self.memory_budget = Gauge(
            p + "memory_budget_bytes",
            "Memory the worker must stay under (0: none known)",
            registry=r,
        )
        self.memory_bound = Gauge(
            p + "memory_bound_bytes",
            "Resident memory the effective settings allow at most",
            registry=r,
        )

        self.documents_consumed = Counter(
            p + "documents_consumed_total", "Input records taken from the input topic", registry=r
        )
        self.documents_completed = Counter(
            p + "documents_completed_total",
            "Documents whose chunk events were all acknowledged",
            ["strategy"],
            registry=r,
        )
        self.documents_dead_lettered = Counter(
            p + "documents_dead_lettered_total",
            "Input records sent to the dead-letter topic",
            ["reason"],
            registry=r,
        )
        self.chunks_produced = Counter(
            p + "chunks_produced_total", "Chunk events acknowledged", ["strategy"], registry=r
        )
        self.input_bytes = Counter(p + "input_bytes_total", "Input record bytes", registry=r)
        self.output_bytes = Counter(
            p + "output_bytes_total", "Chunk event bytes acknowledged", registry=r
        )
        self.publish_retries = Counter(
            p + "publish_retries_total", "Transient publish failures retried", registry=r
        )
        self.document_seconds = Histogram(
            p + "document_processing_seconds",
            "Decode to last acknowledgement, per document",
            ["strategy"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.end_to_end_lag = Histogram(
            p + "end_to_end_lag_seconds",
            "Input record timestamp to last chunk acknowledged",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.embedding_batches = Counter(
            p + "embedding_batches_total", "Inference batches run", registry=r
        )
        self.batch_texts = Histogram(
            p + "embedding_batch_texts", "Texts per batch", buckets=BATCH_TEXT_BUCKETS, registry=r
        )
        self.batch_tokens = Histogram(
            p + "embedding_batch_tokens",
            "Padded tokens per batch",
            buckets=BATCH_TOKEN_BUCKETS,
            registry=r,
        )
        self.embedding_real_tokens = Counter(
            p + "embedding_real_tokens_total", "Tokens of real text embedded", registry=r
        )
        self.embedding_padded_tokens = Counter(
            p + "embedding_padded_tokens_total", "Tokens computed including padding", registry=r
        )
        self.padding_ratio = Gauge(
            p + "embedding_padding_ratio",
            "Share of computed tokens that were padding, since start",
            registry=r,
        )
        self.inference_seconds = Counter(
            p + "embedding_inference_seconds_total",
            "Time spent in model inference, summed over batches that run at once (can grow "
            "faster than one second per second)",
            registry=r,
        )
        self.batcher_queue_tokens = Gauge(
            p + "batcher_queue_tokens", "Tokens waiting in the embedding queue", registry=r
        )
        self.in_flight_documents = Gauge(
            p + "in_flight_documents", "Documents taken but not finished", registry=r
        )
        self.in_flight_bytes = Gauge(
            p + "in_flight_bytes", "Input bytes of documents in flight", registry=r
        )
        self.paused_partitions = Gauge(
            p + "paused_partitions", "Assigned partitions paused by backpressure", registry=r
        )
        self.backpressure_pauses = Counter(
            p + "backpressure_pauses_total", "Times the consumer paused its partitions", registry=r
        )
        self.assigned_partitions = Gauge(
            p + "assigned_partitions", "Partitions of the input topic assigned", registry=r
        )
        self.consumer_lag = Gauge(
            p + "consumer_lag_records",
            "High-water mark minus position, per assigned partition",
            ["partition"],
            registry=r,
        )
        self.commit_seconds = Histogram(
            p + "commit_latency_seconds",
            "Offset commit round trip",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.commit_failures = Counter(
            p + "commit_failures_total", "Offset commits that failed", registry=r
        )
        self.last_commit = Gauge(
            p + "last_commit_timestamp_seconds",
            "Unix time of the last successful commit",
            registry=r,
        )
        # Exactly-once (worker/kafka/transactions.py): one transaction per input partition and
        # commit interval; its duration runs from its first write to its commit, the time
        # read_committed consumers wait for what it holds.
        self.transactions_committed = Counter(
            p + "transactions_committed_total",
            "Kafka transactions committed (exactly-once: one per input partition with writes "
            "per commit)",
            registry=r,
        )
        self.transactions_aborted = Counter(
            p + "transactions_aborted_total",
            "Kafka transactions aborted or given up with writes in them (exactly-once)",
            registry=r,
        )
        self.transaction_seconds = Histogram(
            p + "transaction_duration_seconds",
            "From a transaction's first write to its commit (exactly-once)",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        # Every stuck partition, and the work waiting (worker/observability/backlog.py).
        self.partition_commit_age = Gauge(
            p + "partition_commit_age_seconds",
            "Seconds since the partition's commit point last advanced while it had work "
            "(records taken and not committed, or lag); 0 when idle",
            ["partition"],
            registry=r,
        )
        self.backlog_seconds = Gauge(
            p + "backlog_seconds",
            "Estimated seconds of work waiting in the partition for this worker: lag × mean "
            "input bytes per record × measured seconds per input byte",
            ["partition"],
            registry=r,
        )
        self.seconds_per_input_byte = Gauge(
            p + "processing_seconds_per_input_byte",
            "Measured wall time per input byte while documents are in flight (recent, decaying)",
            registry=r,
        )
        self.kafka_connection_failures = Counter(
            p + "kafka_connection_failures_total",
            "Failed attempts to reach Kafka (start-up and while running), by kind",
            ["kind"],
            registry=r,
        )
        self.rebalances = Counter(
            p + "rebalances_total", "Partition assignments received", registry=r
        )
        self.missing_topics = Gauge(
            p + "missing_topics",
            "Topics the worker needs that did not exist at its last start-up attempt",
            registry=r,
        )
        self.partitions_lost = Counter(
            p + "partitions_lost_total",
            "Partitions revoked after this member's session expired or its generation ended",
            registry=r,
        )
        self.loop_lag = Histogram(
            p + "event_loop_lag_seconds",
            "How late the event loop ran a 100 ms timer",
            buckets=LOOP_LAG_BUCKETS,
            registry=r,
        )
        self.loop_lag_max = Gauge(
            p + "event_loop_lag_max_seconds",
            "Largest event-loop lag seen in the last 10 s",
            registry=r,
        )
        self.unreadable_batches = Counter(
            p + "unreadable_batches_total",
            "Record batches the consumer could not read (codec missing, corrupt); the "
            "partition waits on it, uncommitted",
            ["partition"],
            registry=r,
        )
        self.unreadable_partitions = Gauge(
            p + "unreadable_partitions", "Partitions stuck on an unreadable batch", registry=r
        )
        # Document lifecycle (docs/concepts/lifecycle.md).
        self.documents_deleted = Counter(
            p + "documents_deleted_total",
            "Input tombstones that deleted a known document's chunks",
            registry=r,
        )
        self.chunks_retracted = Counter(
            p + "chunks_retracted_total",
            "Chunk tombstones published: chunks of deleted documents and chunks a new version "
            "no longer has",
            registry=r,
        )
        self.chunks_unchanged = Counter(
            p + "chunks_unchanged_total",
            "Chunks of a new version whose ids the previous version had, by what was done "
            "(emitted again or skipped: CHUNKSTREAM_UNCHANGED_CHUNKS)",
            ["action"],
            registry=r,
        )
        for action in ("emitted", "skipped"):  # a closed set: exported from the start
            self.chunks_unchanged.labels(action)
        self.documents_skipped = Counter(
            p + "documents_skipped_total",
            "Input records that changed nothing (replayed, older version, unknown delete)",
            ["reason"],
            registry=r,
        )
        self.state_documents = Gauge(
            p + "state_documents",
            "Documents the worker remembers, per assigned partition (its state store)",
            ["partition"],
            registry=r,
        )
        self.restoring_partitions = Gauge(
            p + "restoring_partitions",
            "Assigned partitions whose state is being restored (not consumed meanwhile)",
            registry=r,
        )
        self.state_restore_seconds = Histogram(
            p + "state_restore_seconds",
            "Time to restore one partition's state from the changelog on assignment",
            buckets=RESTORE_BUCKETS,
            registry=r,
        )
        self.ready = Gauge(p + "ready", "1 when /readyz answers 200", registry=r)
        self.started_at = Gauge(
            p + "start_time_seconds", "Unix time the worker started", registry=r
        )
        self.started_at.set(time.time())

    def totals(self) -> Totals:
        """The counters' totals: the one count of documents, chunks, dead letters and
        rebalances (no second tally beside the metrics)."""
        finished = (
            self.documents_completed,
            self.documents_deleted,
            self.documents_skipped,
            self.documents_dead_lettered,
        )
        return Totals(
            documents=sum(_total(c) for c in finished),
            chunks=_total(self.chunks_produced),
            dead_letters=_total(self.documents_dead_lettered),
            rebalances=_total(self.rebalances),
        )

    def record_budgets(self, budgets: Budgets) -> None:
        self.cpu_budget.set(budgets.cpu_cores)
        self.inference_threads.set(budgets.inference_threads)
        self.memory_budget.set(budgets.memory_bytes or 0)
        self.memory_bound.set(budgets.memory_bound)
