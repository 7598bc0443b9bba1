"""Settings: env and flags merge, and every bad value fails naming its variable."""

from __future__ import annotations

import argparse
import datetime as dt
import re
import subprocess
import sys
from pathlib import Path

import pytest

from worker.config import (
    DEFAULT_BATCH_BYTES,
    OTHER_VARIABLES,
    SETTINGS_INFO,
    Section,
    Settings,
    add_flags,
    batch_bytes,
    chunk_cap,
    env_name,
    invalid_setting,
    load_settings,
    redacted,
    settings_table,
    unknown_variables,
)
from worker.errors import ConfigError
from worker.kafka.clients import make_producer
from worker.wire.codec import Encoding, EventEncoder
from worker.wire.events import DocumentChunksEvent, SourceRecord

REPO = Path(__file__).resolve().parent.parent


def test_defaults_env_and_flag_precedence() -> None:
    s = load_settings({}, env={})
    assert (s.input_topic, s.output_topic, s.dlq_topic) == ("documents", "chunks", "documents.dlq")
    assert s.max_document_bytes == 10 * 1024 * 1024
    env = {
        "CHUNKSTREAM_GROUP_ID": "from-env",
        "CHUNKSTREAM_MAX_IN_FLIGHT_DOCUMENTS": "12",
        "CHUNKSTREAM_STRATEGY_PARAMS": "chunk_size=300,tokenizer=character",
        "CHUNKSTREAM_ALLOWED_STRATEGIES": "sentence, lexical",
    }
    s = load_settings({"group_id": "from-flag", "param": ["chunk_size=50"]}, env=env)
    assert s.group_id == "from-flag"
    assert s.max_in_flight_documents == 12
    assert s.strategy_params == {"chunk_size": "50", "tokenizer": "character"}
    assert s.allowed_strategies == ["sentence", "lexical"]


def test_embedding_concurrency_defaults_to_the_batchers_measured_default() -> None:
    from worker.runtime.cgroups import CgroupLimits
    from worker.runtime.resources import DEFAULT_CONCURRENT_BATCHES, plan

    # 0 = derived from the CPU budget: the batcher's default once the budget has room for it.
    assert load_settings({}, env={}).concurrent_batches == 0
    derived = plan(load_settings({}, env={}), CgroupLimits(None, None), 8).settings
    assert derived.concurrent_batches == DEFAULT_CONCURRENT_BATCHES
    s = load_settings({}, env={"CHUNKSTREAM_CONCURRENT_BATCHES": "1"})
    assert (s.concurrent_batches, s.inference_threads) == (1, 0)


def test_json_params() -> None:
    s = load_settings({}, env={"CHUNKSTREAM_STRATEGY_PARAMS": '{"chunk_size": 77}'})
    assert s.strategy_params == {"chunk_size": "77"}


async def test_the_batch_size_is_derived_unless_set_and_never_above_the_record_limit() -> None:
    assert batch_bytes(load_settings({}, env={})) == DEFAULT_BATCH_BYTES
    small = load_settings({}, env={"CHUNKSTREAM_MAX_RECORD_BYTES": "65536"})
    assert batch_bytes(small) == 65536  # capped, not refused
    chosen = load_settings({}, env={"CHUNKSTREAM_BATCH_SIZE": "4096"})
    assert batch_bytes(chosen) == 4096
    # What the client is given: its batch builder takes records of 1,000 bytes up to it.
    assert await _records_per_batch(chosen, 1000) <= 4
    assert 500 <= await _records_per_batch(load_settings({}, env={}), 1000) <= 524


