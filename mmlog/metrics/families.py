"""What a scrape shows: the metric families, read from the shared block and the main process's own state.

Counters come from the metrics block (`ipc/metrics_block.py`), summed over every
process's region. Gauges about partitions, groups and the cluster are computed
here, at scrape time, from what the main process already has: each hosted
partition's state page (log start, log end, high watermark, replication role and
ISR), its segment list, the group coordinator's committed offsets, the ZooKeeper
partition states when this broker is the controller, and the cleaner's status file.
Nothing here adds work to the produce or fetch path.

The families and their names are listed in docs/metrics.md; names follow
what Kafka's JMX exporter makes of Kafka's MBeans (`kafka_server_brokertopicmetrics_
bytesin_total` for kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec), and
`mmlog_` for what Kafka has no MBean for.
"""

from __future__ import annotations

import logging

from mmlog.metrics.exposition import Family
from mmlog.errors import BY_CODE
from mmlog.ipc import metrics_block as mb
from mmlog.log.cleaner.manager import read_status
from mmlog.log.state import LEADER_ROLE
from mmlog.protocol.messages import APIS

log = logging.getLogger(__name__)

BOUNDS_MS = tuple(us / 1000 for us in mb.BOUNDS_US)
REQUEST_TIMES = (  # (phase, family, what it measures): Kafka's RequestMetrics, ipc/metrics_block.py
    (mb.QUEUE, "kafka_network_requestmetrics_requestqueuetimems",
     "Time from a request's frame being fully read to its handler starting, in ms, per API."),
    (mb.LOCAL, "kafka_network_requestmetrics_localtimems",
     "Time in the request's handler, in ms, per API."),
    (mb.REMOTE, "kafka_network_requestmetrics_remotetimems",
     "Time a request waited after its handler (parked fetch, acks=all produce, control plane), in ms; "
     "only requests that waited."),
    (mb.SEND, "kafka_network_requestmetrics_responsesendtimems",
     "Time from a response being queued to its last byte written to the socket (sendfile included), in ms, "
     "per API."),
    (mb.TOTAL, "kafka_network_requestmetrics_totaltimems",
     "Time from a request's frame being fully read to its response's last byte written, in ms, per API."),
)


def api_name(api: int) -> str:
    known = APIS.get(api)
    return known.name if known else str(api)


def error_name(code: int) -> str:
    """UNKNOWN_TOPIC_OR_PARTITION for 3: Kafka's Errors enum names, from mmlog's typed errors."""
    cls = BY_CODE.get(code)
    if cls is None:
        return str(code)
    return "".join(f"_{c}" if c.isupper() and i else c for i, c in enumerate(cls.__name__)).upper()


def collect(broker) -> list[Family]:
    """Every family of one scrape; `broker` is the `MetricsSources` of the main process."""
    totals = broker.block.totals()
    families = request_families(totals)
    families += traffic_families(broker, totals)
    families += partition_families(broker)
    families += cleaner_families(broker, totals)
    return families


def request_families(totals) -> list[Family]:
    requests = Family("kafka_network_requestmetrics_requests", "counter",
                      "Requests done (response written, or none due), per API.")
    errors = Family("kafka_network_requestmetrics_errors", "counter",
                    "Non-zero error codes answered, per API and error (each partition or resource that carries one).")
    times = [(kind, Family(name, "histogram", doc)) for kind, name, doc in REQUEST_TIMES]
    for api in range(mb.MAX_API):
        count = int(totals[mb.REQUESTS + api])
        if not count:
            continue
        name = api_name(api)
        requests.add(count, request=name)
        codes = totals[mb.ERRORS + api * mb.ERROR_SLOTS: mb.ERRORS + (api + 1) * mb.ERROR_SLOTS]
        for slot in codes.nonzero()[0]:
            errors.add(int(codes[slot]), request=name, error=error_name(int(slot) - 1))
        for kind, family in times:
            buckets, total_us = mb.latency(totals, kind, api)
            if buckets.any() or kind != mb.REMOTE:
                family.add_histogram(BOUNDS_MS, buckets, total_us / 1000, request=name)
    return [requests, errors] + [family for _, family in times]


def _scalar(totals, name: str) -> int:
    return int(totals[mb.SCALAR[name]])


