"""The source's options, read and checked on the driver before any task starts.

Spark hands options over with lower-cased names and string values; each is read
here once, by its documented name or an alias (Spark's Kafka source spells some of
them `kafka.*`), and a bad or unknown one is a one-line ValueError naming it, so a
typo fails the query at once instead of being ignored.

Read (batch and streaming):

    bootstrap               HOST:PORT[,HOST:PORT...]; alias kafka.bootstrap.servers
    subscribe               topic[,topic...]                    } exactly one
    subscribePattern        a regular expression, whole names   }
    startingOffsets         earliest | latest | JSON {"topic": {"0": 23, "1": -2}}
                            (batch default earliest, streaming default latest;
                             -2 earliest, -1 latest; partitions left out: the default)
    includeHeaders          true | false (default false): the headers column
    failOnDataLoss          true | false (default true): fail when records in a range are gone
    fetchMaxBytes           bytes per Fetch of one partition (default 4 MiB);
                            alias kafka.max.partition.fetch.bytes
    pollTimeoutMs           how long a task waits on an unreachable leader (default 120000);
                            alias kafkaConsumer.pollTimeoutMs
    isolation_level         read_committed (default) | read_uncommitted; alias kafka.isolation.level.
                            read_committed ends ranges at the last stable offset and drops aborted
                            transactions; readCommitted true | false says the same

Batch only:  endingOffsets (latest | JSON, default latest), minPartitions,
             maxRecordsPerPartition (default 1,000,000: larger ranges are split).
Streaming only:  maxOffsetsPerTrigger (records per micro-batch over all partitions).

Values typed by the schema registry (read; mmlog/spark/values.py):

    valueFormat             binary (default) | avro | json | protobuf: the value column becomes a struct
                            of the schema's fields, and a valueSchemaId column is added
    schemaRegistry          the registry's URL(s); alias schema.registry.url
    valueSubject            the reader schema's subject (default <topic>-value of the one topic)
    valueSchemaVersion      its version (default latest); or valueSchemaId, a schema id
    schemaRegistryUser, schemaRegistryPassword   basic authentication

Write: bootstrap, topic (overrides a topic column, as in Spark), requestTimeoutMs; with valueFormat avro,
json or protobuf a struct value column is encoded by the registry's schema (mmlog/spark/value_encoder.py):
schemaRegistry, valueSubject, valueSchema (the schema's text), schemaRegistryUser/Password.

Security (read and write), as Spark's Kafka source takes them:

    kafka.security.protocol     PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL
    kafka.sasl.mechanism        PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512
    kafka.sasl.jaas.config      ...ScramLoginModule required username="..." password="...";
    kafka.ssl.truststore.location   CA certificates (PEM)
    kafka.ssl.keystore.location     the client's certificate chain and key (PEM), for mutual TLS
    kafka.ssl.key.password, kafka.ssl.endpoint.identification.algorithm, kafka.ssl.*.type (PEM)

mapped onto the client's options (security/client.py `options_from_properties`) and
checked on the driver; each executor builds its own TLS context from the same files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

from mmlog.client.connection import parse_bootstrap
from mmlog.security.client import ClientSecurity, options_from_properties
from mmlog.spark.offsets import EARLIEST, LATEST, OffsetSpec, parse_spec

MiB = 1 << 20
# 4 MiB a Fetch: about 20,000 records of 200 bytes, one Arrow batch; fetched while the last one is decoded.
DEFAULT_FETCH_BYTES = 4 * MiB
MAX_FETCH_BYTES = 256 * MiB  # Arrow binary offsets are int32: a chunk stays far below 2 GiB
# A range of at most 1,000,000 records per Spark task: at 200 bytes about 1-2 s of work, so a failed
# task repeats little and two cores share even a one-partition topic.
DEFAULT_MAX_RECORDS = 1_000_000


class Options:
    """The options as given (names lower-cased); `take` reads one, `finish` rejects whatever is left."""

    def __init__(self, given: Mapping[str, str]) -> None:
        self._left = {str(k).lower(): str(v) for k, v in dict(given).items()}

    def take(self, name: str, *aliases: str) -> str | None:
        found = [n for n in (name, *aliases) if n.lower() in self._left]
        if len(found) > 1:
            raise ValueError(f"mmlog: options {' and '.join(found)} mean the same: give one")
        return self._left.pop(found[0].lower()) if found else None

    def text(self, name: str, *aliases: str, required: bool = False) -> str | None:
        value = self.take(name, *aliases)
        if value is not None and not value.strip():
            raise ValueError(f"mmlog option {name}: empty")
        if value is None and required:
            raise ValueError(f"mmlog option {name} is required")
        return None if value is None else value.strip()

    def integer(self, name: str, default: int | None, low: int, high: int | None = None,
                aliases: tuple[str, ...] = ()) -> int | None:
        value = self.take(name, *aliases)
        if value is None:
            return default
        try:
            number = int(value.strip())
        except ValueError:
            number = None
        if number is None or number < low or (high is not None and number > high):
            bound = f">= {low}" + ("" if high is None else f" and <= {high}")
            raise ValueError(f"mmlog option {name}: want an integer {bound}, got {value!r}")
        return number

    def boolean(self, name: str, default: bool) -> bool:
        value = self.take(name)
        if value is None:
            return default
        if value.strip().lower() not in ("true", "false"):
            raise ValueError(f"mmlog option {name}: want true or false, got {value!r}")
        return value.strip().lower() == "true"

    def forbid(self, name: str, why: str) -> None:
        if self.take(name) is not None:
            raise ValueError(f"mmlog option {name}: {why}")

    def finish(self, known: str) -> None:
        if self._left:
            raise ValueError(f"mmlog: unknown option {sorted(self._left)[0]!r} (known: {known})")


def _bootstrap(opts: Options) -> str:
    value = opts.text("bootstrap", "kafka.bootstrap.servers", required=True)
    try:
        parse_bootstrap(value)
    except ValueError as exc:
        raise ValueError(f"mmlog option bootstrap: {exc}") from None
    return value


_SECURITY_PREFIXES = ("kafka.security.", "kafka.sasl.", "kafka.ssl.")


def _security(opts: Options) -> tuple:
    """The kafka.security/sasl/ssl options as the client's keywords (sorted pairs: options are pickled)."""
    props = {name[len("kafka."):]: opts.take(name) for name in list(opts._left) if name.startswith(_SECURITY_PREFIXES)}
    try:
        keywords = options_from_properties(props)
        ClientSecurity.from_options(**keywords)  # the files load and the settings agree, on the driver
    except (ValueError, OSError) as exc:
        raise ValueError(f"mmlog security options: {exc}") from None
    return tuple(sorted(keywords.items()))


