"""The Helm chart (deploy/helm/chunkstream) renders the kustomize objects: for the same values,
`helm template` and `kubectl kustomize` give equal objects, and both pass the Kubernetes
schemas strictly. The chart reads the base's own files (files/ links to deploy/k8s and
deploy/monitoring), so this holds by construction; the test is what says so.

What may differ, and only this (normalised below before comparing):
- the two labels that name the tool (`helm.sh/chart`, `app.kubernetes.io/managed-by`);
- how a config change rolls the pods: kustomize suffixes the ConfigMap's name with a hash of
  its content, Helm keeps the name and puts the content's checksum on the pod template.
"""

from __future__ import annotations

import copy
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import manifests as m

CHART = m.DEPLOY / "helm" / "chunkstream"
HELM_VERSION = (m.DEPLOY / "helm" / "helm-version").read_text().strip()
HELM = m.REPO / ".cache" / "deploy-tools" / f"helm-{HELM_VERSION}" / "helm"
HELM_ONLY_LABELS = ("helm.sh/chart", "app.kubernetes.io/managed-by")

# Values that make the chart render each kustomization (release `chunkstream` in the
# kustomization's namespace).
RULES_VALUES: dict[str, Any] = {
    "config": {
        "CHUNKSTREAM_STRATEGY": "lexical",
        "CHUNKSTREAM_ALLOWED_STRATEGIES": "sentence,adaptive,lexical",
        "CHUNKSTREAM_MAX_IN_FLIGHT_BYTES": "0",
        "CHUNKSTREAM_MAX_IN_FLIGHT_DOCUMENTS": "1024",
    },
    "resources": {
        "requests": {"cpu": "500m", "memory": "320Mi"},
        "limits": {"cpu": "1", "memory": "320Mi"},
    },
}
SAME = {"base": {}, "keda": {"keda": {"enabled": True}}, "rules": RULES_VALUES}


def helm(*args: str) -> str:
    if not HELM.is_file():
        pytest.fail(f"{HELM} missing: scripts/bootstrap installs Helm {HELM_VERSION}")
    result = subprocess.run(
        [str(HELM), *args], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def render_chart(values: dict[str, Any], tmp_path: Path, release: str = "chunkstream") -> str:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    return helm("template", release, str(CHART), "--namespace", "chunkstream", "-f", str(path))


def objects(text: str) -> list[m.Obj]:
    return [doc for doc in yaml.safe_load_all(text) if doc]


def normalised(objs: list[m.Obj]) -> dict[tuple[str, str], m.Obj]:
    out = {}
    for obj in copy.deepcopy(objs):
        meta = obj["metadata"]
        for label in HELM_ONLY_LABELS:
            meta.get("labels", {}).pop(label, None)
        if obj["kind"] == "ConfigMap":
            meta["name"] = re.sub(r"^(chunkstream-config)-[a-z0-9]{10}$", r"\1", meta["name"])
        if obj["kind"] in ("Deployment", "StatefulSet"):
            pod = obj["spec"]["template"]
            pod["metadata"].get("annotations", {}).pop("checksum/config", None)
            for source in pod["spec"]["containers"][0].get("envFrom", []):
                ref = source["configMapRef"]
                ref["name"] = re.sub(r"^(chunkstream-config)-[a-z0-9]{10}$", r"\1", ref["name"])
        out[(obj["kind"], meta["name"])] = obj
    return out


@pytest.mark.parametrize("name", sorted(SAME))
def test_chart_renders_the_kustomize_objects(name: str, tmp_path: Path) -> None:
    chart = normalised(objects(render_chart(SAME[name], tmp_path)))
    kustomize = normalised(m.render(name))
    assert sorted(chart) == sorted(kustomize)
    for key, obj in kustomize.items():
        assert chart[key] == obj, key


def test_chart_values_take_effect(tmp_path: Path) -> None:
    """The normalisation hides nothing that matters: the checksum follows the config, a
    release name reaches names and selectors, the image and replica values apply."""
    default = normalised(objects(render_chart({}, tmp_path)))
    raw = objects(render_chart({}, tmp_path))
    changed = objects(render_chart({"config": {"CHUNKSTREAM_LOG_LEVEL": "DEBUG"}}, tmp_path))

    def checksum(objs: list[m.Obj]) -> str:
        (deployment,) = [o for o in objs if o["kind"] == "Deployment"]
        return str(deployment["spec"]["template"]["metadata"]["annotations"]["checksum/config"])

    assert checksum(raw) != checksum(changed)
    values = {
        "fullnameOverride": "",
        "image": {"repository": "reg.example/cs", "digest": "sha256:" + "ab" * 32},
        "replicaCount": 5,
    }
    other = normalised(objects(render_chart(values, tmp_path, release="ingest")))
    deployment = other[("Deployment", "ingest")]
    assert deployment["spec"]["replicas"] == 5
    pod = deployment["spec"]["template"]
    assert pod["spec"]["containers"][0]["image"] == "reg.example/cs@sha256:" + "ab" * 32
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert selector["app.kubernetes.io/instance"] == "ingest"
    assert pod["metadata"]["labels"] == selector
    assert other[("Service", "ingest-metrics")]["spec"]["selector"] == selector
    assert (
        other[("ServiceMonitor", "ingest")]["spec"]["selector"]["matchLabels"][
            "app.kubernetes.io/instance"
        ]
        == "ingest"
    )
    assert ("Deployment", "chunkstream") in default


def test_chart_lints_and_validates_strictly(tmp_path: Path) -> None:
    """helm lint passes, and every object the chart renders (base and KEDA) passes
    kubernetes-validate --strict, as the kustomizations do (deploy/validate runs the same)."""
    helm("lint", str(CHART))
    for name, values in SAME.items():
        path = tmp_path / f"{name}.yaml"
        path.write_text(render_chart(values, tmp_path))
        result = subprocess.run(
            [str(m.BIN / "kubernetes-validate"), "--strict", str(path)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        for obj in objects(path.read_text()):
            if (obj["apiVersion"], obj["kind"]) not in m.CRD_KINDS:
                assert f"passed for resource {obj['kind'].lower()}/{obj['metadata']['name']}" in (
                    result.stdout + result.stderr
                )
