"""Render the kustomizations with the real kubectl and read the container files, for tests."""

from __future__ import annotations

import functools
import json
import math
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
KUBECTL = BIN / "kubectl"
DEPLOY = REPO / "deploy"
DOCKERFILE = DEPLOY / "docker" / "Dockerfile"
# Every kustomization CI renders: name → directory.
KUSTOMIZATIONS = {
    "base": DEPLOY / "k8s" / "base",
    "keda": DEPLOY / "k8s" / "overlays" / "keda",
    "static-membership": DEPLOY / "k8s" / "overlays" / "static-membership",
    "managed-kafka": DEPLOY / "k8s" / "overlays" / "managed-kafka",
    "rules": DEPLOY / "k8s" / "overlays" / "rules",
    "strimzi": DEPLOY / "k8s" / "overlays" / "strimzi",
}
# Custom resources we ship; kubernetes-validate has no schema for them, our tests check them.
CRD_KINDS = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
    ("monitoring.coreos.com/v1", "PrometheusRule"),
    ("keda.sh/v1alpha1", "ScaledObject"),
    ("kafka.strimzi.io/v1beta2", "KafkaUser"),
    ("kafka.strimzi.io/v1beta2", "KafkaTopic"),
}

Obj = dict[str, Any]


@functools.cache
def render_text(name: str) -> str:
    result = subprocess.run(
        [str(KUBECTL), "kustomize", str(KUSTOMIZATIONS[name])],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, f"kubectl kustomize {name} failed:\n{result.stderr}"
    return result.stdout


def render(name: str) -> list[Obj]:
    return [doc for doc in yaml.safe_load_all(render_text(name)) if doc]


def one(objs: list[Obj], kind: str, name: str | None = None) -> Obj:
    found = [
        o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)
    ]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def workload(objs: list[Obj]) -> Obj:
    """The Deployment, or the StatefulSet of the static-membership overlay."""
    found = [o for o in objs if o["kind"] in ("Deployment", "StatefulSet")]
    assert len(found) == 1, [o["kind"] for o in found]
    return found[0]


