"""Broker settings: Kafka's `server.properties` names, command-line flags, one registry.

`BrokerConfig.load(file, overrides)` reads an optional properties file, applies
command-line overrides (by Kafka name), validates every value and rejects unknown
names with a `ConfigError` naming the setting, so a typo stops the broker at start
instead of being silently ignored. Topic defaults (`log.segment.bytes`,
`log.retention.hours`, ...) become the `LogConfig` every topic starts from.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Mapping

from mmlog.config.settings import (
    BROKER_ALIASES,
    BROKER_TOPIC_DEFAULTS,
    TOPIC_SETTINGS,
    ConfigError,
    LogConfig,
    Setting,
    parse_properties,
)
from mmlog.config.security_protocols import PROTOCOLS, SASL_PROTOCOLS, TLS_PROTOCOLS


def _positive_int(v: int) -> bool:
    return v > 0


def _parses(parse):
    """A setting's validator: True when parse(value) does not raise ValueError."""

    def check(value: str) -> bool:
        try:
            parse(value)
            return True
        except ValueError:
            return False

    return check


_listener_ok = _parses(lambda value: parse_listeners(value, _AnyName()))  # the shape only: names are checked in load


class _AnyName(dict):
    def __contains__(self, name) -> bool:
        return True

    def __getitem__(self, name) -> str:
        return "PLAINTEXT"


def parse_connection_overrides(value: str) -> dict[str, int]:
    """'10.0.0.1:50,client.example:5' -> {host: limit}; IPv6 hosts in [brackets] or bare (the last colon splits)."""
    out = {}
    for item in filter(None, (p.strip() for p in value.split(","))):
        host, colon, count = item.rpartition(":")
        host = host.strip().strip("[]")
        if not colon or not host or not count.strip().isdigit():
            raise ValueError(f"bad override {item!r}: want HOST:N")
        out[host] = int(count)
    return out


_overrides_ok = _parses(parse_connection_overrides)


def parse_metrics_listen(value: str) -> tuple[str, int] | None:
    """metrics.listen: '' -> None (off); '9404' -> ('127.0.0.1', 9404); 'HOST:PORT' (IPv6 in [brackets])."""
    value = value.strip()
    if not value:
        return None
    host, colon, port = value.rpartition(":")
    host = host.strip("[]") if colon else "127.0.0.1"
    if not port.isdigit() or not 0 <= int(port) <= 65535 or not host:
        raise ValueError(f"bad metrics address {value!r}: want [HOST:]PORT")
    return host, int(port)


_metrics_listen_ok = _parses(parse_metrics_listen)


def parse_registry_listeners(value: str, what: str = "schema registry") -> list[tuple[str, str, int]]:
    """schema.registry.listeners (console.listeners alike): 'http://HOST:PORT,https://HOST:PORT' ->
    [(scheme, host, port), ...] (IPv6 hosts in [brackets]; an empty host listens on every address); '' -> []
    (off)."""
    out = []
    for item in filter(None, (p.strip() for p in value.split(","))):
        scheme, sep, rest = item.partition("://")
        host, colon, port = rest.rpartition(":")
        if sep != "://" or scheme.lower() not in ("http", "https") or not colon or not port.isdigit() \
                or not 0 <= int(port) <= 65535:
            raise ValueError(f"bad {what} listener {item!r}: want http://HOST:PORT or https://HOST:PORT")
        out.append((scheme.lower(), host.strip("[]") or "0.0.0.0", int(port)))
    return out


_registry_listeners_ok = _parses(parse_registry_listeners)


def parse_console_listeners(value: str) -> list[tuple[str, str, int]]:
    return parse_registry_listeners(value, "console")


_console_listeners_ok = _parses(parse_console_listeners)


