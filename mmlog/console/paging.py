"""Server-side paging and filtering of the console's lists: `page`, `size` and `q` from the query."""

from __future__ import annotations

from mmlog.console.errors import ConsoleError

MAX_SIZE = 500
DEFAULT_SIZE = 50


def number(query: dict, name: str, default: int, low: int = 0, high: int | None = None) -> int:
    """An integer query parameter (ConsoleError 400 when it is not one, or out of [low, high])."""
    raw = query.get(name, "")
    if raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConsoleError(400, "INVALID_REQUEST", f"{name}: {raw!r} is not an integer") from None
    if value < low or (high is not None and value > high):
        raise ConsoleError(400, "INVALID_REQUEST", f"{name}: {value} is out of range")
    return value


def page(items, call, text=lambda item: item, sort=None, show=lambda item: item) -> dict:
    """One page of `items` whose `text(item)` holds `q` (case-insensitive), in `sort` order, each shown
    as `show(item)` (called for the page's items only: the costly part of a list of thousands):
    {"items", "total", "page", "size"} (page numbers from 1; total counts what the filter kept)."""
    q = call.query.get("q", "").strip().lower()
    kept = [item for item in items if q in text(item).lower()] if q else list(items)
    if sort is not None:
        kept.sort(key=sort)
    size = number(call.query, "size", DEFAULT_SIZE, 1, MAX_SIZE)
    at = number(call.query, "page", 1, 1)
    return {"items": [show(item) for item in kept[(at - 1) * size:at * size]], "total": len(kept), "page": at,
            "size": size}
