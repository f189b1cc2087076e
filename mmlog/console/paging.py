"""One page of a list filtered on the server: what every console list answers (items, total, page, size)."""

from __future__ import annotations

PAGE_SIZE = 25
MAX_PAGE_SIZE = 500


def bounds(page: int, size: int) -> tuple[int, int]:
    """A page number (from 1) and size, made sane."""
    return max(1, int(page)), min(MAX_PAGE_SIZE, max(1, int(size)))


def matching(names, search: str) -> list[str]:
    """The names holding `search`, case ignored, sorted."""
    needle = (search or "").strip().lower()
    return sorted(n for n in names if needle in n.lower())


def page_of(items: list, page: int = 1, size: int = PAGE_SIZE) -> tuple[list, dict]:
    """(the page's items, the answer's paging fields)."""
    page, size = bounds(page, size)
    start = (page - 1) * size
    return items[start:start + size], {"total": len(items), "page": page, "size": size}
