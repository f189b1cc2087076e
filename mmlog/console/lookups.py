"""What several pages ask the cluster for many partitions at once, one request per broker: offsets
(ListOffsets at each leader) and partition sizes (DescribeLogDirs of each broker), through a session's
Admin, so that the user's ACLs decide what answers."""

from __future__ import annotations

from mmlog.client.admin_offsets import EARLIEST, LATEST
from mmlog.client.admin import TOPIC_RESOURCE
from mmlog.errors import KafkaError
from mmlog.protocol.messages import describe_configs, describe_log_dirs, list_offsets

__all__ = ["EARLIEST", "LATEST", "log_dirs", "offsets", "sizes", "topic_setting"]


def offsets(admin, partitions, timestamp: int = LATEST, read_committed: bool = False) -> dict:
    """{(topic, partition): offset} at the partitions' live leaders (those without one, or refused, left out)."""
    cluster = admin.cluster
    by_leader: dict[int, dict[str, list[int]]] = {}
    for topic, p in partitions:
        info = cluster.topics.get(topic)
        if info is not None and p < info.partitions and info.leaders[p] in cluster.brokers:
            by_leader.setdefault(info.leaders[p], {}).setdefault(topic, []).append(p)
    out = {}
    for leader, topics in by_leader.items():
        try:
            body = admin._request(leader, list_offsets.API_KEY, 5, list_offsets.REQUEST(
                replica_id=-1, isolation_level=int(read_committed), topics=[
                    {"name": t, "partitions": [{"partition_index": p, "timestamp": timestamp} for p in ps]}
                    for t, ps in topics.items()]))
        except (KafkaError, OSError):
            continue  # a leader that does not answer: its partitions show no offsets
        for t in body.topics:
            for part in t.partitions:
                if not part.error_code:
                    out[(t.name, part.partition_index)] = part.offset
    return out


def log_dirs(admin, topics=None) -> dict:
    """{broker: {log dir: {(topic, partition): size}}} (topics None: every partition); a broker that refuses
    (DESCRIBE on the cluster is wanted) or does not answer is absent."""
    request = describe_log_dirs.REQUEST(topics=None if topics is None else [
        {"topic": t, "partitions": list(ps)} for t, ps in topics.items()])
    out = {}
    for node in list(admin.cluster.brokers):
        try:
            body = admin._request(node, describe_log_dirs.API_KEY, 1, request)
        except (KafkaError, OSError):
            continue
        dirs = out[node] = {}
        for result in body.results:
            if result.error_code:
                continue
            dirs[result.log_dir] = {(t.name, p.partition_index): p.partition_size
                                    for t in result.topics for p in t.partitions}
    return out


def sizes(dirs: dict) -> dict:
    """{(topic, partition): size of its largest replica} from `log_dirs`' answer."""
    out: dict = {}
    for by_dir in dirs.values():
        for parts in by_dir.values():
            for key, size in parts.items():
                out[key] = max(size, out.get(key, 0))
    return out


def topic_setting(admin, topics, name: str, default: str) -> dict[str, str]:
    """{topic: the value of one config} for many topics in one DescribeConfigs; `default` for a topic whose
    configs the user may not see."""
    topics = sorted(topics)
    if not topics:
        return {}
    body = admin._request(admin._controller(), describe_configs.API_KEY, 1, describe_configs.REQUEST(resources=[
        {"resource_type": TOPIC_RESOURCE, "resource_name": t, "configuration_keys": [name]} for t in topics]))
    out = dict.fromkeys(topics, default)
    for result in body.results:
        if not result.error_code:
            out.update({result.resource_name: c.value for c in result.configs if c.name == name and c.value})
    return out