def _singles(kind: str, rows) -> list[Family]:
    """Families of one unlabelled sample each, from (name, value, doc) rows."""
    out = []
    for name, value, doc in rows:
        family = Family(name, kind, doc)
        family.add(value)
        out.append(family)
    return out


def traffic_families(broker, totals) -> list[Family]:
    out = _singles("counter", [(name, _scalar(totals, scalar), doc) for name, scalar, doc in (
        ("kafka_server_brokertopicmetrics_bytesin", "bytes_in", "Record batch bytes appended by Produce."),
        ("kafka_server_brokertopicmetrics_messagesin", "messages_in", "Records appended by Produce."),
        ("kafka_server_brokertopicmetrics_bytesout", "bytes_out", "Record bytes sent to consumers by Fetch."),
        ("kafka_server_brokertopicmetrics_replicationbytesout", "replication_bytes_out",
         "Record bytes sent to follower replicas by Fetch."),
        ("kafka_server_socketservermetrics_connection_creation", "connections_created",
         "Connections processors took from the acceptor."),
        ("kafka_server_socketservermetrics_connection_close", "connections_closed", "Connections processors closed."),
        ("mmlog_processor_restarts", "processor_restarts",
         "Processors that died and were replaced (their counts stay in every counter)."),
        ("mmlog_processor_failures", "processor_failures",
         "Unexpected exceptions a processor met serving a connection; each closed that connection only."),
        ("mmlog_log_partition_evictions", "partition_evictions",
         "Partitions the main process and the processors closed to stay within log.max.open.partitions "
         "(each is opened again on its next use: a steady rate means descriptors or mappings are short)."),
        ("mmlog_processor_requests_compiled", "requests_compiled",
         "Requests the compiled request path served (compiled.request.path.enable); the rest went through "
         "the Python handlers."),
    )])
    connections = Family("kafka_server_socketservermetrics_connection_count", "gauge",
                         "Connections open, per processor.")
    for slot, count in enumerate(broker.block.per_processor(mb.GAUGE["connections"])):
        connections.add(count, networkProcessor=str(slot))
    checks = Family("mmlog_processor_catalogue_checks", "gauge",
                    "Times each processor has checked the catalogue, ACLs and quotas for changes (one stat, "
                    "every 0.5 s): a change made before a check began is in force on that processor after it.")
    for slot, count in enumerate(broker.block.per_processor(mb.GAUGE["catalogue_checks"])):
        checks.add(count, networkProcessor=str(slot))
    purgatory = Family("kafka_server_delayedoperationpurgatory_purgatorysize", "gauge",
                       "Requests parked in the processors' purgatories (long-poll fetches, acks=all produces).")
    purgatory.add(sum(broker.board.parked))
    flush = Family("kafka_log_logflushstats_logflushtimems", "histogram", "Time of each log flush (fsync), in ms.")
    flush.add_histogram(BOUNDS_MS, totals[mb.FLUSH:mb.FLUSH + mb.BUCKETS], int(totals[mb.FLUSH + mb.BUCKETS]) / 1000)
    return out + [connections, checks, purgatory, flush]