async def _records_per_batch(settings: Settings, value_bytes: int) -> int:
    producer = make_producer(settings)
    try:
        builder = producer.create_batch()
        taken = 0
        while builder.append(key=None, value=bytes(value_bytes), timestamp=None) is not None:
            taken += 1
        return taken
    finally:
        await producer.stop()


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        ({"CHUNKSTREAM_METRICS_PORT": "http"}, "CHUNKSTREAM_METRICS_PORT (--metrics-port)"),
        ({"CHUNKSTREAM_METRICS_PORT": "70000"}, "CHUNKSTREAM_METRICS_PORT"),
        ({"CHUNKSTREAM_ENCODING": "xml"}, "CHUNKSTREAM_ENCODING"),
        ({"CHUNKSTREAM_MAX_DOCUMENT_BYTES": "0"}, "CHUNKSTREAM_MAX_DOCUMENT_BYTES"),
        ({"CHUNKSTREAM_OUTPUT_TOPIC": "documents"}, "CHUNKSTREAM_OUTPUT_TOPIC"),
        ({"CHUNKSTREAM_DLQ_TOPIC": "chunks"}, "CHUNKSTREAM_DLQ_TOPIC"),
        ({"CHUNKSTREAM_SECURITY_PROTOCOL": "SASL_SSL"}, "CHUNKSTREAM_SASL_MECHANISM"),
        ({"CHUNKSTREAM_SSL_CAFILE": "/nonexistent/ca.pem"}, "CHUNKSTREAM_SSL_CAFILE"),
        ({"CHUNKSTREAM_STRATEGY_PARAMS": "chunk_size"}, "CHUNKSTREAM_STRATEGY_PARAMS"),
        ({"CHUNKSTREAM_LOG_LEVEL": "LOUD"}, "CHUNKSTREAM_LOG_LEVEL"),
        ({"CHUNKSTREAM_COMPRESSION_TYPE": "brotli"}, "CHUNKSTREAM_COMPRESSION_TYPE"),
        ({"CHUNKSTREAM_LINGER_MS": "-1"}, "CHUNKSTREAM_LINGER_MS"),
        ({"CHUNKSTREAM_BATCH_SIZE": "100"}, "CHUNKSTREAM_BATCH_SIZE"),
        (
            {"CHUNKSTREAM_BATCH_SIZE": "131072", "CHUNKSTREAM_MAX_RECORD_BYTES": "65536"},
            "CHUNKSTREAM_BATCH_SIZE",
        ),
        ({"CHUNKSTREAM_FORWARD_HEADERS": "tenant,Traceparent"}, "CHUNKSTREAM_FORWARD_HEADERS"),
        ({"CHUNKSTREAM_FORWARD_HEADERS": "content-type"}, "CHUNKSTREAM_FORWARD_HEADERS"),
        ({"CHUNKSTREAM_CONCURRENT_BATCHES": "-1"}, "CHUNKSTREAM_CONCURRENT_BATCHES"),
        ({"CHUNKSTREAM_MEMORY_BUDGET": "-5"}, "CHUNKSTREAM_MEMORY_BUDGET"),
    ],
)
def test_bad_values_name_the_setting(env: dict[str, str], needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings({}, env=env)
    assert needle in str(info.value)


def test_password_from_file_is_masked(tmp_path: Path) -> None:
    secret = tmp_path / "pw"
    secret.write_text("hunter2\n")
    env = {
        "CHUNKSTREAM_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
        "CHUNKSTREAM_SASL_MECHANISM": "SCRAM-SHA-512",
        "CHUNKSTREAM_SASL_USERNAME": "alice",
        "CHUNKSTREAM_SASL_PASSWORD_FILE": str(secret),
    }
    s = load_settings({}, env=env)
    assert s.sasl_password == "hunter2"
    assert redacted(s)["sasl_password"] == "***"
    assert "hunter2" not in repr(redacted(s))


def test_settings_table_lists_every_setting_once_in_its_group() -> None:
    table = settings_table()
    rows = [line for line in table.splitlines() if line.startswith("| `CHUNKSTREAM_")]
    settings = [row.split(" | ")[0].strip("| `") for row in rows if " | `--" in row]
    assert settings == sorted(set(settings), key=settings.index)  # none twice
    assert set(settings) == {env_name(field) for field in Settings.__struct_fields__}
    # Each row under the heading of its group, the groups in their declared order.
    headings = [line.removeprefix("### ") for line in table.splitlines() if line[:4] == "### "]
    assert headings == [*(str(section) for section in Section), "Other environment variables"]
    under = table.split("### Producer\n")[1].split("###")[0]
    assert "`CHUNKSTREAM_LINGER_MS` | `--linger-ms` | integer ≥ 0, ≤ 60000 | `5` |" in under
    assert "| `CHUNKSTREAM_LINGER_MS`" not in table.split("### Producer")[0]


@pytest.mark.parametrize(
    ("field", "kind"),
    [
        ("bootstrap_servers", "text"),
        ("group_instance_id", "text (optional)"),
        ("document_lifecycle", "boolean"),
        ("encoding", "`msgpack` \\| `json` \\| `connect-json`"),  # declared order, not sorted
        ("sasl_mechanism", "`PLAIN` \\| `SCRAM-SHA-256` \\| `SCRAM-SHA-512` (optional)"),
        ("max_record_bytes", "integer ≥ 65536"),
        ("drain_timeout_s", "number > 0"),
        ("metrics_port", "integer ≥ 0, ≤ 65535"),
        ("forward_headers", "list (comma-separated)"),
        ("strategy_params", "map (`k=v,k=v` or JSON)"),
    ],
)
def test_a_settings_type_is_read_off_its_declaration(field: str, kind: str) -> None:
    assert SETTINGS_INFO[field].kind == kind


def test_the_flags_help_is_the_settings_own() -> None:
    parser = argparse.ArgumentParser()
    add_flags(parser)
    helps = {a.dest: a.help for a in parser._actions if a.dest in Settings.__struct_fields__}
    assert helps["linger_ms"] == "Kafka's linger.ms: how long the producer waits to fill a batch"
    assert helps == {field: info.meaning for field, info in SETTINGS_INFO.items()}
    assert all(text and text.strip() == text for text in helps.values())


def test_a_misspelt_variable_is_named_with_the_closest_known_name() -> None:
    env = {
        "CHUNKSTREAM_STRATEGIE": "lexical",
        "CHUNKSTREAM_BOOTSTRAP_SERVER": "kafka:9092",
        "chunkstream_group_id": "lower case",  # Linux variables are case-sensitive: ignored
        "CHUNKSTREAM_PURE_PYTON": "1",  # not a setting, but one of ours
        "CHUNKSTREAM_XYZZY": "1",  # close to nothing
        "CHUNKSTREAM_STRATEGY": "sentence",  # known: a setting
        "CHUNKSTREAM_TEST_BOOTSTRAP": "host:1",  # known: the test suite's
        "PATH": "/usr/bin",
    }
    assert unknown_variables(env) == [
        "CHUNKSTREAM_BOOTSTRAP_SERVER is not a chunkstream setting; ignored "
        "(did you mean CHUNKSTREAM_BOOTSTRAP_SERVERS?)",
        "CHUNKSTREAM_PURE_PYTON is not a chunkstream setting; ignored "
        "(did you mean CHUNKSTREAM_PURE_PYTHON?)",
        "CHUNKSTREAM_STRATEGIE is not a chunkstream setting; ignored "
        "(did you mean CHUNKSTREAM_STRATEGY?)",
        "CHUNKSTREAM_XYZZY is not a chunkstream setting; ignored "
        "(`chunkstream settings` lists the settings)",
        "chunkstream_group_id is not a chunkstream setting; ignored "
        "(did you mean CHUNKSTREAM_GROUP_ID?)",
    ]
    assert unknown_variables({env_name(f): "x" for f in Settings.__struct_fields__}) == []


def test_every_chunkstream_variable_the_repository_uses_is_known() -> None:
    """A variable that the package, scripts, deploy files, docs, benchmarks or the suite's own
    machinery (conftest, tests/support) read or set is a setting or one of OTHER_VARIABLES, so
    that no tool of ours makes the worker warn. (Test modules are left out: some spell unknown
    names on purpose.)"""
    known = {env_name(f) for f in Settings.__struct_fields__} | {v.name for v in OTHER_VARIABLES}
    # Not a name quoted in the warning's own words, as docs/reference/settings.md shows it.
    name = re.compile(r"\bCHUNKSTREAM_[A-Z0-9_]*[A-Z0-9]\b(?! is not a chunkstream setting)")
    used: dict[str, str] = {}
    places = ("worker", "scripts", "deploy", "bench", "docs", "examples", ".ci", "tests/support")
    paths = [REPO / "tests" / "conftest.py", *(p for t in places for p in (REPO / t).rglob("*"))]
    for path in paths:
        if path.is_file() and path.suffix not in {".so", ".pyc", ".onnx", ".npy", ".png"}:
            for found in name.findall(path.read_text(encoding="utf-8", errors="replace")):
                used.setdefault(found, str(path.relative_to(REPO)))
    # C header guards (CHUNKSTREAM_WORDPIECE_H) are not variables.
    unknown = {
        v: where
        for v, where in used.items()
        if v not in known and not (v.endswith("_H") and where.endswith((".h", ".c")))
    }
    assert len(used) > 30  # the walk found the repository's variables
    assert unknown == {}


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "worker.cli", *args],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", **env},
        cwd=REPO,
        timeout=60,
    )


