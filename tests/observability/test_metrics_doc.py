"""Every metric docs/reference/metrics.md names exists in the registry, and every family is
documented there."""

from __future__ import annotations

import re
from pathlib import Path

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from worker.observability.metrics import Metrics

DOC = Path(__file__).resolve().parents[2] / "docs" / "reference" / "metrics.md"


def exposed_names() -> set[str]:
    text = generate_latest(Metrics().registry).decode()
    names: set[str] = set()
    for family in text_string_to_metric_families(text):
        names.add(family.name)
        names.update(sample.name for sample in family.samples)
    return names


def test_documented_metrics_exist_and_all_are_documented() -> None:
    documented = set(re.findall(r"`(chunkstream_[a-z_]+)", DOC.read_text(encoding="utf-8")))
    # Labelled families expose no sample before their first label value: count them by name.
    families = {
        f.name + ("_total" if f.type == "counter" else "_info" if f.type == "info" else "")
        for f in Metrics().registry.collect()
    }
    assert documented - (exposed_names() | families) == set(), "documented but not exposed"
    assert families - documented == set(), "exposed but not documented"
