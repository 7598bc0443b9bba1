"""The Dockerfile, .dockerignore and the compose stack, checked offline (no Docker engine
here): hadolint lints the Dockerfile; the tests hold the image to the contract the manifests
and the kubelet-style test rely on."""

from __future__ import annotations

import fnmatch
import json
import subprocess

import yaml

from tests.deploy import manifests as m


def test_hadolint() -> None:
    result = subprocess.run(
        [str(m.BIN / "hadolint"), str(m.DOCKERFILE)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_contract() -> None:
    instructions = m.dockerfile_instructions()
    froms = [rest for k, rest in instructions if k == "FROM"]
    assert len(froms) == 2
    assert all(":" in f and "latest" not in f for f in froms)
    build = instructions[: [k for k, _ in instructions].index("FROM", 1)]
    build_runs = " ".join(rest for k, rest in build if k == "RUN")
    assert 'pip install ".[model]"' in build_runs
    assert "chunkstream model build --int8 --out /opt/chunkstream/model" in build_runs
    final = m.final_stage()
    env = m.image_env()
    assert env["CHUNKSTREAM_MODEL_DIR"] == "/opt/chunkstream/model"
    copies = [rest for k, rest in final if k == "COPY"]
    assert "--from=build /opt/chunkstream/model /opt/chunkstream/model" in copies
    users = [rest for k, rest in final if k == "USER"]
    assert users
    uid = users[-1].split(":")[0]
    assert uid.isdigit()
    assert int(uid) >= 10000  # numeric: lets the kubelet enforce runAsNonRoot
    assert m.image_entrypoint() == ["chunkstream", "run"]
    assert any(k == "HEALTHCHECK" and "/healthz" in rest for k, rest in final)
    assert json.loads(next(rest for k, rest in final if k == "VOLUME")) == [env["TMPDIR"]]
    labels = " ".join(rest for k, rest in final if k == "LABEL")
    for key in ("title", "description", "version", "revision", "licenses"):
        assert f"org.opencontainers.image.{key}=" in labels
    # The base Deployment's securityContext user is the image's user.
    pod = m.workload(m.render("base"))["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsUser"] == int(uid)


def _ignored(path: str, patterns: list[str]) -> bool:
    """Docker's .dockerignore rule: the last matching pattern wins, `!` re-includes."""
    ignored = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        pat = pattern[1:] if negate else pattern
        pat = pat.rstrip("/")
        flat = pat.replace("**/", "*/")
        if fnmatch.fnmatch(path, pat) or fnmatch.fnmatch(path, flat) or path.startswith(pat + "/"):
            ignored = not negate
    return ignored


def test_dockerignore_sends_only_what_the_build_copies() -> None:
    patterns = [
        line.strip()
        for line in (m.REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    for needed in ("pyproject.toml", "README.md", "worker/cli.py", "worker/embedding/build.py"):
        assert not _ignored(needed, patterns), needed
    for heavy in (
        ".venv/bin/python",
        ".cache/models/all-MiniLM-L6-v2/model.onnx",
        ".git/HEAD",
        "tests/conftest.py",
        "worker/__pycache__/cli.cpython-311.pyc",
    ):
        assert _ignored(heavy, patterns), heavy
    # Every COPY source from the build context is shipped.
    for keyword, rest in m.dockerfile_instructions():
        if keyword == "COPY" and not rest.startswith("--from"):
            for source in rest.split()[:-1]:
                assert not _ignored(source.rstrip("/"), patterns), source


def test_compose_stack() -> None:
    compose_dir = m.DEPLOY / "docker"
    compose = yaml.safe_load((compose_dir / "compose.yaml").read_text())
    services = compose["services"]
    assert set(services) == {"kafka", "topics", "worker", "prometheus", "grafana"}
    kafka = services["kafka"]
    assert kafka["image"].startswith("apache/kafka:")
    assert kafka["environment"]["KAFKA_PROCESS_ROLES"] == "broker,controller"  # KRaft
    assert services["topics"]["build"]["dockerfile"] == "deploy/docker/Dockerfile"
    worker = services["worker"]
    assert worker["image"] == services["topics"]["image"]
    assert worker["read_only"] is True
    assert worker["environment"]["CHUNKSTREAM_BOOTSTRAP_SERVERS"].startswith("kafka:")
    listeners = kafka["environment"]["KAFKA_ADVERTISED_LISTENERS"]
    assert "kafka:9092" in listeners
    # Prometheus scrapes the worker's metrics port; Grafana gets the dashboard provisioned.
    prom = yaml.safe_load((compose_dir / "prometheus.yml").read_text())
    targets = prom["scrape_configs"][0]["static_configs"][0]["targets"]
    assert targets == [f"worker:{m.image_env()['CHUNKSTREAM_METRICS_PORT']}"]
    for volume in services["prometheus"]["volumes"] + services["grafana"]["volumes"]:
        source = volume.split(":")[0]
        assert (compose_dir / source).exists(), source
    dashboards = yaml.safe_load(
        (compose_dir / "grafana/provisioning/dashboards/chunkstream.yaml").read_text()
    )
    path = dashboards["providers"][0]["options"]["path"]
    assert any(v.endswith(f":{path}/chunkstream.json:ro") for v in services["grafana"]["volumes"])
    datasource = yaml.safe_load(
        (compose_dir / "grafana/provisioning/datasources/prometheus.yaml").read_text()
    )["datasources"][0]
    assert datasource["type"] == "prometheus"
    assert datasource["url"] == "http://prometheus:9090"
