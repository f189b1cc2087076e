"""What several handlers share: exceptions as Kafka error codes, the leader check, forwarding to the control plane."""

from __future__ import annotations

import logging

from mmlog.ipc.control_channel import DEFAULT_TIMEOUT_S, ControlTimedOut, ControlUnavailable
from mmlog.errors import CoordinatorNotAvailable, FencedLeaderEpoch, KafkaError, NotLeaderOrFollower, UnknownLeaderEpoch
from mmlog.processors.request import DEFERRED
from mmlog.security import acls
from mmlog.processors.handler_context import HandlerContext

log = logging.getLogger("mmlog.processors.handlers")

UNKNOWN_SERVER_ERROR = -1


def error_code(exc: BaseException, logged: bool = False) -> int:
    """The Kafka error code for an exception; unexpected ones are logged with their traceback (unless
    `logged` says the caller did already)."""
    if isinstance(exc, KafkaError):
        return exc.code
    if not logged:
        log.error("unexpected error while handling a request", exc_info=exc)
    return UNKNOWN_SERVER_ERROR


def check_leader(log, current_leader_epoch: int) -> None:
    """Only the leader serves fetches, and only in the epoch the fetcher believes in (-1: any)."""
    if not log.state.serves_clients():
        raise NotLeaderOrFollower(f"{log.directory.name}: this broker is not its leader")
    if current_leader_epoch >= 0:
        epoch = log.replication().leader_epoch
        if current_leader_epoch < epoch:
            raise FencedLeaderEpoch(f"{log.directory.name}: epoch {current_leader_epoch} < ours, {epoch}")
        if current_leader_epoch > epoch:
            raise UnknownLeaderEpoch(f"{log.directory.name}: epoch {current_leader_epoch} > ours, {epoch}")


COORDINATOR_NOT_AVAILABLE = CoordinatorNotAvailable.code
REQUEST_TIMED_OUT = 7
FAILURE_MESSAGES = {COORDINATOR_NOT_AVAILABLE: "control plane unavailable",
                    REQUEST_TIMED_OUT: "the control plane did not answer within the request's timeout"}


def failure_message(code: int) -> str:
    """The error message that goes with a forwarded request's failure code."""
    return FAILURE_MESSAGES.get(code, "the control plane's answer could not be handled")


def forward(ctx: HandlerContext, request, op: str, args, respond, unavailable, timeout_ms: int | None = None,
            wait_ms: int | None = None) -> object:
    """Send a control op (one of `mmlog.ipc.control_ops`'s names); respond(value) with its answer, or
    with unavailable(code) if there is none. Returns DEFERRED for the handler.

    The code is COORDINATOR_NOT_AVAILABLE when the control plane could not answer (clients find it
    again and retry), REQUEST_TIMED_OUT when the request's own `timeout_ms` passed first, or the Kafka
    error of an answer respond() could not turn into a response (UNKNOWN_SERVER_ERROR for a bug),
    logged once. A call waits DEFAULT_TIMEOUT_S, the request's timeout_ms if it has one, or `wait_ms`
    for a request that may wait longer without a timeout of its own (a JoinGroup's rebalance).
    """

    def done(ok, value):
        if not ok:
            if not isinstance(value, ControlUnavailable):
                log.error("control op %s failed: %r", op, value)
            value = unavailable(failure_code(value, own_timeout=bool(timeout_ms)))
        request.respond(respond(value))

    def failed(exc: BaseException) -> None:
        answer(request, lambda: respond(unavailable(error_code(exc, logged=True))))

    ctx.control.call(op, args, done, control_timeout_s(timeout_ms, wait_ms), failed)
    return DEFERRED


def failure_code(failure: BaseException, own_timeout: bool = True) -> int:
    """The error code of a forwarded request the control plane did not answer: REQUEST_TIMED_OUT once a
    request's own timeout_ms passed (Kafka's admin requests), else COORDINATOR_NOT_AVAILABLE (clients find
    the control plane again and retry)."""
    return REQUEST_TIMED_OUT if own_timeout and isinstance(failure, ControlTimedOut) else COORDINATOR_NOT_AVAILABLE


def control_timeout_s(timeout_ms: int | None, wait_ms: int | None = None) -> float:
    """How long a forwarded request waits for the control plane: its own timeout_ms when it has one
    above 0 (Kafka's admin requests), else wait_ms, else DEFAULT_TIMEOUT_S."""
    if timeout_ms is not None and timeout_ms > 0:
        return timeout_ms / 1000
    return wait_ms / 1000 if wait_ms else DEFAULT_TIMEOUT_S


def answer(request, build) -> None:
    """Answer a deferred request with build()'s response; if even that fails, close its connection (a
    client whose request cannot be answered sees its connection end, as Kafka closes it)."""
    try:
        request.respond(build())
    except Exception as exc:  # noqa: BLE001 - the request must not be left waiting for ever
        log.error("a request could not be answered: closing its connection", exc_info=exc)
        request.fail(exc)


def client_host(request) -> str:
    """The client's address as Kafka reports it in DescribeGroups (`/127.0.0.1`)."""
    peer = request.conn.peer
    return f"/{peer[0]}" if isinstance(peer, tuple) and peer else ""


def member_args(request, instance_id_since: int, **more) -> dict:
    """The fields that name a group member in Heartbeat, SyncGroup and OffsetCommit, plus `more`.

    group_instance_id exists only from `instance_id_since` on; below that the codec's
    default ("") must not be mistaken for a static member's id.
    """
    body = request.body
    return {
        "group_id": body.group_id,
        "generation_id": body.generation_id,
        "member_id": body.member_id,
        "group_instance_id": body.group_instance_id if request.version >= instance_id_since else None,
        **more,
    }


PRODUCER_FENCED, INVALID_PRODUCER_EPOCH = 90, 47


def fenced_for(version: int, since: int):
    """Kafka answers PRODUCER_FENCED (KIP-588) only from the version of each transaction API that
    knows it (`since`); older versions get INVALID_PRODUCER_EPOCH, which their clients handle alike."""

    def translate(code: int) -> int:
        return INVALID_PRODUCER_EPOCH if code == PRODUCER_FENCED and version < since else code

    return translate


def forward_txn(ctx: HandlerContext, request, op: str, args: dict, schema, fenced_since: int):
    """Forward a transaction op whose answer is one error code (AddOffsetsToTxn, EndTxn), translated
    for the request's version (`fenced_for`)."""
    translate = fenced_for(request.header.api_version, fenced_since)
    return forward(ctx, request, op, args,
                   lambda v: schema.RESPONSE(throttle_time_ms=0, error_code=translate(v["error_code"])),
                   lambda code: {"error_code": code})


TOPIC_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED = 29, 31
CONFIG_TOPIC = 2  # a config resource type; the others (broker, broker logger) are the cluster's


def config_refusal(ctx: HandlerContext, conn, operation: int, resource_type: int, name: str) -> int:
    """0, or Kafka's error code for a config resource the principal may not DESCRIBE_CONFIGS / ALTER_CONFIGS:
    a topic by its name (TOPIC_AUTHORIZATION_FAILED), a broker as the cluster (CLUSTER_AUTHORIZATION_FAILED)."""
    authorizer = ctx.authorizer
    if not authorizer.enabled:
        return 0
    if resource_type == CONFIG_TOPIC:
        return 0 if authorizer.allowed(conn, operation, acls.TOPIC, name) else TOPIC_AUTHORIZATION_FAILED
    return 0 if authorizer.cluster(conn, operation) else CLUSTER_AUTHORIZATION_FAILED
