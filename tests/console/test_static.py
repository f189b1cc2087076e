"""The console's pages as shipped: every static file is package data (so `pip install` brings it), and no
script puts data into the page as HTML (no innerHTML, outerHTML, insertAdjacentHTML, document.write, eval):
text goes in as text."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from pathlib import Path

import mmlog.console

STATIC = Path(mmlog.console.__file__).parent / "static"
ROOT = Path(__file__).resolve().parents[2]
AS_HTML = re.compile(r"\b(innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval)\b|new Function\(")


def test_every_static_file_is_package_data():
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["mmlog.console"]
    files = [p.relative_to(STATIC.parent).as_posix() for p in STATIC.rglob("*") if p.is_file()]
    assert files and all(any(fnmatch.fnmatch(f, g) for g in globs) for f in files), files


def test_no_script_writes_html():
    for script in STATIC.rglob("*.js"):
        found = AS_HTML.findall(script.read_text())
        assert not found, f"{script.name}: {found}"


def test_the_page_shell_has_no_inline_script_or_style():
    page = (STATIC / "index.html").read_text()
    assert "<style" not in page and " style=" not in page and not re.search(r"\son[a-z]+=", page)
    assert re.findall(r"<script[^>]*>", page) == ['<script type="module" src="/console/static/app.js">']
