"""Frame templates against the codec: what `fill` writes and what `read` accepts are the codec's bytes."""

import random

import pytest

from mmlog.protocol import Placeholder, RequestHeader, decode_response, encode_request_parts, encode_response
from mmlog.protocol.messages import produce
from mmlog.protocol.template import I16, I32, I64, MARKS, FrameTemplate, TemplateError

MARK = {"error_code": MARKS[I16][0], "base_offset": MARKS[I64][0], "log_append_time_ms": MARKS[I64][1],
        "log_start_offset": MARKS[I64][2]}


def answer(name, index, throttle, **fields):
    return produce.RESPONSE(throttle_time_ms=throttle, responses=[{"name": name, "partition_responses": [
        {"index": index, "record_errors": [], "error_message": None, **fields}]}])


def answer_template(name, index, skip=0):
    frame = encode_response(RequestHeader(0, 8, 0, None), answer(name, index, MARKS[I32][0], **MARK))
    return FrameTemplate(frame, [(I32, 4), (I16, MARK["error_code"]), (I64, MARK["base_offset"]),
                                 (I64, MARK["log_append_time_ms"]), (I64, MARK["log_start_offset"]),
                                 (I32, MARKS[I32][0])], skip=skip)


def random_fields(rng):
    return dict(error_code=rng.randrange(-(1 << 15), 1 << 15), base_offset=rng.randrange(-(1 << 63), 1 << 63),
                log_append_time_ms=rng.randrange(-(1 << 63), 1 << 63),
                log_start_offset=rng.randrange(-(1 << 63), 1 << 63))


def test_fill_writes_the_codecs_bytes_and_read_gives_the_values_back():
    rng = random.Random(1)
    for _ in range(200):
        name, index = rng.choice(["t", "orders", "x.y_z-" * 20]), rng.randrange(1 << 31)
        template, received = answer_template(name, index), answer_template(name, index, skip=4)
        cid, throttle, fields = rng.randrange(-(1 << 31), 1 << 31), rng.randrange(1 << 31), random_fields(rng)
        values = (cid, fields["error_code"], fields["base_offset"], fields["log_append_time_ms"],
                  fields["log_start_offset"], throttle)
        expected = encode_response(RequestHeader(0, 8, cid, None), answer(name, index, throttle, **fields))
        assert bytes(template.fill(*values)) == bytes(expected)
        assert template.read(expected) == values
        assert received.read(memoryview(expected)[4:]) == values  # a framer's frame: no size prefix


def test_read_refuses_any_frame_that_differs_outside_the_fields():
    template = answer_template("orders", 3, skip=4)
    rng = random.Random(2)
    for changed in (dict(index=4), dict(name="orderz"), dict(error_message="bad"),
                    dict(record_errors=[{"batch_index": 0, "batch_index_error_message": None}])):
        body = answer(changed.pop("name", "orders"), changed.pop("index", 3), 0, **random_fields(rng), **changed)
        frame = memoryview(encode_response(RequestHeader(0, 8, 7, None), body))[4:]
        assert template.read(frame) is None
        assert decode_response(0, 8, frame)[0] == 7  # the codec reads it: the caller's fallback


def test_a_field_right_after_the_skipped_prefix_is_read():
    frame = encode_response(RequestHeader(0, 8, 1234, None), answer("t", 0, 0))
    template = FrameTemplate(frame, [(I32, 0), (I32, 4)], skip=4)  # size prefix, then correlation id
    assert template.read(memoryview(frame)[4:]) == (None, 1234)


def test_markers_that_cannot_be_told_apart_refuse_a_template():
    frame = encode_response(RequestHeader(0, 8, 0, None), answer("t", 0, 0, **MARK))
    with pytest.raises(TemplateError):
        FrameTemplate(frame, [(I64, MARKS[I64][3])])  # a marker that is not in the frame
    twice = encode_response(RequestHeader(0, 8, 0, None), answer("t", 0, 0, base_offset=MARKS[I64][0],
                                                                 log_start_offset=MARKS[I64][0]))
    with pytest.raises(TemplateError):
        FrameTemplate(twice, [(I64, MARKS[I64][0])])


def test_fields_out_of_frame_order_are_refused():
    frame = encode_response(RequestHeader(0, 8, 0, None), answer("t", 0, 0, **MARK))
    with pytest.raises(ValueError, match="order"):
        FrameTemplate(frame, [(I64, MARK["base_offset"]), (I16, MARK["error_code"])])


def test_a_request_head_around_a_placeholder_equals_the_codecs_frame():
    """What the producer sends: the head up to the records (size and records length patched), then the batch."""
    rng = random.Random(3)
    for _ in range(50):
        records = rng.randbytes(rng.randrange(2000))
        header = RequestHeader(0, 8, 0, rng.choice([None, "client"]))
        body = dict(acks=rng.choice([0, 1, -1]), timeout_ms=rng.randrange(1 << 31), transactional_id=None)
        head, placeholder = encode_request_parts(header, produce.REQUEST(**body, topic_data=[
            {"name": "t", "partition_data": [{"index": 5, "records": Placeholder(0)}]}]))
        template = FrameTemplate(head, [(I32, 0), (I32, len(head) - 4)])
        frame = template.fill(len(head) - 4 + len(records), len(records)) + records
        whole = b"".join(bytes(p) for p in encode_request_parts(header, produce.REQUEST(**body, topic_data=[
            {"name": "t", "partition_data": [{"index": 5, "records": records}]}])))
        assert bytes(frame) == whole
