"""numba's kernel cache is keyed on every source file of the package, so a cached kernel never runs the old code
of a kernel it calls in another module (numba itself checks only the caller's own file)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from mmlog.system import kernel_cache

CALLER = """
from numba import njit
from pkg import callee

@njit(cache=True)
def twice(x):
    return 2 * callee.value(x)
"""


def callee(result: int) -> str:
    return f"from numba import njit\n\n@njit(cache=True)\ndef value(x):\n    return x + {result}\n"


def package(tmp_path: Path) -> Path:
    pkg = tmp_path / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "caller.py").write_text(CALLER)
    (pkg / "callee.py").write_text(callee(1))
    return pkg


def run(pkg: Path, keyed: bool) -> int:
    """twice(10) in a fresh interpreter, numba's cache keyed by kernel_cache (else numba's own, in-tree)."""
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", kernel_cache.CACHE_ENV)}
    env["PYTHONPATH"] = os.pathsep.join([str(pkg.parent), *sys.path])
    code = textwrap.dedent(f"""
        from mmlog.system import kernel_cache
        if {keyed}:
            kernel_cache.configure({str(pkg)!r})
        from pkg import caller
        print(caller.twice(10))
    """)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return int(out.stdout.split()[-1])


def change_callee(pkg: Path, result: int) -> None:
    path = pkg / "callee.py"
    before = path.stat().st_mtime_ns
    path.write_text(callee(result))
    os.utime(path, ns=(before + 10**9, before + 10**9))  # a later time, whatever the clock's resolution


def test_numbas_own_cache_runs_a_callers_old_callee_and_the_keyed_cache_does_not(tmp_path):
    own, keyed = package(tmp_path / "own"), package(tmp_path / "keyed")
    assert run(own, keyed=False) == run(keyed, keyed=True) == 22  # compiled and cached
    for pkg in (own, keyed):
        change_callee(pkg, 5)
    assert run(own, keyed=False) == 22  # numba's limitation: the caller's file did not change, its cache is used
    assert run(keyed, keyed=True) == 30  # a new state of the sources: a new cache, the new code


def test_the_directory_follows_the_sources_and_not_what_caches_beside_them(tmp_path):
    pkg = package(tmp_path)
    first = kernel_cache.fingerprint(str(pkg))
    (pkg / "__pycache__").mkdir()
    (pkg / "__pycache__" / "caller.twice-5.py311.nbi").write_bytes(b"x")
    (pkg / "notes.txt").write_text("not a source")
    assert kernel_cache.fingerprint(str(pkg)) == first
    change_callee(pkg, 2)
    assert kernel_cache.fingerprint(str(pkg)) != first


def test_a_numba_cache_dir_the_user_chose_is_left_alone(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "mine"))
    monkeypatch.delenv(kernel_cache.CACHE_ENV, raising=False)
    assert kernel_cache.configure(str(package(tmp_path))) is None
    assert os.environ["NUMBA_CACHE_DIR"] == str(tmp_path / "mine")


def test_directories_of_other_sources_go_once_unused_for_a_day(tmp_path, monkeypatch):
    pkg = package(tmp_path)
    for name in ("NUMBA_CACHE_DIR", kernel_cache.CACHE_ENV):  # configure sets both: restored after the test
        monkeypatch.delenv(name, raising=False)
    base = pkg / "__pycache__"
    old, recent = base / f"{kernel_cache.PREFIX}0ld", base / f"{kernel_cache.PREFIX}recent"
    for other in (old, recent):
        other.mkdir(parents=True)
    day_ago = time.time() - kernel_cache.STALE_S - 60
    os.utime(old, (day_ago, day_ago))
    current = kernel_cache.configure(str(pkg))
    expected = base / f"{kernel_cache.PREFIX}{kernel_cache.fingerprint(str(pkg))}"
    assert current == os.environ["NUMBA_CACHE_DIR"] == str(expected)
    assert Path(current).is_dir() and recent.is_dir() and not old.exists()


def test_a_package_that_cannot_be_written_keeps_its_kernels_in_the_users_own_cache(tmp_path, monkeypatch):
    pkg = package(tmp_path)
    (pkg / "__pycache__").write_text("a file where the directory would go: nothing can be written there")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert kernel_cache.base_directory(str(pkg)) == str(tmp_path / "cache" / "mmlog")
    os.chmod(tmp_path / "cache" / "mmlog", 0o777)  # others may write it: its code could be anyone's
    assert kernel_cache.base_directory(str(pkg)) is None
