"""Settings: environment variables ``CHUNKSTREAM_<NAME>`` and the same names as flags.

Precedence: flag > environment > default. Everything is validated once, at start-up; a bad
value raises :class:`ConfigError` whose message names the variable and the flag, so an
operator reading a crash-looping pod's log knows what to fix.
"""

from __future__ import annotations

import argparse
import difflib
import enum
import importlib
import json
import os
import re
import typing
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal, NamedTuple

import msgspec

from worker.errors import ConfigError
from worker.models.manifest import DEFAULT_MODEL_NAME, DEFAULT_STATIC_NAME
from worker.models.reference import SEARCH_PATH_ENV

if TYPE_CHECKING:
    from worker.chunking.contract import StrategyError

ENV_PREFIX = "CHUNKSTREAM_"
MiB = 1024 * 1024
# The commit interval under exactly-once when none is set (Kafka Streams' default then too).
EXACTLY_ONCE_COMMIT_INTERVAL_MS = 100
# A document's metadata holds at most 64 entries (worker.wire.events.MAX_METADATA_ENTRIES).
MAX_ROW_METADATA = 64


class Section(enum.StrEnum):
    """The groups of settings, in the order the settings table lists them."""

    KAFKA = "Kafka connection and group"
    TOPICS = "Topics"
    LIFECYCLE = "Document lifecycle"
    STRATEGY = "Strategy"
    LIMITS = "Events and limits"
    ROWS = "Input mapping (table rows)"
    CONSUMER = "In flight, commits and the consumer"
    PRODUCER = "Producer"
    OBSERVABILITY = "Metrics, health and logs"
    SECURITY = "Security (TLS and SASL)"
    MODELS = "Models and inference"
    BUDGETS = "Container budgets"


def about(section: Section, meaning: str, **constraints: Any) -> msgspec.Meta:
    """A setting's one line of help and its group, beside its value's constraints: the help of
    ``chunkstream run --help`` and the meaning column of :func:`settings_table` (the README's
    and docs/reference/settings.md's tables) are this text, stated nowhere else."""
    return msgspec.Meta(description=meaning, extra={"section": section}, **constraints)


