"""Settings: environment variables ``CHUNKSTREAM_<NAME>`` and the same names as flags.

Precedence: flag > environment > default. Everything is validated once, at start-up; a bad
value raises :class:`ConfigError` whose message names the variable and the flag, so an
operator reading a crash-looping pod's log knows what to fix.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Literal

import msgspec

from worker.errors import ConfigError
from worker.models.manifest import DEFAULT_MODEL_NAME, DEFAULT_STATIC_NAME

ENV_PREFIX = "CHUNKSTREAM_"
MiB = 1024 * 1024
# The commit interval under exactly-once when none is set (Kafka Streams' default then too).
EXACTLY_ONCE_COMMIT_INTERVAL_MS = 100

Positive = Annotated[int, msgspec.Meta(ge=1)]
# A document's metadata holds at most 64 entries (worker.wire.events.MAX_METADATA_ENTRIES).
MAX_ROW_METADATA = 64


class Settings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    bootstrap_servers: str = "localhost:9092"
    group_id: str = "chunkstream"
    group_instance_id: str | None = None
    client_id: str = "chunkstream"
    input_topic: str = "documents"
    output_topic: str = "chunks"
    dlq_topic: str = "documents.dlq"
    # Document lifecycle (docs/concepts/lifecycle.md): updates retract, tombstones delete, state
    # in a compacted changelog topic co-partitioned with the input.
    document_lifecycle: bool = True
    state_topic: str = ""  # "" = "<group_id>-document-state-changelog" (Kafka Streams' naming)
    create_state_topic: bool = True  # created when missing, as Kafka Streams' internal topics
    state_dir: str | None = None
    documents_topic: str | None = None
    unchanged_chunks: Literal["emit", "skip"] = "emit"
    strategy: str = "sentence"
    strategy_params: dict[str, str] = msgspec.field(default_factory=dict)
    allowed_strategies: list[str] = msgspec.field(default_factory=list)
    encoding: Literal["msgpack", "json", "connect-json"] = "msgpack"
    # Input mapping (docs/operating/from-a-table.md): `row` reads each input record as one table
    # row, a flat JSON object (a Debezium change event after ExtractNewRecordState), and the
    # row_* settings name the columns that become the document's fields.
    input_format: Literal["document", "row"] = "document"
    row_id: str = "id"
    row_text: str = "text"
    row_version: str | None = None
    row_content_type: str | None = None
    row_metadata: list[str] = msgspec.field(default_factory=list)
    row_unavailable_value: str = "__debezium_unavailable_value"
    max_document_bytes: Positive = 10 * MiB
    max_record_bytes: Annotated[int, msgspec.Meta(ge=64 * 1024)] = 1 * MiB
    max_chunks_per_document: Positive = 20_000
    max_in_flight_documents: Positive = 256
    max_in_flight_bytes: Annotated[int, msgspec.Meta(ge=0)] = 0
    commit_interval_ms: Positive = 1000  # EXACTLY_ONCE_COMMIT_INTERVAL_MS if not set, with it
    # exactly-once: a document's chunk events, tombstones, state record and dead letter commit
    # with its input offset in one Kafka transaction (docs/concepts/exactly-once.md).
    processing_guarantee: Literal["at-least-once", "exactly-once"] = "at-least-once"
    drain_timeout_s: Annotated[float, msgspec.Meta(gt=0)] = 25.0
    session_timeout_ms: Annotated[int, msgspec.Meta(ge=1000)] = 10_000
    heartbeat_interval_ms: Annotated[int, msgspec.Meta(ge=100)] = 3_000
    rebalance_timeout_ms: Annotated[int, msgspec.Meta(ge=1000)] = 20_000
    max_poll_interval_ms: Annotated[int, msgspec.Meta(ge=1000)] = 300_000
    auto_offset_reset: Literal["earliest", "latest"] = "earliest"
    # Producer tuning by Kafka's own names (compression.type, linger.ms, batch.size) and the
    # input headers that travel on to the output (issue 14).
    compression_type: Literal["none", "gzip", "snappy", "lz4", "zstd"] = "zstd"
    linger_ms: Annotated[int, msgspec.Meta(ge=0, le=60_000)] = 5
    batch_size: Annotated[int, msgspec.Meta(ge=0)] = 0  # 0: batch_bytes() derives it
    forward_headers: list[str] = msgspec.field(default_factory=list)
    metrics_host: str = "0.0.0.0"
    metrics_port: Annotated[int, msgspec.Meta(ge=0, le=65535)] = 9400
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = None
    sasl_username: str | None = None
    sasl_password: str | None = None
    # Read at start-up and again for every new client and connection (worker/kafka/clients.py), so a
    # rotated secret is used without a restart.
    sasl_password_file: str | None = None
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    model_dir: str | None = None
    model_int8: bool = False
    inference_threads: Annotated[int, msgspec.Meta(ge=0)] = 0
    concurrent_batches: Annotated[int, msgspec.Meta(ge=0)] = 0
    max_batch_tokens: Annotated[int, msgspec.Meta(ge=256)] = 4096
    max_batch_size: Positive = 64
    max_wait_ms: Annotated[float, msgspec.Meta(ge=0)] = 5.0
    max_queued_tokens: Annotated[int, msgspec.Meta(ge=1024)] = 65536
    include_embeddings: bool = False
    retrieval_model_dir: str | None = None
    # Container budgets (worker/runtime/resources.py): 0 = read the cgroup limits.
    cpu_budget: Annotated[float, msgspec.Meta(ge=0)] = 0.0
    memory_budget: Annotated[int, msgspec.Meta(ge=0)] = 0


# One line per setting: the README's configuration table is generated from this.
SETTING_HELP: dict[str, str] = {
    "bootstrap_servers": "Kafka bootstrap servers, comma-separated host:port",
    "group_id": "consumer group id; all replicas of one deployment share it",
    "group_instance_id": "static membership id (stable per pod) to avoid rebalances on restart",
    "client_id": "Kafka client id prefix (shows up in broker logs and quotas)",
    "input_topic": "topic of DocumentEvents",
    "output_topic": "topic of ChunkEvents (key = chunk id, partitioned by document id; a null "
    "value deletes the chunk)",
    "dlq_topic": "topic of DeadLetterEvents",
    "document_lifecycle": "updates retract the chunks a document no longer has and input "
    "tombstones delete every chunk of the document (docs/concepts/lifecycle.md); "
    "false: append-only",
    "state_topic": "compacted changelog of what the worker remembers per document, "
    "co-partitioned with the input (empty = `<group_id>-document-state-changelog`)",
    "create_state_topic": "create the state topic at start-up when it is missing (compacted, "
    "the input's partition count and replication factor), as Kafka Streams creates its internal "
    "topics; false where the worker may not create topics: it then waits for the topic",
    "state_dir": "directory of the local state store (a cache of the state topic, rebuilt from "
    "it; a kept directory restores faster after a restart); unset = a temporary directory",
    "documents_topic": "optional topic of DocumentChunksEvents: each document's current chunk "
    "ids, a null value when it is deleted (for sinks that delete by document)",
    "unchanged_chunks": "`emit` every chunk of a new version (unchanged ones keep their ids and "
    "get current index/offsets) or `skip` the chunks whose ids the previous version had",
    "strategy": "default chunking strategy",
    "strategy_params": "its parameters: `k=v,k=v` or a JSON object",
    "allowed_strategies": "strategies a document may request in its `strategy` field "
    "(comma-separated; `*` = any; empty = overrides refused)",
    "encoding": "encoding of produced events: `msgpack`, `json` or `connect-json` "
    "(Kafka Connect's JSON envelope)",
    "input_format": "`document` (DocumentEvents, msgpack or JSON) or `row`: a flat JSON object "
    "of a table's columns (a Debezium change event flattened by ExtractNewRecordState; Connect's "
    "envelope is unwrapped), mapped by the `row_*` settings (docs/operating/from-a-table.md)",
    "row_id": "with `row`: the column holding the document id (a number becomes its decimal "
    "text, as Connect's StringConverter writes the key)",
    "row_text": "with `row`: the column holding the text to chunk",
    "row_version": "with `row`: the column whose value becomes the version, always as an opaque "
    "string (offset order decides, so a restored database whose values restart lower still "
    "wins); unset = none",
    "row_content_type": "with `row`: the column holding the content type (`text/markdown` or "
    "`markdown`/`md`, `text/plain` or `plain`/`text`; null = `text/plain`); unset = "
    "`text/plain`",
    "row_metadata": "with `row`: columns copied into the document's metadata, under their names "
    "(comma-separated; scalar values)",
    "row_unavailable_value": "with `row`: a mapped column holding this text is a value the change "
    "event did not carry (an unchanged TOASTed column): the record is dead-lettered "
    "(`unavailable_value`) and the document's chunks stay",
    "max_document_bytes": "larger input records are dead-lettered unparsed",
    "max_record_bytes": "largest record the producer sends, Kafka's max.request.size "
    "(keep ≤ the topics' max.message.bytes)",
    "max_chunks_per_document": "a document cutting into more chunks is dead-lettered "
    "(`too_many_chunks`): bounds the output one input can cause; with the lifecycle, also at "
    "most max_record_bytes / 52 (the ids one state record can name)",
    "max_in_flight_documents": "high watermark: partitions pause above it",
    "max_in_flight_bytes": "high watermark on input bytes being processed (0 = the largest "
    "that fits the memory budget, at most 256 MiB)",
    "commit_interval_ms": "how often finished offsets are committed (with exactly-once: how "
    "long a transaction stays open, and the default is 100: Kafka Streams' under exactly-once)",
    "processing_guarantee": "`at-least-once` (a crash or a rebalance may publish a document's "
    "records again) or `exactly-once` (its records and input offset commit in one Kafka "
    "transaction per input partition; consumers read with `isolation.level=read_committed`)",
    "drain_timeout_s": "on SIGTERM, how long in-flight documents may take to finish",
    "session_timeout_ms": "consumer group session timeout",
    "heartbeat_interval_ms": "consumer heartbeat interval",
    "rebalance_timeout_ms": "how long a rebalance may wait for members (bounds revoke drain)",
    "max_poll_interval_ms": "consumer max poll interval",
    "auto_offset_reset": "where a group with no committed offset starts",
    "compression_type": "Kafka's compression.type of produced events: none, gzip, snappy, lz4 "
    "or zstd (every codec is always readable on input; the state changelog, random chunk ids, "
    "is always written uncompressed)",
    "linger_ms": "Kafka's linger.ms: how long the producer waits to fill a batch",
    "batch_size": "Kafka's batch.size: bytes of events per partition batch before compression "
    "(0 = 512 KiB, or CHUNKSTREAM_MAX_RECORD_BYTES if that is lower; at least 1024 and at most "
    "CHUNKSTREAM_MAX_RECORD_BYTES; a larger single event still goes alone)",
    "forward_headers": "input record headers copied onto chunk events and dead letters "
    "(comma-separated names; `traceparent`/`tracestate` always continue)",
    "metrics_host": "bind address of /metrics, /healthz, /readyz",
    "metrics_port": "port of /metrics, /healthz, /readyz (0 disables the server)",
    "log_level": "DEBUG, INFO, WARNING or ERROR",
    "security_protocol": "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL",
    "sasl_mechanism": "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512",
    "sasl_username": "SASL user",
    "sasl_password": "SASL password (or `CHUNKSTREAM_SASL_PASSWORD_FILE`); never logged",
    "sasl_password_file": "file holding the SASL password (a mounted Secret); read again for "
    "new connections, so a rotated password needs no restart",
    "ssl_cafile": "CA bundle that signs the brokers' certificates",
    "ssl_certfile": "client certificate (mutual TLS)",
    "ssl_keyfile": "client private key (mutual TLS)",
    "model_dir": "boundary model of the embedding strategies: an ONNX directory (`chunkstream "
    "model build`) or a static one (`model distill`, model2vec); default the distilled "
    f"`{DEFAULT_STATIC_NAME}` found on the model search path (docs/concepts/models.md)",
    "model_int8": "use the per-channel int8 model (`model.int8.onnx`) of ONNX models",
    "inference_threads": "onnxruntime intra-op threads of each running batch "
    "(0 = derived from the CPU budget)",
    "concurrent_batches": "embedding batches run at once, each on its own thread (0 = derived: "
    "threads × batches ≤ CPU budget − 1, at least 1)",
    "max_batch_tokens": "embedding batch budget: padded length × batch size",
    "max_batch_size": "most texts in one embedding batch",
    "max_wait_ms": "longest a text waits for its batch to fill",
    "max_queued_tokens": "high watermark of the embedding queue (partitions pause above it, "
    "resume below half)",
    "include_embeddings": "add each chunk's embedding (float32 little-endian bytes) to its event",
    "retrieval_model_dir": "model of the embeddings that go out with `include_embeddings`, whose "
    "tokens size chunks; default `model_dir` when that is an ONNX build, else the transformer "
    f"`{DEFAULT_MODEL_NAME}` found on the model search path",
    "cpu_budget": "CPU cores the worker may use, a number or a Kubernetes quantity (`1.5`, "
    "`500m`; 0 = the cgroup CPU quota, else the CPUs it may run on); inference threads are "
    "derived from it",
    "memory_budget": "bytes of memory the worker must stay under (0 = the cgroup memory limit, "
    "if any); the in-flight window is derived from it and checked against it",
}

SECRET_FIELDS = frozenset({"sasl_password"})
_LIST_FIELDS = frozenset({"allowed_strategies", "forward_headers", "row_metadata"})
_MAP_FIELDS = frozenset({"strategy_params"})


def env_name(field: str) -> str:
    return ENV_PREFIX + field.upper()


def flag_name(field: str) -> str:
    return "--" + field.replace("_", "-")


def _describe(field: str) -> str:
    return f"{env_name(field)} ({flag_name(field)})"


def parse_params(raw: str, field: str = "strategy_params") -> dict[str, str]:
    """``k=v,k=v`` or a JSON object of scalars → ``{k: "v"}`` (values stay strings; the
    strategy's own parameter schema converts and range-checks them)."""
    raw = raw.strip()
    if not raw:
        return {}
    if raw.startswith("{"):
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"invalid setting {_describe(field)}: {exc}") from None
        if not isinstance(value, dict):
            raise ConfigError(f"invalid setting {_describe(field)}: expected a JSON object")
        return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in value.items()}
    params: dict[str, str] = {}
    for item in raw.split(","):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"invalid setting {_describe(field)}: {item!r} is not key=value")
        params[key.strip()] = value.strip()
    return params


