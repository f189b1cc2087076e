"""What a request's answer counts in the metrics block (`ipc/metrics_block.py`): the error codes it
carries, and the phases of a group of requests answered together.

Kafka counts every error code a response holds (top level, per topic, per partition:
`AbstractResponse.errorCounts`). Produce and Fetch count theirs where they make them
(handlers/produce.py, handlers/fetch.py: only on the error path, nothing per
partition when all is well); every other response is walked here once when it is
answered: a few fields of a small body, never on the produce or fetch path.
"""

from __future__ import annotations

from mmlog.protocol.messages import fetch, produce
from mmlog.protocol.schema import error_codes

COUNTED_BY_HANDLER = frozenset((produce.API_KEY, fetch.API_KEY))


def count_errors(metrics, api: int, body) -> None:
    """Count each non-zero `error_code` in a response body (`schema.error_codes`: codec structs, dicts in
    their place, encoded items; arrays of ids or names are never visited)."""
    for code in error_codes(body):
        metrics.error(api, code)


def runs(times: list[float]) -> list[tuple[int, float]]:
    """(count, time) of each run of equal times: a group's frames, stamped by the reads that completed
    them (processors/connection.py), are usually one run, so a group is counted with one call."""
    out = []
    for t in times:
        if out and out[-1][1] == t:
            out[-1] = (out[-1][0] + 1, t)
        else:
            out.append((1, t))
    return out


def count_answered(conn, api: int, arrivals: list[float], received: float, answered: float) -> None:
    """Requests of a group answered at once, at `answered`: counted when their responses are written."""
    if arrivals[0] == arrivals[-1]:  # one run: stamps never go back, so the first and last tell
        conn.mark_sending(api, len(arrivals), arrivals[0], received, answered, answered)
        return
    for count, arrived in runs(arrivals):
        conn.mark_sending(api, count, arrived, received, answered, answered)


def count_unanswered(metrics, conn, api: int, results: list, no_response, received: float,
                     handled: float) -> list[float]:
    """A group's requests whose result is `no_response` (acks=0; request.py's sentinel, which imports
    this module) are done when their handler is, with nothing to send: counted now. The arrival times of
    the others, in the order they will be answered."""
    arrivals = conn.arrivals
    if no_response not in results:
        return arrivals  # every one answered (the common case): in order, one a frame
    unanswered = [a for a, r in zip(arrivals, results) if r is no_response]
    for count, arrived in runs(unanswered):
        metrics.request(api, count, arrived, received, handled, handled, handled)
    return [a for a, r in zip(arrivals, results) if r is not no_response]
