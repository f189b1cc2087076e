"""Pipelined Produce requests handled as one group: appended in order, answered in order, each its own error.

Over the wire (the frames of a test leave in one write, so the broker nearly always
reads them together) and, deterministically, through `dispatch.handle_requests` on a
connection whose frames are queued by hand. Plus the two templates of the group path:
the request shape that reads a client's next requests without the codec, and the
answer template, both checked against the codec's own bytes.
"""

import random
import socket

import pytest

from mmlog.log import Partition
from mmlog.log.manager import LogManager
from mmlog.processors import dispatch
from mmlog.processors.connection import Connection
from mmlog.processors.handlers import produce as handler
from mmlog.processors.request import CloseConnection
from mmlog.protocol import RequestHeader, decode_request, decode_response, encode_request, encode_response
from mmlog.protocol.messages import api_versions, metadata, produce
from mmlog.protocol.records import build_batch, decode_records, iter_batches
from mmlog.testing import LocalHandlerContext
from mmlog.testing.connections import connect, fetch_one
from tests.processors.test_bad_input import CORRUPT_MESSAGE, UNKNOWN_TOPIC_OR_PARTITION, assert_closed

INVALID_REQUIRED_ACKS = 21


def frame(topic_data, correlation_id, acks=1, version=8, client_id="group-test"):
    return encode_request(RequestHeader(produce.API_KEY, version, correlation_id, client_id),
                          produce.REQUEST(acks=acks, timeout_ms=5000, topic_data=topic_data))


def one(topic, partition, records):
    return [{"name": topic, "partition_data": [{"index": partition, "records": records}]}]


def batch(value: bytes, records=1):
    return build_batch([(None, value)] * records)


def corrupt(records: bytes) -> bytes:
    bad = bytearray(records)
    bad[-1] ^= 0xFF  # inside the CRC's range
    return bytes(bad)


def answers(conn, count, version=8):
    """The next `count` responses: (correlation id, [(name, index, error, base offset)])."""
    out = []
    for _ in range(count):
        cid, body = decode_response(produce.API_KEY, version, conn.receive_frame())
        out.append((cid, [(t.name, p.index, p.error_code, p.base_offset)
                          for t in body.responses for p in t.partition_responses]))
    return out


def values(conn, topic, partition):
    """Every value of a partition, in offset order."""
    data = fetch_one(conn, topic, partition, 0).records
    return [(r.offset, r.value) for pos, _ in iter_batches(data) for r in decode_records(data, pos)]


def make_topic(conn, name):
    conn.request(metadata.API_KEY, 8, metadata.REQUEST(topics=[{"name": name}]))


# ---------------------------------------------------------------- over the wire


def test_pipelined_produces_in_one_write_are_appended_in_order_and_answered_in_order(broker):
    with connect(broker) as conn:
        make_topic(conn, "group-order")
        conn.send_raw(b"".join(frame(one("group-order", 0, batch(b"v%d" % i, records=1 + i % 3)), 100 + i)
                               for i in range(40)))
        got = answers(conn, 40)
        assert [cid for cid, _ in got] == list(range(100, 140))
        bases = [parts[0][3] for _, parts in got]
        sizes = [1 + i % 3 for i in range(40)]
        assert all(parts[0][2] == 0 for _, parts in got)
        assert bases == [sum(sizes[:i]) for i in range(40)]  # dense, in request order
        expected = [b"v%d" % i for i in range(40) for _ in range(sizes[i])]
        assert [v for _, v in values(conn, "group-order", 0)] == expected


def test_a_corrupt_batch_among_pipelined_ones_fails_alone(broker):
    with connect(broker) as conn:
        make_topic(conn, "group-corrupt")
        records = [batch(b"good-%d" % i) for i in range(6)]
        records[2] = corrupt(records[2])
        records[5] = corrupt(records[5])
        conn.send_raw(b"".join(frame(one("group-corrupt", 0, r), i) for i, r in enumerate(records)))
        got = answers(conn, 6)
        assert [cid for cid, _ in got] == list(range(6))
        errors = [parts[0][2] for _, parts in got]
        assert errors == [0, 0, CORRUPT_MESSAGE, 0, 0, CORRUPT_MESSAGE]
        assert [parts[0][3] for _, parts in got if parts[0][2] == 0] == [0, 1, 2, 3]  # the bad ones take no offset
        assert values(conn, "group-corrupt", 0) == [(0, b"good-0"), (1, b"good-1"), (2, b"good-3"), (3, b"good-4")]


def test_acks_0_among_acks_1_gets_no_answer_and_is_appended_in_its_place(broker):
    with connect(broker) as conn:
        make_topic(conn, "group-acks")
        acks = [1, 0, 0, 1, 0, 1, -1, 0]
        conn.send_raw(b"".join(frame(one("group-acks", 0, batch(b"r%d" % i)), i, acks=a) for i, a in enumerate(acks)))
        got = answers(conn, sum(1 for a in acks if a != 0))
        assert [cid for cid, _ in got] == [i for i, a in enumerate(acks) if a != 0]
        assert [parts[0][3] for _, parts in got] == [i for i, a in enumerate(acks) if a != 0]
        assert values(conn, "group-acks", 0) == [(i, b"r%d" % i) for i in range(len(acks))]