def add_flags(parser: argparse.ArgumentParser) -> None:
    for field in Settings.__struct_fields__:
        parser.add_argument(flag_name(field), dest=field, default=None, help=SETTING_HELP[field])
    parser.add_argument(
        "--param",
        dest="param",
        action="append",
        metavar="K=V",
        help="one strategy parameter (repeatable; merged over --strategy-params)",
    )


def _raw_from_env(env: Mapping[str, str]) -> dict[str, Any]:
    raw: dict[str, Any] = {}
    for field in Settings.__struct_fields__:
        value = env.get(env_name(field))
        if value is not None and value != "":
            raw[field] = value
    return raw


def read_password_file(path: str) -> str:
    """The SASL password in ``path`` (a trailing newline is not part of it)."""
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read().rstrip("\n")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not UTF-8"
        raise ConfigError(
            f"invalid setting {_describe('sasl_password_file')}: cannot read {path} ({why})"
        ) from None


def _normalise(field: str, value: Any) -> Any:
    if isinstance(value, list) and field in _MAP_FIELDS:
        # Repeated `--param k=v` flags.
        merged: dict[str, str] = {}
        for item in value:
            merged.update(parse_params(item, field))
        return merged
    if isinstance(value, str) and field in _MAP_FIELDS:
        return parse_params(value, field)
    if isinstance(value, str) and field in _LIST_FIELDS:
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, str) and field == "cpu_budget":
        return _cpu_quantity(value)
    return value


