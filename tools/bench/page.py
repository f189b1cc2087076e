"""docs/benchmarks.md is written by several benchmarks: each owns one section of it, between its markers.

    <!-- NAME: begin -->
    ...what the benchmark last wrote...
    <!-- NAME: end -->

A benchmark that records replaces the text between its own markers and leaves the
rest of the page as it was (the sections of the other benchmarks, hand-written
notes); on a page without its markers, it appends its section with them.
"""

from __future__ import annotations

from pathlib import Path


def markers(name: str) -> tuple[str, str]:
    """The begin and end marker lines of the section `name` (an HTML comment each: invisible once rendered)."""
    return f"<!-- {name}: begin -->", f"<!-- {name}: end -->"


def splice(page: str, section: str, name: str) -> str:
    """`page` with the text between the markers of `name` replaced by `section` (appended, with its markers,
    if the page does not have them)."""
    begin, end = markers(name)
    if begin in page and end in page.split(begin, 1)[1]:
        head, rest = page.split(begin, 1)
        return head + begin + "\n" + section + "\n" + end + rest.split(end, 1)[1]
    return (page.rstrip("\n") + "\n\n" if page.strip() else "") + begin + "\n" + section + "\n" + end + "\n"


def write_section(path: Path, name: str, section: str) -> None:
    """Replace the section `name` of the page at `path` (created if missing) with `section`."""
    path = Path(path)
    path.write_text(splice(path.read_text() if path.exists() else "", section.strip("\n"), name))


BENCHMARKS = Path(__file__).resolve().parents[2] / "docs" / "benchmarks.md"


def show(section: str, name: str, record: bool) -> None:
    """Print a benchmark's section; with `record`, also write it as the section `name` of docs/benchmarks.md."""
    print(section)
    if record:
        write_section(BENCHMARKS, name, section)
