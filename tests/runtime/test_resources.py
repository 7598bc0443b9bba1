"""Container budgets: cgroup limits read from fake cgroup trees (v1 and v2), and the threads
and in-flight window derived from them."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from worker.config import load_settings
from worker.errors import ConfigError
from worker.runtime.cgroups import CgroupLimits, read_limits
from worker.runtime.resources import (
    BATCH_RESERVE,
    DEFAULT_IN_FLIGHT_BYTES,
    MODEL_RESERVE,
    loaded_models,
    memory_bound,
    plan,
    runnable_strategies,
)

REPO = Path(__file__).resolve().parents[2]
STATIC_DIR = REPO / ".cache/models/all-MiniLM-L6-v2-static"
ONNX_DIR = REPO / ".cache/models/all-MiniLM-L6-v2"

MiB = 1 << 20


def write(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def test_v2_root_of_a_container(tmp_path: Path) -> None:
    write(tmp_path, "cgroup.controllers", "cpu memory")
    write(tmp_path, "cpu.max", "150000 100000")
    write(tmp_path, "memory.max", str(768 * MiB))
    assert read_limits(tmp_path, "0::/\n") == CgroupLimits(1.5, 768 * MiB)


def test_v2_nested_limits_take_the_smallest_on_the_path(tmp_path: Path) -> None:
    write(tmp_path, "cgroup.controllers", "cpu memory")
    write(tmp_path, "kubepods/cpu.max", "400000 100000")
    write(tmp_path, "kubepods/memory.max", "max")
    write(tmp_path, "kubepods/pod1/cpu.max", "max 100000")
    write(tmp_path, "kubepods/pod1/memory.max", str(512 * MiB))
    write(tmp_path, "kubepods/pod1/c1/cpu.max", "max 100000")
    assert read_limits(tmp_path, "0::/kubepods/pod1/c1\n") == CgroupLimits(4.0, 512 * MiB)
    # A host path not visible under the mount (a container's own namespace): the root applies.
    write(tmp_path, "cpu.max", "100000 100000")
    assert read_limits(tmp_path, "0::/elsewhere/x\n") == CgroupLimits(1.0, None)


def test_v2_without_limits(tmp_path: Path) -> None:
    write(tmp_path, "cgroup.controllers", "cpu memory")
    write(tmp_path, "cpu.max", "max 100000")
    write(tmp_path, "memory.max", "max")
    assert read_limits(tmp_path, "0::/\n") == CgroupLimits(None, None)


def test_v1_quota_period_and_memory_limit(tmp_path: Path) -> None:
    write(tmp_path, "cpu,cpuacct/cpu.cfs_quota_us", "-1")
    write(tmp_path, "cpu,cpuacct/cpu.cfs_period_us", "100000")
    write(tmp_path, "cpu,cpuacct/pod/cpu.cfs_quota_us", "200000")
    write(tmp_path, "cpu,cpuacct/pod/cpu.cfs_period_us", "100000")
    write(tmp_path, "memory/memory.limit_in_bytes", "9223372036854771712")  # unlimited
    write(tmp_path, "memory/pod/memory.limit_in_bytes", str(1024 * MiB))
    self_cgroup = "12:memory:/pod\n4:cpu,cpuacct:/pod\n1:name=systemd:/\n"
    assert read_limits(tmp_path, self_cgroup) == CgroupLimits(2.0, 1024 * MiB)
    unlimited = "12:memory:/\n4:cpu,cpuacct:/\n"
    assert read_limits(tmp_path, unlimited) == CgroupLimits(None, None)
    assert read_limits(tmp_path / "nothing", "0::/\n") == CgroupLimits(None, None)


@pytest.mark.parametrize(
    ("quota", "affinity", "want"),
    [
        (1.0, 64, (1, 1)),  # the pod: 1 CPU on a 64-core node
        (1.5, 64, (1, 1)),
        (2.0, 64, (1, 1)),  # one inference thread + the event loop
        (4.0, 64, (1, 2)),  # 3 slots: two batches of one thread
        (8.0, 64, (3, 2)),
        (None, 2, (1, 1)),
        (None, 16, (7, 2)),
        (32.0, 4, (1, 2)),  # affinity below the quota wins
    ],
)
def test_threads_times_batches_plus_the_loop_fit_the_cpu_budget(
    quota: float | None, affinity: int, want: tuple[int, int]
) -> None:
    budgets = plan(load_settings({}, env={}), CgroupLimits(quota, None), affinity)
    s = budgets.settings
    assert (s.inference_threads, s.concurrent_batches) == want
    assert budgets.cpu_cores == min(quota or affinity, affinity)
    product = s.inference_threads * s.concurrent_batches
    assert product == 1 or product + 1 <= budgets.cpu_cores


def test_explicit_cpu_settings_are_kept() -> None:
    env = {"CHUNKSTREAM_INFERENCE_THREADS": "2", "CHUNKSTREAM_CPU_BUDGET": "6"}
    s = plan(load_settings({}, env=env), CgroupLimits(1.0, None), 64).settings
    assert (s.inference_threads, s.concurrent_batches) == (2, 2)
    env = {"CHUNKSTREAM_CONCURRENT_BATCHES": "3"}
    s = plan(load_settings({}, env=env), CgroupLimits(None, None), 8).settings
    assert (s.inference_threads, s.concurrent_batches) == (2, 3)


def test_without_a_memory_budget_nothing_is_derived() -> None:
    budgets = plan(load_settings({}, env={}), CgroupLimits(None, None), 2)
    assert budgets.settings.max_in_flight_bytes == DEFAULT_IN_FLIGHT_BYTES
    assert budgets.memory_bytes is None


# semantic with 1 MiB documents needs more than 768 MiB before any window (its model, the
# retrieval tokenizer it sizes in since issue 21, 160 bytes per byte of the largest document):
# its small pod is 1 GiB.
@pytest.mark.parametrize(
    ("strategy", "limit_mib"),
    [
        ("sentence", 768),
        ("lexical", 768),
        ("semantic", 1024),
        ("sentence", 2048),
        ("lexical", 2048),
        ("semantic", 2048),
    ],
)
def test_the_derived_window_is_the_largest_that_fits_the_limit(
    strategy: str, limit_mib: int
) -> None:
    env = {"CHUNKSTREAM_STRATEGY": strategy, "CHUNKSTREAM_MAX_DOCUMENT_BYTES": str(MiB)}
    settings = load_settings({}, env=env)
    budgets = plan(settings, CgroupLimits(None, limit_mib * MiB), 2)
    s = budgets.settings
    strategies = runnable_strategies(s)
    assert budgets.memory_bound == memory_bound(s, strategies, budgets.models) <= limit_mib * MiB
    assert 0 < s.max_in_flight_bytes <= DEFAULT_IN_FLIGHT_BYTES
    if s.max_in_flight_bytes < DEFAULT_IN_FLIGHT_BYTES:
        bigger = msgspec.structs.replace(s, max_in_flight_bytes=s.max_in_flight_bytes + 1)
        assert memory_bound(bigger, strategies, budgets.models) > limit_mib * MiB


def test_a_window_or_document_limit_that_cannot_fit_fails_naming_the_setting() -> None:
    env = {"CHUNKSTREAM_MAX_IN_FLIGHT_BYTES": str(512 * MiB)}
    with pytest.raises(ConfigError, match="CHUNKSTREAM_MAX_IN_FLIGHT_BYTES"):
        plan(load_settings({}, env=env), CgroupLimits(None, 768 * MiB), 2)
    env = {"CHUNKSTREAM_STRATEGY": "semantic"}  # 10 MiB documents x 160 in memory
    with pytest.raises(ConfigError, match="CHUNKSTREAM_MAX_DOCUMENT_BYTES"):
        plan(load_settings({}, env=env), CgroupLimits(None, 768 * MiB), 2)
    budget = {"CHUNKSTREAM_MEMORY_BUDGET": str(448 * MiB)}  # the setting beats the cgroup
    budgets = plan(load_settings({}, env=budget), CgroupLimits(None, 8192 * MiB), 2)
    assert (budgets.memory_bytes, budgets.memory_source) == (448 * MiB, "setting")
    assert budgets.memory_bound <= 448 * MiB
    # Below what the default 10 MiB documents need with sentence (406 MiB): refused.
    low = load_settings({}, env={"CHUNKSTREAM_MEMORY_BUDGET": str(400 * MiB)})
    with pytest.raises(ConfigError, match="CHUNKSTREAM_MAX_DOCUMENT_BYTES"):
        plan(low, CgroupLimits(None, 8192 * MiB), 2)


def test_a_cpu_request_in_millicores_is_the_budget() -> None:
    """The base hands the pod's CPU request over as `<millicores>m` (downward API): a pod that
    requests 500m on a 64-core node without a CPU limit plans one inference thread, not 31."""
    for request, cores in (("500m", 0.5), ("1000m", 1.0), ("2500m", 2.5), ("1.5", 1.5)):
        env = {"CHUNKSTREAM_CPU_BUDGET": request, "CHUNKSTREAM_STRATEGY": "semantic"}
        budgets = plan(load_settings({}, env=env), CgroupLimits(None, None), 64)
        s = budgets.settings
        assert (budgets.cpu_cores, budgets.cpu_source) == (cores, "setting")
        assert s.inference_threads * s.concurrent_batches == max(1, int(cores) - 1)
    with pytest.raises(ConfigError, match="CHUNKSTREAM_CPU_BUDGET"):
        load_settings({}, env={"CHUNKSTREAM_CPU_BUDGET": "halfm"})


def test_the_reserve_follows_the_models_loaded() -> None:
    """A rule strategy reserves no model and plans no inference thread; the static boundary
    model reserves its own measured figure, not the transformer's; embeddings add the
    retrieval transformer's."""
    semantic = load_settings(
        {}, env={"CHUNKSTREAM_STRATEGY": "semantic", "CHUNKSTREAM_MAX_DOCUMENT_BYTES": str(MiB)}
    )
    strategies = runnable_strategies(semantic)
    rule = plan(load_settings({}, env={}), CgroupLimits(1.0, 1024 * MiB), 64)
    assert rule.models == ()
    assert rule.inference_threads == 0
    static = plan(semantic, CgroupLimits(1.0, 1024 * MiB), 64, ("static",))
    int8 = plan(semantic, CgroupLimits(1.0, 1024 * MiB), 64, ("int8",))
    both = plan(semantic, CgroupLimits(1.0, 1024 * MiB), 64, ("static", "int8"))
    s = static.settings
    assert static.inference_threads == 1
    window = memory_bound(s, strategies, ())
    assert memory_bound(s, strategies, ("static",)) == (
        window + MODEL_RESERVE["static"] + BATCH_RESERVE["static"] * s.concurrent_batches
    )
    # The derived window is the largest that fits: less reserved, more window.
    assert static.settings.max_in_flight_bytes > int8.settings.max_in_flight_bytes
    assert int8.settings.max_in_flight_bytes > both.settings.max_in_flight_bytes
    assert MODEL_RESERVE["static"] < MODEL_RESERVE["int8"] < MODEL_RESERVE["fp32"]
    # Without being told, the plan assumes the transformer for each role (the old bound).
    assert plan(semantic, CgroupLimits(1.0, 1024 * MiB), 64).models == ("fp32",)


