"""The Metrics page's API: the broker's rates and request latency percentiles per API over the last hour."""

from __future__ import annotations

from mmlog.console.router import Routes

routes = Routes()


@routes.get("/metrics/history")
def history(call) -> dict:
    """The samples since `since` (unix seconds; all of the last hour by default), oldest first."""
    metrics = call.console.metrics_history
    if metrics is None:
        return {"interval_s": None, "samples": []}
    since = float(call.query.get("since", 0) or 0)
    return {"interval_s": metrics.interval_s, "samples": metrics.series(since)}
