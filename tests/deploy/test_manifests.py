"""Offline proof for deploy/k8s: every kustomization renders with the real kubectl, every
object validates against the Kubernetes schemas, the custom resources carry the fields we rely
on, and the pod spec keeps the worker's contract (probes, grace period, security, config)."""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.support import manifests as m
from tests.support import promql
from worker.config import ENV_PREFIX, Settings, load_settings
from worker.runtime.cgroups import CgroupLimits
from worker.runtime.resources import (
    loaded_models,
    memory_bound,
    needs_model,
    plan,
    runnable_strategies,
)

ALL = list(m.KUSTOMIZATIONS)
KEDA = ["keda", "managed-kafka", "strimzi"]
# Where each kustomization puts the workers (strimzi: next to the Kafka cluster's Secrets).
NAMESPACE = {name: "kafka" if name == "strimzi" else "chunkstream" for name in ALL}


def validate(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(m.BIN / "kubernetes-validate"), "--strict", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("name", ALL)
def test_renders_and_validates_against_kubernetes_schemas(name: str, tmp_path: Path) -> None:
    objs = m.render(name)
    path = tmp_path / f"{name}.yaml"
    path.write_text(m.render_text(name))
    result = validate(path)
    assert result.returncode == 0, result.stdout + result.stderr
    output = result.stdout + result.stderr
    for obj in objs:
        api, kind = obj["apiVersion"], obj["kind"]
        if (api, kind) in m.CRD_KINDS:
            assert f"Couldn't find schema for kind {kind}" in output
        else:
            # A built-in kind must have been checked, not skipped for want of a schema.
            assert f"passed for resource {kind.lower()}/{obj['metadata']['name']}" in output, (
                kind,
                output,
            )
    assert {(o["apiVersion"], o["kind"]) for o in objs} - m.CRD_KINDS - {
        ("v1", "ServiceAccount"),
        ("v1", "ConfigMap"),
        ("v1", "Service"),
        ("apps/v1", "Deployment"),
        ("apps/v1", "StatefulSet"),
        ("policy/v1", "PodDisruptionBudget"),
        ("networking.k8s.io/v1", "NetworkPolicy"),
    } == set()
    assert all(o["metadata"].get("namespace") == NAMESPACE[name] for o in objs)


def test_strict_validation_rejects_a_misspelt_field(tmp_path: Path) -> None:
    """The validator really checks: a typo in a probe field fails it."""
    objs = m.render("base")
    deployment = copy.deepcopy(m.one(objs, "Deployment"))
    probe = deployment["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]
    probe["periodSecond"] = probe.pop("periodSeconds")
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(deployment))
    assert validate(path).returncode != 0


@pytest.mark.parametrize("name", ALL)
def test_pod_contract(name: str) -> None:
    objs = m.render(name)
    work = m.workload(objs)
    pod = work["spec"]["template"]["spec"]
    c = m.container(objs)
    env = m.container_env(objs, "chunkstream-0")
    image_env = m.image_env()

    # Image: set by kustomize, tagged, run through its own ENTRYPOINT (no command override).
    assert c["image"].startswith("registry.example.com/chunkstream:"), c["image"]
    assert "command" not in c
    assert "args" not in c
    assert m.image_entrypoint() == ["chunkstream", "run"]

    # Probes on the metrics port: liveness /healthz, readiness /readyz, startup /healthz (a
    # slow group join must leave the pod unready, not get it killed).
    port = next(p for p in c["ports"] if p["name"] == "metrics")["containerPort"]
    metrics_port = int(env.get("CHUNKSTREAM_METRICS_PORT", image_env["CHUNKSTREAM_METRICS_PORT"]))
    assert port == metrics_port == 9400
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert c["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    startup = c["startupProbe"]
    # Room for the model load and a group join (measured: ready in ~4 s; a join can wait for
    # a rebalance up to CHUNKSTREAM_REBALANCE_TIMEOUT_MS, 20 s by default).
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 60

    # Grace period: drain deadline + flush/commit/leave.
    drain = float(env.get("CHUNKSTREAM_DRAIN_TIMEOUT_S", Settings().drain_timeout_s))
    assert pod["terminationGracePeriodSeconds"] >= drain + 10

    # Security: non-root, no escalation, read-only root, no capabilities, no API token.
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] >= 10000
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["automountServiceAccountToken"] is False
    sc = c["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert sc.get("privileged", False) is False
    # Two writable paths, both emptyDirs: TMPDIR (small, in memory) and the state store's
    # directory, on disk (in memory it would count toward the memory limit the plan checks).
    volumes = {v["name"]: v for v in pod["volumes"]}
    writable = {
        vm["mountPath"]: volumes[vm["name"]] for vm in c["volumeMounts"] if not vm.get("readOnly")
    }
    state_dir = m.container_env(objs, "pod")["CHUNKSTREAM_STATE_DIR"]
    assert sorted(writable) == sorted([image_env["TMPDIR"], state_dir])
    assert all("emptyDir" in volume for volume in writable.values())
    assert writable[image_env["TMPDIR"]]["emptyDir"]["medium"] == "Memory"
    assert "medium" not in writable[state_dir]["emptyDir"]  # the node's disk
    assert _mem(writable[state_dir]["emptyDir"]["sizeLimit"]) >= 1 << 30

    # Resources: requests and limits set; requests ≤ limits.
    res = c["resources"]
    assert _cpu(res["requests"]["cpu"]) <= _cpu(res["limits"]["cpu"])
    assert _mem(res["requests"]["memory"]) <= _mem(res["limits"]["memory"])

    # Every variable is a real setting and the whole environment passes the worker's own
    # validation (file paths pointed at stand-ins).
    unknown = {
        k
        for k in env
        if k.startswith(ENV_PREFIX)
        and k.removeprefix(ENV_PREFIX).lower() not in Settings.__struct_fields__
        and k != "CHUNKSTREAM_SASL_PASSWORD_FILE"
    }
    assert not unknown


# Measured throughput of one inference core (docs/benchmarks.md: 0.29 CPU-s per 4.4 KB
# document for semantic, int8; sdpm and context from the relative costs in docs/benchmarks.md's
# end-to-end table, 1.7x and 2.75x): input bytes per second. The transformer's figures, the
# slowest boundary model a pod may be pointed at; the image's static default is ~30x faster.
EMBEDDING_BYTES_PER_S = {"semantic": 15_000, "sdpm": 8_800, "context": 5_400}


@pytest.mark.parametrize("name", ALL)
def test_rendered_settings_fit_the_pods_cpu_memory_and_drain(name: str, tmp_path: Path) -> None:
    """Acceptance: the worker's own budget plan, for the models it really loads (the image's,
    read from the models scripts/bootstrap made with the same commands), given the container's
    memory limit as its cgroup would show it on a 64-core node *without* a CPU limit: the CPU
    budget is the pod's CPU request (downward API), threads x batches fit it (and leave the
    event loop its core where there is one), the memory bound <= the memory limit, and the
    in-flight window of an embedding strategy finishes within the revocation drain."""
    objs = m.render(name)
    c = m.container(objs)
    request = m.quantity(c["resources"]["requests"]["cpu"])
    memory = int(m.quantity(c["resources"]["limits"]["memory"]))
    env = {**m.image_env(), **m.container_env(objs, "chunkstream-0")}
    env.update(m.local_models(env))  # the image's model dirs, as built here
    env.pop("CHUNKSTREAM_SASL_PASSWORD_FILE", None)
    env.pop("CHUNKSTREAM_SSL_CAFILE", None)
    env.update(CHUNKSTREAM_SECURITY_PROTOCOL="PLAINTEXT")
    settings = load_settings({}, env=env)
    assert settings.memory_budget == memory  # the downward API hands the limit over
    assert settings.cpu_budget == request  # ... and the CPU request, fractions included

    models = loaded_models(settings)
    budgets = plan(settings, CgroupLimits(None, memory), affinity=64, models=models)
    s = budgets.settings
    assert (budgets.cpu_cores, budgets.cpu_source) == (request, "setting")
    slots = s.inference_threads * s.concurrent_batches
    assert slots <= max(1, request)
    assert slots == 1 or slots + 1 <= request
    assert budgets.memory_bound == memory_bound(s, runnable_strategies(s), models) <= memory
    # The overlay's strategy decides what loads: a model exactly when one may run.
    assert bool(models) == needs_model(settings)

    drain = min(s.rebalance_timeout_ms / 1000 - 5, s.drain_timeout_s)
    if s.strategy in EMBEDDING_BYTES_PER_S:
        seconds = s.max_in_flight_bytes / (EMBEDDING_BYTES_PER_S[s.strategy] * slots)
        assert seconds <= drain, f"{seconds:.0f} s of work in flight, drain budget {drain} s"


def test_one_image_setting_reaches_every_workload(tmp_path: Path) -> None:
    """A release edits components/image once; every overlay's workloads run that image."""
    component = m.DEPLOY / "k8s" / "components" / "image" / "kustomization.yaml"
    (setting,) = yaml.safe_load(component.read_text())["images"]
    expected = f"{setting['newName']}:{setting['newTag']}"
    for name in ALL:
        images = {
            c["image"]
            for o in m.render(name)
            if o["kind"] in ("Deployment", "StatefulSet")
            for c in o["spec"]["template"]["spec"]["containers"]
        }
        assert images == {expected}, name
    # The same on a copy with the release's edit: a digest reaches every overlay.
    copy_root = tmp_path / "deploy"
    shutil.copytree(m.DEPLOY, copy_root)
    digest = "sha256:" + "ab" * 32
    edited = copy_root / component.relative_to(m.DEPLOY)
    raw = yaml.safe_load(edited.read_text())
    raw["images"] = [{"name": "chunkstream", "newName": "reg.example/cs", "digest": digest}]
    edited.write_text(yaml.safe_dump(raw))
    for name, directory in m.KUSTOMIZATIONS.items():
        out = subprocess.run(
            [str(m.KUBECTL), "kustomize", str(copy_root / directory.relative_to(m.DEPLOY))],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout
        workloads = [
            o for o in yaml.safe_load_all(out) if o and o["kind"] in ("Deployment", "StatefulSet")
        ]
        assert workloads, name
        for o in workloads:
            (c,) = o["spec"]["template"]["spec"]["containers"]
            assert c["image"] == f"reg.example/cs@{digest}", name


def test_network_policy_admits_only_the_monitoring_namespace() -> None:
    policy = m.one(m.render("base"), "NetworkPolicy")
    (rule,) = policy["spec"]["ingress"]
    assert rule["from"] == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    ]
    assert rule["ports"] == [{"port": "metrics", "protocol": "TCP"}]


@pytest.mark.parametrize("name", ALL)
def test_environment_is_a_valid_worker_configuration(name: str, tmp_path: Path) -> None:
    objs = m.render(name)
    env = {**m.image_env(), **m.container_env(objs, "chunkstream-0")}
    model = tmp_path / "model"
    model.mkdir()
    env.update(dict.fromkeys(m.local_models(env), str(model)))  # the image's model dirs
    for variable, content in (
        ("CHUNKSTREAM_SASL_PASSWORD_FILE", "s3cret\n"),
        ("CHUNKSTREAM_SSL_CAFILE", "-----BEGIN CERTIFICATE-----\n"),
    ):
        if variable in env:
            # The file comes from a Secret mounted where the variable points, and the pod
            # does not start without it.
            secret, _ = m.mounted_secret(objs, env[variable])
            assert secret["optional"] is False
            stand_in = tmp_path / Path(env[variable]).name
            stand_in.write_text(content)
            env[variable] = str(stand_in)
    settings = load_settings({}, env=env)
    assert settings.group_id
    assert settings.model_int8 in (True, False)
    if name in ("managed-kafka", "strimzi"):
        assert settings.security_protocol == "SASL_SSL"
        assert settings.sasl_mechanism == "SCRAM-SHA-512"
        assert settings.sasl_password == "s3cret"
    if name == "strimzi":
        assert settings.ssl_cafile is not None
    if name == "static-membership":
        assert settings.group_instance_id == "chunkstream-0"
        assert settings.session_timeout_ms > 45_000  # survives a restart within the grace
    else:
        assert settings.group_instance_id is None


@pytest.mark.parametrize("name", ALL)
def test_selectors_match_the_pods(name: str) -> None:
    objs = m.render(name)
    pod_labels = m.workload(objs)["spec"]["template"]["metadata"]["labels"]

    def selects(selector: dict[str, str]) -> bool:
        return bool(selector) and all(pod_labels.get(k) == v for k, v in selector.items())

    assert selects(m.workload(objs)["spec"]["selector"]["matchLabels"])
    service = m.one(objs, "Service", "chunkstream-metrics")
    assert selects(service["spec"]["selector"])
    assert service["spec"]["publishNotReadyAddresses"] is True
    assert service["spec"]["ports"][0]["targetPort"] == "metrics"
    assert selects(m.one(objs, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"])
    for policy in (o for o in objs if o["kind"] == "NetworkPolicy"):
        assert selects(policy["spec"]["podSelector"]["matchLabels"])
    # ServiceMonitor (CRD): selects the metrics Service by its labels, scrapes its named port.
    sm = m.one(objs, "ServiceMonitor")
    assert sm["apiVersion"] == "monitoring.coreos.com/v1"
    wanted = sm["spec"]["selector"]["matchLabels"]
    assert wanted
    assert all(service["metadata"]["labels"].get(k) == v for k, v in wanted.items())
    (endpoint,) = sm["spec"]["endpoints"]
    assert endpoint["port"] == service["spec"]["ports"][0]["name"]
    assert endpoint["path"] == "/metrics"
    assert sm["spec"]["jobLabel"] in service["metadata"]["labels"]


@pytest.mark.parametrize("name", KEDA)
def test_scaled_object(name: str) -> None:
    objs = m.render(name)
    so = m.one(objs, "ScaledObject")
    assert so["apiVersion"] == "keda.sh/v1alpha1"
    target = m.workload(objs)
    assert so["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": target["kind"],
        "name": target["metadata"]["name"],
    }
    assert "replicas" not in target["spec"], "KEDA owns the replica count"
    partitions = int(so["metadata"]["annotations"]["chunkstream.io/input-partitions"])
    assert 1 <= so["spec"]["minReplicaCount"] <= so["spec"]["maxReplicaCount"] <= partitions
    # A drain never takes the only worker (the PDB lets one pod go at a time).
    assert so["spec"]["minReplicaCount"] >= 2
    assert 0 < so["spec"]["fallback"]["replicas"] <= so["spec"]["maxReplicaCount"]
    (trigger,) = so["spec"]["triggers"]
    # Scaling on the seconds of work waiting, through Prometheus (KEDA needs no Kafka
    # credentials): the query sums the workers' backlog estimate of *this* deployment.
    assert trigger["type"] == "prometheus"
    meta = trigger["metadata"]
    assert all(isinstance(v, str) for v in meta.values()), "trigger metadata values are strings"
    assert "authenticationRef" not in trigger
    query = meta["query"]
    assert promql.metric_names(query) == {"chunkstream_backlog_seconds"}
    assert query.startswith("sum(max by (partition) (")
    selector = dict(re.findall(r'(\w+)="([^"]*)"', query))
    service = m.one(objs, "Service", "chunkstream-metrics")
    job_label = m.one(objs, "ServiceMonitor")["spec"]["jobLabel"]
    assert selector == {
        "namespace": target["metadata"]["namespace"],
        "job": service["metadata"]["labels"][job_label],
    }
    assert float(meta["threshold"]) > 0
    assert meta["serverAddress"].startswith("http")


def test_static_membership_statefulset_is_the_deployment_plus_an_instance_id() -> None:
    base = m.workload(m.render("base"))
    objs = m.render("static-membership")
    sts = m.workload(objs)
    assert sts["kind"] == "StatefulSet"
    assert not [o for o in objs if o["kind"] == "Deployment"]
    assert sts["spec"]["serviceName"] == "chunkstream-metrics"
    template = copy.deepcopy(sts["spec"]["template"])
    env = template["spec"]["containers"][0]["env"]
    instance = [e for e in env if e["name"] == "CHUNKSTREAM_GROUP_INSTANCE_ID"]
    assert instance == [
        {
            "name": "CHUNKSTREAM_GROUP_INSTANCE_ID",
            "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
        }
    ]
    env.remove(instance[0])
    # Same pod template otherwise (only the ConfigMap's hash differs: its content does).
    base_template = copy.deepcopy(base["spec"]["template"])
    for t in (template, base_template):
        t["spec"]["containers"][0]["envFrom"][0]["configMapRef"]["name"] = "chunkstream-config"
    assert template == base_template


def test_prometheus_rule_fields() -> None:
    rule = m.one(m.render("base"), "PrometheusRule")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    alerts = {}
    for group in rule["spec"]["groups"]:
        assert group["name"]
        assert group["rules"]
        for r in group["rules"]:
            assert ("alert" in r) != ("record" in r)
            assert r["expr"].strip()
            if "alert" in r:
                alerts[r["alert"]] = r
    assert {
        "ChunkstreamLagGrowing",
        "ChunkstreamDeadLetterRate",
        "ChunkstreamNoCommits",
        "ChunkstreamWorkersAbsent",
        "ChunkstreamRebalanceStorm",
        "ChunkstreamNotReady",
        "ChunkstreamPartitionStuck",
        "ChunkstreamUnreadablePartition",
        "ChunkstreamCpuThrottled",
    } <= set(alerts)
    # Pod-level symptoms aggregate per pod, so healthy pods cannot hide a stuck one.
    for alert in ("ChunkstreamNoCommits", "ChunkstreamRebalanceStorm", "ChunkstreamNotReady"):
        expr = alerts[alert]["expr"]
        assert expr.count("by (namespace, job, pod)") >= 1, alert
        assert "by (namespace, job)" not in expr, alert
    # Stuck publishes hold documents in flight while the lag gauge reads 0.
    assert "chunkstream_in_flight_documents" in alerts["ChunkstreamNoCommits"]["expr"]
    # Absent workers per namespace and job, from the job label the operator gives the Service
    # (no job name in the rule; tests/deploy/test_dashboard.py checks the shape).
    assert "group by (namespace, job)" in alerts["ChunkstreamWorkersAbsent"]["expr"]
    # Above normal KEDA scaling: one pod removed per 120 s is 7.5 rebalances in 15 minutes,
    # and at most maxReplicaCount - 1 joins on the way up.
    so = m.one(m.render("keda"), "ScaledObject")
    normal = 15 * 60 / 120 + so["spec"]["maxReplicaCount"] - 1
    storm = alerts["ChunkstreamRebalanceStorm"]["expr"]
    assert "[15m]" in storm
    assert float(storm.rsplit(">", 1)[1]) > normal
    for r in alerts.values():
        assert r["for"].endswith("m")
        assert r["labels"]["severity"] in ("warning", "critical")
        assert r["annotations"]["summary"]
        assert r["annotations"]["description"]


def _cpu(value: str) -> float:
    return float(value[:-1]) / 1000 if value.endswith("m") else float(value)


def _mem(value: str) -> int:
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30}
    return int(value[:-2]) * units[value[-2:]] if value[-2:] in units else int(value)


def test_strimzi_user_topics_and_tls() -> None:
    """The Strimzi overlay: the KafkaUser is the SASL user, its Secret is the mounted password,
    its ACLs cover exactly the group and topics the workers use; KafkaTopics exist for the
    input, output, dead letters and the compacted state changelog, whose partitions equal the
    input's; the cluster CA Secret is the CA file; the partitions annotation is the input's."""
    objs = m.render("strimzi")
    env = m.container_env(objs, "chunkstream-0")
    (user,) = [o for o in objs if o["kind"] == "KafkaUser"]
    topics = {
        o["spec"].get("topicName", o["metadata"]["name"]): o
        for o in objs
        if o["kind"] == "KafkaTopic"
    }
    cluster = user["metadata"]["labels"]["strimzi.io/cluster"]
    assert all(t["metadata"]["labels"]["strimzi.io/cluster"] == cluster for t in topics.values())
    # SCRAM-SHA-512 over the cluster's TLS listener, the user's own Secret, the cluster CA.
    assert user["spec"]["authentication"]["type"] == "scram-sha-512"
    assert env["CHUNKSTREAM_SASL_MECHANISM"] == "SCRAM-SHA-512"
    assert env["CHUNKSTREAM_SECURITY_PROTOCOL"] == "SASL_SSL"
    assert env["CHUNKSTREAM_BOOTSTRAP_SERVERS"] == f"{cluster}-kafka-bootstrap:9093"
    assert env["CHUNKSTREAM_SASL_USERNAME"] == user["metadata"]["name"]
    secret, key = m.mounted_secret(objs, env["CHUNKSTREAM_SASL_PASSWORD_FILE"])
    assert (secret["secretName"], key) == (user["metadata"]["name"], "password")
    secret, key = m.mounted_secret(objs, env["CHUNKSTREAM_SSL_CAFILE"])
    assert (secret["secretName"], key) == (f"{cluster}-cluster-ca-cert", "ca.crt")
    # Topics: the ConfigMap's, and the state changelog compacted with the input's partitions.
    state = "chunkstream-document-state-changelog"
    names = [env[f"CHUNKSTREAM_{k}_TOPIC"] for k in ("INPUT", "OUTPUT", "DLQ")]
    assert set(topics) == {*names, state}
    input_topic = topics[env["CHUNKSTREAM_INPUT_TOPIC"]]
    assert topics[state]["spec"]["config"]["cleanup.policy"] == "compact"
    assert topics[state]["spec"]["partitions"] == input_topic["spec"]["partitions"]
    so = m.one(objs, "ScaledObject")
    annotation = so["metadata"]["annotations"]["chunkstream.io/input-partitions"]
    assert int(annotation) == input_topic["spec"]["partitions"]
    for name in names[1:]:  # the worker checks max.message.bytes >= its record limit
        limit = int(topics[name]["spec"]["config"]["max.message.bytes"])
        assert limit >= Settings().max_record_bytes
    # ACLs: the group and each topic, with what the worker does there and nothing more.
    acls = {
        (a["resource"]["type"], a["resource"]["name"]): set(a["operations"])
        for a in user["spec"]["authorization"]["acls"]
    }
    assert all(
        a["resource"]["patternType"] == "literal" for a in user["spec"]["authorization"]["acls"]
    )
    assert acls == {
        ("group", env["CHUNKSTREAM_GROUP_ID"]): {"Read", "Describe"},
        ("topic", names[0]): {"Read", "Describe"},  # its configs are never read
        ("topic", names[1]): {"Write", "Describe", "DescribeConfigs"},
        ("topic", names[2]): {"Write", "Describe", "DescribeConfigs"},
        ("topic", state): {"Read", "Write", "Describe", "DescribeConfigs"},
    }
    # The egress sample lets the workers reach DNS and the brokers' namespace, nothing else.
    egress = m.one(objs, "NetworkPolicy", "chunkstream-egress")
    assert egress["spec"]["policyTypes"] == ["Egress"]
    dns, kafka = egress["spec"]["egress"]
    assert {p["port"] for p in dns["ports"]} == {53}
    assert {p["protocol"] for p in dns["ports"]} == {"UDP", "TCP"}
    assert 9093 in {p["port"] for p in kafka["ports"]}
    (peer,) = kafka["to"]
    assert peer["namespaceSelector"]["matchLabels"] == {
        "kubernetes.io/metadata.name": m.workload(objs)["metadata"]["namespace"]
    }


@pytest.mark.parametrize("name", ALL)
def test_disruption_budget_never_blocks_a_drain_and_keeps_one_worker(name: str) -> None:
    """maxUnavailable 1 (never minAvailable): a drain can always evict, one pod at a time, so
    it is never blocked forever; with at least two replicas (fixed, or KEDA's minimum) a drain
    never takes the only worker."""
    objs = m.render(name)
    pdb = m.one(objs, "PodDisruptionBudget")
    assert pdb["spec"]["maxUnavailable"] == 1
    assert "minAvailable" not in pdb["spec"]
    assert pdb["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
    scaled = [o for o in objs if o["kind"] == "ScaledObject"]
    replicas = (
        scaled[0]["spec"]["minReplicaCount"] if scaled else m.workload(objs)["spec"]["replicas"]
    )
    assert replicas >= 2
