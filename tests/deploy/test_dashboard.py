"""The Grafana dashboard and the alert rules query only metrics the worker really exposes:
every expression is parsed as PromQL and each metric name in it must appear in a /metrics
scrape of a worker running with the deployment's own configuration on the real broker."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import free_port
from tests.deploy import manifests as m
from tests.deploy import promql
from tests.kafka import helpers
from tests.kafka.test_full_worker import http_get
from tests.kafka.test_worker_kafka import make_docs
from worker.config import load_settings
from worker.service import Worker


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
    assert all(n.startswith("chunkstream") for n in used_metrics())


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
    await helpers.create(settings, partitions=2)
    docs = make_docs(8, seed=5)
    poison = [(b"poison", b"\xff\x00 not a document", [])]
    await helpers.produce_raw(
        kafka_bootstrap, settings.input_topic, helpers.encode_documents(docs) + poison
    )
    worker = Worker(settings)
    task = asyncio.create_task(worker.run())
    try:
        await helpers.wait_committed_to_end(
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
    exposed = {
        sample.name for family in text_string_to_metric_families(text) for sample in family.samples
    }
    missing = used_metrics() - exposed
    assert not missing, f"queried but not exposed: {sorted(missing)}"