class Settings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    bootstrap_servers: Annotated[
        str, about(Section.KAFKA, "Kafka bootstrap servers, comma-separated host:port")
    ] = "localhost:9092"
    group_id: Annotated[
        str, about(Section.KAFKA, "consumer group id; all replicas of one deployment share it")
    ] = "chunkstream"
    group_instance_id: Annotated[
        str | None,
        about(
            Section.KAFKA,
            "static membership id (stable per pod) to avoid rebalances on restart",
        ),
    ] = None
    client_id: Annotated[
        str,
        about(Section.KAFKA, "Kafka client id prefix (shows up in broker logs and quotas)"),
    ] = "chunkstream"
    input_topic: Annotated[str, about(Section.TOPICS, "topic of DocumentEvents")] = "documents"
    output_topic: Annotated[
        str,
        about(
            Section.TOPICS,
            "topic of ChunkEvents (key = chunk id, partitioned by document id; a null value "
            "deletes the chunk)",
        ),
    ] = "chunks"
    dlq_topic: Annotated[str, about(Section.TOPICS, "topic of DeadLetterEvents")] = "documents.dlq"
    document_lifecycle: Annotated[
        bool,
        about(
            Section.LIFECYCLE,
            "updates retract the chunks a document no longer has and input tombstones delete "
            "every chunk of the document (docs/concepts/lifecycle.md); false: append-only",
        ),
    ] = True
    # "" = Kafka Streams' naming of a changelog: state_topic() derives it from the group.
    state_topic: Annotated[
        str,
        about(
            Section.TOPICS,
            "compacted changelog of what the worker remembers per document, co-partitioned "
            "with the input (empty = `<group_id>-document-state-changelog`)",
        ),
    ] = ""
    create_state_topic: Annotated[
        bool,
        about(
            Section.TOPICS,
            "create the state topic at start-up when it is missing (compacted, the input's "
            "partition count and replication factor), as Kafka Streams creates its internal "
            "topics; false where the worker may not create topics: it then waits for the topic",
        ),
    ] = True
    state_dir: Annotated[
        str | None,
        about(
            Section.LIFECYCLE,
            "directory of the local state store (a cache of the state topic, rebuilt from it; "
            "a kept directory restores faster after a restart); unset = a temporary directory",
        ),
    ] = None
    documents_topic: Annotated[
        str | None,
        about(
            Section.TOPICS,
            "optional topic of DocumentChunksEvents: each document's current chunk ids, a null "
            "value when it is deleted (for sinks that delete by document)",
        ),
    ] = None
    unchanged_chunks: Annotated[
        Literal["emit", "skip"],
        about(
            Section.LIFECYCLE,
            "`emit` every chunk of a new version (unchanged ones keep their ids and get current "
            "index/offsets) or `skip` the chunks whose ids the previous version had",
        ),
    ] = "emit"
    strategy: Annotated[str, about(Section.STRATEGY, "default chunking strategy")] = "sentence"
    strategy_params: Annotated[
        dict[str, str], about(Section.STRATEGY, "its parameters: `k=v,k=v` or a JSON object")
    ] = msgspec.field(default_factory=dict)
    allowed_strategies: Annotated[
        list[str],
        about(
            Section.STRATEGY,
            "strategies a document may request in its `strategy` field (comma-separated; "
            "`*` = any; empty = overrides refused)",
        ),
    ] = msgspec.field(default_factory=list)
    encoding: Annotated[
        Literal["msgpack", "json", "connect-json"],
        about(
            Section.LIMITS,
            "encoding of produced events: `msgpack`, `json` or `connect-json` (Kafka "
            "Connect's JSON envelope)",
        ),
    ] = "msgpack"
    # Input mapping (docs/operating/from-a-table.md): `row` reads each input record as one table
    # row, a flat JSON object (a Debezium change event after ExtractNewRecordState), and the
    # row_* settings name the columns that become the document's fields.
    input_format: Annotated[
        Literal["document", "row"],
        about(
            Section.ROWS,
            "`document` (DocumentEvents, msgpack or JSON) or `row`: a flat JSON object of a "
            "table's columns (a Debezium change event flattened by ExtractNewRecordState; "
            "Connect's envelope is unwrapped), mapped by the `row_*` settings "
            "(docs/operating/from-a-table.md)",
        ),
    ] = "document"
    row_id: Annotated[
        str,
        about(
            Section.ROWS,
            "with `row`: the column holding the document id (a number becomes its decimal "
            "text, as Connect's StringConverter writes the key)",
        ),
    ] = "id"
    row_text: Annotated[
        str, about(Section.ROWS, "with `row`: the column holding the text to chunk")
    ] = "text"
    row_version: Annotated[
        str | None,
        about(
            Section.ROWS,
            "with `row`: the column whose value becomes the version, always as an opaque "
            "string (offset order decides, so a restored database whose values restart lower "
            "still wins); unset = none",
        ),
    ] = None
    row_content_type: Annotated[
        str | None,
        about(
            Section.ROWS,
            "with `row`: the column holding the content type (`text/markdown` or "
            "`markdown`/`md`, `text/plain` or `plain`/`text`; null = `text/plain`); unset = "
            "`text/plain`",
        ),
    ] = None
    row_metadata: Annotated[
        list[str],
        about(
            Section.ROWS,
            "with `row`: columns copied into the document's metadata, under their names "
            "(comma-separated; scalar values)",
        ),
    ] = msgspec.field(default_factory=list)
    row_unavailable_value: Annotated[
        str,
        about(
            Section.ROWS,
            "with `row`: a mapped column holding this text is a value the change event did not "
            "carry (an unchanged TOASTed column): the record is dead-lettered "
            "(`unavailable_value`) and the document's chunks stay",
        ),
    ] = "__debezium_unavailable_value"
    max_document_bytes: Annotated[
        int, about(Section.LIMITS, "larger input records are dead-lettered unparsed", ge=1)
    ] = 10 * MiB
    max_record_bytes: Annotated[
        int,
        about(
            Section.LIMITS,
            "largest record the producer sends, Kafka's max.request.size (keep ≤ the topics' "
            "max.message.bytes)",
            ge=64 * 1024,
        ),
    ] = 1 * MiB
    max_chunks_per_document: Annotated[
        int,
        about(
            Section.LIMITS,
            "a document cutting into more chunks is dead-lettered (`too_many_chunks`): bounds "
            "the output one input can cause (0 = max_document_bytes / 32; with a documents "
            "topic, also at most the ids one record of max_record_bytes names)",
            ge=0,
        ),
    ] = 0  # 0: chunk_cap() derives it
    max_in_flight_documents: Annotated[
        int, about(Section.CONSUMER, "high watermark: partitions pause above it", ge=1)
    ] = 256
    max_in_flight_bytes: Annotated[
        int,
        about(
            Section.CONSUMER,
            "high watermark on input bytes being processed (0 = the largest that fits the "
            "memory budget, at most 256 MiB)",
            ge=0,
        ),
    ] = 0
    # Unset with exactly-once: EXACTLY_ONCE_COMMIT_INTERVAL_MS (load_settings).
    commit_interval_ms: Annotated[
        int,
        about(
            Section.CONSUMER,
            "how often finished offsets are committed (with exactly-once: how long a "
            "transaction stays open, and the default is 100: Kafka Streams' under exactly-once)",
            ge=1,
        ),
    ] = 1000
    processing_guarantee: Annotated[
        Literal["at-least-once", "exactly-once"],
        about(
            Section.CONSUMER,
            "`at-least-once` (a crash or a rebalance may publish a document's records again) "
            "or `exactly-once` (its records and input offset commit in one Kafka transaction "
            "per input partition; consumers read with `isolation.level=read_committed`)",
        ),
    ] = "at-least-once"
    drain_timeout_s: Annotated[
        float,
        about(
            Section.CONSUMER,
            "on SIGTERM, how long in-flight documents may take to finish",
            gt=0,
        ),
    ] = 25.0
    session_timeout_ms: Annotated[
        int, about(Section.CONSUMER, "consumer group session timeout", ge=1000)
    ] = 10_000
    heartbeat_interval_ms: Annotated[
        int, about(Section.CONSUMER, "consumer heartbeat interval", ge=100)
    ] = 3_000
    rebalance_timeout_ms: Annotated[
        int,
        about(
            Section.CONSUMER,
            "how long a rebalance may wait for members (bounds revoke drain)",
            ge=1000,
        ),
    ] = 20_000
    max_poll_interval_ms: Annotated[
        int, about(Section.CONSUMER, "consumer max poll interval", ge=1000)
    ] = 300_000
    auto_offset_reset: Annotated[
        Literal["earliest", "latest"],
        about(Section.CONSUMER, "where a group with no committed offset starts"),
    ] = "earliest"
    compression_type: Annotated[
        Literal["none", "gzip", "snappy", "lz4", "zstd"],
        about(
            Section.PRODUCER,
            "Kafka's compression.type of produced events: none, gzip, snappy, lz4 or zstd "
            "(every codec is always readable on input; the state changelog, random chunk ids, "
            "is always written uncompressed)",
        ),
    ] = "zstd"
    linger_ms: Annotated[
        int,
        about(
            Section.PRODUCER,
            "Kafka's linger.ms: how long the producer waits to fill a batch",
            ge=0,
            le=60_000,
        ),
    ] = 5
    batch_size: Annotated[
        int,
        about(
            Section.PRODUCER,
            "Kafka's batch.size: bytes of events per partition batch before compression "
            "(0 = 512 KiB, or CHUNKSTREAM_MAX_RECORD_BYTES if that is lower; at least 1024 and "
            "at most CHUNKSTREAM_MAX_RECORD_BYTES; a larger single event still goes alone)",
            ge=0,
        ),
    ] = 0
    forward_headers: Annotated[
        list[str],
        about(
            Section.PRODUCER,
            "input record headers copied onto chunk events and dead letters (comma-separated "
            "names; `traceparent`/`tracestate` always continue)",
        ),
    ] = msgspec.field(default_factory=list)
    metrics_host: Annotated[
        str, about(Section.OBSERVABILITY, "bind address of /metrics, /healthz, /readyz")
    ] = "0.0.0.0"
    metrics_port: Annotated[
        int,
        about(
            Section.OBSERVABILITY,
            "port of /metrics, /healthz, /readyz (0 disables the server)",
            ge=0,
            le=65535,
        ),
    ] = 9400
    log_level: Annotated[
        Literal["DEBUG", "INFO", "WARNING", "ERROR"],
        about(Section.OBSERVABILITY, "DEBUG, INFO, WARNING or ERROR"),
    ] = "INFO"
    security_protocol: Annotated[
        Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"],
        about(Section.SECURITY, "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"),
    ] = "PLAINTEXT"
    sasl_mechanism: Annotated[
        Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None,
        about(Section.SECURITY, "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"),
    ] = None
    sasl_username: Annotated[str | None, about(Section.SECURITY, "SASL user")] = None
    sasl_password: Annotated[
        str | None,
        about(
            Section.SECURITY,
            "SASL password (or `CHUNKSTREAM_SASL_PASSWORD_FILE`); never logged",
        ),
    ] = None
    # Read at start-up and again for every new client and connection (worker/kafka/clients.py).
    sasl_password_file: Annotated[
        str | None,
        about(
            Section.SECURITY,
            "file holding the SASL password (a mounted Secret); read again for new "
            "connections, so a rotated password needs no restart",
        ),
    ] = None
    ssl_cafile: Annotated[
        str | None, about(Section.SECURITY, "CA bundle that signs the brokers' certificates")
    ] = None
    ssl_certfile: Annotated[
        str | None, about(Section.SECURITY, "client certificate (mutual TLS)")
    ] = None
    ssl_keyfile: Annotated[
        str | None, about(Section.SECURITY, "client private key (mutual TLS)")
    ] = None
    model_dir: Annotated[
        str | None,
        about(
            Section.MODELS,
            "boundary model of the embedding strategies: an ONNX directory (`chunkstream "
            "model build`) or a static one (`model distill`, model2vec); default the distilled "
            f"`{DEFAULT_STATIC_NAME}` found on the model search path (docs/concepts/models.md)",
        ),
    ] = None
    model_int8: Annotated[
        bool,
        about(
            Section.MODELS,
            "use the per-channel int8 model (`model.int8.onnx`) of ONNX models",
        ),
    ] = False
    inference_threads: Annotated[
        int,
        about(
            Section.MODELS,
            "onnxruntime intra-op threads of each running batch (0 = derived from the CPU budget)",
            ge=0,
        ),
    ] = 0
    concurrent_batches: Annotated[
        int,
        about(
            Section.MODELS,
            "embedding batches run at once, each on its own thread (0 = derived: threads × "
            "batches ≤ CPU budget − 1, at least 1)",
            ge=0,
        ),
    ] = 0
    max_batch_tokens: Annotated[
        int,
        about(Section.MODELS, "embedding batch budget: padded length × batch size", ge=256),
    ] = 4096
    max_batch_size: Annotated[
        int, about(Section.MODELS, "most texts in one embedding batch", ge=1)
    ] = 64
    max_wait_ms: Annotated[
        float, about(Section.MODELS, "longest a text waits for its batch to fill", ge=0)
    ] = 5.0
    max_queued_tokens: Annotated[
        int,
        about(
            Section.MODELS,
            "high watermark of the embedding queue (partitions pause above it, resume below half)",
            ge=1024,
        ),
    ] = 65536
    include_embeddings: Annotated[
        bool,
        about(
            Section.MODELS,
            "add each chunk's embedding (float32 little-endian bytes) to its event",
        ),
    ] = False
    retrieval_model_dir: Annotated[
        str | None,
        about(
            Section.MODELS,
            "model of the embeddings that go out with `include_embeddings`, whose tokens size "
            "chunks; default `model_dir` when that is an ONNX build, else the transformer "
            f"`{DEFAULT_MODEL_NAME}` found on the model search path",
        ),
    ] = None
    # Container budgets (worker/runtime/resources.py).
    cpu_budget: Annotated[
        float,
        about(
            Section.BUDGETS,
            "CPU cores the worker may use, a number or a Kubernetes quantity (`1.5`, `500m`; "
            "0 = the cgroup CPU quota, else the CPUs it may run on); inference threads are "
            "derived from it",
            ge=0,
        ),
    ] = 0.0
    memory_budget: Annotated[
        int,
        about(
            Section.BUDGETS,
            "bytes of memory the worker must stay under (0 = the cgroup memory limit, if any); "
            "the in-flight window is derived from it and checked against it",
            ge=0,
        ),
    ] = 0


