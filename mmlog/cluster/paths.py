"""ZooKeeper paths and node contents of an mmlog cluster (Kafka's own layout).

    /cluster/id                                   {"version":"1","id":...}
    /controller                                   ephemeral {"version":1,"brokerid":N,"timestamp":...}
    /controller_epoch                             decimal, bumped by each new controller
    /brokers/ids/<id>                             ephemeral registration (host, port, rack, endpoints)
    /brokers/offline_replicas/<id>                ephemeral: {"partitions":[[topic,p],...]} on a failed log dir
    /brokers/topics/<topic>                       {"version":3,"topic_id":...,"partitions":{"0":[id,...],...},
                                                   "adding_replicas":{"0":[id,...]},"removing_replicas":{...}}
    /brokers/topics/<topic>/partitions/<p>/state  {"controller_epoch":E,"leader":id|-1,"leader_epoch":N,"isr":[...]}
    /config/topics/<topic>                        {"version":1,"config":{...overrides}}
    /config/brokers/<id> and /<default>           {"version":1,"config":{...dynamic broker configs}}
    /config/clients/<id>, /config/users/<user>,   {"version":1,"config":{"producer_byte_rate":"1048576",...}}
      /config/users/<user>/clients/<id>           (client quotas; names percent-encoded, <default> for all)
    /config/changes/config_change_<seq>           {"version":2,"entity_path":"clients/x"}: watched by every broker
    /kafka-acl/<ResourceType>/<name>              {"version":1,"acls":[{"principal":"User:a","permissionType":"Allow",
    /kafka-acl-extended/prefixed/<Type>/<prefix>    "operation":"Read","host":"*"}]} (literal; prefixed)
    /kafka-acl-changes/acl_changes_<seq>          "Topic:name": a literal resource's ACLs changed
    /kafka-acl-extended-changes/acl_changes_<seq> {"version":1,"resourceType":..,"name":..,"patternType":"PREFIXED"}
    /latest_producer_id_block                     {"version":1,"broker":id,"block_start":S,"block_end":E}
    /consumers/<group>/offsets/<topic>/<p>        {"offset":...,"leader_epoch":...,"metadata":...,"commit_ms":...}
    /consumers/<group>/generation                 {"protocol_type":...,"generation":N}
    /consumers/<group>/pending/<producer id>      {"offsets":[[topic,p,offset,leader_epoch,metadata,commit_ms],...]}

The pending nodes hold offsets committed inside a transaction not yet decided.

The last two are the paper's offset registry. Group ids are free text, so they
are percent-encoded into one path component; topic names are already legal.
Everything is compact JSON in UTF-8.
"""

from __future__ import annotations

import time
from urllib.parse import quote, unquote

from mmlog.replication.leader_and_isr import LeaderAndIsr
from mmlog.system.compact_json import dump, load  # the nodes' encoding: paths.dump, paths.load
from mmlog.security.zookeeper_acls import ACL_PATHS  # the ACL nodes are security's; the store creates them

CLUSTER_ID = "/cluster/id"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKER_IDS = "/brokers/ids"
OFFLINE_REPLICAS = "/brokers/offline_replicas"
TOPICS = "/brokers/topics"
TOPIC_CONFIGS = "/config/topics"
USER_CONFIGS = "/config/users"  # SCRAM credentials and user quotas, Kafka's layout: {"version":1,"config":{...}}
CONFIG = "/config"
BROKER_CONFIGS = "/config/brokers"
CONFIG_CHANGES = "/config/changes"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"
CONSUMERS = "/consumers"


BASE_PATHS = (BROKER_IDS, OFFLINE_REPLICAS, TOPICS, TOPIC_CONFIGS, USER_CONFIGS, CONSUMERS, BROKER_CONFIGS,
              CONFIG_CHANGES, "/config/clients", *ACL_PATHS)


def now_ms() -> int:
    return int(time.time() * 1000)


# ---------------------------------------------------------------- brokers and controller

def broker(node_id: int) -> str:
    return f"{BROKER_IDS}/{node_id}"


def offline_replicas(node_id: int) -> str:
    """A broker's replicas whose log dir failed (ephemeral, like its registration): {"partitions": [[t, p], ...]}."""
    return f"{OFFLINE_REPLICAS}/{node_id}"