def _value_encoding(opts: Options) -> tuple | None:
    fmt = (opts.text("valueFormat") or "binary").lower()
    names = ("schemaRegistry", "valueSubject", "valueSchema", "schemaRegistryUser", "schemaRegistryPassword")
    if fmt == "binary":
        for name in names:
            opts.forbid(name, "only with valueFormat avro or json")
        return None
    if fmt not in ("avro", "json", "protobuf"):
        raise ValueError(f"mmlog option valueFormat: a write takes binary, avro, json or protobuf, not {fmt!r}")
    schema = opts.take("valueSchema")
    if schema is not None:
        import json
        try:
            json.loads(schema)
        except ValueError as exc:
            raise ValueError(f"mmlog option valueSchema: not JSON ({exc})") from None
    return (fmt, opts.text("schemaRegistry", "schema.registry.url", required=True), opts.text("valueSubject"),
            schema, opts.text("schemaRegistryUser"), opts.text("schemaRegistryPassword"))


def typed_value(given: Mapping[str, str]) -> tuple[bool, object]:
    """(includeHeaders, the value format) alone, for the source's schema: batch or streaming alike."""
    opts = Options(given)
    subscribe = opts.text("subscribe")
    topics = None if subscribe is None else tuple(t.strip() for t in subscribe.split(",") if t.strip())
    return opts.boolean("includeHeaders", False), value_format(opts, topics)