BROKER_SETTINGS: dict[str, Setting] = {
    s.name: s
    for s in [
        Setting("broker.id", int, 0, "This broker's id (unique in a cluster).", lambda v: v >= 0, ">= 0",
                flag="--broker-id"),
        Setting("log.dirs", str, "/var/lib/mmlog", "Comma-separated data directories.", bool, "non-empty",
                flag="--data-dir"),
        Setting("listeners", str, "PLAINTEXT://127.0.0.1:9092", "Where to listen: [NAME://]HOST:PORT[,...], NAME a "
                "security protocol or a name in listener.security.protocol.map.", _listener_ok, "[NAME://]HOST:PORT list",
                flag="--listen"),
        Setting("advertised.listeners", str, "", "The addresses clients are told to connect to, per listener name "
                "(default: listeners).", lambda v: v == "" or _listener_ok(v), "[NAME://]HOST:PORT list",
                flag="--advertised-listener"),
        Setting("num.network.threads", int, os.cpu_count() or 1, "Processor processes serving connections.",
                lambda v: 1 <= v <= 256, "1 .. 256", flag="--processors"),
        Setting("num.partitions", int, 1, "Partitions of an auto-created topic.", lambda v: v >= 1, ">= 1"),
        Setting("default.replication.factor", int, 1, "Replicas of a topic created without a replication "
                "factor (auto-created, or CreateTopics with -1).", lambda v: 1 <= v <= 8, "1 .. 8"),
        Setting("replica.lag.time.max.ms", int, 30_000, "A follower that has not caught up with the leader "
                "for this long leaves the ISR.", lambda v: v > 0, "> 0"),
        Setting("replica.fetch.wait.max.ms", int, 500, "How long a follower's fetch waits at the leader for "
                "new records.", lambda v: v >= 0, ">= 0"),
        Setting("replica.fetch.max.bytes", int, 1 << 20, "Bytes a follower fetches per partition per request.",
                lambda v: v > 0, "> 0"),
        Setting("replica.fetch.backoff.ms", int, 1000, "How long a follower waits after a failed fetch.",
                lambda v: v >= 0, ">= 0"),
        Setting("replica.high.watermark.checkpoint.interval.ms", int, 5000, "How often every partition's high "
                "watermark is written to replication-offset-checkpoint.", lambda v: v > 0, "> 0"),
        Setting("follower.replication.throttled.rate", int, 2**63 - 1, "Bytes/s at which this broker copies the "
                "out-of-sync replicas its topics' follower.replication.throttled.replicas name (a dynamic config; "
                "`mmlog reassign --throttle` sets it and the moving replicas' topic configs).",
                lambda v: v > 0, "> 0"),
        Setting("leader.replication.throttled.rate", int, 2**63 - 1, "Bytes/s this broker sends, across its "
                "processors, to out-of-sync followers of the replicas its topics' "
                "leader.replication.throttled.replicas name (a dynamic config).", lambda v: v > 0, "> 0"),
        Setting("auto.leader.rebalance.enable", bool, True, "Give leadership back to each partition's "
                "preferred replica when it is in sync again."),
        Setting("leader.imbalance.check.interval.seconds", int, 300, "How often the controller checks "
                "preferred leaders.", lambda v: v > 0, "> 0"),
        Setting("auto.create.topics.enable", bool, True, "Create a topic when a client asks for an unknown one."),
        Setting("auto.create.topics.max.per.request", int, 100, "Unknown topics one Metadata request may "
                "auto-create; the rest answer LEADER_NOT_AVAILABLE and are created when asked again (mmlog).",
                lambda v: v >= 1, ">= 1"),
        Setting("auto.create.topics.max.per.second", int, 100, "Topics auto-created per second, over all "
                "clients (a token bucket holding one second's worth); the rest answer LEADER_NOT_AVAILABLE "
                "(mmlog).", lambda v: v >= 1, ">= 1"),
        Setting("max.partitions.per.request", int, 10_000, "Partitions one CreateTopics request (or one "
                "auto-created topic) may create: larger counts are refused before anything is allocated "
                "(mmlog).", lambda v: v >= 1, ">= 1"),
        Setting("max.partitions.per.broker", int, 100_000, "Replicas one broker may host: a topic that would "
                "take any broker past it is refused with POLICY_VIOLATION (mmlog).", lambda v: v >= 1, ">= 1"),
        Setting("log.max.open.partitions", int, 0, "Partitions each process of the broker (the main "
                "process after start-up, each processor, the replica fetcher) keeps open (the least recently "
                "used ones are closed and reopened on use); 0 sizes it from the descriptor limit and "
                "vm.max_map_count (mmlog).", lambda v: v == 0 or v >= 8, "0 or >= 8"),
        Setting("compiled.request.path.enable", bool, True, "Serve the common Produce requests in "
                "numba-compiled code (epoll, recv, append, answer and send without the interpreter); false "
                "serves every request with the Python handlers (mmlog)."),
        Setting("delete.topic.enable", bool, True, "Allow DeleteTopics."),
        Setting("zookeeper.connect", str, "", "ZooKeeper host:port[,...][/chroot]; empty runs standalone."),
        Setting("zookeeper.session.timeout.ms", int, 18000, "ZooKeeper session timeout: a broker that stops "
                "answering leaves the cluster this long after.", lambda v: v > 0, "> 0"),
        Setting("zookeeper.connection.timeout.ms", int, 18000, "How long a starting broker waits to reach "
                "ZooKeeper.", lambda v: v > 0, "> 0"),
        Setting("socket.request.max.bytes", int, 100 * 1024 * 1024, "Largest request frame accepted.",
                lambda v: v >= 1024, ">= 1024"),
        Setting("connections.max.idle.ms", int, 600_000, "Close connections idle this long.", lambda v: v > 0, "> 0"),
        Setting("queued.max.request.bytes", int, 512 * 1024 * 1024, "Request bytes all processors may hold at "
                "once (received, queued or being handled); past it they stop reading sockets.",
                lambda v: v >= 1024, ">= socket.request.max.bytes"),
        Setting("max.connections", int, 2**31 - 1, "Connections the broker keeps open at once; more are closed "
                "on accept.", lambda v: v >= 0, ">= 0"),
        Setting("max.connections.per.ip", int, 2**31 - 1, "Connections one client address may keep open; more "
                "are closed on accept.", lambda v: v >= 0, ">= 0"),
        Setting("max.connections.per.ip.overrides", str, "", "Per-address exceptions: HOST:N[,HOST:N...] "
                "(names resolved at start).", _overrides_ok, "HOST:N list"),
        Setting("quota.window.num", int, 11, "Samples a client quota's rate is measured over.",
                lambda v: v >= 2, ">= 2"),
        Setting("quota.window.size.seconds", int, 1, "Length of each quota sample (s).", lambda v: v >= 1, ">= 1"),
        Setting("log.cleaner.enable", bool, True, "Run the log cleaner process, which compacts topics whose "
                "cleanup.policy has compact."),
        Setting("log.cleaner.dedupe.buffer.size", int, 128 << 20, "Memory of the cleaner's offset map (24 bytes "
                "a key): more keys than fit make a cleaning cover fewer segments.", lambda v: v >= 1024, ">= 1024"),
        Setting("log.cleaner.io.buffer.load.factor", float, 0.9, "How full the offset map may get.",
                lambda v: 0 < v < 1, "between 0 and 1"),
        Setting("log.cleaner.io.max.bytes.per.second", float, 1.7976931348623157e308, "Bytes a second the "
                "cleaner reads and writes, at most (its I/O throttle).", lambda v: v > 0, "> 0"),
        Setting("log.cleaner.backoff.ms", int, 15_000, "How long the cleaner sleeps when no log needs cleaning.",
                _positive_int, "> 0"),
        Setting("log.retention.check.interval.ms", int, 300_000, "How often retention runs.", lambda v: v > 0, "> 0"),
        Setting("log.flush.scheduler.interval.ms", int, 1000, "How often flush.ms and segment.ms are checked.",
                lambda v: v > 0, "> 0"),
        Setting("controlled.shutdown.timeout.ms", int, 30_000, "How long SIGTERM waits for in-flight requests.",
                lambda v: v >= 0, ">= 0"),
        Setting("broker.stall.timeout.ms", int, 60_000, "How long the control thread may go without a turn of its "
                "loop before the broker stops itself with exit code 1, for systemd to restart it (a stuck control "
                "plane is never left serving as a zombie).", lambda v: v >= 1000, ">= 1000"),
        Setting("metrics.listen", str, "", "Serve Prometheus metrics over HTTP at [HOST:]PORT/metrics (a bare "
                "port: 127.0.0.1 only); empty: off.", _metrics_listen_ok, "[HOST:]PORT",
                flag="--metrics-listen"),
        Setting("schema.registry.listeners", str, "", "Serve the schema registry (Confluent Schema Registry's "
                "REST API) on these URLs: http://HOST:PORT or https://HOST:PORT (TLS from the ssl.* settings), "
                "comma-separated; empty: off.", _registry_listeners_ok, "http[s]://HOST:PORT list"),
        Setting("console.listeners", str, "", "Serve the web console on these URLs: http://HOST:PORT or "
                "https://HOST:PORT (TLS from the ssl.* settings), comma-separated; an address also given to "
                "schema.registry.listeners or metrics.listen serves both from one port; empty: off.",
                _console_listeners_ok, "http[s]://HOST:PORT list"),
        Setting("console.session.timeout.ms", int, 3_600_000, "How long a console session lasts without a "
                "request before it ends (its Kafka clients closed; a login is asked for again).",
                lambda v: v >= 1000, ">= 1000"),
        Setting("schema.registry.timeout.ms", int, 10_000, "How long a schema registry write waits for its record "
                "in _schemas to be acknowledged by every in-sync replica and read back.", lambda v: v >= 100,
                ">= 100"),
        Setting("broker.rack", str, "", "This broker's rack, as Metadata reports it (empty: none)."),
        Setting("cluster.id", str, "", "Cluster id (generated and kept in the data dir when empty)."),
        Setting("group.initial.rebalance.delay.ms", int, 3000, "Wait for more members before the first rebalance.",
                lambda v: v >= 0, ">= 0"),
        Setting("group.min.session.timeout.ms", int, 6000, "Smallest session timeout a group member may ask for.",
                lambda v: v > 0, "> 0"),
        Setting("group.max.session.timeout.ms", int, 1_800_000, "Largest session timeout a group member may ask for.",
                lambda v: v > 0, "> 0"),
        Setting("offsets.retention.minutes", int, 10080,
                "Committed offsets of a group empty this long (of a simple group: committed this long ago) expire.",
                lambda v: v >= 1, ">= 1"),
        Setting("offsets.retention.check.interval.ms", int, 600_000, "How often offsets are checked for expiry.",
                lambda v: v > 0, "> 0"),
        Setting("offset.metadata.max.bytes", int, 4096, "Largest metadata string an offset commit may carry.",
                lambda v: v >= 0, ">= 0"),
        Setting("transaction.state.log.num.partitions", int, 50, "Partitions of __transaction_state (fixed once "
                "the topic exists).", lambda v: 1 <= v <= 1000, "1 .. 1000"),
        Setting("transaction.state.log.replication.factor", int, 3, "Replicas of __transaction_state in cluster "
                "mode (standalone: 1); the topic is made once this many brokers are live.", lambda v: 1 <= v <= 8,
                "1 .. 8"),
        Setting("transaction.state.log.min.isr", int, 2, "min.insync.replicas of __transaction_state.",
                lambda v: v >= 1, ">= 1"),
        Setting("transaction.state.log.segment.bytes", int, 100 << 20, "Segment size of __transaction_state.",
                lambda v: v >= 1 << 14, ">= 16384"),
        Setting("transaction.max.timeout.ms", int, 900_000, "Largest transaction.timeout.ms a producer may ask for.",
                lambda v: v > 0, "> 0"),
        Setting("transactional.id.expiration.ms", int, 604_800_000, "A transactional id idle this long is "
                "forgotten.", lambda v: v > 0, "> 0"),
        Setting("transaction.abort.timed.out.transaction.cleanup.interval.ms", int, 10_000, "How often "
                "transactions past their timeout are looked for and aborted.", lambda v: v > 0, "> 0"),
        Setting("transaction.remove.expired.transaction.cleanup.interval.ms", int, 3_600_000, "How often "
                "expired transactional ids are removed.", lambda v: v > 0, "> 0"),
    ]
}
# Broker-level topic defaults, named as Kafka names them.
for _broker_name, _topic_name in BROKER_TOPIC_DEFAULTS.items():
    _t = TOPIC_SETTINGS[_topic_name]
    BROKER_SETTINGS[_broker_name] = Setting(_broker_name, _t.type, _t.default, _t.doc, _t.check, _t.rule)
