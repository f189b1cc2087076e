"""The house rules that a machine can check: modules of a readable size, tools/ standing apart from tests/,
and text that cites only what the repository holds (no issue numbers, no documents kept elsewhere)."""

from __future__ import annotations

import ast
import functools
import re
import subprocess
from pathlib import Path

import mmlog

REPO = Path(mmlog.__file__).resolve().parents[1]
MAX_LINES = 600
LONGER = "longer than 600 lines because"  # what a longer module's docstring says, followed by why
SCANNED = ("mmlog", "tests", "tools", "docs", "README.md", ".ci", "pyproject.toml")

# An issue or pull request cited by number: "issue #N", "issues N", "PR #N", "(#N)", or a bare "#N". Not a
# markdown heading or a comment ("# " has a space), a format spec ("{:#0Nx}"), an HTML entity ("&#N;"), an
# anchor ("page#N") or a colour in quotes ("#N"); lines about colours are left alone as well.
ISSUE = re.compile(r"\bissues?\s*#?\d+|\bPR\s*#\d+|\(#\d+\)|(?<![\w&#/'\"=:])#\d+\b", re.IGNORECASE)
COLOUR = re.compile(r"colou?r|fill|stroke|background", re.IGNORECASE)
# Documents of the project that were never in the repository; any other *.md cited must be one it holds.
ELSEWHERE = re.compile(r"\bDESIGN\s*§|\b(?:DESIGN|KAFKA_INTEROP|RUNTIME_NOTES|STYLE)\.md\b")
MARKDOWN = re.compile(r"\b[\w.-]+\.md\b")


@functools.cache
def tracked_files() -> list[Path]:
    """The repository's files under SCANNED (git's list when there is one, else every file there)."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z", "--", *SCANNED], cwd=REPO, capture_output=True,
                                check=True).stdout.decode().split("\0")
        files = [REPO / name for name in listed if name]
    except (OSError, subprocess.CalledProcessError):
        files = []
    if not files:
        files = [p for name in SCANNED for p in ([REPO / name] if (REPO / name).is_file()
                                                  else (REPO / name).rglob("*")) if p.is_file()]
    return [p for p in files if p.is_file() and "__pycache__" not in p.parts]


@functools.cache
def text_files() -> dict[Path, str]:
    """Each tracked text file's contents (binary files and recorded client frames are not text)."""
    out = {}
    for path in tracked_files():
        if "fixtures" in path.relative_to(REPO).parts or path == Path(__file__).resolve():
            continue
        data = path.read_bytes()
        if b"\0" in data:
            continue
        try:
            out[path] = data.decode()
        except UnicodeDecodeError:
            continue
    return out


def test_no_module_is_longer_than_600_lines_without_saying_why():
    too_long = []
    for path in sorted((REPO / "mmlog").rglob("*.py")):
        text = path.read_text()
        lines = len(text.splitlines())
        if lines <= MAX_LINES:
            continue
        doc = " ".join((ast.get_docstring(ast.parse(text)) or "").split())
        if LONGER not in doc:
            too_long.append(f"{path.relative_to(REPO)}: {lines} lines")
    assert not too_long, (f"split these, or say in the module docstring why they are {LONGER} ...:\n"
                          + "\n".join(too_long))


def tools_imports_of_tests(path: Path) -> list[str]:
    """Where a file imports a module of tests/, puts tests/ on sys.path, or runs a module of tests/."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        if any(n == "tests" or n.startswith("tests.") for n in names):
            found.append(f"line {node.lineno}: imports {', '.join(names)}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
                "insert", "append", "extend") and ast.unparse(node.func.value) == "sys.path":
            if re.search(r"\btests\b", ast.unparse(node)):
                found.append(f"line {node.lineno}: puts tests/ on sys.path")
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and re.fullmatch(r"tests(\.\w+)+", node.value):
            found.append(f"line {node.lineno}: runs {node.value}")
        if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)) and node.args \
                and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module" \
                and re.match(r"['\"]tests\b", ast.unparse(node.args[0])):
            found.append(f"line {node.lineno}: imports {ast.unparse(node.args[0])}")
    return sorted(found, key=lambda f: int(f.split(":")[0].split()[1]))


def test_tools_import_nothing_of_tests():
    """Benchmarks and soaks stand on mmlog (mmlog.testing holds the fixtures they share), never on tests/."""
    wrong = [f"{path.relative_to(REPO)} {where}" for path in sorted((REPO / "tools").rglob("*.py"))
             for where in tools_imports_of_tests(path)]
    assert not wrong, "\n".join(wrong)


def test_the_tools_check_sees_each_way_in(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("import sys\nsys.path.insert(0, str(ROOT / 'tests'))\nfrom tests.cluster import x\n"
                      "import tests.faults\nargs = ['-m', 'tests.interop.worker']\nfrom mmlog.testing import y\n")
    found = tools_imports_of_tests(sample)
    assert [f.split(":")[0] for f in found] == ["line 2", "line 3", "line 4", "line 5"], found


def test_no_issue_numbers():
    hits = [f"{path.relative_to(REPO)}:{n}: {line.strip()}" for path, text in text_files().items() if ISSUE.search(text)
            for n, line in enumerate(text.splitlines(), 1) if ISSUE.search(line) and not COLOUR.search(line)]
    assert not hits, "cite no issues or pull requests by number; say what and why instead:\n" + "\n".join(hits)


def test_the_issue_pattern():
    # The examples are made at run time, so that this file cites no number itself.
    n = 20
    for cited in (f"issue #{n}", f"Issue {n}", f"fixed (#{n})", f"as #{n} found", f"PR #{n}",
                  f"see issues {n} and 4"):
        assert ISSUE.search(cited), cited
    for fine in ("# a comment", "## Heading", f"{{crc:#{0}{n}x}}", f"&#{n};", f'"#{n}{n}"', f"page#{n}",
                 "partition 2", "the issue is", "#!/bin/sh"):
        assert not ISSUE.search(fine), fine


def test_no_documents_cited_that_the_repository_does_not_hold():
    held = {p.name for p in tracked_files() if p.suffix == ".md"} | {"README.md"}
    hits = []
    for path, text in text_files().items():
        for n, line in enumerate(text.splitlines(), 1):
            missing = [m for m in MARKDOWN.findall(line) if m not in held]
            if ELSEWHERE.search(line) or missing:
                hits.append(f"{path.relative_to(REPO)}:{n}: {line.strip()}")
    assert not hits, "cite only documents in the repository:\n" + "\n".join(hits)


# A path into the repository as the docs cite one: mmlog/..., tests/..., tools/..., docs/... (a glob like
# tools/bench_*.py is not a path).
CITED_PATH = re.compile(r"(?<![\w/.-])((?:mmlog|tests|tools|docs)/[\w./-]*[\w/])(?![\w*])")


def test_every_path_the_docs_cite_exists():
    hits = []
    for path, text in text_files().items():
        if path.suffix != ".md":
            continue
        for n, line in enumerate(text.splitlines(), 1):
            hits += [f"{path.relative_to(REPO)}:{n}: {cited}" for cited in CITED_PATH.findall(line)
                     if not (REPO / cited.rstrip(".")).exists()]
    assert not hits, "the docs cite paths that are not in the repository:\n" + "\n".join(hits)
