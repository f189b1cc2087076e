"""The user's cache directory for mmlog, and whether code cached there may run: one rule for every cache whose
contents run in the broker (the codec cache's bytecode, the numba kernels' machine code)."""

from __future__ import annotations

import os


def directory() -> str | None:
    """$XDG_CACHE_HOME/mmlog, else ~/.cache/mmlog; None when there is no home ("~" left unexpanded)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "mmlog") if os.path.isabs(base) else None


def trusted(path: str | os.PathLike) -> bool:
    """Whether the directory is this user's own and only theirs to write: code loaded from it runs here."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return st.st_uid == os.geteuid() and not st.st_mode & 0o022