SECRET_FIELDS = frozenset({"sasl_password"})
_LIST_FIELDS = frozenset({"allowed_strategies", "forward_headers", "row_metadata"})
_MAP_FIELDS = frozenset({"strategy_params"})


def env_name(field: str) -> str:
    return ENV_PREFIX + field.upper()


def flag_name(field: str) -> str:
    return "--" + field.replace("_", "-")


def _describe(field: str) -> str:
    return f"{env_name(field)} ({flag_name(field)})"


def invalid_setting(field: str, why: object) -> ConfigError:
    """The one wording of a refused setting, naming its variable and its flag:
    ``invalid setting CHUNKSTREAM_<FIELD> (--<field>): <why>``. Every room that refuses a
    setting (here, the start-up checks of worker.app, the budgets, the model loading) raises
    this, so an operator greps one shape."""
    return ConfigError(f"invalid setting {_describe(field)}: {why}")


def strategy_setting_error(exc: StrategyError) -> ConfigError:
    """The registry's refusal of the default strategy, as the setting to fix: its name
    (``strategy``) when no strategy has it, else its parameters (``strategy_params``)."""
    from worker.chunking.contract import NoSuchStrategy

    field = "strategy" if isinstance(exc, NoSuchStrategy) else "strategy_params"
    return invalid_setting(field, exc)


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
            raise invalid_setting(field, exc) from None
        if not isinstance(value, dict):
            raise invalid_setting(field, "expected a JSON object")
        return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in value.items()}
    params: dict[str, str] = {}
    for item in raw.split(","):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise invalid_setting(field, f"{item!r} is not key=value")
        params[key.strip()] = value.strip()
    return params


