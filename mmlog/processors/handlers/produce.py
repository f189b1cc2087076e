"""Produce (0): validate and append record batches, per partition.

The records field is a writable view into the request frame: the log rewrites
baseOffset in it and writes those same bytes to the segment, so a batch is never
copied between the socket and the page cache. A batch is validated (length,
magic, CRC-32C) before anything is written; every partition gets its own error.
acks=0 sends no response at all. With an authoriser, a topic the producer may not
WRITE answers TOPIC_AUTHORIZATION_FAILED and appends nothing; transactional records
in a request without a transactional id are TRANSACTIONAL_ID_AUTHORIZATION_FAILED
for every partition, with or without one (`refusals`).

acks=-1 (all): with fewer in-sync replicas than min.insync.replicas a partition
answers NOT_ENOUGH_REPLICAS and appends nothing. Otherwise the append is answered
once the high watermark has passed its last offset (the followers hold it): at
once when the ISR is the leader alone, else the request parks in the purgatory
(`AwaitingReplicas`) and follower fetches that move the HW wake it. When the HW
has passed it answers NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR meanwhile
shrank below the minimum, NOT_LEADER_OR_FOLLOWER if leadership moved, and
REQUEST_TIMED_OUT when the request's timeout_ms passes first. Responses stay in
request order: the requests of a connection behind a parked one wait with it.

Group commit. Pipelined Produce requests that arrived together on one connection
are handled together (`handle_group`): each partition's batches, from every request
of the group in request order, are appended under one lock hold with one pwritev and
one state publish (`Partition.append_many`), so offsets stay dense and in request
order, and a bad batch fails alone. Responses are then built in request order, and
the connection sends them with one sendmsg. A request is only answered after the
whole group is appended (and fsynced, if the flush policy says so), so nothing is
acknowledged before it is as durable as a request handled alone would be.

The common answer, one topic with one partition and no error message, is written
from a per-(topic, version) `FrameTemplate` that the generic codec encoded once with
marker values: each answer patches its correlation id, partition, error code, base
offset and log start offset into a copy (1 µs instead of 4).
"""

import time
from functools import partial

from mmlog.errors import (
    InvalidRecord,
    InvalidRequiredAcks,
    NotEnoughReplicas,
    NotEnoughReplicasAfterAppend,
    NotLeaderOrFollower,
    RequestTimedOut,
    TopicAuthorizationFailed,
    TransactionalIdAuthorizationFailed,
)
from mmlog.log import AppendInfo
from mmlog.processors.handlers._common import error_code
from mmlog.processors.request import NO_RESPONSE
from mmlog.protocol import EncodeError, Placeholder, RequestHeader, encode_request_parts, encode_response
from mmlog.protocol import records as rec
from mmlog.protocol.messages import produce as schema
from mmlog.protocol.template import I16, I32, I64, MARKS, FrameTemplate, TemplateError
from mmlog.security.acls import TOPIC, TRANSACTIONAL_ID, WRITE
from mmlog.processors.handler_context import HandlerContext

API_KEY = schema.API_KEY
MAX_TEMPLATES = 1024  # request shapes and (topic, version) answer templates kept; beyond, a cache starts over


def handle(ctx: HandlerContext, request):
    """One decoded Produce request, as a group of one (dispatch sends every Produce frame to
    `handle_group` itself; this keeps the handler interface every API module has)."""
    body = request.body
    acks, topics, timeout_ms = parts(body)
    refused = refusals(ctx, request.conn, body.transactional_id, topics)
    return handle_group(ctx, [(request.header, acks, topics, timeout_ms)], refused=refused and [refused])[0]


def parts(body) -> tuple:
    """(acks, [(topic, [(partition, records)])], timeout ms) of a decoded request body: what handle_group takes."""
    return (body.acks, [(t.name, [(p.index, p.records) for p in t.partition_data]) for t in body.topic_data],
            body.timeout_ms)


