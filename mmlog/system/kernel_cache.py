"""Where numba keeps mmlog's compiled kernels: a directory of their own for each state of the sources.

numba checks a cached function against its own source file only (that file's size and time), not against
the functions it calls from other modules. The compiled request loop (processors/compiled/loop.py) calls
into produce_path, fetch_path and the append kernel: after a change to one of those alone, as a `git pull`
of an editable install brings, the cached loop would go on running the old code. So the cache lives in a
directory named after a fingerprint of every source file of the package (path, size, modification time):
changed sources start a fresh cache, which the first broker (or the test suite's warm-up) fills, and
directories of earlier states are removed once nothing has used them for a day.

numba reads NUMBA_CACHE_DIR when it is imported, and processes started from this one inherit it; a
NUMBA_CACHE_DIR the user set is left alone (CACHE_ENV tells ours from theirs).
"""

from __future__ import annotations

import os
import sys
import time
import zlib

from mmlog.system import user_cache

CACHE_ENV = "MMLOG_KERNEL_CACHE"  # the cache directory this module chose (so a child process knows it is ours)
PREFIX = "kernels-"
STALE_S = 86_400  # a directory of other sources unused this long is removed
TOUCH_S = 3_600  # how stale the current directory's time may get before a process marks it in use again
PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # os.path, not pathlib: every import of
# mmlog runs this module, and a client that needs nothing else should not pay for pathlib's imports


def fingerprint(package: str) -> str:
    """A CRC-32 of every .py file under package: its path, size and modification time (zlib's, not hashlib's:
    every process that imports mmlog computes it, and hashlib alone takes 4 ms to import)."""
    lines = []
    _list(package, len(package) + 1, lines)
    lines.sort()
    return f"{zlib.crc32(chr(10).join(lines).encode()):08x}"


def _list(directory: str, strip: int, lines: list) -> None:
    with os.scandir(directory) as entries:
        for entry in entries:
            if entry.name.endswith(".py") and entry.is_file():
                st = entry.stat()
                lines.append(f"{entry.path[strip:]}\0{st.st_size}\0{st.st_mtime_ns}")
            elif entry.is_dir() and entry.name != "__pycache__":
                _list(entry.path, strip, lines)


def base_directory(package: str) -> str | None:
    """Where the cache directories go: the package's own __pycache__ when this process may write there (an
    editable install, a checkout: numba's own default), else the user's cache directory when it is theirs
    alone (system/user_cache.py: a cache's code runs in the broker); None when neither will do."""
    if _writable(os.path.join(package, "__pycache__")):
        return os.path.join(package, "__pycache__")
    user = user_cache.directory()
    if user is not None and _writable(user, mode=0o700) and user_cache.trusted(user):
        return user
    return None


def _writable(directory: str, mode: int = 0o777) -> bool:
    """Whether this process can create files in directory (made if missing). access(2) answers for most; it
    ignores capabilities (a broker run as another user keeps root's: testing.as_user), so a no is tried, as
    numba tries, with a file created and removed."""
    try:
        os.makedirs(directory, mode=mode, exist_ok=True)
    except OSError:
        return False
    if os.access(directory, os.W_OK | os.X_OK):
        return True
    probe = os.path.join(directory, f".probe-{os.getpid()}")
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        os.unlink(probe)
        return True
    except OSError:
        return False


def configure(package: str = PACKAGE) -> str | None:
    """Point numba's cache at this state of the sources' directory (unless the user chose one); the
    directory, or None when left to numba's default."""
    given = os.environ.get("NUMBA_CACHE_DIR")
    if given and given != os.environ.get(CACHE_ENV):
        return None  # the user's own choice
    base = base_directory(package)
    if base is None:
        return None
    path = os.path.join(base, PREFIX + fingerprint(package))
    os.environ["NUMBA_CACHE_DIR"] = os.environ[CACHE_ENV] = path
    config = sys.modules.get("numba.core.config")
    if config is not None:  # numba was imported first: it has read the variable already
        config.CACHE_DIR = path
    _remove_stale(base, path)
    return path


def _remove_stale(base: str, current: str) -> None:
    """Remove the directories of other states of the sources that nothing has used for STALE_S (best effort:
    another process may be removing them too)."""
    now = time.time()
    try:
        os.makedirs(current, exist_ok=True)
        if now - os.stat(current).st_mtime > TOUCH_S:
            os.utime(current)  # in use: its time says so to the processes of other states
        others = [e.path for e in os.scandir(base) if e.name.startswith(PREFIX) and e.path != current]
    except OSError:
        return
    for other in others:
        try:
            if now - os.stat(other).st_mtime > STALE_S:
                import shutil

                shutil.rmtree(other, ignore_errors=True)
        except OSError:
            pass