def _cpu_quantity(text: str) -> str | float:
    """``500m`` (millicores, as a pod spec writes a CPU request) → 0.5; anything else is left
    for the Settings conversion, which names the setting when it is not a number."""
    text = text.strip()
    if text.endswith("m"):
        try:
            return float(text[:-1]) / 1000
        except ValueError:
            return text
    return text


_PATH = re.compile(r"at `\$\.(\w+)")


def load_settings(
    flags: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None
) -> Settings:
    """Merge flags over environment over defaults, then validate everything."""
    raw = _raw_from_env(os.environ if env is None else env)
    for field, value in (flags or {}).items():
        if field in Settings.__struct_fields__ and value is not None:
            raw[field] = value
    raw = {field: _normalise(field, value) for field, value in raw.items()}
    if raw.get("sasl_password_file"):
        if raw.get("sasl_password") is not None:
            raise ConfigError(
                f"invalid setting {_describe('sasl_password')}: set either it or "
                f"{env_name('sasl_password_file')}, not both"
            )
        raw["sasl_password"] = read_password_file(raw["sasl_password_file"])
    extra_params = (flags or {}).get("param")
    if extra_params:
        raw["strategy_params"] = {
            **raw.get("strategy_params", {}),
            **_normalise("strategy_params", list(extra_params)),
        }
    if raw.get("processing_guarantee") == "exactly-once" and "commit_interval_ms" not in raw:
        # Kafka Streams' default under exactly-once: output is readable only once its
        # transaction commits, and the commit runs beside the work (worker.consuming.loop).
        raw["commit_interval_ms"] = EXACTLY_ONCE_COMMIT_INTERVAL_MS
    try:
        settings = msgspec.convert(raw, Settings, strict=False)
    except msgspec.ValidationError as exc:
        match = _PATH.search(str(exc))
        where = _describe(match.group(1)) if match else "configuration"
        raise ConfigError(f"invalid setting {where}: {exc}") from None
    _check_consistency(settings)
    return settings


