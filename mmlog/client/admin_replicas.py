"""The admin client's replica operations, the controller's: leader elections, reassignments, throttles.

A mixin of `Admin` (admin.py). It also writes the topics' throttled-replicas configs, whose format
the broker reads in `mmlog/config/throttled_replicas.py` (the client does not import the broker's
config package; tests/client/test_admin.py checks that the two agree)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from mmlog.client.records import TopicPartition
from mmlog.errors import KafkaError, NotController, error_for_code
from mmlog.protocol.messages import alter_partition_reassignments, elect_leaders, list_partition_reassignments

ELECTION_TYPES = {"preferred": 0, "unclean": 1}
# The topic configs naming the replicas whose replication is throttled (Kafka's names).
LEADER_THROTTLED = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED = "follower.replication.throttled.replicas"


def throttled_pairs(replicas: dict[int, list[int]]) -> str:
    """A throttled-replicas value naming each partition's listed brokers: {0: [1, 2]} -> '0:1,0:2'."""
    return ",".join(f"{p}:{b}" for p, brokers in sorted(replicas.items()) for b in brokers)


@dataclass(frozen=True)
class Reassignment:
    """A partition reassignment in progress: the replicas now (old and new), those being added and removed."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]

    @property
    def target(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing)


class ReplicaAdmin:
    """Requests only the controller answers: elections, reassignments; and the throttles that bound moves."""

    def elect_leaders(self, election_type: str = "preferred",
                      partitions: list[TopicPartition] | None = None) -> dict[TopicPartition, KafkaError | None]:
        """Preferred or unclean leader elections (None: every partition); per partition None when elected, or
        its error (ElectionNotNeeded, PreferredLeaderNotAvailable, EligibleLeadersNotAvailable, ...)."""
        by_topic: dict[str, list[int]] = {}
        for tp in partitions or ():
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        request = elect_leaders.REQUEST(election_type=ELECTION_TYPES[election_type], timeout_ms=int(self.timeout * 1000),
                                        topic_partitions=None if partitions is None else [
                                            {"topic": t, "partitions": ps} for t, ps in by_topic.items()])
        body = self._to_controller(elect_leaders.API_KEY, 1, request, lambda b: any(
            r.error_code == NotController.code for t in b.replica_election_results for r in t.partition_result))
        return {TopicPartition(t.topic, r.partition_id): error_for_code(r.error_code, r.error_message or "")
                if r.error_code else None for t in body.replica_election_results for r in t.partition_result}

    def alter_partition_reassignments(self, targets: dict[TopicPartition, list[int] | None]) -> None:
        """Move partitions to new replicas (None cancels a partition's move); the controller carries them
        through in the background (`list_partition_reassignments` shows progress). Raises the first
        partition's error: InvalidReplicaAssignment, UnknownTopicOrPartition, NoReassignmentInProgress."""
        by_topic: dict[str, list] = {}
        for tp, replicas in targets.items():
            by_topic.setdefault(tp.topic, []).append(
                {"partition_index": tp.partition, "replicas": None if replicas is None else list(replicas)})
        body = self._to_controller(alter_partition_reassignments.API_KEY, 0, alter_partition_reassignments.REQUEST(
            timeout_ms=int(self.timeout * 1000), topics=[{"name": t, "partitions": ps} for t, ps in by_topic.items()]),
            lambda b: b.error_code == NotController.code)
        self._raise_first([(body.error_code, body.error_message or "")] + [
            (r.error_code, f"{t.name}-{r.partition_index}: {r.error_message or ''}".rstrip(": "))
            for t in body.responses for r in t.partitions])

    def list_partition_reassignments(self, partitions: list[TopicPartition] | None = None
                                     ) -> dict[TopicPartition, Reassignment]:
        """The reassignments in progress (of `partitions`, or all)."""
        by_topic: dict[str, list[int]] = {}
        for tp in partitions or ():
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        body = self._to_controller(list_partition_reassignments.API_KEY, 0, list_partition_reassignments.REQUEST(
            timeout_ms=int(self.timeout * 1000), topics=None if partitions is None else [
                {"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]),
            lambda b: b.error_code == NotController.code)
        self._raise_first([(body.error_code, body.error_message or "")])
        return {TopicPartition(t.name, r.partition_index): Reassignment(
            tuple(r.replicas), tuple(r.adding_replicas), tuple(r.removing_replicas))
            for t in body.topics for r in t.partitions}

    def set_replication_throttle(self, rate: int | None) -> None:
        """leader.replication.throttled.rate and follower.replication.throttled.rate of every broker (bytes/s;
        None removes them): the cluster-wide default's dynamic configs, as kafka-reassign-partitions.sh sets
        each broker's. They bound the replicas the topics' *.replication.throttled.replicas name
        (`throttle_moves`)."""
        names = ["leader.replication.throttled.rate", "follower.replication.throttled.rate"]
        self.alter_broker_config(None, set={n: rate for n in names} if rate is not None else None,
                                 delete=names if rate is None else ())

    def throttle_moves(self, moves: dict[TopicPartition, tuple[list[int], list[int]]]) -> None:
        """Name the replicas of partition moves ({partition: (current replicas, target replicas)}) in their
        topics' throttled-replicas configs, as kafka-reassign-partitions.sh does: the leader side throttles
        the current replicas (whichever leads), the follower side the replicas the move adds."""
        by_topic: dict[str, tuple[dict, dict]] = {}
        for tp, (current, target) in moves.items():
            leader, follower = by_topic.setdefault(tp.topic, ({}, {}))
            leader[tp.partition] = list(current)
            follower[tp.partition] = [b for b in target if b not in current]
        for topic, (leader, follower) in sorted(by_topic.items()):
            self.alter_topic_config(topic, set={LEADER_THROTTLED: throttled_pairs(leader),
                                                FOLLOWER_THROTTLED: throttled_pairs(follower)})

    def clear_throttled_replicas(self, topics) -> None:
        """Remove the throttled-replicas configs of these topics (the moves are done)."""
        for topic in sorted(set(topics)):
            self.alter_topic_config(topic, delete=[LEADER_THROTTLED, FOLLOWER_THROTTLED])

    def _to_controller(self, api_key: int, version: int, request, not_controller, attempts: int = 10):
        """A request only the controller answers: sent to the one Metadata names, again after a refresh
        while the answer is NOT_CONTROLLER (a controller change under way)."""
        for _ in range(attempts - 1):
            body = self._request(self._controller(), api_key, version, request)
            if not not_controller(body):
                return body
            time.sleep(0.2)
            self.cluster.refresh([])
        return self._request(self._controller(), api_key, version, request)
