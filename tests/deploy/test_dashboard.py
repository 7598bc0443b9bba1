"""The Grafana dashboard and the alert rules query only metrics that exist: every expression is
parsed as PromQL; each metric name in it is declared in worker/observability/metrics.py or is on the
explicit list of other exporters' metrics below; and each of ours appears in a /metrics scrape of a
worker running with the deployment's own configuration on the real broker."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support import kafka_io, promql
from tests.support import manifests as m
from tests.support.generated_docs import make_docs
from tests.support.network import free_port, http_get
from worker.app import Worker
from worker.config import load_settings
from worker.observability.metrics import Metrics

# Metrics of other exporters that the dashboard and the rules may query, and only these. Every
# name here must be one the exporter really has (its documentation), never a guess.
EXTERNAL_METRICS = {
    # cAdvisor, served by the kubelet at /metrics/cadvisor (kube-prometheus-stack scrapes it):
    # CPU throttling is only visible from outside the container.
    "container_cpu_cfs_throttled_periods_total",
    "container_cpu_cfs_periods_total",
    "container_cpu_usage_seconds_total",
    "container_memory_working_set_bytes",
}
# Declared in worker/observability/metrics.py but not yet set by any worker code: a scrape shows
# their HELP
# and TYPE but no sample. None is left (the commit age and the backlog estimate of issue 20 are
# set now); a name added here is exempt from the scrape test's real-sample check until then.
NOT_YET_SET: set[str] = set()
# Labelled by partition and set only when the event happens (a record batch the consumer cannot
# read): tests/broker/test_codecs.py produces one on the real broker and reads the sample.
SET_ON_EVENT = {"chunkstream_unreadable_batches_total"}


def declared_samples() -> set[str]:
    """Every sample name the registry of worker/observability/metrics.py can expose, labelled
    families
    included (they expose no sample before their first label value)."""
    suffixes = {
        "counter": ("_total", "_created"),
        "gauge": ("",),
        "info": ("_info",),
        "histogram": ("_bucket", "_sum", "_count", "_created"),
    }
    return {
        family.name + suffix
        for family in Metrics().registry.collect()
        for suffix in suffixes[family.type]
    }


def used_metrics() -> set[str]:
    names: set[str] = set()
    for expr in promql.dashboard_queries():
        names |= promql.metric_names(expr)
    exprs, records = promql.rule_expressions()
    for expr in exprs:
        names |= promql.metric_names(expr)
    return (names - records) | promql.variable_metrics()


def test_dashboard_structure() -> None:
    dash = promql.dashboard()
    assert dash["uid"] == "chunkstream-worker"
    panels = [p for p in dash["panels"] if p["type"] != "row"]
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    titles = " ".join(p["title"].lower() for p in panels)
    for topic in ("documents", "lag", "latency", "batch", "padding", "dead letters", "paused"):
        assert topic in titles, topic
    assert "rebalances" in titles
    for p in panels:
        assert p["datasource"]["uid"] == "${datasource}"
        assert p["targets"]
        grid = p["gridPos"]
        assert grid["x"] + grid["w"] <= 24


def test_every_expression_parses_and_names_metrics() -> None:
    queries = promql.dashboard_queries()
    assert len(queries) > 30
    for expr in queries:
        assert promql.metric_names(expr), expr
    # The extractor sees through functions, aggregations, binary operators and subqueries.
    assert promql.metric_names(
        "histogram_quantile(0.9, sum by (le) (rate(a_bucket[5m]))) / on() group_left "
        "max_over_time(b[10m:1m]) and -c{x='y'}"
    ) == {"a_bucket", "b", "c"}
    exprs, records = promql.rule_expressions()
    used = set().union(*(promql.metric_names(e) for e in exprs))
    # Every recording rule is used by an alert, and only our metrics are named.
    assert records <= used
    assert all(n.startswith("chunkstream") for n in used_metrics() - EXTERNAL_METRICS)


def test_every_queried_metric_is_declared_in_worker_metrics() -> None:
    """Acceptance (issue 20): every PromQL metric name of the dashboard and the rules is a
    family of worker/observability/metrics.py or on the commented list of other exporters'
    metrics."""
    declared = declared_samples()
    used = used_metrics()
    unknown = used - declared - EXTERNAL_METRICS
    assert not unknown, f"queried but declared nowhere: {sorted(unknown)}"
    # The lists stay honest: each external name is used, none shadows one of ours, and every
    # metric waiting for its worker code is declared and queried.
    assert used >= EXTERNAL_METRICS
    assert not EXTERNAL_METRICS & declared
    assert declared & used >= NOT_YET_SET
    # The check can fail: a misspelt name is caught.
    assert "chunkstream_partition_commit_age" not in declared
    assert "chunkstream_partition_commit_age_seconds" in declared


def test_issue_20_panels_and_alerts() -> None:
    """Commit age per partition with an alert on the oldest; absent workers per namespace and
    job without a job name written in the rule; panels for unreadable partitions, budgets,
    throttling, every model role with its identity, and the document lifecycle."""
    queries = promql.dashboard_queries()

    def queried(name: str) -> list[str]:
        return [q for q in queries if name in promql.metric_names(q)]

    for name in (
        "chunkstream_partition_commit_age_seconds",
        "chunkstream_backlog_seconds",
        "chunkstream_unreadable_partitions",
        "chunkstream_unreadable_batches_total",
        "chunkstream_cpu_budget_cores",
        "chunkstream_inference_threads",
        "chunkstream_memory_budget_bytes",
        "chunkstream_memory_bound_bytes",
        "container_cpu_cfs_throttled_periods_total",
        "container_cpu_cfs_periods_total",
        "chunkstream_documents_deleted_total",
        "chunkstream_chunks_retracted_total",
        "chunkstream_chunks_unchanged_total",
        "chunkstream_state_documents",
        "chunkstream_restoring_partitions",
        "chunkstream_state_restore_seconds_bucket",
    ):
        assert queried(name), name
    assert any(
        "by (pod, partition)" in q for q in queried("chunkstream_partition_commit_age_seconds")
    )
    (model,) = queried("chunkstream_model_info")
    for label in ("role", "dir", "variant", "dimension", "identity"):
        assert label in model.split("(")[1], (label, model)

    rules = {
        r["alert"]: r["expr"]
        for g in m.one(m.render("base"), "PrometheusRule")["spec"]["groups"]
        for r in g["rules"]
        if "alert" in r
    }
    stuck = rules["ChunkstreamPartitionStuck"]
    assert "chunkstream_partition_commit_age_seconds" in promql.metric_names(stuck)
    assert stuck.startswith("max by (namespace, job, pod, partition)")
    absent = rules["ChunkstreamWorkersAbsent"]
    assert "job=" not in absent.replace(" ", "")
    assert "namespace=" not in absent.replace(" ", "")
    assert "group by (namespace, job)" in absent
    assert "unless on (namespace, job)" in absent
    assert "chunkstream_unreadable_partitions" in promql.metric_names(
        rules["ChunkstreamUnreadablePartition"]
    )


def test_issue_38_transactions_panel() -> None:
    """Exactly-once: transactions committed and aborted per second, and the duration's
    quantiles from its histogram."""
    queries = promql.dashboard_queries()
    for name in (
        "chunkstream_transactions_committed_total",
        "chunkstream_transactions_aborted_total",
    ):
        assert any(name in promql.metric_names(q) and "rate(" in q for q in queries), name
    durations = [
        q
        for q in queries
        if "chunkstream_transaction_duration_seconds_bucket" in promql.metric_names(q)
    ]
    assert durations
    assert all(q.startswith("histogram_quantile(") for q in durations)


@pytest.mark.kafka
async def test_every_queried_metric_exists_in_a_real_scrape(
    kafka_bootstrap: str, topic_names: dict[str, str]
) -> None:
    """A worker configured like the base Deployment (semantic strategy, static boundary model), in
    process on the local broker, after it chunked documents and dead-lettered one."""
    env = {**m.image_env(), **m.container_env(m.render("base"), "chunkstream-test")}
    port = free_port()
    env.update(
        CHUNKSTREAM_BOOTSTRAP_SERVERS=kafka_bootstrap,
        **m.local_models(env),  # the image's models, as scripts/bootstrap made them here
        CHUNKSTREAM_METRICS_PORT=str(port),
        CHUNKSTREAM_COMMIT_INTERVAL_MS="200",
        **{f"CHUNKSTREAM_{k.upper()}": v for k, v in topic_names.items()},
    )
    settings = load_settings({}, env=env)
    assert settings.strategy == "semantic"
    await kafka_io.create(settings, partitions=2)
    docs = make_docs(8, seed=5)
    poison: tuple[bytes, bytes, list[tuple[str, bytes]]] = (
        b"poison",
        b"\xff\x00 not a document",
        [],
    )
    await kafka_io.produce_raw(
        kafka_bootstrap, settings.input_topic, [*kafka_io.encode_documents(docs), poison]
    )
    worker = Worker(settings)
    task = asyncio.create_task(worker.run())
    try:
        await kafka_io.wait_committed_to_end(
            kafka_bootstrap, settings.group_id, settings.input_topic, timeout_s=120
        )
        await asyncio.sleep(1.5)  # one sampling period of the level gauges
        status, text = await http_get(port, "/readyz")
        assert status == 200, text
        status, text = await http_get(port, "/metrics")
        assert status == 200
    finally:
        worker.request_stop()
        assert await task == 0
    families = list(text_string_to_metric_families(text))
    exposed = {sample.name for family in families for sample in family.samples}
    missing = used_metrics() - EXTERNAL_METRICS - NOT_YET_SET - SET_ON_EVENT - exposed
    assert not missing, f"queried but not exposed: {sorted(missing)}"
    # Declared and served, sample or not (see NOT_YET_SET, SET_ON_EVENT).
    served = {family.name for family in families}
    assert served >= NOT_YET_SET
    assert served >= {name.removesuffix("_total") for name in SET_ON_EVENT}