def handle_group(ctx: HandlerContext, requests: list, throttle_ms: int = 0, refused: list | None = None) -> list:
    """Answer Produce requests of one connection, in order: a response (a body, or a frame from the
    template), NO_RESPONSE, or `AwaitingReplicas` each. A request is (header, acks, [(topic,
    [(partition, records)])], timeout ms). throttle_ms: a client quota's (processors/quotas.py).
    refused: per request, {topic: error code} of the topics the authoriser refused (`refusals`), or None."""
    answers = []  # per request: [(topic, [(partition, error code, base offset, log start offset, message)])]
    waits = []  # per request: [(results, slot, partition log, offset the HW must reach)]
    pending: dict[tuple[str, int], list] = {}  # (topic, partition) -> [(records, results, slot, waits)], in order
    for n, (_, acks, topics, _) in enumerate(requests):
        valid_acks = acks in (0, 1, -1)
        answer, waiting = [], [] if acks == -1 else None
        denied = refused[n] if refused else None
        for name, partitions in topics:
            results = []
            for index, records in partitions:
                if denied and name in denied:
                    results.append((index, denied[name], -1, -1, None))
                    ctx.metrics.error(API_KEY, denied[name])
                elif not valid_acks:
                    results.append((index, InvalidRequiredAcks.code, -1, -1, None))
                    ctx.metrics.error(API_KEY, InvalidRequiredAcks.code)
                elif records is None or len(records) == 0:
                    results.append(_error(index, InvalidRecord("produce request without records")))
                    ctx.metrics.error(API_KEY, InvalidRecord.code)
                else:
                    pending.setdefault((name, index), []).append((records, results, len(results), waiting))
                    results.append(None)
            answer.append((name, results))
        answers.append(answer)
        waits.append(waiting)
    appended = False
    metrics = ctx.metrics
    nbytes = nrecords = 0
    for (name, index), items in pending.items():
        try:
            log = ctx.manager.partition(name, index)
            items = _enough_replicas(log, index, items)
            outcomes = log.append_many(
                [bytearray(records) if records.readonly else records for records, _, _, _ in items]) if items else []
        except Exception as exc:  # noqa: BLE001 - each partition answers for itself
            outcomes = [exc] * len(items)
        for (records, results, slot, waiting), outcome in zip(items, outcomes):
            if outcome.__class__ is AppendInfo:
                results[slot] = (index, 0, outcome.base_offset, outcome.log_start_offset, None)
                appended = True
                nbytes += len(records)
                nrecords += outcome.records
                if waiting is not None and log.high_watermark <= outcome.last_offset:
                    waiting.append((results, slot, (name, index), outcome.last_offset + 1))
            else:
                results[slot] = _error(index, outcome)
                metrics.error(API_KEY, results[slot][1])
    if appended:
        ctx.appended()
        metrics.produced(nbytes, nrecords)
    out = []
    for (header, acks, _, timeout_ms), answer, waiting in zip(requests, answers, waits):
        if waiting:
            deadline = time.monotonic() + max(timeout_ms, 0) / 1000
            out.append(AwaitingReplicas(ctx.manager, header, answer, waiting, deadline,
                                        partial(_answer, throttle_ms=throttle_ms) if throttle_ms else None))
        else:
            out.append(NO_RESPONSE if acks == 0 else _answer(header, answer, throttle_ms))
    return out


def appended_elsewhere(manager, header, topics, timeout_ms: int, held: list) -> "AwaitingReplicas":
    """The waiting answer of an acks=-1 request whose records the compiled path appended: `held` holds each
    partition's (base offset, last offset, log start offset, waits), in request order; a partition waits
    where the high watermark was not past its records after the append, as `handle_group` decides."""
    answer, waits, rows = [], [], iter(held)
    for name, partitions in topics:
        results = []
        for index, _ in partitions:
            base_offset, last_offset, log_start_offset, waiting = next(rows)
            if waiting:
                waits.append((results, len(results), (name, index), last_offset + 1))
            results.append((index, 0, base_offset, log_start_offset, None))
        answer.append((name, results))
    return AwaitingReplicas(manager, header, answer, waits, time.monotonic() + max(timeout_ms, 0) / 1000)