def add_flags(parser: argparse.ArgumentParser) -> None:
    for field in Settings.__struct_fields__:
        parser.add_argument(
            flag_name(field), dest=field, default=None, help=SETTINGS_INFO[field].meaning
        )
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
        raise invalid_setting("sasl_password_file", f"cannot read {path} ({why})") from None


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
            raise invalid_setting(
                "sasl_password", f"set either it or {env_name('sasl_password_file')}, not both"
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
        if match is None:
            raise ConfigError(f"invalid configuration: {exc}") from None
        raise invalid_setting(match.group(1), exc) from None
    _check_consistency(settings)
    return settings


def _check_consistency(s: Settings) -> None:
    bad = invalid_setting
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
    _check_producer(s)
    _check_row_mapping(s)


def _check_row_mapping(s: Settings) -> None:
    """The columns a row mapping names: each at most once, none blank."""
    bad = invalid_setting
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


def _check_producer(s: Settings) -> None:
    bad = invalid_setting
    if 0 < s.batch_size < 1024:
        raise bad("batch_size", f"{s.batch_size} is below 1024 (0 derives it)")
    if s.batch_size > s.max_record_bytes:
        # The broker checks max.message.bytes per batch: a fuller batch would be refused.
        raise bad("batch_size", f"{s.batch_size} is above {env_name('max_record_bytes')}")
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


# The fewest document bytes per chunk the derived cap allows. Prose, code, logs and tables cut
# into chunks several times larger at any size setting; short sections (a changelog's headings)
# come closest, and keep a margin. A document of a heading every line is dead-lettered.
DOCUMENT_BYTES_PER_CHUNK = 32
# A documents-topic record names every chunk id of its document in one record: an id costs
# this much in the value (a quoted 32-digit string in JSON, a little less in msgpack), beside
# room for the record's other fields, key and framing.
_LISTING_BYTES_PER_CHUNK = 36
_LISTING_ROOM = 8 * 1024


def chunk_cap(settings: Settings) -> tuple[int, str]:
    """The most chunks a document may cut into, and the setting that says so: the setting, or
    derived from ``max_document_bytes`` (any document within that limit and not made of
    one-line sections fits); with a documents topic, also as many as one record of
    ``max_record_bytes`` can name (above it the record would be refused). The state record
    bounds nothing: a large state goes out in parts (worker.wire.state_record)."""
    cap, setting = settings.max_chunks_per_document, "CHUNKSTREAM_MAX_CHUNKS_PER_DOCUMENT"
    if not cap:
        cap = max(1, settings.max_document_bytes // DOCUMENT_BYTES_PER_CHUNK)
        setting += f" (derived: CHUNKSTREAM_MAX_DOCUMENT_BYTES / {DOCUMENT_BYTES_PER_CHUNK})"
    if settings.documents_topic is not None:
        fits = (settings.max_record_bytes - _LISTING_ROOM) // _LISTING_BYTES_PER_CHUNK
        if fits < cap:
            return fits, "CHUNKSTREAM_MAX_RECORD_BYTES (the documents topic's record)"
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


class SettingInfo(NamedTuple):
    """What the settings table says of one setting, read off its declaration."""

    section: Section
    meaning: str
    kind: str  # its type as the reference writes it: "integer ≥ 1", "`emit` \\| `skip`", …


def _kind(info: msgspec.inspect.Type, declared: Any) -> str:
    """A setting's type in the reference's words, constraints included. ``declared`` is its
    annotation, whose literal values keep their order (msgspec's inspection sorts them)."""
    mi = msgspec.inspect
    if isinstance(info, mi.Metadata):
        return _kind(info.type, typing.get_args(declared)[0])
    if isinstance(info, mi.UnionType):  # X | None: an optional setting
        (inner,) = [t for t in info.types if not isinstance(t, mi.NoneType)]
        (declared,) = [t for t in typing.get_args(declared) if t is not type(None)]
        return f"{_kind(inner, declared)} (optional)"
    if isinstance(info, mi.LiteralType):
        return " \\| ".join(f"`{value}`" for value in typing.get_args(declared))
    if isinstance(info, mi.IntType | mi.FloatType):
        limits = (("≥", info.ge), (">", info.gt), ("≤", info.le), ("<", info.lt))
        bounds = ", ".join(f"{sign} {value}" for sign, value in limits if value is not None)
        number = "integer" if isinstance(info, mi.IntType) else "number"
        return f"{number} {bounds}" if bounds else number
    names = {
        mi.BoolType: "boolean",
        mi.StrType: "text",
        mi.ListType: "list (comma-separated)",
        mi.DictType: "map (`k=v,k=v` or JSON)",
    }
    return names[type(info)]


def _settings_info() -> dict[str, SettingInfo]:
    info = msgspec.inspect.type_info(Settings)
    assert isinstance(info, msgspec.inspect.StructType)
    declared = typing.get_type_hints(Settings, include_extras=True)
    described = {}
    for field in info.fields:
        about = field.type
        assert isinstance(about, msgspec.inspect.Metadata), f"{field.name} has no about(...)"
        assert about.extra_json_schema is not None
        assert about.extra is not None
        described[field.name] = SettingInfo(
            about.extra["section"],
            about.extra_json_schema["description"],
            _kind(about, declared[field.name]),
        )
    return described


SETTINGS_INFO: dict[str, SettingInfo] = _settings_info()
"""Every setting's group, help and type, as declared on :class:`Settings`."""


class OtherVariable(NamedTuple):
    """A ``CHUNKSTREAM_*`` variable that is ours but not a setting: no flag, not validated, and
    never warned about as unknown."""

    name: str
    read_by: str
    meaning: str


OTHER_VARIABLES: tuple[OtherVariable, ...] = (
    OtherVariable(
        SEARCH_PATH_ENV,
        "the worker and the CLI",
        "`:`-separated directories that replace the model search path (docs/concepts/models.md)",
    ),
    # worker.chunking._native reads these two; named here rather than imported, so that the
    # image's model stage (which copies config.py, not the chunking cores) can import config.
    OtherVariable(
        "CHUNKSTREAM_PURE_PYTHON",
        "the worker, the CLI and the benchmarks",
        "`1`: every compiled path off (the rule strategies' cores, the embedding layout's "
        "sentences and text counts, the static model's rows): their pure-Python twins run "
        "instead (the same chunks and vectors, slower; for comparison or debugging); read "
        "whenever a core is asked for",
    ),
    OtherVariable(
        "CHUNKSTREAM_REQUIRE_NATIVE",
        "the test suite",
        "`1`: the test suite fails when a compiled core was not built (`scripts/test` sets it)",
    ),
    OtherVariable(
        "CHUNKSTREAM_TEST_BOOTSTRAP",
        "the test suite",
        "bootstrap servers of a running broker the Kafka tests use instead of starting their own",
    ),
    OtherVariable(
        "CHUNKSTREAM_FUZZ_PROFILE",
        "the test suite",
        "`long`: the fuzz tests try many more examples than CI's `ci`",
    ),
    OtherVariable(
        "CHUNKSTREAM_CAMPAIGN_SEED",
        "the test suite",
        "the seed of the fault campaign's random plan (tests/faults/test_campaign.py prints the "
        "one it used), to run that plan again",
    ),
    OtherVariable(
        "CHUNKSTREAM_PEER_PYTHON",
        "bench/peer_bench.py",
        "the interpreter of a virtualenv with the peers the benchmark runs (the `bench` extra)",
    ),
    OtherVariable(
        "CHUNKSTREAM_KAFKA_CACHE",
        "deploy/kafka/local-kafka",
        "where the local broker's jars and run directory are kept (default `.cache/kafka`)",
    ),
    OtherVariable(
        "CHUNKSTREAM_CONNECT_CACHE",
        "deploy/connect/local-connect, local-postgres",
        "where Kafka Connect's and PostgreSQL's downloads and run directories are kept "
        "(default `.cache/connect`)",
    ),
    OtherVariable(
        "CHUNKSTREAM_STATIC_MODEL_DIR",
        "scripts/bootstrap",
        "where the static boundary model is distilled "
        f"(default `.cache/models/{DEFAULT_STATIC_NAME}`)",
    ),
)


def unknown_variables(env: Mapping[str, str]) -> list[str]:
    """A warning for each ``CHUNKSTREAM_*`` variable of ``env`` that is neither a setting nor
    one of :data:`OTHER_VARIABLES`, naming the closest known name when one is close: a
    misspelt setting is otherwise ignored without a word (and its default used)."""
    known = [env_name(field) for field in Settings.__struct_fields__]
    known += [variable.name for variable in OTHER_VARIABLES]
    endings = {name.removeprefix(ENV_PREFIX): name for name in known}
    found = []
    for name in sorted(env):
        if not name.upper().startswith(ENV_PREFIX) or name in known:
            continue
        # Compared without the prefix they all share, which would make every name look close.
        ending = name.upper().removeprefix(ENV_PREFIX)
        closest = difflib.get_close_matches(ending, endings, n=1)
        hint = (
            f"did you mean {endings[closest[0]]}?"
            if closest
            else "`chunkstream settings` lists the settings"
        )
        found.append(f"{name} is not a chunkstream setting; ignored ({hint})")
    return found


def _shown(value: object) -> str:
    """A default as the settings table shows it: empty when unset, booleans as they are set."""
    if value in (None, "", [], {}):
        return ""
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value}`"


def settings_table() -> str:
    """Markdown tables of every setting by group (variable, flag, type, default, meaning), and
    of the other variables: what `chunkstream settings` prints, the README's and
    docs/reference/settings.md's tables (tests keep both current)."""
    defaults = Settings()
    lines: list[str] = []
    for section in Section:
        lines += [f"### {section}", "", "| variable | flag | type | default | meaning |"]
        lines.append("|---|---|---|---|---|")
        for field, info in SETTINGS_INFO.items():
            if info.section == section:
                lines.append(
                    f"| `{env_name(field)}` | `{flag_name(field)}` | {info.kind} "
                    f"| {_shown(getattr(defaults, field))} | {info.meaning} |"
                )
        lines.append("")
    lines += [
        "### Other environment variables",
        "",
        "Ours, but not settings: no flag, and no warning at start-up, which names any other "
        f"`{ENV_PREFIX}*` variable as unknown.",
        "",
        "| variable | read by | meaning |",
        "|---|---|---|",
    ]
    lines += [f"| `{v.name}` | {v.read_by} | {v.meaning} |" for v in OTHER_VARIABLES]
    return "\n".join(lines)