def value_format(opts: Options, topics):
    """The registry's reader schema for valueFormat avro/json/protobuf (asked on the driver), or None."""
    from mmlog.client.serde.registry import RegistryError
    from mmlog.spark import values

    fmt = (opts.text("valueFormat") or "binary").lower()
    if fmt not in values.FORMATS:
        raise ValueError(f"mmlog option valueFormat: want one of {', '.join(values.FORMATS)}, not {fmt!r}")
    names = ("schemaRegistry", "valueSubject", "valueSchemaVersion", "valueSchemaId", "schemaRegistryUser",
             "schemaRegistryPassword")
    if fmt == "binary":
        for name in names:
            opts.forbid(name, "only with valueFormat avro, json or protobuf")
        return None
    registry = opts.text("schemaRegistry", "schema.registry.url", required=True)
    schema_id = opts.integer("valueSchemaId", None, 0)
    try:
        return values.resolve(fmt, registry, topics, opts.text("valueSubject"),
                              opts.text("valueSchemaVersion") or "latest", schema_id,
                              opts.text("schemaRegistryUser"), opts.text("schemaRegistryPassword"))
    except (OSError, RegistryError) as exc:
        raise ValueError(f"mmlog: the schema registry at {registry}: {exc}") from None


ISOLATION_LEVELS = ("read_committed", "read_uncommitted")


def _read_committed(opts: Options) -> bool:
    """isolation_level (or readCommitted): committed data only unless read_uncommitted is asked for."""
    level = opts.text("isolation_level", "kafka.isolation.level")
    if level is not None and level not in ISOLATION_LEVELS:
        raise ValueError(f"mmlog option isolation_level: want read_committed or read_uncommitted, not {level!r}")
    flag = opts.text("readCommitted")
    if flag is None:
        return level != "read_uncommitted"
    if flag.lower() not in ("true", "false"):
        raise ValueError(f"mmlog option readCommitted: want true or false, got {flag!r}")
    if level is not None and (level == "read_committed") != (flag.lower() == "true"):
        raise ValueError("mmlog options isolation_level and readCommitted disagree: give one")
    return flag.lower() == "true"