def registration(host: str, port: int, rack: str | None, listeners=(), protocols: dict | None = None,
                 registry=()) -> bytes:
    """Kafka's broker registration: host and port of the first listener, and every (name, host, port); with
    a schema registry, its URLs (a field of mmlog's own, which Kafka's readers of the node ignore)."""
    listeners = listeners or (("PLAINTEXT", host, port),)
    doc = {
        "version": 4, "host": host, "port": port, "rack": rack, "jmx_port": -1,
        "endpoints": [f"{name}://{h}:{p}" for name, h, p in listeners],
        "listener_security_protocol_map": protocols or {"PLAINTEXT": "PLAINTEXT"}, "timestamp": str(now_ms()),
    }
    if registry:
        doc["schema_registry_urls"] = list(registry)
    return dump(doc)


def registration_listeners(doc: dict) -> tuple:
    """((name, host, port), ...) of a registration's endpoints."""
    out = []
    for url in doc.get("endpoints", ()):
        name, _, rest = url.partition("://")
        host, _, port = rest.rpartition(":")
        out.append((name, host.strip("[]"), int(port)))
    return tuple(out)


def controller(node_id: int) -> bytes:
    return dump({"version": 1, "brokerid": node_id, "timestamp": str(now_ms())})


# ---------------------------------------------------------------- topics

def topic(name: str) -> str:
    return f"{TOPICS}/{name}"


def topic_partitions(name: str) -> str:
    return f"{TOPICS}/{name}/partitions"


def partition(name: str, p: int) -> str:
    return f"{TOPICS}/{name}/partitions/{p}"


def partition_state(name: str, p: int) -> str:
    return f"{TOPICS}/{name}/partitions/{p}/state"


def user_config(name: str) -> str:
    return f"{USER_CONFIGS}/{name}"


def topic_config(name: str) -> str:
    return f"{TOPIC_CONFIGS}/{name}"


def assignment(replicas: list[list[int]], topic_id: str, adding: dict | None = None,
               removing: dict | None = None) -> bytes:
    """A topic node: each partition's replicas, the preferred leader first; while a partition is being
    reassigned (KIP-455) its replicas are the union of old and new, and `adding` / `removing` hold
    {partition: [broker ids]} of those joining and leaving."""
    return dump({"version": 3, "topic_id": topic_id, "partitions": {str(p): r for p, r in enumerate(replicas)},
                 "adding_replicas": {str(p): r for p, r in sorted((adding or {}).items())},
                 "removing_replicas": {str(p): r for p, r in sorted((removing or {}).items())}})


def parse_reassigning(data: bytes) -> tuple[dict[int, list[int]], dict[int, list[int]]]:
    """({partition: adding replicas}, {partition: removing replicas}) of a topic node."""
    doc = load(data)
    return ({int(p): list(r) for p, r in doc.get("adding_replicas", {}).items()},
            {int(p): list(r) for p, r in doc.get("removing_replicas", {}).items()})


def parse_assignment(data: bytes) -> tuple[list[list[int]], str]:
    """(replicas per partition, topic id) of a topic node."""
    doc = load(data)
    parts = doc["partitions"]
    return [list(parts[str(p)]) for p in range(len(parts))], doc.get("topic_id", "")


def state(leader: int, leader_epoch: int, controller_epoch: int, isr=None) -> bytes:
    """A state node's bytes (the ISR defaults to the leader alone)."""
    if isr is None:
        isr = [leader] if leader >= 0 else []
    return LeaderAndIsr(leader, leader_epoch, tuple(isr), controller_epoch).to_json()


# ---------------------------------------------------------------- consumer groups

def group(group_id: str) -> str:
    return f"{CONSUMERS}/{quote(group_id, safe='')}"


def group_id_of(child: str) -> str:
    return unquote(child)


def group_offsets(group_id: str) -> str:
    return f"{group(group_id)}/offsets"


def group_topic(group_id: str, topic_name: str) -> str:
    return f"{group(group_id)}/offsets/{topic_name}"


def group_offset(group_id: str, topic_name: str, p: int) -> str:
    return f"{group(group_id)}/offsets/{topic_name}/{p}"


def group_generation(group_id: str) -> str:
    return f"{group(group_id)}/generation"


def group_pending(group_id: str) -> str:
    return f"{group(group_id)}/pending"


def group_pending_producer(group_id: str, producer_id: int) -> str:
    return f"{group(group_id)}/pending/{producer_id}"