def container(objs: list[Obj]) -> Obj:
    containers = workload(objs)["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["worker"]
    return dict(containers[0])


def mounted_secret(objs: list[Obj], path: str) -> tuple[dict[str, Any], str]:
    """(the Secret volume source mounted where file ``path`` lies, the key it names)."""
    mounts = {vm["mountPath"]: vm["name"] for vm in container(objs)["volumeMounts"]}
    file = Path(path)
    volume = mounts[str(file.parent)]
    pod = workload(objs)["spec"]["template"]["spec"]
    secret = dict(next(v for v in pod["volumes"] if v["name"] == volume)["secret"])
    items = {i["path"]: i["key"] for i in secret.get("items", [])}
    return secret, items.get(file.name, file.name)


def config_map_data(objs: list[Obj], ref: str) -> dict[str, str]:
    return dict(one(objs, "ConfigMap", ref)["data"])


def quantity(value: str | int) -> float:
    """A Kubernetes quantity (cpu "1", "500m"; memory "768Mi", "1Gi", bytes) as a number."""
    text = str(value)
    units = {"m": 1e-3, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "k": 1e3, "M": 1e6, "G": 1e9}
    for suffix in sorted(units, key=len, reverse=True):
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * units[suffix]
    return float(text)


_DEPENDENT = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def container_env(objs: list[Obj], pod_name: str) -> dict[str, str]:
    """The environment the kubelet gives the worker container (ConfigMaps via envFrom, then
    `env` with the downward API resolved for a pod called ``pod_name``)."""
    c = container(objs)
    env: dict[str, str] = {}
    for source in c.get("envFrom", []):
        env.update(config_map_data(objs, source["configMapRef"]["name"]))
    for item in c.get("env", []):
        if "value" in item:
            # $(NAME) expands a variable defined before this one, as the kubelet does.
            env[item["name"]] = _DEPENDENT.sub(
                lambda match: env.get(match.group(1), match.group(0)), item["value"]
            )
            continue
        if "resourceFieldRef" in item["valueFrom"]:
            ref = item["valueFrom"]["resourceFieldRef"]
            assert ref["containerName"] == c["name"]
            kind, _, resource = ref["resource"].partition(".")
            amount = quantity(c["resources"][kind][resource]) / quantity(ref.get("divisor", "1"))
            env[item["name"]] = str(math.ceil(amount))  # the kubelet rounds up
            continue
        field = item["valueFrom"]["fieldRef"]["fieldPath"]
        assert field == "metadata.name", f"unsupported downward API field {field}"
        env[item["name"]] = pod_name
    return env


# -- the Dockerfile ----------------------------------------------------------------------------


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        keyword, _, rest = line.partition(" ")
        out.append((keyword.upper(), rest.strip()))
    return out


def final_stage() -> list[tuple[str, str]]:
    instructions = dockerfile_instructions()
    last_from = max(i for i, (k, _) in enumerate(instructions) if k == "FROM")
    return instructions[last_from:]


def image_entrypoint() -> list[str]:
    entry = [rest for k, rest in final_stage() if k == "ENTRYPOINT"]
    assert len(entry) == 1
    value = json.loads(entry[0])
    assert isinstance(value, list)
    return [str(v) for v in value]


def image_env() -> dict[str, str]:
    """ENV of the runtime stage (`ENV A=1 B=2` form)."""
    env: dict[str, str] = {}
    for keyword, rest in final_stage():
        if keyword == "ENV":
            for item in shlex.split(rest):
                key, sep, value = item.partition("=")
                assert sep, f"ENV {item!r}: use KEY=value"
                env[key] = value
    return env


def stages() -> dict[str, list[tuple[str, str]]]:
    """The Dockerfile's stages by name (`FROM x AS name`), each from its FROM on."""
    instructions = dockerfile_instructions()
    from_at = [i for i, (k, _) in enumerate(instructions) if k == "FROM"]
    out = {}
    for start, end in zip(from_at, [*from_at[1:], len(instructions)], strict=True):
        words = instructions[start][1].split()
        assert len(words) == 3, instructions[start]
        assert words[1].upper() == "AS", instructions[start]
        out[words[2]] = instructions[start:end]
    return out


def build_commands() -> list[list[str]]:
    """Every command of the build stages' RUN instructions (split at `&&`), as argv lists;
    `python -m worker.cli` (the package run from its source, not installed) reads as
    `chunkstream`, the command it is."""
    build = [i for name, stage in stages().items() if name != "runtime" for i in stage]
    commands = []
    for keyword, rest in build:
        if keyword != "RUN":
            continue
        for part in rest.split("&&"):
            argv = shlex.split(part)
            if argv and Path(argv[0]).name == "python" and argv[1:3] == ["-m", "worker.cli"]:
                argv = ["chunkstream", *argv[3:]]
            commands.append(argv)
    return commands


def build_command(*words: str) -> list[str]:
    """The one build-stage command that starts with a program named ``words[0]`` (any
    directory) followed by ``words[1:]``."""
    found = [
        argv
        for argv in build_commands()
        if Path(argv[0]).name == words[0] and argv[1 : len(words)] == list(words[1:])
    ]
    assert len(found) == 1, f"expected one `{' '.join(words)}` in the build stage: {found}"
    return found[0]


def option(argv: list[str], name: str) -> str:
    """The value of ``name`` in ``argv`` (`--name value`)."""
    assert argv.count(name) == 1, (name, argv)
    return argv[argv.index(name) + 1]


def image_model_dirs() -> dict[str, str]:
    """Where the build stage writes each model in the image: kind → directory."""
    return {
        "onnx": option(build_command("chunkstream", "model", "build"), "--out"),
        "static": option(build_command("chunkstream", "model", "distill"), "--out"),
    }


def local_models(env: dict[str, str]) -> dict[str, str]:
    """The image's model settings in ``env`` with each image directory replaced by the model
    scripts/bootstrap made here with the same command (`model build`, `model distill`)."""
    from worker.models.reference import find

    here = {"onnx": find("retrieval", None).directory, "static": find("boundary", None).directory}
    local = {image: str(here[kind]) for kind, image in image_model_dirs().items()}
    return {
        key: local[env[key]]
        for key in ("CHUNKSTREAM_MODEL_DIR", "CHUNKSTREAM_RETRIEVAL_MODEL_DIR")
        if key in env
    }
