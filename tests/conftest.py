"""Suite-wide set-up: numba's caches are filled once before the first broker starts.

On a fresh clone the kernels have no cache (`__pycache__/*.nbi` beside their modules), and the
first broker a test starts compiles them all: about 40 s of CPU, minutes of wall time on a busy
machine, past a broker fixture's ready timeout. Compiling them here, once, in a child process (so
this one stays small), leaves every broker a warm cache.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import mmlog

WARM = ("from mmlog.acceptor.main import compaction_kernels, kernels, precompile;"
        "kernels.warm(); compaction_kernels.warm(); precompile()")


def _cache_is_cold() -> bool:
    if os.environ.get("NUMBA_CACHE_DIR"):
        return not any(Path(os.environ["NUMBA_CACHE_DIR"]).rglob("*.nbi"))
    return not any(Path(mmlog.__file__).parent.rglob("__pycache__/*.nbi"))


def pytest_sessionstart(session) -> None:
    if not _cache_is_cold():
        return
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", WARM], check=True)
    session.config.get_terminal_writer().line(
        f"numba kernels compiled into a cold cache in {time.monotonic() - started:.0f} s")