for _alias, (_target, _scale) in BROKER_ALIASES.items():
    BROKER_SETTINGS[_alias] = Setting(_alias, int, None, f"{_target} in coarser units.", lambda v: v >= -1, ">= -1")
BROKER_SETTINGS["log.dir"] = Setting("log.dir", str, "", "A single data directory (log.dirs wins).")


DEFAULT_PROTOCOL_MAP = ",".join(f"{p}:{p}" for p in PROTOCOLS)
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SSL_PROTOCOLS = ("TLSv1.2", "TLSv1.3")


@dataclass(frozen=True)
class Listener:
    """One entry of `listeners`: its name, its security protocol and where it binds."""

    name: str
    protocol: str
    host: str
    port: int

    @property
    def tls(self) -> bool:
        return self.protocol in TLS_PROTOCOLS

    @property
    def sasl(self) -> bool:
        return self.protocol in SASL_PROTOCOLS

    def url(self, host: str | None = None, port: int | None = None) -> str:
        host = self.host if host is None else host
        return f"{self.name}://{f'[{host}]' if ':' in host else host}:{self.port if port is None else port}"


def parse_protocol_map(value: str) -> dict[str, str]:
    """'CLIENT:SASL_SSL,REPLICATION:SSL' -> {name: protocol}; every protocol one of Kafka's four."""
    out = {}
    for item in filter(None, (p.strip() for p in value.split(","))):
        name, colon, protocol = item.partition(":")
        if not colon or not name.strip() or protocol.strip().upper() not in PROTOCOLS:
            raise ValueError(f"bad entry {item!r}: want NAME:{'|'.join(PROTOCOLS)}")
        out[name.strip().upper()] = protocol.strip().upper()
    return out


