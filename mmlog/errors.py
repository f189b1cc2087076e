"""Kafka error codes as typed exceptions.

Every error a broker returns on the wire, or that mmlog raises internally, is a
`KafkaError` subclass carrying the Kafka error code (`Errors.java`), so a handler
turns any exception into the code a Kafka broker would send.
"""

from __future__ import annotations


class KafkaError(Exception):
    """Base of all errors that map to a Kafka error code."""

    code: int = -1
    retriable: bool = False

    def __init__(self, message: str = "") -> None:
        super().__init__(message or self.__class__.__name__)


class UnknownServerError(KafkaError):
    code = -1


class OffsetOutOfRange(KafkaError):
    code = 1


class CorruptMessage(KafkaError):
    code = 2
    retriable = True


class UnknownTopicOrPartition(KafkaError):
    code = 3
    retriable = True


class InvalidFetchSize(KafkaError):
    code = 4


class LeaderNotAvailable(KafkaError):
    code = 5
    retriable = True


class NotLeaderOrFollower(KafkaError):
    code = 6
    retriable = True


class RequestTimedOut(KafkaError):
    code = 7
    retriable = True


class MetadataStoreUnreachable(RequestTimedOut):
    """ZooKeeper did not answer a call of the control thread within its deadline, or the connection to it
    is down: the call was not waited for. An event of a partitioned network, not a fault of the broker:
    logged as one line, answered REQUEST_TIMED_OUT (clients retry), retried by the timer that made it."""


class MessageTooLarge(KafkaError):
    code = 10


class OffsetMetadataTooLarge(KafkaError):
    code = 12


class CoordinatorLoadInProgress(KafkaError):
    code = 14
    retriable = True


class CoordinatorNotAvailable(KafkaError):
    code = 15
    retriable = True


class NotCoordinator(KafkaError):
    code = 16
    retriable = True


class InvalidTopic(KafkaError):
    code = 17


class RecordListTooLarge(KafkaError):
    code = 18


class InvalidRequiredAcks(KafkaError):
    code = 21


class IllegalGeneration(KafkaError):
    code = 22


class InconsistentGroupProtocol(KafkaError):
    code = 23


class InvalidGroupId(KafkaError):
    code = 24


class UnknownMemberId(KafkaError):
    code = 25


class InvalidSessionTimeout(KafkaError):
    code = 26


class RebalanceInProgress(KafkaError):
    code = 27


class InvalidCommitOffsetSize(KafkaError):
    code = 28


class UnsupportedVersion(KafkaError):
    code = 35


class TopicAlreadyExists(KafkaError):
    code = 36


class InvalidPartitions(KafkaError):
    code = 37


class InvalidReplicationFactor(KafkaError):
    code = 38


class InvalidConfig(KafkaError):
    code = 40


class InvalidRequest(KafkaError):
    code = 42


class OutOfOrderSequenceNumber(KafkaError):
    code = 45


class DuplicateSequenceNumber(KafkaError):
    code = 46


class InvalidProducerEpoch(KafkaError):
    """A batch of an epoch older than its producer's current one (a fenced zombie)."""

    code = 47


class UnknownProducerId(KafkaError):
    """No state for this producer id (new, or expired) and its batch does not start at sequence 0."""

    code = 59


class KafkaStorageError(KafkaError):
    code = 56
    retriable = True


class ProducerFenced(KafkaError):
    code = 90


class GroupIdNotFound(KafkaError):
    code = 69


class MemberIdRequired(KafkaError):
    code = 79


class FencedInstanceId(KafkaError):
    code = 82


class InvalidRecord(KafkaError):
    code = 87


class ReplicaNotAvailable(KafkaError):
    code = 9
    retriable = True


class NotEnoughReplicas(KafkaError):
    """acks=all with fewer in-sync replicas than min.insync.replicas: nothing was appended."""

    code = 19
    retriable = True


class NotEnoughReplicasAfterAppend(KafkaError):
    """Appended, but the ISR shrank below min.insync.replicas before the followers had it."""

    code = 20
    retriable = True


class PolicyViolation(KafkaError):
    code = 44


class FencedLeaderEpoch(KafkaError):
    """The request carries a leader epoch older than this replica's."""

    code = 74
    retriable = True


class UnknownLeaderEpoch(KafkaError):
    """The request carries a leader epoch newer than this replica knows yet."""

    code = 75
    retriable = True


# ------------------------------------------------------------ transactions (the coordinator's answers)


class InvalidTxnState(KafkaError):
    """The request does not fit the transaction's state (commit of an aborted one, end of none; a
    non-transactional batch from a producer whose transaction on the partition is open)."""

    code = 48


class InvalidProducerIdMapping(KafkaError):
    """The producer id is not the one the coordinator gave this transactional id."""

    code = 49


class InvalidTransactionTimeout(KafkaError):
    """transaction.timeout.ms above the broker's transaction.max.timeout.ms (or not positive)."""

    code = 50


class ConcurrentTransactions(KafkaError):
    """The previous transaction of this transactional id is still being completed: retry."""

    code = 51
    retriable = True


class TransactionCoordinatorFenced(KafkaError):
    """A marker from a coordinator older than the partition has seen (a deposed coordinator)."""

    code = 52


class OperationNotAttempted(KafkaError):
    """Another part of the same request failed, so this one was not tried."""

    code = 55


class TransactionalIdNotFound(KafkaError):
    code = 105
# ---------------------------------------------------------------- the admin APIs

class BrokerNotAvailable(KafkaError):
    code = 8


class InvalidReplicaAssignment(KafkaError):
    code = 39


class NotController(KafkaError):
    """Only the controller answers this (ElectLeaders, partition reassignments): clients ask Metadata again."""

    code = 41
    retriable = True


class ReassignmentInProgress(KafkaError):
    code = 60


class NonEmptyGroup(KafkaError):
    code = 68


class GroupSubscribedToTopic(KafkaError):
    code = 86


class PreferredLeaderNotAvailable(KafkaError):
    code = 80


class EligibleLeadersNotAvailable(KafkaError):
    code = 83


class ElectionNotNeeded(KafkaError):
    code = 84


class NoReassignmentInProgress(KafkaError):
    code = 85


# Security
class UnsupportedSaslMechanism(KafkaError):
    code = 33


class IllegalSaslState(KafkaError):
    code = 34


class SaslAuthenticationFailed(KafkaError):
    code = 58


class ResourceNotFound(KafkaError):
    code = 91


class UnacceptableCredential(KafkaError):
    code = 93


# ACL authorisation
class TopicAuthorizationFailed(KafkaError):
    code = 29


class GroupAuthorizationFailed(KafkaError):
    code = 30


class ClusterAuthorizationFailed(KafkaError):
    code = 31


class TransactionalIdAuthorizationFailed(KafkaError):
    code = 53


class SecurityDisabled(KafkaError):
    code = 54


# The flexible versions of the core APIs
class UnstableOffsetCommit(KafkaError):
    """OffsetFetch v7+ with require_stable: a transaction holds uncommitted offsets for the partition."""

    code = 88
    retriable = True


class UnknownTopicId(KafkaError):
    code = 100
    retriable = True


BY_CODE: dict[int, type[KafkaError]] = {
    cls.code: cls for cls in KafkaError.__subclasses__()
}


def error_for_code(code: int, message: str = "") -> KafkaError:
    """Return the typed exception for a Kafka error code (UnknownServerError if unknown)."""
    cls = BY_CODE.get(code)
    if cls is None:
        return UnknownServerError(f"error code {code}: {message}".rstrip(": "))
    return cls(message)

