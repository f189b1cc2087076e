"""Client quotas inside a processor: record what a quota'd client uses, and how long it must wait.

Per request, never per record. A connection whose client has no quota (the common case)
costs one dict look-up per request. For one that has (`config/quotas.py` resolves it,
cached per (user, client id) until the quotas change), Kafka's three quota managers:

- produce: the request's bytes are recorded when it arrives, then the throttle time is
  read (ClientQuotaManager: record, then check the rate against the quota);
- fetch: the response's record bytes are recorded when it is built; if that puts the
  client over its quota, they are unrecorded and the answer is empty, carrying only the
  throttle time (Kafka's KafkaApis.handleFetchRequest). A fetch never asks for more than
  the quota allows in W-1 windows (`fetch_cap`);
- request: the time a handler takes (as a percentage of one second) is recorded after
  it ran; a request is answered with the throttle time the rate so far calls for,
  at most one window (ClientRequestQuotaManager bounds it so).

The response carries the larger throttle time in `throttle_time_ms`, and the connection
is muted for that long after the response is queued (Kafka >= 2.0, KIP-219): nothing
more is read or handled from it until the time is over (`worker.Processor.throttle`).
"""

from __future__ import annotations

import time

from mmlog.config.quotas import ANONYMOUS, FETCH, PRODUCE, REQUEST, resolve


def _now_ms() -> int:
    return int(time.time() * 1000)


class ClientQuotas:
    """One processor's view of the quotas and the shared rates (`ipc/quota_block.py`)."""

    def __init__(self, block, writer: int, manager) -> None:
        self.block = block
        self.writer = writer
        self.manager = manager  # its `dynamic["quotas"]` holds the quota configs (reloaded with the catalogue)
        self._quotas: dict | None = None
        self._resolved: dict[tuple, tuple | None] = {}  # (key, user, client id) -> (limit, slot) or None
        self.enabled = False  # any quota set: what the hot path checks (one attribute), kept by `refresh`

    def refresh(self) -> None:
        """Take the quotas of the catalogue the manager holds now (the worker calls this after reloading it)."""
        self.enabled = self.block is not None and bool(self.manager.dynamic.get("quotas"))

    def sensor(self, key: str, conn, client_id: str | None):
        """(limit, slot) of the quota `key` of a connection's user (its authenticated principal, else
        ANONYMOUS) and client id, or None."""
        user = conn.principal.partition(":")[2] or ANONYMOUS
        quotas = self.manager.dynamic.get("quotas", {})
        if quotas is not self._quotas:
            self._quotas, self._resolved = quotas, {}
        if not quotas:
            return None
        cache_key = (key, user, client_id)
        found = self._resolved.get(cache_key, False)
        if found is False:
            hit = resolve(quotas, user, client_id or "", key)
            found = self._resolved[cache_key] = None if hit is None else (hit[0], self.block.slot(hit[1], _now_ms()))
        return found

    def limits_produce(self, conn, client_id) -> bool:
        """Whether the client has a produce quota."""
        return self.sensor(PRODUCE, conn, client_id) is not None

    def produce(self, conn, client_id, nbytes: int) -> int:
        """Record a Produce request's bytes; the throttle time in ms (0: within the quota)."""
        return self._record(PRODUCE, conn, client_id, nbytes)[0]

    def _record(self, key: str, conn, client_id, value: float) -> tuple[int, int, int]:
        """Record value on the client's sensor of `key`: (throttle ms, slot, now ms); (0, -1, 0) without a quota."""
        sensor = self.sensor(key, conn, client_id)
        if sensor is None:
            return 0, -1, 0
        limit, slot = sensor
        now = _now_ms()
        measured = self.block.record(slot, self.writer, now, value)
        return self.block.throttle_ms(slot, now, limit, measured), slot, now

    def fetch_cap(self, conn, client_id) -> int | None:
        """The most bytes one fetch may ask for: what the quota allows in W-1 windows (Kafka's
        getMaxValueInQuotaWindow), or None without a quota."""
        sensor = self.sensor(FETCH, conn, client_id)
        if sensor is None:
            return None
        return max(1, int(sensor[0] * (self.block.windows - 1) * self.block.window_ms / 1000))

    def fetched(self, conn, client_id, nbytes: int) -> int:
        """Record a fetch response's bytes; if that breaks the quota, unrecord them and return the throttle time."""
        throttle, slot, now = self._record(FETCH, conn, client_id, nbytes)
        if throttle:
            self.block.record(slot, self.writer, now, -nbytes)
        return throttle

    def request_throttle(self, conn, client_id) -> int:
        """The request-time throttle a client's next response carries (at most one window)."""
        sensor = self.sensor(REQUEST, conn, client_id)
        if sensor is None:
            return 0
        limit, slot = sensor
        return min(self.block.throttle_ms(slot, _now_ms(), limit), self.block.window_ms)

    def handled(self, conn, client_id, seconds: float) -> None:
        """Record the time a request of the client took to handle (as percent of a second)."""
        sensor = self.sensor(REQUEST, conn, client_id)
        if sensor is not None:
            self.block.record(sensor[1], self.writer, _now_ms(), seconds * 100.0)