def parse_listeners(value: str, protocol_map: Mapping[str, str] | None = None) -> list[Listener]:
    """'PLAINTEXT://host:9092,SASL_SSL://host2:9093' -> [Listener, ...]; a bare HOST:PORT is PLAINTEXT.

    A name is looked up in protocol_map (`listener.security.protocol.map`, Kafka's default maps
    each protocol to itself); IPv6 hosts in [brackets]. Names must be unique."""
    protocol_map = parse_protocol_map(DEFAULT_PROTOCOL_MAP) if protocol_map is None else protocol_map
    out = []
    for item in filter(None, (p.strip() for p in value.split(","))):
        name, sep, rest = item.rpartition("://")
        name = name.strip().upper() if sep else "PLAINTEXT"
        if name not in protocol_map:
            raise ValueError(f"listener {name} has no security protocol (listener.security.protocol.map)")
        host, colon, port = rest.rpartition(":")
        if not colon or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise ValueError(f"bad listener {item!r}: want [NAME://]HOST:PORT")
        if any(known.name == name for known in out):
            raise ValueError(f"listener name {name} appears twice")
        out.append(Listener(name, protocol_map[name], host.strip("[]") or "0.0.0.0", int(port)))
    if not out:
        raise ValueError("no listener")
    return out


def _mechanisms_ok(value: str) -> bool:
    names = [m.strip() for m in value.split(",") if m.strip()]
    return bool(names) and set(names) <= set(SASL_MECHANISMS)