def refusals(ctx: HandlerContext, conn, transactional_id, topics) -> dict[str, int] | None:
    """The topics of one request refused before any append, with their error codes (Kafka's
    handleProduceRequest): all of them TRANSACTIONAL_ID_AUTHORIZATION_FAILED if the request holds
    transactional records without a transactional id, or if the producer may not WRITE its transactional
    id; else, with an authoriser, each topic it may not WRITE, TOPIC_AUTHORIZATION_FAILED. None: nothing
    refused."""
    authorizer = ctx.authorizer
    if (transactional_id is None and _transactional(topics)) or (
            authorizer.enabled and transactional_id is not None
            and not authorizer.allowed(conn, WRITE, TRANSACTIONAL_ID, transactional_id)):
        return {name: TransactionalIdAuthorizationFailed.code for name, _ in topics}
    if not authorizer.enabled:
        return None
    denied = {name: TopicAuthorizationFailed.code for name, _ in topics if not authorizer.allowed(conn, WRITE, TOPIC,
                                                                                                   name)}
    return denied or None


_ATTRIBUTES_LOW = rec.ATTRIBUTES + 1  # the int16's low byte, which holds the transactional bit


def _transactional(topics) -> bool:
    """Whether any partition's first batch is a v2 batch with the transactional bit: Kafka's ProduceRequest
    looks at the first batch of each partition the same way."""
    for _, partitions in topics:
        for _, records in partitions:
            if (records is not None and len(records) > _ATTRIBUTES_LOW and records[rec.MAGIC_OFFSET] == rec.MAGIC
                    and records[_ATTRIBUTES_LOW] & rec.TRANSACTIONAL_BIT):
                return True
    return False


def check_enough_replicas(log) -> None:
    """NOT_ENOUGH_REPLICAS for an acks=all append to a partition whose ISR is below min.insync.replicas."""
    isr, needed = log.state.isr_size(), log.config.min_insync_replicas
    if isr < needed and log.state.serves_clients():
        raise NotEnoughReplicas(f"{isr} in-sync replicas, min.insync.replicas is {needed}")


def result_error(index: int, exc) -> tuple:
    """A partition's failed result, as AwaitingReplicas keeps results."""
    return _error(index, exc)


def _enough_replicas(log, index: int, items: list) -> list:
    """The items that may be appended: acks=all ones fail with NOT_ENOUGH_REPLICAS when the ISR is
    smaller than min.insync.replicas (nothing appended for them)."""
    if all(waiting is None for _, _, _, waiting in items):
        return items
    try:
        check_enough_replicas(log)
        return items
    except NotEnoughReplicas as exc:
        error = _error(index, exc)
    for _, results, slot, waiting in items:
        if waiting is not None:
            results[slot] = error
    return [item for item in items if item[3] is None]


class AwaitingReplicas:
    """A request appended with acks=all and waiting for the HW to pass each partition's last offset:
    a Produce, or a WriteTxnMarkers (whose `build` makes its own response from the same results).

    `answer` holds the per-partition results, (partition, error code, base offset, log start
    offset, message) tuples, in lists that `waits` points into: (results, slot, (topic, partition),
    offset the HW must reach). A wait names its partition rather than holding the open log: the
    processor may close a partition it has not used lately (log.max.open.partitions) while a
    request waits on it, and `manager.partition` opens it again."""

    __slots__ = ("manager", "header", "answer", "waits", "deadline", "build")

    def __init__(self, manager, header, answer, waits: list, deadline: float, build=None) -> None:
        self.manager = manager
        self.header = header
        self.answer = answer
        self.waits = waits
        self.deadline = deadline
        self.build = build or _answer

    def settle(self, timed_out: bool = False) -> bool:
        """Answer each partition that can be answered now; True when all of them are."""
        for wait in list(self.waits):
            results, slot, key, needed = wait
            index = results[slot][0]
            try:
                log = self.manager.partition(*key)
                if not log.state.serves_clients():
                    results[slot] = _error(index, NotLeaderOrFollower("leadership moved before the followers had it"))
                elif log.high_watermark >= needed:
                    isr, minimum = log.state.isr_size(), log.config.min_insync_replicas
                    if isr < minimum:
                        results[slot] = _error(index, NotEnoughReplicasAfterAppend(
                            f"appended, but the ISR shrank to {isr} (min.insync.replicas {minimum})"))
                elif timed_out:
                    results[slot] = _error(index, RequestTimedOut("the followers did not fetch it in timeout_ms"))
                else:
                    continue
            except Exception as exc:  # noqa: BLE001 - deleted meanwhile, say
                results[slot] = _error(index, exc)
            self.waits.remove(wait)
        return not self.waits

    def response(self):
        return self.build(self.header, self.answer)


