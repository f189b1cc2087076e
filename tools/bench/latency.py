"""End-to-end latency: a producer at a fixed rate and a long-polling consumer, each in a process of its own.

Every message carries its send time (`time.monotonic_ns()`, CLOCK_MONOTONIC,
the same clock in every process of the machine) in its first 8 bytes; the
consumer subtracts it from the time the message reached the application. The
producer first sends one message stamped 0 and waits; the consumer, once that
message has reached it (so it is connected and long-polling), lets the paced
run begin. p50, p99 and p99.9 are over every paced message.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from tools.bench.common import ClientFailed, ClientProcess

TICK = 0.001  # the producer wakes every millisecond and sends what is due: 10 messages a tick at 10,000/s


@dataclass
class Latency:
    system: str
    variant: str
    rate: float  # messages a second asked for
    count: int  # messages measured
    achieved: float  # messages a second actually sent
    p50: float  # milliseconds
    p99: float
    p999: float
    max: float


def paced(burst, rate: float, count: int) -> float:
    """Call `burst(n)` with the messages due so that `count` go out at `rate` a second; returns the rate achieved."""
    start = time.monotonic()
    sent = 0
    while sent < count:
        due = min(count, int((time.monotonic() - start) * rate) + 1)
        if due > sent:
            burst(due - sent)
            sent = due
        ahead = sent / rate - (time.monotonic() - start)
        if ahead > 0:
            time.sleep(min(ahead, TICK))
    return count / (time.monotonic() - start)


async def paced_async(burst, rate: float, count: int) -> float:
    """`paced` for asyncio clients: `await burst(n)`, and the waits are the event loop's (so that the
    client's own tasks, such as reading confirms, run in between)."""
    import asyncio

    start = time.monotonic()
    sent = 0
    while sent < count:
        due = min(count, int((time.monotonic() - start) * rate) + 1)
        if due > sent:
            await burst(due - sent)
            sent = due
        ahead = sent / rate - (time.monotonic() - start)
        await asyncio.sleep(min(ahead, TICK) if ahead > 0 else 0)
    return count / (time.monotonic() - start)


def elapsed_ms(now_ns: int, stamps: np.ndarray) -> np.ndarray:
    """Milliseconds from each paced message's send stamp to `now_ns`; the message stamped 0 is left out."""
    return (now_ns - stamps[stamps > 0]) / 1e6


def measure(system: str, variant: str, producer_fn, consumer_fn, args: tuple, cfg, log) -> Latency | None:
    """Run `producer_fn(*args, rate, count, created, go) -> {"achieved": rate}` and
    `consumer_fn(*args, count, ready) -> latencies in ms`, each in a client process, and return the
    percentiles of what the consumer measured (None if it failed)."""
    ctx = ClientProcess._ctx
    created, ready, go = ctx.Event(), ctx.Event(), ctx.Event()
    count = int(cfg.latency_rate * cfg.latency_seconds)
    timeout = cfg.latency_seconds * 4 + 60
    producer = ClientProcess(producer_fn, *args, cfg.latency_rate, count, created, go)
    consumer = None
    try:
        producer.wait_for(created, 60, "first message sent")
        consumer = ClientProcess(consumer_fn, *args, count, ready)
        consumer.wait_for(ready, 60, "first message received")
        go.set()
        achieved = producer.result(timeout)["achieved"]
        ms = np.asarray(consumer.result(timeout), dtype=np.float64)
    except ClientFailed as exc:
        log(f"{system}: latency test failed: {exc}")
        return None
    finally:
        producer.stop(0)
        if consumer is not None:
            consumer.stop(0)
    p50, p99, p999, top = np.percentile(ms, [50, 99, 99.9, 100])
    result = Latency(system, variant, cfg.latency_rate, len(ms), achieved, p50, p99, p999, top)
    log(f"{system}: latency at {cfg.latency_rate:,.0f}/s ({variant}): p50 {p50:.2f} ms, p99 {p99:.2f} ms, "
        f"p99.9 {p999:.2f} ms, max {top:.2f} ms")
    return result
