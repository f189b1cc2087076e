"""The producer's Produce requests: a step's batches encoded together, framed from a per-partition template.

A mixin of `Sender` (sender.py), whose docstring tells why the cost is per step, not per batch."""

from __future__ import annotations

import struct

from mmlog.client import encode
from mmlog.client.channel import Channel
from mmlog.protocol import Placeholder, RequestHeader, encode_request_parts, encode_response
from mmlog.protocol import compression
from mmlog.protocol.messages import produce
from mmlog.protocol.template import I16, I32, I64, MARKS, FrameTemplate, TemplateError

PRODUCE_VERSION = 8
_I32 = struct.Struct(">i")


class ProduceRequests:
    """Builds the batches a step sends and queues one Produce request per leader."""

    def _build_all(self, queues: list, per_queue: int) -> None:
        """Encode the first `per_queue` closed batches of each queue that are not encoded yet, in one
        kernel call: what this step can send (a request takes one batch per partition)."""
        todo = []
        for queue in queues:
            closed = queue.closed  # send() may append meanwhile: index it, never iterate it
            for i in range(min(per_queue, len(closed))):
                batch = closed[i]
                if batch.data is None:
                    todo.append(batch)
        if not todo:
            return
        built = encode.build_runs([b.values for b in todo], [b.keys for b in todo], [b.headers for b in todo],
                                  [b.stamps for b in todo])
        codec, level = self.codec, self.compression_level
        for batch, data in zip(todo, built):
            batch.data = data if not codec else compression.compress_batch(data, codec, level)
            batch.values = batch.keys = batch.headers = None

    def _wire(self, queue) -> tuple:
        """(request head, answer template) of a one-batch request for the queue's partition, made
        once by the generic codec. The head is the frame up to the batch: size | header |
        transactional_id (the producer's, or null) acks timeout_ms | 1 topic | name | 1 partition |
        index | records length; a request patches its size (bytes 0-3), correlation id (8-11, by the
        channel) and records length (the last 4 bytes), and sends the batch after it. The answer
        template reads the usual answer (see `_answer_template`)."""
        wire = queue.wire
        if wire is None:
            parts = encode_request_parts(RequestHeader(produce.API_KEY, PRODUCE_VERSION, 0, self.client_id),
                                         produce.REQUEST(acks=self.acks, timeout_ms=self.timeout_ms,
                                                         transactional_id=self.transactional_id, topic_data=[
                                             {"name": queue.topic, "partition_data": [
                                                 {"index": queue.partition, "records": Placeholder(0)}]}]))
            assert len(parts) == 2 and parts[0][-4:] == bytes(4), "the records field must end the frame"
            wire = queue.wire = (bytes(parts[0]), self._answer_template(queue.topic, queue.partition))
        return wire

    def _request(self, channel: Channel, batches: list) -> None:
        """Queue one Produce request for these batches (written by the caller's on_writable)."""
        if len(batches) == 1:
            batch = batches[0]
            head = bytearray(self._wire(batch.queue)[0])
            data = batch.data
            size = len(data)
            _I32.pack_into(head, len(head) - 4, size)
            _I32.pack_into(head, 0, len(head) - 4 + size)
            parts = [head, data]
        else:
            by_topic: dict[str, list] = {}
            for batch in batches:
                by_topic.setdefault(batch.topic, []).append({"index": batch.partition, "records": batch.data})
            parts = encode_request_parts(
                RequestHeader(produce.API_KEY, PRODUCE_VERSION, 0, self.client_id),
                produce.REQUEST(acks=self.acks, timeout_ms=self.timeout_ms, transactional_id=self.transactional_id,
                                topic_data=[{"name": topic, "partition_data": partitions}
                                            for topic, partitions in by_topic.items()]))

        def done(response, exc, batches=batches, channel=channel):
            # acks=0: (None, None) once written, or the exception of a connection lost before
            # (Channel.fail fails the unwritten frames too).
            self._on_response(channel, batches, response, exc)

        channel.queue_frame(parts, produce.API_KEY, PRODUCE_VERSION, done, expect_response=self.acks != 0, raw=True)

    def _answer_template(self, topic: str, partition: int) -> FrameTemplate | None:
        """The usual answer to a one-batch request, by the codec with marker values; fields:
        correlation id, error code, base offset, log append time, log start offset, throttle
        time. Anything else in an answer (an error message) is decoded by the codec."""
        marks = {"error_code": MARKS[I16][0], "base_offset": MARKS[I64][0], "log_append_time_ms": MARKS[I64][1],
                 "log_start_offset": MARKS[I64][2]}
        frame = encode_response(RequestHeader(produce.API_KEY, PRODUCE_VERSION, 0, None), produce.RESPONSE(
            throttle_time_ms=MARKS[I32][0], responses=[{"name": topic, "partition_responses": [
                {"index": partition, "record_errors": [], "error_message": None, **marks}]}]))
        try:
            return FrameTemplate(frame, [(I32, 4), (I16, marks["error_code"]), (I64, marks["base_offset"]),
                                         (I64, marks["log_append_time_ms"]), (I64, marks["log_start_offset"]),
                                         (I32, MARKS[I32][0])], skip=4)
        except TemplateError:
            return None
