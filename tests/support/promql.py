"""Every PromQL expression of the dashboard and the alert rules, and the metric names in them
(read from the parsed expression, not guessed with a regex)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import promql_parser

from tests.support import manifests as m

DASHBOARD = m.DEPLOY / "monitoring" / "chunkstream-dashboard.json"
# Grafana's own variables become plain values before parsing.
_GRAFANA_VARS = {"$__rate_interval": "5m", "$__interval": "1m", "$namespace": ".*", "$job": ".*"}
_LABEL_VALUES = re.compile(r"^label_values\((\w+),\s*\w+\)$")


def dashboard() -> dict[str, Any]:
    value = json.loads(DASHBOARD.read_text())
    assert isinstance(value, dict)
    return value


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels", []))


def dashboard_queries() -> list[str]:
    """Panel target expressions, Grafana variables substituted."""
    out = []
    for panel in _panels(dashboard()["panels"]):
        for target in panel.get("targets", []):
            expr = target["expr"]
            for var, value in _GRAFANA_VARS.items():
                expr = expr.replace(var, value)
            assert "$" not in expr, f"unknown Grafana variable in {expr!r}"
            out.append(expr)
    return out


def variable_metrics() -> set[str]:
    """Metrics that template variables read with label_values(metric, label)."""
    names = set()
    for var in dashboard()["templating"]["list"]:
        if var["type"] == "query":
            match = _LABEL_VALUES.match(var["query"]["query"])
            assert match, var["query"]
            names.add(match.group(1))
    return names


def rule_expressions() -> tuple[list[str], set[str]]:
    """(every rule's expr, the names of the recording rules)."""
    rule = m.one(m.render("base"), "PrometheusRule")
    exprs, records = [], set()
    for group in rule["spec"]["groups"]:
        for r in group["rules"]:
            exprs.append(r["expr"])
            if "record" in r:
                records.add(r["record"])
    return exprs, records


def metric_names(expr: str) -> set[str]:
    names: set[str] = set()
    _walk(promql_parser.parse(expr), names)
    return names


def _walk(node: Any, names: set[str]) -> None:
    if isinstance(node, promql_parser.VectorSelector):
        assert node.name, f"selector without a metric name: {node}"
        names.add(node.name)
        return
    for attr in ("lhs", "rhs", "expr", "param", "vector_selector"):
        child = getattr(node, attr, None)
        if child is not None and not isinstance(child, (int, float, str)):
            _walk(child, names)
    for arg in getattr(node, "args", None) or []:
        _walk(arg, names)
