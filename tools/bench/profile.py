"""`--profile`: py-spy records mmlog's client and broker processors during a run, and the top frames are
summarised from py-spy's raw (collapsed-stack) output.

py-spy attaches to the processes by pid (root, or ptrace allowed), samples 200
times a second without pausing them (`--nonblocking`), and leaves idle threads
out, so a percentage is a share of the samples in which a thread was running
Python code. A raw line is `thread;frame;frame;...;leaf count`, root first.
"""

from __future__ import annotations

import collections
import contextlib
import shutil
import signal
import subprocess
import time
from pathlib import Path

ATTACH = 0.5  # seconds py-spy is given to attach before the measured part starts


@contextlib.contextmanager
def maybe(cfg, name: str, client_pid: int, server_pids: list[int], log):
    """Profile the client and the server processes while the block runs, if cfg.profile is set."""
    if not cfg.profile:
        yield
        return
    if shutil.which("py-spy") is None:
        log("--profile: py-spy is not installed (pip install py-spy); not profiling")
        yield
        return
    out = Path(cfg.out) / "profiles"
    out.mkdir(parents=True, exist_ok=True)
    spies = []
    for role, pid in [("client", client_pid)] + [(f"broker-{p}", p) for p in server_pids]:
        path = out / f"{name}-{role}.txt"
        cmd = ["py-spy", "record", "--pid", str(pid), "--format", "raw", "--nonblocking", "--nolineno", "--rate", "200",
               "--threads", "--output", str(path)]
        spies.append((role, path, subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                                   stderr=subprocess.DEVNULL)))
    time.sleep(ATTACH)
    try:
        yield
    finally:
        for _, _, spy in spies:
            if spy.poll() is None:
                spy.send_signal(signal.SIGINT)  # py-spy writes its output on ^C (and when its target exits)
        for _, _, spy in spies:
            try:
                spy.wait(30)
            except subprocess.TimeoutExpired:
                spy.kill()
                spy.wait()
        busiest = max((p for _, p, _ in spies[1:] if p.exists()), key=lambda p: samples(p)[0], default=None)
        for role, path, _ in spies:
            if path.exists() and (role == "client" or path == busiest):
                summary = summarize(path)
                path.with_suffix(".summary.txt").write_text(summary)
                log(f"profile {path.name}:\n{summary}")


def samples(path: Path) -> tuple[int, list[tuple[list[str], int]]]:
    """(total samples, [(stack root first, count)]) of a py-spy raw file."""
    stacks = []
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            stacks.append((stack.split(";"), int(count)))
    return sum(c for _, c in stacks), stacks


def summarize(path: Path, top: int = 12) -> str:
    """The top frames of a profile by own time (leaf) and by total time (on the stack), in % of samples,
    and the share of each thread."""
    total, stacks = samples(path)
    if not total:
        return "no samples\n"
    own, inclusive, threads = collections.Counter(), collections.Counter(), collections.Counter()
    names: dict[str, str] = {}
    for stack, count in stacks:
        frames = stack
        if stack[0].startswith("thread ("):  # `thread (tid)` or `thread (tid): name`
            tid, _, name = stack[0].partition(": ")
            names[tid] = names.get(tid) or name
            threads[tid] += count
            frames = stack[1:]
        own[frames[-1] if frames else "(no Python frame sampled)"] += count
        for frame in set(frames):
            inclusive[frame] += count
    for frame in _root_chains(stacks):  # spawn_main ... Processor.run: no news beyond the thread's share
        inclusive.pop(frame, None)
    lines = [f"{total} samples; threads: " + ", ".join(
        f"{names.get(t) or t} {100 * c / total:.0f}%" for t, c in threads.most_common())]
    lines.append("own time:")
    lines += [f"  {100 * c / total:5.1f}%  {f}" for f, c in own.most_common(top)]
    lines.append("total time:")
    lines += [f"  {100 * c / total:5.1f}%  {f}" for f, c in inclusive.most_common(top)]
    return "\n".join(lines) + "\n"


def _root_chains(stacks, share: float = 0.9) -> set[str]:
    """Per thread, the frames from the root down that lie under at least `share` of its sampled stacks."""
    by_thread: dict[str, list] = collections.defaultdict(list)
    for stack, count in stacks:
        if len(stack) > 1 and stack[0].startswith("thread ("):
            by_thread[stack[0].partition(": ")[0]].append((stack[1:], count))
    chain: set[str] = set()
    for items in by_thread.values():
        total = sum(c for _, c in items)
        depth = 0
        while items:
            counts = collections.Counter()
            for frames, c in items:
                if len(frames) > depth:
                    counts[frames[depth]] += c
            if not counts:
                break
            frame, c = counts.most_common(1)[0]
            if c < share * total:
                break
            chain.add(frame)
            items = [(f, n) for f, n in items if len(f) > depth and f[depth] == frame]
            depth += 1
    return chain
