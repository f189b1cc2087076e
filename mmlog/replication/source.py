"""One leader broker as a follower sees it: a connection, and a thread fetching all we follow there.

Each round: partitions new to us (or in a new leader epoch) first truncate what
the leader does not hold, in OffsetsForLeaderEpoch rounds (KIP-101/279,
`Partition.truncate_to_leader_epoch`); then one Fetch (replica_id = our broker
id, current_leader_epoch = the plan's epoch) asks for every ready partition from
its log end. The leader parks the fetch until it has something
(`replica.fetch.wait.max.ms`), so an idle follower costs one request per wait.
Records are appended as the leader sent them (`append_replica`: same offsets,
epochs and bytes), cut after the last whole batch (a fetch may end mid-batch).

The fetch offset is how the leader learns our log end: the next round's request,
sent as soon as an append is done, is what moves its high watermark. Our log start
goes with it, and each answer's log start becomes ours (up to our high watermark):
records deleted on the leader (DeleteRecords) go here too.

Partitions their topic's follower.replication.throttled.replicas names here are
throttled while out of the ISR (`throttle.py`): while the broker's follower rate is
exceeded they are left out of the fetch.

Errors per partition: OFFSET_OUT_OF_RANGE behind the leader's log start starts
our log afresh there, otherwise (we are ahead) truncates by epoch again; a fenced,
unknown or moved leader epoch, or a leader that is not one yet, waits for the
plan to change (checked again after `replica.fetch.backoff.ms`). A broken
connection is made again after the back-off.
"""

from __future__ import annotations

import logging
import threading
import time

from mmlog.errors import FencedLeaderEpoch, KafkaError, OffsetOutOfRange
from mmlog.log.leader_epochs import UNDEFINED
from mmlog.log.state import Role
from mmlog.protocol import ProtocolError
from mmlog.protocol.messages import fetch, offset_for_leader_epoch
from mmlog.protocol.records import validate_whole_batches
from mmlog.replication.peer import PeerConnection
from mmlog.replication.throttle import Throttle
from mmlog.security.client import inter_broker

log = logging.getLogger(__name__)

FETCH_VERSION = 11  # replica_id and current_leader_epoch, before fetch sessions' topic ids
EPOCH_VERSION = 3  # OffsetsForLeaderEpoch with replica_id
MAX_TRUNCATION_ROUNDS = 32
FOLLOWER = int(Role.FOLLOWER)