@dataclass(frozen=True)
class ReadOptions:
    """What a batch or streaming read was asked for (plain values: the readers are pickled to executors)."""

    bootstrap: str
    topics: tuple[str, ...] | None  # subscribe
    pattern: str | None  # subscribePattern
    starting: OffsetSpec
    ending: OffsetSpec
    include_headers: bool
    fail_on_data_loss: bool
    fetch_max_bytes: int
    poll_timeout_ms: int
    min_partitions: int | None
    max_records_per_partition: int
    max_offsets_per_trigger: int | None
    read_committed: bool = True
    security: tuple = ()  # (client keyword, value) pairs: TLS and SASL (see the module docstring)
    value_format: object = None  # values.ValueFormat: the registry's reader schema, when valueFormat is set

    @classmethod
    def parse(cls, given: Mapping[str, str], *, streaming: bool) -> "ReadOptions":
        opts = Options(given)
        bootstrap = _bootstrap(opts)
        subscribe = opts.text("subscribe")
        pattern = opts.text("subscribePattern")
        if (subscribe is None) == (pattern is None):
            raise ValueError("mmlog: give exactly one of the options subscribe and subscribePattern")
        topics = None
        if subscribe is not None:
            topics = tuple(dict.fromkeys(t.strip() for t in subscribe.split(",") if t.strip()))
            if not topics:
                raise ValueError(f"mmlog option subscribe: no topic in {subscribe!r}")
        if pattern is not None:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"mmlog option subscribePattern: {exc}") from None
        starting = parse_spec("startingOffsets", opts.take("startingOffsets"),
                              default="latest" if streaming else "earliest",
                              allowed=(EARLIEST, LATEST) if streaming else (EARLIEST,))
        if streaming:
            ending = "latest"
            for name in ("endingOffsets", "minPartitions", "maxRecordsPerPartition"):
                opts.forbid(name, "not for streaming reads")
            min_partitions, max_records = None, DEFAULT_MAX_RECORDS
            max_per_trigger = opts.integer("maxOffsetsPerTrigger", None, 1)
        else:
            ending = parse_spec("endingOffsets", opts.take("endingOffsets"), default="latest", allowed=(LATEST,))
            min_partitions = opts.integer("minPartitions", None, 1)
            max_records = opts.integer("maxRecordsPerPartition", DEFAULT_MAX_RECORDS, 1)
            opts.forbid("maxOffsetsPerTrigger", "for streaming reads only")
            max_per_trigger = None
        read = cls(
            bootstrap=bootstrap, topics=topics, pattern=pattern, starting=starting, ending=ending,
            include_headers=opts.boolean("includeHeaders", False),
            fail_on_data_loss=opts.boolean("failOnDataLoss", True),
            fetch_max_bytes=opts.integer("fetchMaxBytes", DEFAULT_FETCH_BYTES, 1024, MAX_FETCH_BYTES,
                                         aliases=("kafka.max.partition.fetch.bytes",)),
            poll_timeout_ms=opts.integer("pollTimeoutMs", 120_000, 1, aliases=("kafkaConsumer.pollTimeoutMs",)),
            min_partitions=min_partitions, max_records_per_partition=max_records,
            max_offsets_per_trigger=max_per_trigger, read_committed=_read_committed(opts), security=_security(opts),
            value_format=value_format(opts, topics))
        opts.finish("bootstrap, subscribe, subscribePattern, startingOffsets, includeHeaders, failOnDataLoss, "
                    "fetchMaxBytes, pollTimeoutMs, isolation_level, readCommitted, valueFormat, schemaRegistry, "
                    "valueSubject, valueSchemaVersion, valueSchemaId, schemaRegistryUser, schemaRegistryPassword, "
                    + ("maxOffsetsPerTrigger" if streaming else
                                                        "endingOffsets, minPartitions, maxRecordsPerPartition"))
        return read


@dataclass(frozen=True)
class WriteOptions:
    """Where a DataFrame is written: the brokers, the topic of every row if the `topic` option is set, and
    whether each task writes in a transaction (`exactlyOnce`, default true) under which id prefix."""

    bootstrap: str
    topic: str | None
    request_timeout_ms: int
    exactly_once: bool = True
    transactional_id_prefix: str | None = None
    security: tuple = ()  # (client keyword, value) pairs
    value_encoding: tuple | None = None  # (format, registry, subject, schema text, user, password)

    @classmethod
    def parse(cls, given: Mapping[str, str], *, streaming: bool = False) -> "WriteOptions":
        opts = Options(given)
        if streaming:
            opts.take("checkpointLocation")  # Spark's own (it passes it on to the sink too)
        write = cls(bootstrap=_bootstrap(opts), topic=opts.text("topic"),
                    request_timeout_ms=opts.integer("requestTimeoutMs", 30_000, 1),
                    exactly_once=opts.boolean("exactlyOnce", True),
                    transactional_id_prefix=opts.text("transactionalIdPrefix"), security=_security(opts),
                    value_encoding=_value_encoding(opts))
        opts.finish("bootstrap, topic, requestTimeoutMs, exactlyOnce, transactionalIdPrefix, valueFormat, "
                    "schemaRegistry, valueSubject, valueSchema, schemaRegistryUser, schemaRegistryPassword")
        return write