def _check_consistency(s: Settings) -> None:
    def bad(field: str, why: str) -> ConfigError:
        return ConfigError(f"invalid setting {_describe(field)}: {why}")

    if not s.bootstrap_servers.strip():
        raise bad("bootstrap_servers", "must not be empty")
    for field in ("group_id", "input_topic", "output_topic", "dlq_topic"):
        if not getattr(s, field).strip():
            raise bad(field, "must not be empty")
    if s.output_topic == s.input_topic:
        raise bad("output_topic", "must differ from the input topic (it would loop)")
    if s.dlq_topic in (s.input_topic, s.output_topic):
        raise bad("dlq_topic", "must differ from the input and output topics")
    taken = {s.input_topic, s.output_topic, s.dlq_topic}
    if s.document_lifecycle and state_topic(s) in taken:
        raise bad("state_topic", "must differ from the input, output and dead-letter topics")
    if s.documents_topic is not None and s.documents_topic in taken | {state_topic(s)}:
        raise bad("documents_topic", "must differ from the worker's other topics")
    if s.heartbeat_interval_ms >= s.session_timeout_ms:
        raise bad("heartbeat_interval_ms", "must be lower than the session timeout")
    if s.security_protocol.startswith("SASL"):
        if s.sasl_mechanism is None:
            raise bad("sasl_mechanism", f"required with {s.security_protocol}")
        if not s.sasl_username or s.sasl_password is None:
            raise bad("sasl_username", f"user and password are required with {s.sasl_mechanism}")
    for field in ("ssl_cafile", "ssl_certfile", "ssl_keyfile"):
        path = getattr(s, field)
        if path is not None and not os.path.isfile(path):
            raise bad(field, f"no such file: {path}")
    for field in ("model_dir", "retrieval_model_dir"):
        path = getattr(s, field)
        if path is not None and not os.path.isdir(path):
            raise bad(field, f"no such directory: {path}")
    _check_producer(s, bad)
    _check_row_mapping(s, bad)


