"""The consumer's Fetch v11 frames: encoded by the codec once per set of partitions, then a template filled in.

A consumer long-polling a few partitions sends the same request again and again with only the fetch
offsets moved (and the correlation id, which the channel writes). Rather than the codec encoding each one
field by field, a `FrameTemplate` of that request, made once with marker values in the offsets, is copied
and patched. A request of more partitions than there are markers, or one whose marker is not found
exactly once, is encoded by the codec every time: the bytes are the codec's either way (a non-flexible
version has one encoding), which tests/client/test_fetch_requests.py checks.
"""

from __future__ import annotations

from mmlog.protocol.codec import encode_request
from mmlog.protocol.header import RequestHeader
from mmlog.protocol.messages import fetch
from mmlog.protocol.template import I64, MARKS, FrameTemplate, TemplateError

FETCH_VERSION = 11  # the highest non-flexible Fetch; records are the last field of each partition
KEPT = 64  # templates kept (a consumer's partition sets come and go with rebalances and leader moves)


class FetchRequests:
    """Fetch frames for one consumer's settings; `frame(parts, max_bytes)` for each request."""

    def __init__(self, client_id: str, max_wait_ms: int, min_bytes: int, isolation: int) -> None:
        self.client_id = client_id
        self.max_wait_ms = max_wait_ms
        self.min_bytes = min_bytes
        self.isolation = isolation
        # per (max_bytes, (topic, partition, partition max bytes)...): the template (None: the codec each
        # time) and the indexes of the request's partitions in the order the frame holds them
        self._templates: dict[tuple, tuple[FrameTemplate | None, list[int]]] = {}

    def frame(self, parts: list[tuple[str, int, int, int]], max_bytes: int) -> bytearray:
        """The request frame (size prefix included, correlation id 0) fetching each (topic, partition,
        fetch offset, partition max bytes) of `parts`, grouped by topic in the order first named."""
        if len(parts) > len(MARKS[I64]):
            return self._encode(parts, max_bytes)
        key = (max_bytes, *((topic, partition, limit) for topic, partition, _, limit in parts))
        made = self._templates.get(key)
        if made is None:
            if len(self._templates) >= KEPT:
                self._templates.clear()
            made = self._templates[key] = self._template(parts, max_bytes)
        template, order = made
        if template is None:
            return self._encode(parts, max_bytes)
        return template.fill(*(parts[i][2] for i in order))

    def _template(self, parts: list, max_bytes: int) -> tuple[FrameTemplate | None, list[int]]:
        order = _frame_order(parts)
        marked = [(topic, partition, MARKS[I64][k], limit)
                  for k, (topic, partition, _, limit) in enumerate(parts[i] for i in order)]
        try:
            return FrameTemplate(self._encode(marked, max_bytes), [(I64, mark) for _, _, mark, _ in marked]), order
        except TemplateError:
            return None, order

    def body(self, parts: list, max_bytes: int):
        """The request's fields (the codec's struct): a consumer's Fetch, no session, no rack, each (topic,
        partition, fetch offset, partition max bytes) of `parts` grouped by topic in the order first named."""
        topics: dict[str, list] = {}
        for topic, partition, offset, limit in parts:
            topics.setdefault(topic, []).append({
                "partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
                "log_start_offset": -1, "partition_max_bytes": limit})
        return fetch.REQUEST(
            replica_id=-1, max_wait_ms=self.max_wait_ms, min_bytes=self.min_bytes, max_bytes=max_bytes,
            isolation_level=self.isolation, session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
            topics=[{"topic": t, "partitions": ps} for t, ps in topics.items()])

    def _encode(self, parts: list, max_bytes: int) -> bytearray:
        return encode_request(RequestHeader(fetch.API_KEY, FETCH_VERSION, 0, self.client_id),
                              self.body(parts, max_bytes))


def _frame_order(parts: list) -> list[int]:
    """The indexes of `parts` in the order the frame holds them: grouped by topic, topics in the order first
    named (as `_encode` groups them)."""
    first: dict[str, int] = {}
    for topic, *_ in parts:
        first.setdefault(topic, len(first))
    return sorted(range(len(parts)), key=lambda i: first[parts[i][0]])