def _protocols_ok(value: str) -> bool:
    names = [m.strip() for m in value.split(",") if m.strip()]
    return bool(names) and set(names) <= set(SSL_PROTOCOLS)


# Security: listeners of Kafka's four kinds, TLS from PEM files, SASL PLAIN and SCRAM.
BROKER_SETTINGS.update({s.name: s for s in [
    Setting("listener.security.protocol.map", str, DEFAULT_PROTOCOL_MAP, "Listener name -> security protocol "
            "(NAME:PROTOCOL,...).", lambda v: _try(parse_protocol_map, v),
            "NAME:PLAINTEXT|SSL|SASL_PLAINTEXT|SASL_SSL list"),
    Setting("inter.broker.listener.name", str, "", "The listener other brokers reach this one on (replica "
            "fetches, transaction markers); empty: the first listener."),
    Setting("ssl.keystore.type", str, "PEM", "PEM only: the keystore is a PEM file (JKS/PKCS12 are refused).",
            lambda v: v.upper() == "PEM", "PEM"),
    Setting("ssl.keystore.location", str, "", "PEM file with this broker's certificate chain and private key."),
    Setting("ssl.key.password", str, "", "Password of the private key in ssl.keystore.location (empty: none)."),
    Setting("ssl.truststore.type", str, "PEM", "PEM only.", lambda v: v.upper() == "PEM", "PEM"),
    Setting("ssl.truststore.location", str, "", "PEM file of the CA certificates client (and peer broker) "
            "certificates are checked against (empty: the system's)."),
    Setting("ssl.client.auth", str, "none", "Client certificates: required (mutual TLS), requested (checked "
            "when sent) or none.", lambda v: v in ("required", "requested", "none"), "required|requested|none"),
    Setting("ssl.enabled.protocols", str, "TLSv1.2,TLSv1.3", "TLS versions accepted.", _protocols_ok,
            "TLSv1.2,TLSv1.3"),
    Setting("ssl.cipher.suites", str, "", "OpenSSL cipher list for TLS 1.2 (empty: OpenSSL's default; TLS 1.3 "
            "suites are OpenSSL's)."),
    Setting("ssl.endpoint.identification.algorithm", str, "https", "https: a broker connecting to a peer "
            "checks the peer certificate's host name; empty: it does not.", lambda v: v in ("https", ""),
            "https or empty"),
    Setting("sasl.enabled.mechanisms", str, "SCRAM-SHA-256,SCRAM-SHA-512", "SASL mechanisms SASL listeners "
            "accept.", _mechanisms_ok, "|".join(SASL_MECHANISMS) + " list"),
    Setting("sasl.mechanism.inter.broker.protocol", str, "SCRAM-SHA-512", "The mechanism a broker uses on a "
            "SASL inter-broker listener.", lambda v: v in SASL_MECHANISMS, "|".join(SASL_MECHANISMS)),
    Setting("sasl.jaas.config", str, "", "The broker's own login on a SASL inter-broker listener: "
            '...LoginModule required username="..." password="...";'),
    Setting("connections.max.reauth.ms", int, 0, "SASL sessions last this long (ms): a client re-authenticates "
            "before, or its connection is closed; 0: forever.", lambda v: v >= 0, ">= 0"),
    Setting("connection.failed.authentication.delay.ms", int, 100, "How long a failed authentication's answer "
            "is held back before the connection closes (slows password guessing).", lambda v: v >= 0, ">= 0"),
]})