def _check_row_mapping(s: Settings, bad: Callable[[str, str], ConfigError]) -> None:
    """The columns a row mapping names: each at most once, none blank."""
    named: dict[str, str] = {}
    columns = [("row_id", s.row_id), ("row_text", s.row_text)]
    columns += [(f, c) for f in ("row_version", "row_content_type") if (c := getattr(s, f))]
    columns += [("row_metadata", column) for column in s.row_metadata]
    for field, column in columns:
        if not column.strip():
            raise bad(field, "must name a column")
        if column in named and field != "row_metadata":
            raise bad(field, f"column {column!r} is already {env_name(named[column])}")
        named.setdefault(column, field)
    if len(s.row_metadata) > MAX_ROW_METADATA:
        raise bad("row_metadata", f"{len(s.row_metadata)} columns (limit {MAX_ROW_METADATA})")
    if not s.row_unavailable_value:
        raise bad("row_unavailable_value", "must not be empty")


def _check_producer(s: Settings, bad: Callable[[str, str], ConfigError]) -> None:
    if 0 < s.batch_size < 1024:
        raise bad("batch_size", f"{s.batch_size} is below 1024 (0 derives it)")
    if s.batch_size > s.max_record_bytes:
        # The broker checks max.message.bytes per batch: a fuller batch would be refused.
        raise bad("batch_size", f"{s.batch_size} is above CHUNKSTREAM_MAX_RECORD_BYTES")
    if s.compression_type != "none" and not codec_available(s.compression_type):
        raise bad("compression_type", f"the {s.compression_type} codec library is not installed")
    reserved = {"content-type", "traceparent", "tracestate"}
    for name in s.forward_headers:
        if name.lower() in reserved:
            raise bad("forward_headers", f"{name!r} is set by the worker itself")


