"""Which error codes a response carries, for the per-API error counters (`ipc/metrics_block.py`).

Kafka counts every error code a response holds (top level, per topic, per partition:
`AbstractResponse.errorCounts`). Produce and Fetch count theirs where they make them
(handlers/produce.py, handlers/fetch.py: only on the error path, nothing per
partition when all is well); every other response is walked here once when it is
answered: a few fields of a small body, never on the produce or fetch path.
"""

from __future__ import annotations

from mmlog.protocol.messages import fetch, produce
from mmlog.protocol.schema import Struct

COUNTED_BY_HANDLER = frozenset((produce.API_KEY, fetch.API_KEY))


def count_errors(metrics, api: int, body) -> None:
    """Count each non-zero `error_code` in a response body (codec structs, dicts and lists of them)."""
    stack = [body]
    while stack:
        item = stack.pop()
        if isinstance(item, Struct):
            fields = ((name, getattr(item, name)) for name in item.__slots__)
        elif isinstance(item, dict):
            fields = item.items()
        elif isinstance(item, list):
            stack.extend(item)
            continue
        else:
            continue
        for name, value in fields:
            if name == "error_code":
                if value:
                    metrics.error(api, value)
            elif isinstance(value, (list, dict, Struct)):
                stack.append(value)