# ACL authorisation: Kafka's authoriser names, and mmlog's own, all mean mmlog's ACL authoriser.
AUTHORIZER_NAMES = ("kafka.security.authorizer.AclAuthorizer", "kafka.security.auth.SimpleAclAuthorizer",
                    "mmlog.security.acls.AclAuthorizer")
BROKER_SETTINGS.update({s.name: s for s in [
    Setting("authorizer.class.name", str, "", "The ACL authoriser: empty for none (every request allowed), or "
            "one of " + ", ".join(AUTHORIZER_NAMES) + " (all mmlog's ACL authoriser).",
            lambda v: v in ("", *AUTHORIZER_NAMES), "empty or " + "|".join(AUTHORIZER_NAMES)),
    Setting("super.users", str, "", "Principals the authoriser always allows, semicolon-separated "
            "(User:admin;User:CN=broker0): put the brokers' own inter-broker principal here."),
    Setting("allow.everyone.if.no.acl.found", bool, False, "With an authoriser: a resource no ACL names is "
            "open to everyone (true) or to super users only (false, Kafka's default)."),
]})


# Settings a listener may override as Kafka spells it: listener.name.<listener>.<setting> (lower-case name).
PER_LISTENER = ("ssl.client.auth", "sasl.enabled.mechanisms", "ssl.keystore.location", "ssl.key.password",
                "ssl.truststore.location", "ssl.enabled.protocols", "ssl.cipher.suites")