def test_run_fails_fast_on_bad_config_naming_the_field() -> None:
    result = _run(["run"], {"CHUNKSTREAM_MAX_IN_FLIGHT_DOCUMENTS": "many"})
    assert result.returncode == 2
    assert "CHUNKSTREAM_MAX_IN_FLIGHT_DOCUMENTS" in result.stderr
    # The registry's refusals, turned into the setting that chose the strategy (worker.app).
    result = _run(["run", "--strategy", "nope"], {})
    assert result.returncode == 2
    assert "chunkstream: invalid setting CHUNKSTREAM_STRATEGY (--strategy): " in result.stderr
    result = _run(["run", "--param", "chunk_size=-1"], {})
    assert result.returncode == 2
    assert (
        "chunkstream: invalid setting CHUNKSTREAM_STRATEGY_PARAMS (--strategy-params): "
        in result.stderr
    )


def test_the_invalid_setting_wording_has_one_home() -> None:
    """Every refused setting is worded by config.invalid_setting (variable and flag): no
    module spells the message itself."""
    spelled = [
        f"{path.relative_to(REPO)}:{number}"
        for path in sorted((REPO / "worker").rglob("*.py"))
        if path.name != "config.py" or path.parent.name != "worker"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "invalid setting" in line
    ]
    assert spelled == []
    assert str(invalid_setting("max_wait_ms", "too long")) == (
        "invalid setting CHUNKSTREAM_MAX_WAIT_MS (--max-wait-ms): too long"
    )