def partition_families(broker) -> list[Family]:
    """Per partition (log offsets, size, segments, under-replication), per group (lag), and the cluster."""
    end = Family("kafka_log_log_logendoffset", "gauge", "Log end offset, per partition.")
    start = Family("kafka_log_log_logstartoffset", "gauge", "Log start offset, per partition.")
    hw = Family("kafka_log_log_highwatermark", "gauge", "High watermark, per partition.")
    size = Family("kafka_log_log_size", "gauge", "Bytes of the partition's segments, per partition.")
    segments = Family("kafka_log_log_numlogsegments", "gauge", "Segments, per partition.")
    under = Family("kafka_cluster_partition_underreplicated", "gauge",
                   "1 for a partition this broker leads with fewer in-sync replicas than replicas.")
    stable: dict[tuple[str, int], int] = {}  # last stable offsets, for the lag
    count = leaders = under_count = 0
    for g in broker.manager.gauges():  # closed partitions are read, not reopened
        snap, rep, topic, p = g.snapshot, g.replication, g.topic, g.partition
        labels = {"topic": topic, "partition": str(p)}
        end.add(snap.log_end, **labels)
        start.add(snap.log_start, **labels)
        hw.add(snap.high_watermark, **labels)
        size.add(g.size_bytes, **labels)
        segments.add(g.segments, **labels)
        count += 1
        if rep.role == LEADER_ROLE:
            leaders += 1
            lagging = int(len(rep.isr) < len(rep.replicas))
            under_count += lagging
            under.add(lagging, **labels)
            stable[(topic, p)] = snap.last_stable_offset
    families = [end, start, hw, size, segments, under]
    families += _singles("gauge", (
        ("kafka_server_replicamanager_partitioncount", count, "Partitions with a replica here."),
        ("kafka_server_replicamanager_leadercount", leaders, "Partitions this broker leads."),
        ("kafka_server_replicamanager_underreplicatedpartitions", under_count,
         "Partitions this broker leads with fewer in-sync replicas than replicas."),
        ("kafka_controller_kafkacontroller_activecontrollercount", int(broker.is_controller()),
         "1 on the active controller (a standalone broker is its own), else 0."),
        ("kafka_controller_kafkacontroller_offlinepartitionscount", broker.offline_partitions(),
         "Partitions without a leader, as the controller sees them (0 on other brokers)."),
    ))
    shrinks, expands = broker.isr_changes()
    families += _singles("counter", (
        ("kafka_server_replicamanager_isrshrinks", shrinks, "ISR shrinks this broker wrote as a leader."),
        ("kafka_server_replicamanager_isrexpands", expands, "ISR expansions this broker wrote as a leader."),
    ))
    return families + group_families(broker, stable)


def group_families(broker, stable: dict) -> list[Family]:
    """Committed offsets and lag of the groups this broker coordinates, for partitions it leads."""
    current = Family("kafka_consumergroup_current_offset", "gauge", "A group's committed offset, per partition.")
    lag = Family("kafka_consumergroup_lag", "gauge",
                 "Last stable offset minus the group's committed offset, per partition this broker leads.")
    coordinator = broker.coordinator
    table = coordinator.store.table
    for group in sorted(table.group_ids()):
        if not coordinator.owns(group):
            continue
        for (topic, p), committed in sorted(table.group_offsets(group).items()):
            labels = {"consumergroup": group, "topic": topic, "partition": str(p)}
            current.add(committed.offset, **labels)
            end = stable.get((topic, p))
            if end is not None and committed.offset >= 0:
                lag.add(max(0, end - committed.offset), **labels)
    return [current, lag]


def cleaner_families(broker, totals) -> list[Family]:
    out = _singles("counter", [(name, _scalar(totals, scalar), doc) for name, scalar, doc in (
        ("kafka_log_logcleaner_passes", "cleaner_passes", "Cleanings the log cleaner finished."),
        ("kafka_log_logcleaner_bytes_read", "cleaner_bytes_read", "Bytes the log cleaner read."),
        ("kafka_log_logcleaner_bytes_written", "cleaner_bytes_written", "Bytes the log cleaner wrote."),
    )])
    read, written = _scalar(totals, "cleaner_bytes_read"), _scalar(totals, "cleaner_bytes_written")
    recopy = Family("kafka_log_logcleaner_cleaner_recopy_percent", "gauge",
                    "Bytes written as a percentage of bytes read, over every cleaning so far.")
    recopy.add(100.0 * written / read if read else 0.0)
    last = Family("kafka_log_logcleaner_last_clean_time_secs", "gauge",
                  "Duration of the running cleaner's last cleaning, in seconds.")
    last.add(int(totals[mb.GAUGE["cleaner_last_pass_us"]]) / 1e6)
    status = read_status(broker.manager.log_dirs[0])
    dirty = Family("kafka_log_logcleanermanager_dirty_ratio", "gauge",
                   "Dirty bytes / cleanable bytes of each compacted partition, as the cleaner last surveyed it.")
    ratios = []
    for key, entry in sorted(status.items()):
        topic, _, p = key.rpartition("-")
        if "dirty_ratio" in entry and p.isdigit():
            dirty.add(float(entry["dirty_ratio"]), topic=topic, partition=p)
            ratios.append(float(entry["dirty_ratio"]))
    worst = Family("kafka_log_logcleanermanager_max_dirty_percent", "gauge",
                   "The highest dirty ratio of any compacted partition, in percent.")
    worst.add(100.0 * max(ratios, default=0.0))
    return out + [recopy, last, dirty, worst]