class SourceFetcher(threading.Thread):
    """Fetches every partition we follow on one leader broker."""

    def __init__(self, me: int, leader_id: int, manager, config, throttle: Throttle | None = None) -> None:
        super().__init__(name=f"replica-fetcher-{leader_id}", daemon=True)
        self.me = me
        self.leader_id = leader_id
        self.manager = manager
        self.wait_ms = config["replica.fetch.wait.max.ms"]
        self.security = inter_broker(config)  # the protocol of the leaders' inter.broker.listener.name
        self.max_bytes = config["replica.fetch.max.bytes"]
        self.backoff = config["replica.fetch.backoff.ms"] / 1000
        self.throttle = throttle or Throttle()
        self.address: tuple[str, int] | None = None
        self._wanted: dict[tuple[str, int], int] = {}  # what the plan says: (topic, p) -> epoch
        self._ready: dict[tuple[str, int], int] = {}  # truncated in that epoch: fetch them
        self._held: dict[tuple[str, int], float] = {}  # partition -> monotonic time to try again
        self._lock = threading.Lock()
        self._changed = threading.Event()
        self._stopped = False
        self._peer: PeerConnection | None = None

    # ------------------------------------------------------------ from the plan

    def update(self, address: tuple[str, int] | None, partitions: dict[tuple[str, int], int]) -> None:
        with self._lock:
            if address != self.address:
                self.address = address
                self._close()
            self._wanted = dict(partitions)
            self._held.clear()
        self._changed.set()

    def stop(self) -> None:
        self._stopped = True
        self._changed.set()

    # ------------------------------------------------------------ the loop

    def run(self) -> None:
        while not self._stopped:
            try:
                if not self._round():
                    self._changed.wait(0.1)
                    self._changed.clear()
            except (OSError, ProtocolError, KafkaError) as exc:
                log.info("fetching from broker %d: %s", self.leader_id, exc)
                self._close()
                self._changed.wait(self.backoff)
                self._changed.clear()
            except Exception:  # noqa: BLE001 - a bug: the thread ends, and the process with it (fetcher.py)
                log.exception("fetching from broker %d failed unexpectedly", self.leader_id)
                self._close()
                raise
        self._close()

    def _round(self) -> bool:
        """Truncate what needs it, then fetch once; False when there was nothing to do."""
        with self._lock:
            wanted, address = dict(self._wanted), self.address
        if address is None or not wanted:
            return False
        now = time.monotonic()
        self._ready = {k: e for k, e in self._ready.items() if wanted.get(k) == e}
        fresh = [k for k, e in wanted.items() if k not in self._ready and self._held.get(k, 0) <= now]
        if fresh:
            self._truncate(fresh, wanted)
        ready = {k: e for k, e in self._ready.items() if self._held.get(k, 0) <= now}
        if not ready:
            return False
        self._fetch(ready)
        return True

    # ------------------------------------------------------------ truncation

    def _truncate(self, keys: list, wanted: dict) -> None:
        """OffsetsForLeaderEpoch rounds until each partition holds nothing the leader does not."""
        todo = {}
        for key in keys:
            part = self._partition(key)
            if part is None:
                continue
            if part.log_end_offset == 0 and part.latest_epoch() == UNDEFINED:
                self._ready[key] = wanted[key]  # nothing to truncate
            else:
                todo[key] = part
        for _ in range(MAX_TRUNCATION_ROUNDS):
            if not todo:
                return
            for key in [k for k, part in todo.items() if not _follows(part, wanted[k])]:
                del todo[key]  # the main process moved on meanwhile: the next plan says what to do
            # (and if it moves on while the question is on the wire, the truncation refuses under the lock)
            asked = {key: part.latest_epoch() for key, part in todo.items()}
            answers = self._end_offsets(asked, wanted)
            for key, (code, epoch, end) in answers.items():
                part = todo[key]
                if code:
                    self._hold(key, code)
                    del todo[key]
                    continue
                try:
                    done = part.truncate_to_leader_epoch(asked[key], epoch, end, following=wanted[key])
                except FencedLeaderEpoch:
                    del todo[key]  # we lead it now, or follow in another epoch: the next plan says what to do
                    continue
                if done:
                    log.info("%s-%d: truncated to %d for leader %d epoch %d", *key, part.log_end_offset,
                             self.leader_id, wanted[key])
                    self._ready[key] = wanted[key]
                    del todo[key]
        for key in todo:
            log.warning("%s-%d: still diverging from broker %d after %d truncation rounds; trying again", *key,
                        self.leader_id, MAX_TRUNCATION_ROUNDS)
            self._held[key] = time.monotonic() + self.backoff

    def _end_offsets(self, asked: dict, wanted: dict) -> dict:
        by_topic: dict[str, list] = {}
        for (topic, p), epoch in asked.items():
            by_topic.setdefault(topic, []).append(
                {"partition": p, "current_leader_epoch": wanted[topic, p], "leader_epoch": epoch})
        body = offset_for_leader_epoch.REQUEST(replica_id=self.me, topics=[
            {"topic": t, "partitions": ps} for t, ps in by_topic.items()])
        response = self._exchange(offset_for_leader_epoch.API_KEY, EPOCH_VERSION, body)
        return {(t.topic, r.partition): (r.error_code, r.leader_epoch, r.end_offset)
                for t in response.topics for r in t.partitions if (t.topic, r.partition) in asked}

    # ------------------------------------------------------------ fetching

    def _fetch(self, ready: dict) -> None:
        by_topic: dict[str, list] = {}
        parts = {}
        throttled = self._throttled(ready) if self.throttle.active else frozenset()
        if throttled and self.throttle.exceeded():
            ready = {k: e for k, e in ready.items() if k not in throttled}  # over the rate: they wait
            if not ready:
                time.sleep(0.05)
                return
        for key, epoch in ready.items():
            part = self._partition(key)
            if part is None:
                continue
            parts[key] = part
            by_topic.setdefault(key[0], []).append({
                "partition": key[1], "current_leader_epoch": epoch, "fetch_offset": part.log_end_offset,
                "log_start_offset": part.log_start_offset,
                "partition_max_bytes": self.throttle.max_bytes(self.max_bytes) if key in throttled else self.max_bytes})
        if not parts:
            return
        body = fetch.REQUEST(replica_id=self.me, max_wait_ms=self.wait_ms, min_bytes=1, max_bytes=0x7FFFFFFF,
                             isolation_level=0, session_id=0, session_epoch=-1,
                             topics=[{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
                             forgotten_topics_data=[], rack_id="")
        response = self._exchange(fetch.API_KEY, FETCH_VERSION, body)
        for topic in response.responses:
            for answer in topic.partitions:
                key = (topic.topic, answer.partition_index)
                if key in parts:
                    if key in throttled and answer.records is not None:
                        self.throttle.record(len(answer.records))
                    self._apply(key, parts[key], answer)

    def _throttled(self, ready: dict) -> frozenset:
        """The ready partitions the throttle names whose replica here is out of the ISR (Kafka's
        shouldFollowerThrottle: an in-sync follower is never slowed)."""
        out = []
        for key in self.throttle.partitions & ready.keys():
            part = self._partition(key)
            if part is not None and self.me not in part.replication().isr:
                out.append(key)
        return frozenset(out)

    def _apply(self, key, part, answer) -> None:
        try:
            if answer.error_code == OffsetOutOfRange.code:
                self._out_of_range(key, part, answer)
            elif answer.error_code:
                self._hold(key, answer.error_code)
            else:
                records, epoch = answer.records, self._ready[key]
                headers, end = validate_whole_batches(records, dense=False) if records is not None else ((), 0)
                if end:
                    part.append_replica(memoryview(records)[:end], answer.high_watermark, following=epoch,
                                        headers=headers)
                else:
                    part.set_follower_high_watermark(answer.high_watermark, following=epoch)
                part.follow_log_start(answer.log_start_offset, following=epoch)  # records the leader deleted too
        except KafkaError as exc:  # deleted, a storage error, or a gap: start over for this partition
            log.warning("%s-%d from broker %d: %s", *key, self.leader_id, exc)
            self._ready.pop(key, None)
            self._held[key] = time.monotonic() + self.backoff

    def _out_of_range(self, key, part, answer) -> None:
        if answer.log_start_offset > part.log_end_offset:
            log.info("%s-%d: behind the leader's log start %d: starting afresh there", *key, answer.log_start_offset)
            part.truncate_fully_and_start_at(answer.log_start_offset, following=self._ready[key])
        else:
            self._ready.pop(key, None)  # ahead of the leader: truncate by epoch again

    def _hold(self, key, code: int) -> None:
        """The leader cannot serve this partition for us now (see the module docstring)."""
        log.debug("%s-%d: broker %d answered error %d", *key, self.leader_id, code)
        self._ready.pop(key, None)
        self._held[key] = time.monotonic() + self.backoff

    def _partition(self, key):
        try:
            return self.manager.partition(*key)
        except KafkaError:
            return None

    # ------------------------------------------------------------ the connection

    def _exchange(self, api_key: int, version: int, body):
        if self._peer is None:
            self._peer = PeerConnection(self.address, f"replica-{self.me}", self.security)
        return self._peer.request(api_key, version, body, self.wait_ms / 1000 + 30)

    def _close(self) -> None:
        if self._peer is not None:
            self._peer.close()
            self._peer = None


def _follows(part, epoch: int) -> bool:
    """Whether the partition still follows in `epoch` (checked before each truncation round, without the
    lock: the truncation checks again under it)."""
    rep = part.replication()
    return rep.role == FOLLOWER and rep.leader_epoch == epoch

