"""The leader's ISR rule (Kafka's): a follower leaves the in-sync replicas after `replica.lag.time.max.ms`
without catching up to the leader's log end, and joins them again once its log end reaches the high
watermark, while it fetches and is registered in the cluster (a broker without a session is one the
controller counts as dead: it must not count towards min.insync.replicas just because it still fetches).
The leader's main process applies it on a timer (`mmlog/cluster/replicas.py`, `check_isr`)."""

from __future__ import annotations


def next_isr(me: int, rep, hw: int, followers, now_ms: int, lag_ms: int,
             registered) -> tuple[tuple[int, ...], list[str]]:
    """The ISR a leader `me` proposes, in assignment order (`rep.replicas`), from its current one
    (`rep.isr`), its high watermark and each follower's progress (`followers`: (broker, progress) pairs,
    progress with `log_end`, `last_caught_up_ms`, `last_fetch_ms`); and why each broker leaves or joins."""
    isr, why = [], []
    for r, progress in [(me, None), *followers]:
        if progress is None:
            isr.append(r)
        elif r in rep.isr:
            if now_ms - progress.last_caught_up_ms <= lag_ms:
                isr.append(r)
            else:
                why.append(f"broker {r} leaves the ISR (not caught up for "
                           f"{now_ms - progress.last_caught_up_ms} ms)")
        elif (progress.log_end >= hw and progress.log_end >= 0 and now_ms - progress.last_fetch_ms <= lag_ms
              and r in registered):
            isr.append(r)
            why.append(f"broker {r} joins the ISR at offset {progress.log_end}")
    return tuple(r for r in rep.replicas if r in isr), why