def test_each_partition_of_a_group_answers_for_itself(broker):
    with connect(broker) as conn:
        conn.request(metadata.API_KEY, 8, metadata.REQUEST(topics=[{"name": "group-a"}, {"name": "group-b"}]))
        requests = [
            one("group-a", 0, batch(b"a0")),
            [{"name": "group-a", "partition_data": [{"index": 0, "records": batch(b"a1")}]},
             {"name": "group-b", "partition_data": [{"index": 0, "records": batch(b"b0")}]}],
            one("group-a", 7, batch(b"nowhere")),  # no such partition
            one("group-b", 0, batch(b"b1")),
            one("group-a", 0, batch(b"a2")),
        ]
        conn.send_raw(b"".join(frame(r, i) for i, r in enumerate(requests)) + frame(one("group-a", 0, batch(b"x")), 9,
                                                                                      acks=5))
        got = answers(conn, 6)
        assert got == [
            (0, [("group-a", 0, 0, 0)]),
            (1, [("group-a", 0, 0, 1), ("group-b", 0, 0, 0)]),
            (2, [("group-a", 7, UNKNOWN_TOPIC_OR_PARTITION, -1)]),
            (3, [("group-b", 0, 0, 1)]),
            (4, [("group-a", 0, 0, 2)]),
            (9, [("group-a", 0, INVALID_REQUIRED_ACKS, -1)]),
        ]


def test_a_malformed_request_after_good_ones_answers_them_then_closes(broker):
    with connect(broker) as conn:
        make_topic(conn, "group-bad-frame")
        good = [frame(one("group-bad-frame", 0, batch(b"ok%d" % i)), i) for i in range(3)]
        bad = bytearray(frame(one("group-bad-frame", 0, batch(b"bad")), 3))
        # size, api key, version, correlation id, client id, transactional id (null), acks, timeout: the topic count
        at = 4 + 2 + 2 + 4 + 2 + len("group-test") + 2 + 2 + 4
        bad[at:at + 4] = b"\x7f\xff\xff\xff"  # more topics than the frame has bytes
        conn.send_raw(b"".join(good) + bytes(bad))
        assert [cid for cid, _ in answers(conn, 3)] == [0, 1, 2]
        assert_closed(conn)
    with connect(broker) as other:
        assert [v for _, v in values(other, "group-bad-frame", 0)] == [b"ok0", b"ok1", b"ok2"]


# ---------------------------------------------------------------- deterministically


@pytest.fixture
def local(tmp_path, monkeypatch):
    """(context, connection, calls of Partition.append_many) with a topic `t` of 2 partitions."""
    manager = LogManager(tmp_path)
    manager.create_topic("t", 2)
    a, b = socket.socketpair()
    conn = Connection(a, 1 << 20)
    calls = []
    real = Partition.append_many

    def counting(self, bufs):
        calls.append(len(bufs))
        return real(self, bufs)

    monkeypatch.setattr(Partition, "append_many", counting)
    yield LocalHandlerContext(manager), conn, calls
    a.close()
    b.close()
    manager.close()


def queued_frames(conn):
    """The response frames the connection queued, in order, without their size prefixes."""
    data = b"".join(bytes(p) for p in conn.out._parts)
    frames, pos = [], 0
    while pos < len(data):
        size = int.from_bytes(data[pos:pos + 4], "big")
        frames.append(data[pos + 4:pos + 4 + size])
        pos += 4 + size
    return frames


def queued_answers(conn):
    """The Produce responses the connection queued: (correlation id, [(index, error, base offset)])."""
    out = []
    for f in queued_frames(conn):
        cid, body = decode_response(produce.API_KEY, 8, f)
        out.append((cid, [(p.index, p.error_code, p.base_offset)
                          for t in body.responses for p in t.partition_responses]))
    return out


def test_a_run_of_queued_produce_requests_is_appended_in_groups_of_at_most_max_group(local):
    ctx, conn, calls = local
    n = dispatch.MAX_GROUP + 5
    conn.reader.feed(b"".join(frame(one("t", 0, batch(b"%d" % i)), i) for i in range(n)))
    dispatch.handle_requests(ctx, conn)
    assert calls == [dispatch.MAX_GROUP, 5]  # one lock hold and one write per group
    assert queued_answers(conn) == [(i, [(0, 0, i)]) for i in range(n)]
    assert not conn.busy and conn.reader.queued == 0


def test_a_group_stops_at_a_request_of_another_api(local):
    ctx, conn, calls = local
    frames = [frame(one("t", 1, batch(b"%d" % i)), i) for i in range(3)]
    frames.append(encode_request(RequestHeader(api_versions.API_KEY, 0, 3, "x"), api_versions.REQUEST()))
    frames += [frame(one("t", 1, batch(b"%d" % i)), i) for i in range(4, 6)]
    conn.reader.feed(b"".join(frames))
    dispatch.handle_requests(ctx, conn)
    assert calls == [3, 2]
    cids = [int.from_bytes(f[:4], "big") for f in queued_frames(conn)]
    assert cids == [0, 1, 2, 3, 4, 5]  # in request order, the ApiVersions answer among them