def respond_in_order(ctx: HandlerContext, conn, results: list, respond) -> None:
    """Answer a group's requests in order; from the first one still waiting for replicas on, park
    them together in the purgatory (the connection reads no more requests until they are answered).
    `results` is [(header, result)]; respond(header, result) answers one."""
    queue = list(results)

    def advance(timed_out: bool = False) -> bool:
        """Answer what can be answered; True once nothing is left (the purgatory then unparks it)."""
        while queue:
            header, result = queue[0]
            if result.__class__ is AwaitingReplicas:
                if not result.settle(timed_out):
                    conn.busy = True  # a response queued before it freed the connection: not yet
                    return False
                result = result.response()
            queue.pop(0)
            if result is NO_RESPONSE:
                conn.done()
            else:
                respond(header, result)
        return True

    if not advance():
        deadline = max(r.deadline for _, r in queue if r.__class__ is AwaitingReplicas)
        ctx.purgatory.park(_Parked(conn), deadline, advance, lambda: advance(timed_out=True))


class _Parked:
    """What the purgatory needs of a parked request: its connection."""

    __slots__ = ("conn",)

    def __init__(self, conn) -> None:
        self.conn = conn


class RequestShape:
    """A one-partition Produce request as a client sends it again and again, read without the codec.

    Learned from one decoded request: the codec encodes the same header and body again with
    a marker for the partition and an empty records field, and that frame up to the records
    becomes a `FrameTemplate` whose fields are the correlation id, the partition and the
    records length. The next frames that equal it outside those fields are that request
    with other values (the codec's encoding is the only one), so `read` takes them apart in
    1 µs instead of 3.5. Anything else (another topic, more partitions) is decoded as usual.
    """

    __slots__ = ("template", "head", "version", "client_id", "acks", "name", "timeout_ms", "transactional_id")

    def __init__(self, template: FrameTemplate, version: int, client_id, acks: int, name: str,
                 timeout_ms: int = 0, transactional_id: str | None = None) -> None:
        self.timeout_ms = timeout_ms
        self.transactional_id = transactional_id
        self.template = template
        self.head = template.size - template.skip  # bytes of a received frame before its records
        self.version = version
        self.client_id = client_id
        self.acks = acks
        self.name = name

    @classmethod
    def learn(cls, header, body) -> "RequestShape | None":
        """The shape of this decoded request, or None if it has not exactly one partition.

        Shapes are kept per (version, client id, transactional id, acks, timeout, topic): what
        fixes every byte but the template's fields. A producer whose one-partition requests
        take turns between topics then learns each shape once, not once per request (~40 µs).
        """
        if len(body.topic_data) != 1 or len(body.topic_data[0].partition_data) != 1:
            return None
        return _shapes[header.api_version, header.client_id, body.transactional_id, body.acks, body.timeout_ms,
                       body.topic_data[0].name]

    @classmethod
    def _make(cls, version, client_id, transactional_id, acks, timeout_ms, name) -> "RequestShape | None":
        """The shape encoded by the codec with a marker, or None if the codec's frame does not allow one."""
        if schema.REQUEST.is_flexible(version):
            return None
        mark = MARKS[I32][0]
        try:
            head, *rest = encode_request_parts(
                RequestHeader(API_KEY, version, 0, client_id),
                schema.REQUEST(transactional_id=transactional_id, acks=acks, timeout_ms=timeout_ms,
                               topic_data=[{"name": name, "partition_data": [{"index": mark,
                                                                                "records": Placeholder(0)}]}]))
            if len(rest) != 1 or head[-4:] != bytes(4):
                return None
            # fields: correlation id (after the size prefix, api key and version), partition, records length
            template = FrameTemplate(head, [(I32, 8), (I32, mark), (I32, len(head) - 4)], skip=4)
        except (EncodeError, TemplateError):
            return None
        return cls(template, version, client_id, acks, name, timeout_ms, transactional_id)

    def read(self, frame) -> tuple | None:
        """(header, acks, topics, timeout ms) as handle_group takes it, or None if the frame is not of this shape."""
        head = self.head
        values = self.template.read(frame[:head])
        if values is None:
            return None
        correlation_id, index, size = values
        if len(frame) != head + size or size < 0:
            return None
        return (RequestHeader(API_KEY, self.version, correlation_id, self.client_id), self.acks,
                [(self.name, [(index, frame[head:])])], self.timeout_ms)


