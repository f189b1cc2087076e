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


def received_ms(stamps, arrived, count: int) -> np.ndarray:
    """Milliseconds from each message's send stamp to its arrival (`arrived`: ns, one per message), the
    message stamped 0 left out, the first `count`. `stamps`: an int64 array, or the 8-byte stamps."""
    sent = stamps if isinstance(stamps, np.ndarray) else np.frombuffer(b"".join(stamps), "<i8")
    return ((np.asarray(arrived, np.int64) - sent)[sent > 0] / 1e6)[:count]


def elapsed_ms(now_ns: int, stamps: np.ndarray) -> np.ndarray:
    """Milliseconds from each paced message's send stamp to `now_ns`; the message stamped 0 is left out."""
    return (now_ns - stamps[stamps > 0]) / 1e6


def collect(producer_fn, consumer_fn, args: tuple, rate: float, seconds: float) -> tuple[float, np.ndarray]:
    """Run `producer_fn(*args, rate, count, created, go) -> {"achieved": rate}` and
    `consumer_fn(*args, count, ready) -> latencies in ms`, each in a client process; the rate the producer
    achieved and every paced message's latency in ms. Raises ClientFailed if either client fails."""
    ctx = ClientProcess._ctx
    created, ready, go = ctx.Event(), ctx.Event(), ctx.Event()
    count = int(rate * seconds)
    timeout = seconds * 4 + 60
    producer = ClientProcess(producer_fn, *args, rate, count, created, go)
    consumer = None
    try:
        producer.wait_for(created, 60, "first message sent")
        consumer = ClientProcess(consumer_fn, *args, count, ready)
        consumer.wait_for(ready, 60, "first message received")
        go.set()
        achieved = producer.result(timeout)["achieved"]
        return achieved, np.asarray(consumer.result(timeout), dtype=np.float64)
    finally:
        producer.stop(0)
        if consumer is not None:
            consumer.stop(0)


def summary(system: str, variant: str, rate: float, achieved: float, ms: np.ndarray) -> Latency:
    p50, p99, p999, top = np.percentile(ms, [50, 99, 99.9, 100])
    return Latency(system, variant, rate, len(ms), achieved, p50, p99, p999, top)


def measure(system: str, variant: str, producer_fn, consumer_fn, args: tuple, cfg, log) -> Latency | None:
    """`collect` at the run's rate and length; the percentiles of what the consumer measured (None if a
    client failed)."""
    try:
        achieved, ms = collect(producer_fn, consumer_fn, args, cfg.latency_rate, cfg.latency_seconds)
    except ClientFailed as exc:
        log(f"{system}: latency test failed: {exc}")
        return None
    result = summary(system, variant, cfg.latency_rate, achieved, ms)
    log(f"{system}: latency at {cfg.latency_rate:,.0f}/s ({variant}): p50 {result.p50:.2f} ms, p99 "
        f"{result.p99:.2f} ms, p99.9 {result.p999:.2f} ms, max {result.max:.2f} ms")
    return result


# --- taking turns: every server up, one system's clients at a time -----------------------------------------------

@dataclass
class Turns:
    """One system's windows of a taking-turns run: each window's latencies (ms) and achieved rate."""

    name: str
    windows: list  # np.ndarray of ms, one per window
    achieved: list  # msg/s sent, one per window

    def pooled(self, rate: float) -> Latency:
        return summary(self.name, "", rate, float(np.median(self.achieved)), np.concatenate(self.windows))

    def per_window(self, q: float) -> list[float]:
        return [float(np.percentile(ms, q)) for ms in self.windows]


def taking_turns(systems: list[tuple[str, object, object, str]], rounds: int, rate: float, seconds: float,
                 log) -> list[Turns]:
    """`rounds` windows of `seconds` at `rate` for each (name, driver, address, stream prefix) in turn, the
    order rotating each round, a fresh stream a window (`<prefix>-lat-<round>`), so that every system is
    measured in the same minutes and only its own clients run during its window."""
    turns = [Turns(name, [], []) for name, *_ in systems]
    for r in range(rounds):
        for k in range(len(systems)):
            i = (r + k) % len(systems)
            _, driver, address, prefix = systems[i]
            achieved, ms = collect(driver.latency_producer, driver.latency_consumer,
                                   (address, f"{prefix}-lat-{r}"), rate, seconds)
            turns[i].windows.append(ms)
            turns[i].achieved.append(achieved)
        log(f"latency round {r + 1}/{rounds}: p99 ms " + ", ".join(
            f"{t.name} {np.percentile(t.windows[-1], 99):.2f}" for t in turns))
    return turns


def turns_table(turns: list[Turns], rate: float) -> list[str]:
    """Markdown lines: each system's pooled percentiles, then every other system's p50 and p99 over the
    first's, window by window (the pairs measured in one round): above 1 is the first one ahead."""
    from tools.bench.paired import quartiles, slice_ratios

    lines = ["| system | windows | messages | msg/s sent (median window) | p50 ms | p99 ms | p99.9 ms | max ms | "
             "p99 per window: median (quartiles) |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for t in turns:
        lat = t.pooled(rate)
        q1, med, q3 = quartiles(t.per_window(99))
        lines.append(f"| {t.name} | {len(t.windows)} | {lat.count:,} | {lat.achieved:,.0f} | {lat.p50:.2f} | "
                     f"{lat.p99:.2f} | {lat.p999:.2f} | {lat.max:.2f} | {med:.2f} ({q1:.2f}–{q3:.2f}) |")
    first = turns[0]
    lines += ["", f"| their figure over {first.name}'s | p50, pooled | p50 per round: median (quartiles) | "
              "p99, pooled | p99 per round: median (quartiles) |", "|---|---:|---:|---:|---:|"]
    mine = first.pooled(rate)
    for t in turns[1:]:
        theirs = t.pooled(rate)
        cells = []
        for q, pooled_mine, pooled_theirs in ((50, mine.p50, theirs.p50), (99, mine.p99, theirs.p99)):
            q1, med, q3 = slice_ratios(t.per_window(q), first.per_window(q))
            cells += [f"{pooled_theirs / pooled_mine:.2f}", f"{med:.2f} ({q1:.2f}–{q3:.2f})"]
        lines.append(f"| {t.name} | " + " | ".join(cells) + " |")
    return lines
