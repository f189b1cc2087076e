"""The Cluster page's API: brokers (id, address, rack, up since, controller), the partitions offline,
under-replicated and under min ISR (counts, and a paged list of each), log dirs and their use (asked
apart, so that the rest shows at once).

Partitions are those the user may describe (Metadata answers no others); log dirs need DESCRIBE on the
cluster (DescribeLogDirs), and are left out for a user without it. min.insync.replicas is asked only for
the topics with a partition short of replicas (no partition can be under it otherwise)."""

from __future__ import annotations

import os
import time

from mmlog.console import lookups
from mmlog.console.errors import ConsoleError
from mmlog.console.paging import page
from mmlog.console.router import Routes

routes = Routes()
STATES = ("offline", "under_replicated", "under_min_isr")
STARTED_MS = int(time.time() * 1000)  # this process's start: the broker's own "up since" when standalone


def _partitions(admin) -> list[tuple[str, int, int, tuple, tuple]]:
    admin.cluster.refresh(None, allow_auto_create=False)
    return [(name, p, info.leaders[p], info.replicas[p] if info.replicas else (), info.isr[p] if info.isr else ())
            for name, info in sorted(admin.cluster.topics.items()) if info.error == 0
            for p in range(info.partitions)]


def _min_isr(admin, topics) -> dict[str, int]:
    """Each topic's min.insync.replicas (1 where the user may not see its configs)."""
    return {t: int(v) if v.isdigit() else 1 for t, v in lookups.topic_setting(admin, topics, "min.insync.replicas",
                                                                              "1").items()}


def classify(admin) -> dict[str, list]:
    """The partitions in each of STATES: [(topic, partition, leader, replicas, isr), ...]."""
    parts = _partitions(admin)
    live = set(admin.cluster.brokers)
    short = [p for p in parts if len(p[4]) < len(p[3])]
    floors = _min_isr(admin, {p[0] for p in short})
    return {"offline": [p for p in parts if p[2] < 0 or p[2] not in live],
            "under_replicated": short,
            "under_min_isr": [p for p in short if len(p[4]) < floors[p[0]]]}


@routes.get("/cluster")
def overview(call):
    admin = call.session.admin()
    states = classify(admin)
    view = call.console.view.current().brokers
    me = call.console.config["broker.id"]
    cluster = admin.cluster
    brokers = []
    for node, info in sorted(cluster.brokers.items()):
        endpoint = view.get(node)
        started = endpoint.started if endpoint and endpoint.started else STARTED_MS if node == me else None
        brokers.append({"id": node, "address": info.address, "rack": endpoint.rack if endpoint else None,
                        "up_since": started, "controller": node == cluster.controller_id})
    return {"cluster_id": cluster.cluster_id, "controller": cluster.controller_id, "brokers": brokers,
            "partitions": {state: len(found) for state, found in states.items()}}


@routes.get("/cluster/log-dirs")
def log_dirs(call) -> dict:
    """Every broker's log dirs: size and partitions (capacity and free space for this broker's own). Asked
    apart from the rest of the page: a DescribeLogDirs of every partition of a large cluster takes a while."""
    admin = call.session.admin()
    if not admin.cluster.brokers:
        admin.cluster.refresh([])
    own = set(map(str, call.console.config.log_dirs))
    out = []
    for node, dirs in sorted(lookups.log_dirs(admin).items()):
        for path, parts in sorted(dirs.items()):
            row = {"broker": node, "dir": path, "size": sum(parts.values()), "partitions": len(parts)}
            if node == call.console.config["broker.id"] and path in own:
                disk = os.statvfs(path)
                row.update(capacity=disk.f_blocks * disk.f_frsize, free=disk.f_bavail * disk.f_frsize)
            out.append(row)
    return {"log_dirs": out}


@routes.get("/cluster/log-dirs/partitions")
def log_dir_partitions(call):
    """A paged list of the partitions one broker keeps in one log dir (`broker`, `dir`), with their sizes."""
    try:
        node = int(call.query.get("broker", ""))
    except ValueError:
        raise ConsoleError(400, "INVALID_REQUEST", "broker: want a broker id") from None
    path = call.query.get("dir", "")
    admin = call.session.admin()
    if not admin.cluster.brokers:
        admin.cluster.refresh([])
    found = lookups.log_dirs(admin).get(node, {}).get(path)
    if found is None:
        raise ConsoleError(404, "LOG_DIR_NOT_FOUND", f"broker {node} answers no log dir {path!r}")
    return page(sorted(found.items()), call, text=lambda item: item[0][0], show=lambda item: {
        "topic": item[0][0], "partition": item[0][1], "size": item[1]})


@routes.get("/cluster/partitions")
def partitions(call):
    """A paged list of the partitions in one state (`state`: offline, under_replicated, under_min_isr)."""
    state = call.query.get("state", "under_replicated")
    if state not in STATES:
        raise ConsoleError(400, "INVALID_REQUEST", f"state: want one of {', '.join(STATES)}")
    found = classify(call.session.admin())[state]
    return page(found, call, text=lambda p: p[0], show=lambda p: {
        "topic": p[0], "partition": p[1], "leader": p[2], "replicas": list(p[3]), "isr": list(p[4])})
