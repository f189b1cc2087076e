"""The Topics pages' API: a searchable, paged list (partitions, replication factor, size, records, messages
in per second), one topic (each partition's leader, replicas, ISR, log start, high watermark, last stable
offset and size; its configs with their sources; its rate over time), and altering its configs.

What a user sees is what Metadata, ListOffsets, DescribeLogDirs and DescribeConfigs answer them: topics
they may DESCRIBE, sizes with DESCRIBE on the cluster, configs with DESCRIBE_CONFIGS; a change needs
ALTER_CONFIGS on the topic (IncrementalAlterConfigs). Offsets and sizes are asked for the page's topics
only, one request per broker, so a list of thousands answers a page at once."""

from __future__ import annotations

from mmlog.client.admin import TOPIC_RESOURCE
from mmlog.console import lookups
from mmlog.console.errors import ConsoleError
from mmlog.console.paging import page
from mmlog.console.rates import Rates
from mmlog.console.router import Routes
from mmlog.errors import KafkaError, error_for_code
from mmlog.metrics.families import error_name
from mmlog.protocol.messages import describe_configs

routes = Routes()
SOURCES = {1: "topic", 2: "dynamic broker", 3: "dynamic default broker", 4: "static broker", 5: "default",
           6: "dynamic broker logger"}


def rates(console) -> Rates:
    return console.samplers.rates


@routes.get("/topics")
def listing(call):
    admin = call.session.admin()
    admin.cluster.refresh(None, allow_auto_create=False)
    topics = {name: info for name, info in admin.cluster.topics.items() if info.error == 0}
    shown = page(sorted(topics), call)
    names = shown["items"]
    parts = [(t, p) for t in names for p in range(topics[t].partitions)]
    latest = lookups.offsets(admin, parts, lookups.LATEST)
    earliest = lookups.offsets(admin, parts, lookups.EARLIEST)
    sizes = lookups.sizes(lookups.log_dirs(admin, {t: range(topics[t].partitions) for t in names}))
    known = rates(call.console)
    items = []
    for name in names:
        info, mine = topics[name], [(name, p) for p in range(topics[name].partitions)]
        if all(key in latest for key in mine):
            known.sample(name, sum(latest[key] for key in mine))
        items.append({
            "name": name, "partitions": info.partitions,
            "replication_factor": max((len(r) for r in info.replicas), default=0),
            "size": sum(sizes.get(key, 0) for key in mine) if sizes else None,
            "records": sum(max(0, latest.get(key, 0) - earliest.get(key, 0)) for key in mine),
            "rate": known.rate(name),
            "under_replicated": sum(1 for r, i in zip(info.replicas, info.isr) if len(i) < len(r)),
        })
    shown["items"] = items
    return shown


@routes.get("/topics/{topic}")
def topic(call):
    name = call.params["topic"]
    admin = call.session.admin()
    info = _topic(admin, name)
    keys = [(name, p) for p in range(info.partitions)]
    latest = lookups.offsets(admin, keys, lookups.LATEST)
    stable = lookups.offsets(admin, keys, lookups.LATEST, read_committed=True)
    earliest = lookups.offsets(admin, keys, lookups.EARLIEST)
    sizes = lookups.sizes(lookups.log_dirs(admin, {name: range(info.partitions)}))
    _sample(call.console, name, latest, info.partitions)
    partitions = [{"partition": p, "leader": info.leaders[p], "replicas": list(info.replicas[p]),
                   "isr": list(info.isr[p]), "log_start": earliest.get(key), "high_watermark": latest.get(key),
                   "last_stable_offset": stable.get(key), "size": sizes.get(key) if sizes else None}
                  for p, key in enumerate(keys)]
    configs, refused = _configs(admin, name)
    return {"name": name, "partitions": partitions, "configs": configs, "configs_refused": refused,
            "can_alter": _may_alter(admin, name), "rate": rates(call.console).history(name)}


def _sample(console, name: str, latest: dict, partitions: int) -> None:
    """The topic's high watermarks summed into its rate, when every partition answered."""
    if len(latest) == partitions:
        rates(console).sample(name, sum(latest.values()))


def _topic(admin, name: str):
    """The topic's metadata as the user's client sees it (its Kafka error when it may not, or is unknown)."""
    admin.cluster.refresh([name], allow_auto_create=False)
    info = admin.cluster.topics.get(name)
    if info is None or info.error:
        raise error_for_code(info.error if info else 3, name)  # 3: UNKNOWN_TOPIC_OR_PARTITION
    return info


def _configs(admin, name: str) -> tuple[list[dict], str | None]:
    """The topic's configs with their sources, or why they may not be seen (the error's name)."""
    body = admin._request(admin._controller(), describe_configs.API_KEY, 1, describe_configs.REQUEST(
        resources=[{"resource_type": TOPIC_RESOURCE, "resource_name": name, "configuration_keys": None}]))
    [result] = body.results
    if result.error_code:
        return [], error_name(result.error_code)
    return [{"name": c.name, "value": None if c.is_sensitive else c.value, "source": SOURCES.get(c.config_source,
             "unknown"), "read_only": c.read_only, "sensitive": c.is_sensitive}
            for c in sorted(result.configs, key=lambda c: c.name)], None


def _may_alter(admin, name: str) -> bool:
    """Whether the user may alter the topic's configs: an empty change, validated only, is refused if not."""
    try:
        admin.alter_topic_config(name, {}, validate_only=True)
    except KafkaError:
        return False
    return True


@routes.get("/topics/{topic}/rate")
def rate(call):
    """The topic's messages in per second over time, after a sample of its high watermarks now."""
    name = call.params["topic"]
    admin = call.session.admin()
    info = _topic(admin, name)
    latest = lookups.offsets(admin, [(name, p) for p in range(info.partitions)], lookups.LATEST)
    _sample(call.console, name, latest, info.partitions)
    return {"rate": rates(call.console).history(name)}


@routes.put("/topics/{topic}/configs")
def alter(call):
    """Set (`set`: {name: value}) and delete (`delete`: [name], back to the default) topic configs."""
    changes, deleted = call.body.get("set") or {}, call.body.get("delete") or []
    if not isinstance(changes, dict) or not isinstance(deleted, list) or not (changes or deleted):
        raise ConsoleError(400, "INVALID_REQUEST", "want set: {name: value} and/or delete: [name]")
    call.session.admin().alter_topic_config(call.params["topic"], {str(k): str(v) for k, v in changes.items()},
                                            [str(k) for k in deleted])
    return {"altered": sorted(changes) + sorted(map(str, deleted))}