def _per_listener(name: str) -> Setting | None:
    """The setting a listener.name.<listener>.<setting> overrides (None: not one mmlog honours)."""
    prefix, _, rest = name.partition("listener.name.")
    if prefix or not rest:
        return None
    _, dot, setting = rest.partition(".")
    return BROKER_SETTINGS[setting] if dot and setting in PER_LISTENER else None


SENSITIVE = frozenset({"ssl.key.password", "sasl.jaas.config"})  # never shown (DescribeConfigs answers null)


def is_sensitive(name: str) -> bool:
    """A password, under its own name or a listener's (listener.name.<l>.ssl.key.password)."""
    return name in SENSITIVE or any(name.endswith("." + s) for s in SENSITIVE)


def _try(parse, value) -> bool:
    try:
        parse(value)
        return True
    except ValueError:
        return False


def _check_security(config: "BrokerConfig") -> None:
    """What one setting alone cannot tell: listener names known, TLS listeners with a keystore, an
    inter-broker login on a SASL inter-broker listener."""
    try:
        listeners = config.listeners
        advertised = config.advertised_listeners
    except ValueError as exc:
        raise ConfigError(f"listeners: {exc}") from exc
    names = {lst.name for lst in listeners}
    extra = {a.name for a in parse_listeners(config["advertised.listeners"], config.protocol_map)} - names \
        if config["advertised.listeners"] else set()
    if extra:
        raise ConfigError(f"advertised.listeners: {', '.join(sorted(extra))} is not in listeners")
    inter = config["inter.broker.listener.name"].upper()
    if inter and inter not in names:
        raise ConfigError(f"inter.broker.listener.name: {inter} is not in listeners ({', '.join(sorted(names))})")
    for name in config.values:
        if name.startswith("listener.name.") and name.split(".")[2].upper() not in names:
            raise ConfigError(f"{name}: {name.split('.')[2]} is not in listeners")
    for lst in listeners:
        if lst.tls and not config.for_listener(lst.name, "ssl.keystore.location"):
            raise ConfigError(f"listener {lst.name} ({lst.protocol}) needs ssl.keystore.location (PEM: certificate "
                              "chain and key)")
    if any(scheme == "https" for scheme, _, _ in config.registry_listeners) and not config["ssl.keystore.location"]:
        raise ConfigError("schema.registry.listeners: an https listener needs ssl.keystore.location")
    if any(scheme == "https" for scheme, _, _ in config.console_listeners) and not config["ssl.keystore.location"]:
        raise ConfigError("console.listeners: an https listener needs ssl.keystore.location")
    if config.inter_broker_listener.sasl and not config["sasl.jaas.config"]:
        raise ConfigError("a SASL inter.broker.listener.name needs sasl.jaas.config (the broker's own login)")
    del advertised