def test_a_static_model_runs_one_thread_per_batch() -> None:
    """onnxruntime's intra-op threads are a transformer's; a static batch is a lookup and a
    mean on its own thread, so 8 cores give two batches of one thread, not two of three."""
    semantic = load_settings({}, env={"CHUNKSTREAM_STRATEGY": "semantic"})
    static = plan(semantic, CgroupLimits(8.0, None), 64, ("static",)).settings
    assert (static.inference_threads, static.concurrent_batches) == (1, 2)
    onnx = plan(semantic, CgroupLimits(8.0, None), 64, ("int8",)).settings
    assert (onnx.inference_threads, onnx.concurrent_batches) == (3, 2)
    mixed = plan(semantic, CgroupLimits(8.0, None), 64, ("static", "int8")).settings
    assert (mixed.inference_threads, mixed.concurrent_batches) == (3, 2)


def test_loaded_models_reads_the_kinds_the_worker_loads(tmp_path: Path) -> None:
    """The kinds come from the model references the worker resolves, and the boundary model is
    loaded exactly when the worker needs one (resources.needs_boundary_model, which
    worker.app decides with)."""
    for directory in (STATIC_DIR, ONNX_DIR):
        if not (directory / "manifest.json").is_file():
            pytest.fail(f"no model in {directory}: run scripts/bootstrap")
    from worker.chunking import registry
    from worker.runtime.resources import needs_model

    def kinds(**env: str) -> tuple[str, ...]:
        settings = load_settings({}, env={f"CHUNKSTREAM_{k.upper()}": v for k, v in env.items()})
        default = registry.build(settings.strategy, {}, registry.BuildContext())
        assert needs_model(settings) == bool(loaded_models(settings)), env
        if default.needs_model:
            assert loaded_models(settings), env
        return loaded_models(settings)

    static, onnx = str(STATIC_DIR), str(ONNX_DIR)
    assert kinds(strategy="sentence") == ()
    assert kinds(strategy="sentence", allowed_strategies="lexical,adaptive") == ()
    assert kinds(strategy="semantic", model_dir=static) == ("static",)
    assert kinds(strategy="sentence", allowed_strategies="sdpm", model_dir=static) == ("static",)
    assert kinds(strategy="semantic", model_dir=onnx, model_int8="true") == ("int8",)
    assert kinds(strategy="semantic", model_dir=onnx) == ("fp32",)
    # The image: static boundaries, transformer vectors with include_embeddings.
    image = {"model_dir": static, "retrieval_model_dir": onnx, "model_int8": "true"}
    assert kinds(strategy="semantic", **image) == ("static",)
    assert kinds(strategy="semantic", include_embeddings="true", **image) == ("static", "int8")
    # A rule strategy needs no boundary model: only the retrieval model, for the vectors.
    assert kinds(strategy="sentence", include_embeddings="true", **image) == ("int8",)
    # One transformer named for both roles: loaded once.
    one = {"model_dir": onnx, "model_int8": "true"}
    assert kinds(strategy="semantic", include_embeddings="true", **one) == ("int8",)
    # A static boundary model is never the retrieval model: the transformer goes with it.
    assert kinds(strategy="semantic", include_embeddings="true", model_dir=static) == (
        "static",
        "fp32",
    )
    # A directory without a model: planned as the transformer (start-up then refuses it).
    empty = tmp_path / "empty"
    empty.mkdir()
    assert kinds(strategy="semantic", model_dir=str(empty), model_int8="true") == ("int8",)
