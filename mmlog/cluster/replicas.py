"""This broker's replicas: their roles from the partition states, the leader's ISR, the fetch plan.

Runs on the control thread of the main process (which owns the log manager):

- `apply(keys)`: a partition's state node changed. Lead it (a new epoch starts
  at our log end), follow its new leader (the replica fetcher truncates, then
  fetches), or serve nothing while it has no leader. Roles live in each
  partition's shared state page, so processors see them at their next request.
- `check_isr()`, on a timer: as leader, drop from the ISR a follower that has not
  caught up for `replica.lag.time.max.ms`, and take back one whose log end reached
  our HW, if it is registered in /brokers/ids (Kafka's KIP-841: a broker without a
  session, which the controller counts as dead and removed, must not be counted
  by min.insync.replicas because it still fetches). The leader proposes the new
  ISR with a compare-and-set on the state node's version it last applied; if the
  controller (or anyone) wrote meanwhile, the write fails and the watch brings the
  newer state. A change is logged once written: a leader cut from ZooKeeper, which
  may have been deposed meanwhile, announces nothing it could not do.
- The fetch plan (`fetch-plan.json`, first data dir, written atomically when it
  changes): each followed partition with its leader and epoch, and the leaders'
  addresses, and the follower throttle: its rate and the followed partitions whose
  topic's follower.replication.throttled.replicas names this broker
  (`config/throttled_replicas.py`). The replica fetcher process (`mmlog/replication/`)
  re-reads it.
- `leave()`, at a controlled shutdown: hand each partition we lead to the next
  live ISR member (leader epoch + 1) and leave every ISR, so clients move before
  we stop instead of waiting out the session timeout.

Crash points: a role change is one seqlocked publish in the state page; the
ZooKeeper state node is the truth, applied again from scratch after a restart
(every partition opens without a role until then).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from kazoo.exceptions import BadVersionError, NoNodeError

from mmlog.cluster import paths
from mmlog.config import throttled_replicas
from mmlog.errors import KafkaError, MetadataStoreUnreachable
from mmlog.log.state import Role
from mmlog.replication import fetch_plan
from mmlog.replication.isr import next_isr
from mmlog.replication.leader_and_isr import LeaderAndIsr

log = logging.getLogger(__name__)

LEADER, FOLLOWER, NONE = int(Role.LEADER), int(Role.FOLLOWER), int(Role.NONE)


class ReplicaManager:
    """Roles, ISR proposals and the fetch plan of one broker's replicas."""

    def __init__(self, broker_id: int, manager, states, zk, lag_ms: int, wake, inter_broker: str | None = None) -> None:
        self.me = broker_id
        self.inter_broker = inter_broker  # the listener name replica fetches go to
        self.manager = manager
        self.states = states
        self.zk = zk
        self.lag_ms = lag_ms
        self.wake = wake  # wakes the processors' parked requests (acks=all, follower fetches)
        self._plan: bytes | None = None
        self._brokers: dict[int, tuple[str, int]] = {}
        self.registered: set[int] = set()  # brokers in /brokers/ids as last seen: who may join an ISR
        self.registered_zxid = 0  # our registration's czxid (broker epoch): see _apply_one
        # What the roles are, kept here so that timers visit only the partitions they concern (the main
        # process may keep few partitions open: log.max.open.partitions).
        self.led: set[tuple[str, int]] = set()
        self.followed: dict[tuple[str, int], tuple[int, int]] = {}  # -> (leader, leader epoch)
        self.isr_shrinks = self.isr_expands = 0  # ISR changes we wrote (Prometheus: metrics/)
        self.throttle_rate: int | None = None  # follower.replication.throttled.rate (None: unlimited)
        # Told the partitions whose role, epoch or replicas may have changed (the transaction coordinator loads
        # and resigns its `__transaction_state` partitions by it); on the control thread.
        self.on_roles: Callable[[set], None] = lambda keys: None

    # ------------------------------------------------------------ roles

    def apply(self, keys) -> None:
        """Bring the replicas of the partitions in `keys` to their state nodes' roles."""
        topics = self.manager.topics()
        changed = set()
        for topic, p in sorted(keys):
            info = topics.get(topic)
            state = self.states.get(topic, p)
            if (state is None or info is None or info.assignment is None or p >= info.partitions
                    or self.me not in info.assignment[p]):
                continue
            try:
                if self._apply_one(topic, p, info.assignment[p], state):
                    changed.add((topic, p))
            except KafkaError as exc:  # deleted meanwhile, or a storage error: the next change retries
                log.warning("cannot apply the state of %s-%d: %s", topic, p, exc)
        if changed:
            self.write_plan()
            self.wake()
            self.on_roles(changed)

    def _note_role(self, topic: str, p: int, state: LeaderAndIsr) -> None:
        key = (topic, p)
        self.led.discard(key)
        self.followed.pop(key, None)
        if state.leader == self.me:
            self.led.add(key)
        elif state.leader >= 0:
            self.followed[key] = (state.leader, state.leader_epoch)

    def forget(self, topic: str) -> None:
        """A topic was deleted: its partitions have no role here any more."""
        gone = {k for k in (*self.led, *self.followed) if k[0] == topic}
        self.led -= gone
        self.followed = {k: v for k, v in self.followed.items() if k[0] != topic}
        self.write_plan()
        if gone:
            self.on_roles(gone)

    def drop(self, keys) -> None:
        """Partitions reassigned away from us (their replicas deleted here): no role, no fetching."""
        keys = set(keys)
        if keys:
            self.led -= keys
            for key in keys:
                self.followed.pop(key, None)
            self.write_plan()
            self.wake()  # requests parked on them are answered (the partitions serve nobody now)
            self.on_roles(keys)

    def _apply_one(self, topic: str, p: int, replicas: list[int], state: LeaderAndIsr) -> bool:
        part = self.manager.partition(topic, p)
        rep = part.replication()
        if state.leader_epoch < rep.leader_epoch:
            return False  # an older state than the one applied (a re-read raced the watch)
        if state.leader == self.me and 0 < state.zxid < self.registered_zxid:
            # Written before we registered (we restarted, or our session was lost): we may have come back
            # without records we acknowledged (a power loss), and followers would truncate to our log. We
            # lead only by a state the controller writes for this registration of ours (election.decide).
            self.led.discard((topic, p))
            self.followed.pop((topic, p), None)
            if rep.role == NONE and tuple(rep.replicas) == tuple(replicas):
                return False
            part.stop_serving(replicas)
            log.warning("%s-%d: not leading by epoch %d, written before this broker registered: waiting for the "
                        "controller", topic, p, state.leader_epoch)
            return True
        self._note_role(topic, p, state)
        moved = tuple(rep.replicas) != tuple(replicas)  # reassigned: the state came before the topic node
        if state.leader == self.me:
            if rep.role != LEADER or rep.leader_epoch != state.leader_epoch or moved:
                part.become_leader(state.leader_epoch, replicas, state.isr, state.version, leader_id=self.me)
                log.info("%s-%d: leader in epoch %d, ISR %s", topic, p, state.leader_epoch, list(state.isr))
            elif rep.isr != state.isr or rep.isr_version != state.version:
                part.set_isr(state.isr, state.version)
            else:
                return False
            part.maybe_advance_high_watermark()
            return True
        if state.leader >= 0:
            if (rep.role != FOLLOWER or (rep.leader_id, rep.leader_epoch) != (state.leader, state.leader_epoch)
                    or moved):
                part.become_follower(state.leader, state.leader_epoch, replicas, state.isr, state.version)
                log.info("%s-%d: following broker %d in epoch %d", topic, p, state.leader, state.leader_epoch)
                return True
            if rep.isr != state.isr or rep.isr_version != state.version:
                part.set_isr(state.isr, state.version)
            return False
        if rep.role != NONE or moved:
            part.stop_serving(replicas)
            log.info("%s-%d: offline (no live in-sync replica)", topic, p)
            return True
        return False

    # ------------------------------------------------------------ the leader's ISR

    def check_isr(self, now_ms: int | None = None) -> int:
        """Shrink or expand the ISR of every partition we lead; returns how many changed."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        changed = 0
        for topic, p, part in self.manager.partitions(sorted(self.led)):
            try:
                rep = part.replication()
                if rep.role != LEADER or len(rep.replicas) < 2:
                    continue
                isr, why = next_isr(self.me, rep, part.high_watermark, part.followers(), now_ms, self.lag_ms,
                                    self.registered)
                if isr != rep.isr:
                    changed += self._propose_isr(topic, p, part, rep, isr, why)
            except MetadataStoreUnreachable:
                raise  # ZooKeeper is away: no use trying the next partition (the timer logs it once)
            except KafkaError:
                continue  # deleted meanwhile
        return changed

    def _propose_isr(self, topic: str, p: int, part, rep, isr: tuple[int, ...], why: list[str]) -> int:
        state = self.states.get(topic, p)
        if state is None or state.leader != self.me or state.leader_epoch != rep.leader_epoch:
            return 0
        new = LeaderAndIsr(self.me, rep.leader_epoch, isr, state.controller_epoch)
        try:
            stat = self.zk.set(paths.partition_state(topic, p), new.to_json(), version=rep.isr_version)
        except (BadVersionError, NoNodeError):
            self.states.reread(topic, p)  # someone wrote first: its state arrives through the watch
            return 0
        part.set_isr(isr, stat.version)
        part.maybe_advance_high_watermark()
        self.wake()
        for reason in why:
            log.info("%s: %s", part.directory.name, reason)
        if len(isr) < len(rep.isr):
            self.isr_shrinks += 1
        else:
            self.isr_expands += 1
        return 1

    # ------------------------------------------------------------ the fetch plan

    def write_plan(self, brokers: dict | None = None) -> None:
        """Publish the partitions we follow and their leaders' addresses (if it changed)."""
        if brokers is not None:
            self._brokers = {b.node_id: b.address(self.inter_broker) for b in brokers.values()}
            self.registered = set(brokers)
        followed = [[topic, p, leader, epoch] for (topic, p), (leader, epoch) in self.followed.items()]
        throttled = self._throttled() if self.throttle_rate is not None else []
        throttle = (self.throttle_rate, throttled) if throttled else None
        plan = fetch_plan.encode(self._brokers, followed, throttle)
        if plan != self._plan:
            fetch_plan.write(self.manager.log_dirs[0], plan)
            self._plan = plan

    def _throttled(self) -> list[list]:
        """The partitions we follow that their topic's follower.replication.throttled.replicas names on this
        broker (the fetcher throttles them while they are out of the ISR)."""
        topics = self.manager.topics()
        out = []
        for t, p in sorted(self.followed):
            info = topics.get(t)
            if info is not None and throttled_replicas.throttles(info.config.get(throttled_replicas.FOLLOWER, ""),
                                                                self.me, p):
                out.append([t, p])
        return out

    # ------------------------------------------------------------ controlled shutdown

    def leave(self, live) -> int:
        """Move our leaderships to live ISR members and leave every ISR; returns the states written."""
        written = 0
        for topic, p in sorted(self.led | self.followed.keys()):
            state = self.states.get(topic, p)
            if state is None or self.me not in state.isr:
                continue
            rest = tuple(r for r in state.isr if r != self.me)
            if state.leader == self.me:
                successors = [r for r in rest if r in live]
                if not successors:
                    continue  # the only live in-sync replica: stays, and goes offline with us
                new = LeaderAndIsr(successors[0], state.leader_epoch + 1, rest, state.controller_epoch)
            elif state.leader in live and rest:
                new = LeaderAndIsr(state.leader, state.leader_epoch, rest, state.controller_epoch)
            else:
                continue
            try:
                self.zk.set(paths.partition_state(topic, p), new.to_json(), version=state.version)
                written += 1
            except (BadVersionError, NoNodeError):
                continue  # changed meanwhile: the session's end covers it
        return written