def _answer(header, topics, throttle_ms: int = 0):
    """The response: a frame from the template in the common case, else a body for the codec (so is
    a throttled one: throttle_time_ms is 0 in the templates)."""
    if len(topics) == 1 and len(topics[0][1]) == 1 and not throttle_ms:
        result = topics[0][1][0]
        if result[4] is None:  # no error message
            template = _templates[topics[0][0], header.api_version]
            if template is not None:  # (correlation id, index, error code, base offset, log start offset)
                return template.fill(header.correlation_id, *result[:4])
    return schema.RESPONSE(throttle_time_ms=throttle_ms, responses=[
        {"name": name, "partition_responses": [_fields(*result) for result in results]} for name, results in topics])


def _answer_template(name: str, version: int) -> FrameTemplate | None:
    """The one-partition answer of `version` for topic `name`, by the codec with marker values
    (see protocol/template.py); fields: correlation id, index, error code, base offset, log
    start offset (v5+). None if the markers cannot be told apart: the codec then answers."""
    marks = {"index": MARKS[I32][0], "error_code": MARKS[I16][0], "base_offset": MARKS[I64][0],
             "log_start_offset": MARKS[I64][1]}
    frame = encode_response(RequestHeader(API_KEY, version, 0, None), schema.RESPONSE(responses=[
        {"name": name, "partition_responses": [_fields(**marks)]}]))
    fields = [(I32, 4), (I32, marks["index"]), (I16, marks["error_code"]), (I64, marks["base_offset"])]
    if version >= 5:
        fields.append((I64, marks["log_start_offset"]))
    try:
        return FrameTemplate(frame, fields)
    except TemplateError:
        return None


class _Cache(dict):
    """`make(*key)` for each key, made on first look-up and kept; past MAX_TEMPLATES keys it starts over."""

    def __init__(self, make) -> None:
        super().__init__()
        self.make = make

    def __missing__(self, key):
        if len(self) >= MAX_TEMPLATES:
            self.clear()
        value = self[key] = self.make(*key)
        return value


_shapes = _Cache(RequestShape._make)  # (version, client id, transactional id, acks, timeout, topic) -> shape
_templates = _Cache(_answer_template)  # (topic, version) -> answer template


def _error(index, exc) -> tuple:
    return (index, error_code(exc), -1, -1, str(exc))


def _fields(index, error_code, base_offset=-1, log_start_offset=-1, error_message=None) -> dict:
    """A partition's answer as the codec takes it (a result tuple spread out)."""
    return {
        "index": index, "error_code": error_code, "base_offset": base_offset, "log_append_time_ms": -1,
        "log_start_offset": log_start_offset, "record_errors": [], "error_message": error_message,
    }
