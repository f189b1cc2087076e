"""Which error codes a response carries, for the per-API error counters (`ipc/metrics_block.py`).

Kafka counts every error code a response holds (top level, per topic, per partition:
`AbstractResponse.errorCounts`). Produce and Fetch count theirs where they make them
(handlers/produce.py, handlers/fetch.py: only on the error path, nothing per
partition when all is well); every other response is walked here once when it is
answered: a few fields of a small body, never on the produce or fetch path.
"""

from __future__ import annotations

from mmlog.protocol.messages import fetch, produce
from mmlog.protocol.schema import StructType

COUNTED_BY_HANDLER = frozenset((produce.API_KEY, fetch.API_KEY))
_PLANS: dict[StructType, tuple[bool, tuple]] = {}


def _plan(struct: StructType) -> tuple[bool, tuple]:
    """(has an error_code, its fields holding structs or arrays of them) of a struct's schema."""
    plan = _PLANS.get(struct)
    if plan is None:
        plan = _PLANS[struct] = (any(f.name == "error_code" for f in struct.fields),
                                 tuple((f.name, f.struct) for f in struct.fields if f.struct is not None))
    return plan


def count_errors(metrics, api: int, body) -> None:
    """Count each non-zero `error_code` in a response body (codec structs, or dicts in their place),
    walking only the fields its schema says hold structs: arrays of ids or names are never visited."""
    stack = [(body, type(body)._type)]
    while stack:
        item, struct = stack.pop()
        value = item.get if isinstance(item, dict) else item.__getattribute__
        has_error, children = _plan(struct)
        if has_error and (code := value("error_code")):
            metrics.error(api, code)
        for name, child in children:
            nested = value(name)
            if isinstance(nested, list):
                stack.extend((x, child) for x in nested)
            elif nested is not None:
                stack.append((nested, child))
