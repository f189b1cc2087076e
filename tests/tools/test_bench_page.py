"""tools/bench/page.py: each benchmark rewrites only its own section of docs/benchmarks.md."""

from tools.bench.page import markers, splice, write_section

BEGIN, END = markers("bench_peers")


def test_the_section_between_the_markers_is_replaced_and_the_rest_of_the_page_kept():
    page = f"# Title\n\nbefore\n{BEGIN}\nold tables\n{END}\n\nafter\n"
    new = splice(page, "new tables", "bench_peers")
    assert new == f"# Title\n\nbefore\n{BEGIN}\nnew tables\n{END}\n\nafter\n"
    assert splice(new, "again", "bench_peers").count(BEGIN) == 1


def test_a_page_without_the_markers_gets_the_section_appended():
    assert splice("# Title\n", "tables", "bench_peers") == f"# Title\n\n{BEGIN}\ntables\n{END}\n"
    assert splice("", "tables", "bench_peers") == f"{BEGIN}\ntables\n{END}\n"


def test_another_benchmarks_section_is_left_as_it_is():
    begin, end = markers("bench")
    page = f"{begin}\n# Benchmarks\nold run\n{end}\n\n## Peers\n{BEGIN}\npeers' tables\n{END}\n\n## Notes\nby hand\n"
    new = splice(page, "# Benchmarks\nnew run", "bench")
    assert new == page.replace("old run", "new run")
    assert splice(new, "spark", "bench_spark").startswith(new.rstrip("\n") + "\n\n<!-- bench_spark: begin -->")


def test_an_end_marker_before_the_begin_marker_is_not_taken_for_the_sections_end():
    stray = f"{END}\n{BEGIN}\n"  # a page broken by hand: the section is appended rather than text lost
    assert splice(stray, "tables", "bench_peers") == f"{END}\n{BEGIN}\n\n{BEGIN}\ntables\n{END}\n"


def test_write_section_creates_the_page_or_replaces_only_its_part(tmp_path):
    path = tmp_path / "benchmarks.md"
    write_section(path, "bench_spark", "## Spark\n\nfigures\n")
    assert path.read_text() == "<!-- bench_spark: begin -->\n## Spark\n\nfigures\n<!-- bench_spark: end -->\n"
    path.write_text("# Page\n\n" + path.read_text() + "\n## Later\n")
    write_section(path, "bench_spark", "## Spark\n\nnew figures")
    assert path.read_text() == ("# Page\n\n<!-- bench_spark: begin -->\n## Spark\n\nnew figures\n"
                                "<!-- bench_spark: end -->\n\n## Later\n")
