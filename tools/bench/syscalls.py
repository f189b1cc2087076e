"""System calls counted while a block runs: `perf stat` on the kernel's syscall tracepoints.

A tracepoint count costs the traced process next to nothing (no ptrace stop per call, as `strace -c`
makes), so the counts are those of the load as it runs at full speed. `perf stat -x,` prints one
line per event on stderr when it is interrupted: `count,unit,event,...` (or `<not counted>`).
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import time

# the calls a request can make on the data path; every other call is summed as "other"
NAMED = ("epoll_wait", "epoll_pwait", "recvfrom", "read", "sendto", "sendmsg", "write", "pwrite64", "pwritev",
         "pwritev2", "pread64", "sendfile64", "fcntl", "futex")
TOTAL = "raw_syscalls:sys_enter"
ATTACH_S = 0.3  # perf is given this long to attach before the block starts


class SyscallsUnavailable(RuntimeError):
    """perf is missing, or cannot read the syscall tracepoints (not root, no tracefs)."""


def events() -> list[str]:
    return [TOTAL, *(f"syscalls:sys_enter_{name}" for name in NAMED)]


def parse(stderr: str) -> dict[str, int]:
    """perf stat's CSV lines -> {call name, or "total": count}; a call perf did not count is left out."""
    counts = {}
    for line in stderr.splitlines():
        fields = line.split(",")
        if len(fields) < 3 or not fields[0].strip().isdigit():
            continue
        event = fields[2].strip()
        name = "total" if event == TOTAL else event.removeprefix("syscalls:sys_enter_")
        counts[name] = int(fields[0])
    return counts


@contextlib.contextmanager
def counted(pids: list[int]):
    """Count the system calls of `pids` (all their threads) while the block runs; yields a dict that is
    filled when the block ends: each call of NAMED that was made, "other" and "total"."""
    if shutil.which("perf") is None:
        raise SyscallsUnavailable("perf is not installed (apt-get install -y linux-perf)")
    cmd = ["perf", "stat", "-x", ",", "-e", ",".join(events()), "-p", ",".join(map(str, pids))]
    perf = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    time.sleep(ATTACH_S)
    if perf.poll() is not None:
        raise SyscallsUnavailable(f"perf stat could not count system calls: {perf.stderr.read().strip()[:300]}")
    got: dict[str, int] = {}
    try:
        yield got
    finally:
        perf.send_signal(signal.SIGINT)
        _, err = perf.communicate(timeout=30)
        counts = parse(err)
        if "total" not in counts:
            raise SyscallsUnavailable(f"perf stat counted nothing: {err.strip()[:300]}")
        got.update({name: n for name, n in counts.items() if n})
        got["other"] = counts["total"] - sum(n for name, n in counts.items() if name != "total")