@dataclass(frozen=True)
class BrokerConfig:
    """The validated settings of one broker."""

    values: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    @classmethod
    def load(cls, path: str | Path | None = None, overrides: Mapping[str, Any] | None = None) -> "BrokerConfig":
        """Defaults, then the properties file, then overrides; every name checked."""
        raw: dict[str, Any] = {}
        if path is not None:
            try:
                raw.update(parse_properties(Path(path).read_text()))
            except OSError as exc:
                raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
        raw.update({k: v for k, v in (overrides or {}).items() if v is not None})
        values = {name: s.default for name, s in BROKER_SETTINGS.items()}
        for name, value in raw.items():
            setting = BROKER_SETTINGS.get(name) or _per_listener(name)
            if setting is None:
                raise ConfigError(f"unknown setting {name!r}")
            values[name] = setting.parse(value)
        for alias, (target, scale) in BROKER_ALIASES.items():
            if alias in raw and target not in raw:
                values[target] = values[alias] * scale if values[alias] >= 0 else -1
        if "log.dir" in raw and "log.dirs" not in raw:
            values["log.dirs"] = values["log.dir"]
        _check_security(cls(values))
        if values["queued.max.request.bytes"] < values["socket.request.max.bytes"]:
            # A frame of the largest size must fit in the pool, or its connection would wait forever.
            raise ConfigError(f"queued.max.request.bytes ({values['queued.max.request.bytes']}) must be at least "
                              f"socket.request.max.bytes ({values['socket.request.max.bytes']})")
        return cls(values)

    @property
    def log_dirs(self) -> list[Path]:
        return [Path(d.strip()) for d in self["log.dirs"].split(",") if d.strip()]

    @cached_property  # these four parse strings: once per config (read per request, per marker)
    def protocol_map(self) -> dict[str, str]:
        return parse_protocol_map(self["listener.security.protocol.map"])

    @cached_property
    def listeners(self) -> list[Listener]:
        return parse_listeners(self["listeners"], self.protocol_map)

    @cached_property
    def advertised_listeners(self) -> list[Listener]:
        """Each listener as clients are told to reach it: advertised.listeners by name, else where it binds
        (a wildcard host advertised as 127.0.0.1)."""
        told = {a.name: a for a in parse_listeners(self["advertised.listeners"], self.protocol_map)} \
            if self["advertised.listeners"] else {}
        out = []
        for listener in self.listeners:
            a = told.get(listener.name, listener)
            host = "127.0.0.1" if a.host in ("0.0.0.0", "::", "") else a.host
            out.append(Listener(listener.name, listener.protocol, host, a.port))
        return out

    def for_listener(self, listener: str, name: str):
        """A setting as one listener sees it: listener.name.<listener>.<name> if set, else <name>."""
        return self.values.get(f"listener.name.{listener.lower()}.{name}", self.values[name])

    def listener_sets(self, listener: str, name: str) -> bool:
        return f"listener.name.{listener.lower()}.{name}" in self.values

    @cached_property
    def inter_broker_listener(self) -> Listener:
        name = self["inter.broker.listener.name"].upper()
        return next(a for a in self.advertised_listeners if a.name == name) if name else self.advertised_listeners[0]

    @property
    def advertised(self) -> tuple[str, int]:
        """The (host, port) Metadata reports for this broker on its first listener."""
        first = self.advertised_listeners[0]
        return first.host, first.port

    def log_config(self) -> LogConfig:
        """Topic defaults from the broker-level settings."""
        return LogConfig.from_props({t: self.values[b] for b, t in BROKER_TOPIC_DEFAULTS.items()})

    def with_ports(self, ports: list[int]) -> "BrokerConfig":
        """The same config listening on the actually bound ports (after binding port 0), in listener order."""
        values = dict(self.values)
        listeners = self.listeners
        advertised = self.advertised_listeners
        values["listeners"] = ",".join(lst.url(port=port) for lst, port in zip(listeners, ports))
        told = {a.name for a in parse_listeners(self["advertised.listeners"], self.protocol_map)} \
            if self["advertised.listeners"] else set()
        values["advertised.listeners"] = ",".join(
            a.url() if a.name in told and a.port else a.url(port=port) for a, port in zip(advertised, ports))
        return BrokerConfig(values)

    @cached_property
    def registry_listeners(self) -> list[tuple[str, str, int]]:
        return parse_registry_listeners(self["schema.registry.listeners"])

    @cached_property
    def console_listeners(self) -> list[tuple[str, str, int]]:
        return parse_console_listeners(self["console.listeners"])

    def with_registry_ports(self, ports: list[int]) -> "BrokerConfig":
        """The same config with the schema registry listening on the actually bound ports."""
        return self.with_http_ports({"schema.registry.listeners": ports})

    def with_http_ports(self, bound: dict[str, list[int]]) -> "BrokerConfig":
        """The same config with its HTTP services (schema.registry.listeners, console.listeners,
        metrics.listen) on the actually bound ports, by setting."""
        values = dict(self.values)
        for name, ports in bound.items():
            if name == "metrics.listen":
                host, _ = parse_metrics_listen(self[name])
                values[name] = f"{_bracket(host)}:{ports[0]}"
                continue
            listeners = parse_registry_listeners(self[name])
            values[name] = ",".join(f"{scheme}://{_bracket(host)}:{port}"
                                    for (scheme, host, _), port in zip(listeners, ports))
        return BrokerConfig(values)

    def with_port(self, port: int) -> "BrokerConfig":
        return self.with_ports([port] + [lst.port for lst in self.listeners[1:]])


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host else host