# The batch size when none is set. aiokafka keeps one produce request in flight per broker,
# carrying at most one batch per partition, so the bytes a batch may hold bound what a worker
# can publish per round trip: small batches leave a worker waiting on the broker
# (bench/e2e_bench.py; docs/benchmarks.md has the comparison). librdkafka's own default is
# about a topic's default max.message.bytes; half of that leaves room under it whatever the
# compression.
DEFAULT_BATCH_BYTES = 512 * 1024


def batch_bytes(settings: Settings) -> int:
    """The producer's batch.size: the setting, or the default capped by max_record_bytes."""
    return settings.batch_size or min(DEFAULT_BATCH_BYTES, settings.max_record_bytes)


# Bytes per chunk in the largest state record: three versions' 16-byte ids (a version the
# broker refused leaves a delete marker naming its own ids, the previous version's and those
# that one retracted), and room for the record's key and framing.
_STATE_BYTES_PER_CHUNK = 3 * 16 + 4


def chunk_cap(settings: Settings) -> tuple[int, str]:
    """The most chunks a document may cut into, and the setting that says so: with the
    lifecycle, also as many as one state record of ``max_record_bytes`` can name (above it the
    state record would be refused and stall the partition)."""
    cap, setting = settings.max_chunks_per_document, "CHUNKSTREAM_MAX_CHUNKS_PER_DOCUMENT"
    if settings.document_lifecycle:
        fits = settings.max_record_bytes // _STATE_BYTES_PER_CHUNK
        if fits < cap:
            return fits, "CHUNKSTREAM_MAX_RECORD_BYTES (the state record)"
    return cap, setting


def state_topic(settings: Settings) -> str:
    """The state changelog's name: the setting, else Kafka Streams' convention
    ``<application id>-<store>-changelog`` with the group id as the application id."""
    return settings.state_topic or f"{settings.group_id}-document-state-changelog"


def codec_available(name: str) -> bool:
    """Whether the library of a compression codec is importable. aiokafka (≥ 0.11) uses the
    standard library for gzip and cramjam for snappy, lz4 and zstd; asked here by importing
    cramjam rather than through aiokafka, so that settings stay free of the Kafka client
    (docs/architecture.md: Kafka stays at the edge)."""
    if name == "gzip":
        return True
    try:
        importlib.import_module("cramjam")
    except ImportError:
        return False
    return True


def exactly_once(settings: Settings) -> bool:
    """Whether the worker writes in Kafka transactions (worker.kafka.transactions)."""
    return settings.processing_guarantee == "exactly-once"


def redacted(settings: Settings) -> dict[str, Any]:
    """The effective settings with secrets masked, for the start-up banner."""
    out = msgspec.structs.asdict(settings)
    for field in SECRET_FIELDS:
        if out.get(field) is not None:
            out[field] = "***"
    return out


def settings_table(fields: Sequence[str] | None = None) -> str:
    """Markdown table of every setting, its variable, flag, default and meaning."""
    defaults = Settings()
    rows = ["| variable | flag | default | meaning |", "|---|---|---|---|"]
    for field in fields or Settings.__struct_fields__:
        default = getattr(defaults, field)
        shown = "" if default in (None, {}, []) else f"`{default}`"
        rows.append(
            f"| `{env_name(field)}` | `{flag_name(field)}` | {shown} | {SETTING_HELP[field]} |"
        )
    return "\n".join(rows)