def test_an_unparseable_request_in_a_group_answers_those_before_it_then_closes(local):
    ctx, conn, calls = local
    good = [frame(one("t", 0, batch(b"%d" % i)), i) for i in range(2)]
    truncated = bytearray(frame(one("t", 0, batch(b"x")), 2))
    truncated = (len(truncated) - 4 - 30).to_bytes(4, "big") + truncated[4:-30]  # the body ends early
    conn.reader.feed(b"".join(good) + bytes(truncated))
    with pytest.raises(CloseConnection):
        dispatch.handle_requests(ctx, conn)
    assert queued_answers(conn) == [(0, [(0, 0, 0)]), (1, [(0, 0, 1)])]


# ---------------------------------------------------------------- the templates


def random_request(rng, topic=None):
    return dict(version=rng.randint(3, 8), acks=rng.choice([0, 1, -1]), timeout=rng.randrange(1 << 31),
                client_id=rng.choice([None, "", "c", "client-\u00e9" * rng.randint(1, 5)]),
                topic=topic or rng.choice(["t", "topic.with-dots_and_more", "x" * 200]),
                partition=rng.randrange(1 << 31), records=rng.randbytes(rng.randint(0, 300)),
                txn=rng.choice([None, None, "tx"]))


def encode(r, correlation_id):
    return encode_request(RequestHeader(produce.API_KEY, r["version"], correlation_id, r["client_id"]), produce.REQUEST(
        transactional_id=r["txn"], acks=r["acks"], timeout_ms=r["timeout"], topic_data=one(r["topic"], r["partition"],
                                                                                          r["records"])))


def test_a_request_shape_reads_what_the_codec_decodes():
    rng = random.Random(7)
    for _ in range(200):
        first = random_request(rng)
        header, body = decode_request(memoryview(encode(first, 1))[4:])
        shape = handler.RequestShape.learn(header, body)
        assert shape is not None
        for _ in range(5):
            nxt = dict(first, partition=rng.randrange(1 << 31), records=rng.randbytes(rng.randint(0, 300)))
            cid = rng.randrange(-(1 << 31), 1 << 31)
            got = shape.read(memoryview(encode(nxt, cid))[4:])
            h, b = decode_request(memoryview(encode(nxt, cid))[4:])
            assert got is not None
            assert (got[0], got[1]) == (h, b.acks)
            assert [(n, [(i, bytes(r)) for i, r in ps]) for n, ps in got[2]] == \
                [(n, [(i, bytes(r)) for i, r in ps]) for n, ps in handler.parts(b)[1]]
        other = random_request(rng, topic="another-topic")
        assert shape.read(memoryview(encode(other, 1))[4:]) is None
        whole = memoryview(encode(first, 1))[4:]
        assert shape.read(whole[:-1]) is None and shape.read(memoryview(bytes(whole) + b"\x00")) is None


def test_a_shape_is_learned_once_per_topic_and_settings():
    """A producer taking turns between topics finds each shape again instead of encoding it anew."""
    rng = random.Random(9)
    first = random_request(rng, topic="shape-a")
    again = dict(first, partition=first["partition"] + 1, records=b"other records")
    other = dict(first, topic="shape-b")
    learned = [handler.RequestShape.learn(*decode_request(memoryview(encode(r, cid))[4:]))
               for cid, r in enumerate((first, again, other, first))]
    assert learned[0] is not None and learned[2] is not None
    assert learned[0] is learned[1] is learned[3] and learned[2] is not learned[0]


def test_a_request_with_several_partitions_has_no_shape():
    body = produce.REQUEST(acks=1, timeout_ms=1, topic_data=[{"name": "t", "partition_data": [
        {"index": 0, "records": b"a"}, {"index": 1, "records": b"b"}]}])
    header, decoded = decode_request(memoryview(encode_request(RequestHeader(0, 8, 1, "c"), body))[4:])
    assert handler.RequestShape.learn(header, decoded) is None


def test_the_answer_template_writes_the_codecs_bytes():
    rng = random.Random(8)
    for _ in range(300):
        version = rng.randint(3, 8)
        name = rng.choice(["t", "orders", "a.b-c_d" * 10])
        header = RequestHeader(produce.API_KEY, version, rng.randrange(-(1 << 31), 1 << 31), "c")
        result = (rng.randrange(1 << 31), rng.choice([0, 0, 6, 3]), rng.randrange(-1, 1 << 62),
                  rng.randrange(-1, 1 << 40), None)
        fast = handler._answer(header, [(name, [result])])
        assert isinstance(fast, bytearray)
        assert bytes(fast) == bytes(encode_response(header, produce.RESPONSE(throttle_time_ms=0, responses=[
            {"name": name, "partition_responses": [handler._fields(*result)]}])))
    with_message = handler._answer(header, [(name, [(0, 2, -1, -1, "bad CRC")])])
    assert not isinstance(with_message, bytearray)  # the codec writes answers with a message