def test_readme_configuration_table_is_current() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert settings_table() in readme, "README's table is stale: paste `chunkstream settings`"


def test_the_chunk_cap_derives_from_the_document_limit_unless_set() -> None:
    """With the defaults, a document within CHUNKSTREAM_MAX_DOCUMENT_BYTES may cut into one
    chunk per 32 bytes (the state record bounds nothing: it goes out in parts); the setting,
    when given, is the cap, lifecycle or not."""
    for limit in (1024 * 1024, 10 * 1024 * 1024, 64 * 1024 * 1024):
        settings = load_settings({}, env={"CHUNKSTREAM_MAX_DOCUMENT_BYTES": str(limit)})
        cap, setting = chunk_cap(settings)
        assert cap == limit // 32
        assert setting.startswith("CHUNKSTREAM_MAX_CHUNKS_PER_DOCUMENT (derived")
    for lifecycle in ("true", "false"):
        settings = load_settings(
            {},
            env={
                "CHUNKSTREAM_MAX_CHUNKS_PER_DOCUMENT": "500000",
                "CHUNKSTREAM_MAX_RECORD_BYTES": "65536",
                "CHUNKSTREAM_DOCUMENT_LIFECYCLE": lifecycle,
            },
        )
        assert chunk_cap(settings) == (500_000, "CHUNKSTREAM_MAX_CHUNKS_PER_DOCUMENT")


@pytest.mark.parametrize("encoding", ["msgpack", "json", "connect-json"])
def test_with_a_documents_topic_a_document_has_no_more_chunks_than_one_record_names(
    encoding: Encoding,
) -> None:
    """The documents topic's record names every chunk id of its document: at the cap it must
    still fit max_record_bytes with its key, or the record is refused."""
    doc_id = "d" * 256
    for limit in (65536, 1024 * 1024, 4 * 1024 * 1024):
        settings = load_settings(
            {},
            env={
                "CHUNKSTREAM_MAX_RECORD_BYTES": str(limit),
                "CHUNKSTREAM_DOCUMENTS_TOPIC": "chunks.documents",
            },
        )
        cap, setting = chunk_cap(settings)
        assert setting == "CHUNKSTREAM_MAX_RECORD_BYTES (the documents topic's record)"
        listing = DocumentChunksEvent(
            doc_id=doc_id,
            doc_version="v" * 64,
            chunk_ids=["f" * 32] * cap,
            strategy="semantic",
            source=SourceRecord("documents", 11, 2**40),
            produced_at=dt.datetime.now(dt.UTC),
        )
        value = EventEncoder(encoding).encode(listing)
        assert len(value) + len(doc_id) + 1024 <= limit
        assert 36 * (cap + 1000) > limit  # not needlessly low
