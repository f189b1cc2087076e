"""Fuzz the broker's framer and request decoder with mutants of real clients' request frames.

    python tools/fuzz_frames.py --cases 120000 --seed 1 [--crashes DIR] [--batch 200] [--all-apis]
    python tools/fuzz_frames.py --replay DIR/crash-1.bin ...

The corpus is tests/fixtures/client_frames (tools/capture_frames.py). A `Mutator` turns
a captured frame into a case: the frame with its body mutated (bit flips, interesting
bytes and int16/int32 values at aligned and unaligned positions, truncation, junk
appended, spans duplicated or removed) and its size prefix fixed, or with a wrong size
prefix, or cut short on the wire; or a stream of good frames with one mutant among them
and a good frame after it. `send_cases` sends cases on many connections at once, each
on its own connection, reading answers until the broker closes it or goes quiet.

The command line starts a fresh broker (EmbeddedBroker, loopback, temp dir) and sends
`--cases` cases in batches; after each batch the broker must still run with the same
processor pids, no process holding more than half its descriptor limit, and answer
ApiVersions on new connections; a watchdog kills it if its processes together pass
`--max-rss-mib`. A batch that breaks that is saved under `--crashes` and replayed on a
fresh broker (in chunks, then case by case) to find the culprits; each is saved as
``crash-<n>.bin`` (the bytes sent on one connection) for `--replay`. Prints cases/s
and the findings.
"""

from __future__ import annotations

import argparse
import os
import random
import selectors
import shutil
import socket
import struct
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "client_frames"

# Kept out of the suite's corpus: a CreateTopics whose partition count is flipped may still make up to
# max.partitions.per.request (10,000) partitions, seconds of work and descriptors in every process that
# a batch of 200 cases cannot afford. `--all-apis` (the soak's setting) keeps them; the suite's storm of
# admin requests on colliding names is tests/acceptor/test_control_storm.py.
EXCLUDED_APIS = {19: "CreateTopics", 37: "CreatePartitions"}

_SIZE = struct.Struct(">i")
INTERESTING_BYTES = (0x00, 0xFF, 0x7F, 0x80, 0x01, 0xFE)
INTERESTING_INT16 = (0, -1, 0x7FFF, -0x8000, 1, 0xFF)
INTERESTING_INT32 = (0, -1, 2**31 - 1, -(2**31), 1, 16_387, 0x7FFF, 0x8000, 1 << 24, 100 * 1024 * 1024 + 1)


def read_frames(data: bytes) -> list[bytes]:
    """Split a capture (size-prefixed frames, concatenated) into frames, prefix included."""
    frames, pos = [], 0
    while pos + 4 <= len(data):
        size = _SIZE.unpack_from(data, pos)[0]
        frames.append(data[pos:pos + 4 + size])
        pos += 4 + size
    return frames


def api_key(frame: bytes) -> int:
    return struct.unpack_from(">h", frame, 4)[0]


def load_corpus(directory: Path = CORPUS, excluded=EXCLUDED_APIS) -> list[bytes]:
    """Every captured frame (prefix included) of an API not excluded, file by file in name order."""
    frames = []
    for path in sorted(Path(directory).glob("*.frames")):
        frames += [f for f in read_frames(path.read_bytes()) if api_key(f) not in excluded]
    return frames


def prefixed(body: bytes) -> bytes:
    return _SIZE.pack(len(body)) + body


@dataclass
class Case:
    """What one connection sends: the bytes, and how they were made (for reports and replay)."""

    data: bytes
    how: str


class Mutator:
    """Seeded mutations of request frames; the same seed gives the same cases."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.body_mutations = [self.bit_flip, self.interesting_byte, self.interesting_int16,
                               self.interesting_int32, self.truncate, self.extend, self.duplicate_span,
                               self.remove_span]

    # --- mutations of a body (the size prefix is fixed afterwards) -----------------------------

    def _pos(self, body: bytearray, width: int = 1) -> int:
        return self.rng.randrange(max(1, len(body) - width + 1))

    def bit_flip(self, body: bytearray) -> str:
        flips = [self._pos(body) * 8 + self.rng.randrange(8) for _ in range(self.rng.choice((1, 1, 2, 4)))]
        for bit in flips:
            body[bit // 8] ^= 0x80 >> (bit % 8)
        return "bit_flip@" + ",".join(str(b) for b in flips)

    def interesting_byte(self, body: bytearray) -> str:
        pos, value = self._pos(body), self.rng.choice(INTERESTING_BYTES)
        body[pos] = value
        return f"byte@{pos}={value:#x}"

    def _write(self, body: bytearray, fmt: str, value: int) -> str:
        width = struct.calcsize(fmt)
        pos = self._pos(body, width)
        if self.rng.random() < 0.5:
            pos -= pos % width  # aligned to the value's width (within the body)
        if len(body) < pos + width:
            body.extend(bytes(pos + width - len(body)))
        struct.pack_into(fmt, body, pos, value)
        return f"{fmt}@{pos}={value}"

    def interesting_int16(self, body: bytearray) -> str:
        value = self.rng.choice(INTERESTING_INT16)
        return self._write(body, ">h" if value < 0x8000 else ">H", value)

    def interesting_int32(self, body: bytearray) -> str:
        return self._write(body, ">i", self.rng.choice(INTERESTING_INT32))

    def truncate(self, body: bytearray) -> str:
        keep = self.rng.randrange(len(body))
        del body[keep:]
        return f"truncate@{keep}"

    def extend(self, body: bytearray) -> str:
        junk = self.rng.randbytes(self.rng.choice((1, 4, 16, 64, 300)))
        body += junk
        return f"extend+{len(junk)}"

    def duplicate_span(self, body: bytearray) -> str:
        start = self._pos(body)
        end = min(len(body), start + self.rng.choice((1, 2, 4, 8, 32, 256)))
        at = self.rng.randrange(len(body) + 1)
        body[at:at] = body[start:end]
        return f"dup[{start}:{end}]@{at}"

    def remove_span(self, body: bytearray) -> str:
        start = self._pos(body)
        end = min(len(body), start + self.rng.choice((1, 2, 4, 8, 32)))
        del body[start:end]
        return f"del[{start}:{end}]"

    # --- cases -----------------------------------------------------------------------------------

    def mutate(self, frame: bytes) -> Case:
        """One mutant of a frame (prefix included): a body mutation or three, a wrong prefix, or a cut."""
        roll = self.rng.random()
        if roll < 0.08:
            return self.wrong_size(frame)
        if roll < 0.12:
            keep = self.rng.randrange(1, len(frame))
            return Case(frame[:keep], f"cut@{keep}")  # the peer stops mid-frame
        body = bytearray(frame[4:])
        steps = [(self.rng.choice(self.body_mutations) if body else self.extend)(body)
                 for _ in range(self.rng.choice((1, 1, 1, 2, 3)))]
        return Case(prefixed(bytes(body)), " ".join(steps))

    def wrong_size(self, frame: bytes) -> Case:
        """The body under a size prefix that is off by a little, zero, negative, above the limit, or big
        and legal (16 MiB, 100 MiB: the framer must not pay for bytes that never come)."""
        body = frame[4:]
        size = self.rng.choice((len(body) + self.rng.choice((-4, -1, 1, 2, 64)), 0, -1, -(2**31), 2**31 - 1,
                                100 * 1024 * 1024 + 1, self.rng.randrange(len(body) + 1),
                                1 << 24, 100 * 1024 * 1024))
        return Case(struct.pack(">i", size) + body, f"size={size}")

    def case(self, corpus: list[bytes]) -> Case:
        """A mutant alone (80%) or a stream: good frames, a mutant, then a good frame."""
        if self.rng.random() < 0.8:
            return self.mutate(self.rng.choice(corpus))
        before = [self.rng.choice(corpus) for _ in range(self.rng.randrange(1, 4))]
        bad = self.mutate(self.rng.choice(corpus))
        after = self.rng.choice(corpus)
        return Case(b"".join(before) + bad.data + after, f"stream {len(before)} good, {bad.how}, 1 good")


# --- sending ------------------------------------------------------------------------------------

def send_cases(address: tuple[str, int], cases: list[Case], *, parallel: int = 32, quiet: float = 0.15,
               limit: float = 1.0) -> dict[str, int]:
    """Send each case on its own connection, `parallel` at a time, reading until the broker closes
    it, is `quiet` seconds without answering, or `limit` seconds pass. Returns counts of outcomes
    (closed by the broker, quiet, or refused)."""
    sel = selectors.DefaultSelector()
    todo = list(reversed(cases))
    outcomes = {"closed": 0, "quiet": 0, "refused": 0}
    open_ = {}

    def start(case: Case) -> None:
        sock = socket.socket()
        sock.setblocking(False)
        try:
            sock.connect(address)
        except BlockingIOError:
            pass
        now = time.monotonic()
        open_[sock] = [case.data, now + limit, now + quiet]
        sel.register(sock, selectors.EVENT_WRITE)

    def finish(sock: socket.socket, outcome: str) -> None:
        outcomes[outcome] += 1
        sel.unregister(sock)
        del open_[sock]
        sock.close()

    while todo or open_:
        while todo and len(open_) < parallel:
            start(todo.pop())
        for key, mask in sel.select(0.02):
            sock = key.fileobj
            state = open_[sock]
            now = time.monotonic()
            try:
                if mask & selectors.EVENT_WRITE and state[0]:
                    sent = sock.send(state[0])
                    state[0] = state[0][sent:]
                    state[2] = now + quiet
                    if not state[0]:
                        sel.modify(sock, selectors.EVENT_READ)
                elif mask & selectors.EVENT_READ:
                    if not sock.recv(1 << 16):
                        finish(sock, "closed")
                        continue
                    state[2] = now + quiet
            except BlockingIOError:
                pass
            except ConnectionRefusedError:
                finish(sock, "refused")
            except OSError:
                finish(sock, "closed")
        now = time.monotonic()
        for sock, (_, deadline, quiet_by) in list(open_.items()):
            if now > deadline or now > quiet_by:
                finish(sock, "quiet")
    sel.close()
    return outcomes


# --- health -------------------------------------------------------------------------------------

def answers(address: tuple[str, int], timeout: float = 5.0, request: bytes | None = None) -> bool:
    """True if the broker answers a request (by default ApiVersions v0; correlation id 7) on a new
    connection within the timeout."""
    request = request or prefixed(struct.pack(">hhih", 18, 0, 7, 4) + b"fuzz")
    try:
        with socket.create_connection(address, timeout=timeout) as sock:
            sock.sendall(request)
            got = b""
            while len(got) < 8:
                chunk = sock.recv(4096)
                if not chunk:
                    return False
                got += chunk
            return _SIZE.unpack_from(got, 4)[0] == 7
    except OSError:
        return False


def fd_usage(pid: int) -> tuple[int, int]:
    """(open descriptors, soft limit) of a process."""
    with open(f"/proc/{pid}/limits") as limits:
        limit = next(int(line.split()[3]) for line in limits if line.startswith("Max open files"))
    return len(os.listdir(f"/proc/{pid}/fd")), limit


# ListGroups v0 (correlation id 7): answered by the main process's group coordinator, through the control
# plane. A broker whose control plane died or stalls (a zombie) still answers ApiVersions, but not this.
LIST_GROUPS = prefixed(struct.pack(">hhih", 16, 0, 7, 4) + b"fuzz")


class Health:
    """Whether a broker is as it was: running, the same processor pids, descriptors to spare, answering on
    every processor, and its control plane answering."""

    def __init__(self, broker) -> None:
        self.broker = broker
        self.reset()

    def reset(self) -> None:
        self.pids = sorted(self.broker.processor_pids())

    def problems(self, probes: int = 4) -> list[str]:
        broker = self.broker
        if broker.proc.poll() is not None:
            return [f"broker exited with {broker.proc.returncode}"]
        found = []
        pids = sorted(broker.processor_pids())
        if pids != self.pids:
            found.append(f"processor pids {self.pids} -> {pids}")
        for pid in [broker.pid, *pids]:
            try:
                used, limit = fd_usage(pid)
            except (FileNotFoundError, ProcessLookupError):
                continue
            if used > limit // 2:  # a broker out of descriptors can neither accept nor create topics
                found.append(f"pid {pid} holds {used} of its {limit} descriptors")
        address = ("127.0.0.1", broker.port)
        if not all(answers(address) for _ in range(probes)):  # connections are spread over the processors
            found.append("broker does not answer ApiVersions")
        elif not answers(address, request=LIST_GROUPS):
            found.append("the control plane does not answer ListGroups")
        return found


def tree_rss(broker) -> int:
    """Resident bytes of the broker's main process and its processors (shared pages counted in each)."""
    total = 0
    for pid in [broker.pid, *broker.processor_pids()]:
        try:
            with open(f"/proc/{pid}/status") as status:
                total += next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS:"))
        except (FileNotFoundError, StopIteration, ProcessLookupError):
            pass
    return total


class Watchdog:
    """Kills a broker whose processes grow past max_rss bytes (a mutant must not take the machine)."""

    def __init__(self, broker, max_rss: int) -> None:
        self.broker, self.max_rss = broker, max_rss
        self.tripped: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            rss = tree_rss(self.broker)
            if rss > self.max_rss:
                self.tripped = f"RSS {rss >> 20} MiB above {self.max_rss >> 20} MiB: broker killed"
                self.broker.kill()
                return

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


# --- the command line ---------------------------------------------------------------------------

def fresh_broker():
    from mmlog.testing import EmbeddedBroker
    return EmbeddedBroker(processors=2, config={"connections.max.idle.ms": 10_000,
                                                "controlled.shutdown.timeout.ms": 5_000}).start()


class Target:
    """The broker being fuzzed, with its health baseline and watchdog; `renew()` replaces a broken one."""

    def __init__(self, max_rss: int) -> None:
        self.max_rss = max_rss
        self._start()

    def _start(self) -> None:
        self.broker = fresh_broker()
        self.health = Health(self.broker)
        self.watchdog = Watchdog(self.broker, self.max_rss)

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.broker.port)

    def problems(self, probes: int = 4) -> list[str]:
        found = self.health.problems(probes)
        return found + [self.watchdog.tripped] if self.watchdog.tripped else found

    def renew(self) -> None:
        """After a finding: a new broker unless this one still answers (its replaced processors as the baseline)."""
        if self.watchdog.tripped or self.broker.proc.poll() is not None or not answers(self.address):
            self.close()
            self._start()
        self.health.reset()

    def close(self) -> None:
        """Stop the broker, wait for its processors to be gone too, and remove its temp data dir."""
        self.watchdog.close()
        pids = self.broker.processor_pids()
        self.broker.stop(timeout=10)
        deadline = time.monotonic() + 10
        while any(os.path.exists(f"/proc/{pid}") for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        shutil.rmtree(self.broker.data_dir, ignore_errors=True)


def replay(cases: list[Case], max_rss: int, chunk: int = 20) -> list[tuple[Case, list[str]]]:
    """Send the cases to a fresh broker, `chunk` at a time, then one at a time those of a chunk after
    which it was not as it was; return the single cases that break it, with why."""
    target = Target(max_rss)
    culprits = []
    try:
        for start in range(0, len(cases), chunk):
            group = cases[start:start + chunk]
            if len(group) > 1:
                send_cases(target.address, group, limit=2.0, quiet=0.5)
                if not target.problems(probes=2):
                    continue
                target.renew()
            for case in group:
                send_cases(target.address, [case], limit=2.0, quiet=0.5)
                found = target.problems(probes=2)
                if found:
                    culprits.append((case, found))
                    target.renew()
    finally:
        target.close()
    return culprits


def fuzz(cases: int, seed: int, crashes: Path, batch: int, parallel: int, excluded, max_rss: int) -> dict:
    corpus = load_corpus(excluded=excluded)
    mutator = Mutator(seed)
    target = Target(max_rss)
    started, done, findings, outcomes = time.monotonic(), 0, [], {}
    try:
        while done < cases:
            group = [mutator.case(corpus) for _ in range(min(batch, cases - done))]
            for k, v in send_cases(target.address, group, parallel=parallel).items():
                outcomes[k] = outcomes.get(k, 0) + v
            done += len(group)
            found = target.problems()
            if found:
                log_tail = target.broker.log_lines[-40:]
                print(f"after {done} cases: {'; '.join(found)}", flush=True)
                target.renew()
                findings += save_findings(crashes, group, found, log_tail, max_rss)
            if done % (batch * 25) == 0:
                elapsed = time.monotonic() - started
                print(f"{done} cases, {done / elapsed:.0f} cases/s, {len(findings)} findings", flush=True)
    finally:
        target.close()
    elapsed = time.monotonic() - started
    return {"cases": done, "seconds": elapsed, "rate": done / elapsed, "findings": findings, "outcomes": outcomes}


def save_findings(crashes: Path, group: list[Case], found: list[str], log_tail: list[str], max_rss: int) -> list[str]:
    """Save a failing batch, find its culprits by replay on a fresh broker, save each as crash-<n>.bin."""
    crashes.mkdir(parents=True, exist_ok=True)
    n = len(list(crashes.glob("batch-*"))) + 1
    batch_dir = crashes / f"batch-{n}"
    batch_dir.mkdir()
    for i, case in enumerate(group):
        (batch_dir / f"{i:04d}.bin").write_bytes(case.data)
    (batch_dir / "cases.txt").write_text("".join(f"{i:04d} {c.how}\n" for i, c in enumerate(group)))
    (batch_dir / "broker.log").write_text("\n".join(log_tail) + "\n" + "\n".join(found) + "\n")
    saved = []
    for case, why in replay(group, max_rss):
        k = len(list(crashes.glob("crash-*.bin"))) + 1
        path = crashes / f"crash-{k}.bin"
        path.write_bytes(case.data)
        path.with_suffix(".txt").write_text(f"{case.how}\n{'; '.join(why)}\n")
        print(f"  culprit {path}: {case.how}: {'; '.join(why)}", flush=True)
        saved.append(str(path))
    if not saved:
        saved.append(f"{batch_dir} (no single case reproduces it)")
    return saved


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--cases", type=int, default=120_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--batch", type=int, default=200, help="cases between health checks")
    parser.add_argument("--parallel", type=int, default=32, help="connections open at once")
    parser.add_argument("--crashes", type=Path, default=Path(tempfile.gettempdir()) / "mmlog-fuzz-crashes")
    parser.add_argument("--replay", type=Path, nargs="*", help="send these saved cases instead of fuzzing")
    parser.add_argument("--all-apis", action="store_true",
                        help=f"keep {', '.join(EXCLUDED_APIS.values())} in the corpus (see EXCLUDED_APIS)")
    parser.add_argument("--max-rss-mib", type=int, default=1024, help="kill the broker above this (all processes)")
    args = parser.parse_args(argv)
    max_rss = args.max_rss_mib << 20
    if args.replay:
        culprits = replay([Case(p.read_bytes(), str(p)) for p in args.replay], max_rss)
        for case, why in culprits:
            print(f"{case.how}: {'; '.join(why)}")
        print(f"{len(culprits)} of {len(args.replay)} cases break the broker")
        return 1 if culprits else 0
    result = fuzz(args.cases, args.seed, args.crashes, args.batch, args.parallel,
                  {} if args.all_apis else EXCLUDED_APIS, max_rss)
    print(f"{result['cases']} cases in {result['seconds']:.0f} s ({result['rate']:.0f} cases/s), seed {args.seed}; "
          f"connections: {result['outcomes']}")
    print(f"{len(result['findings'])} findings" + "".join(f"\n  {f}" for f in result["findings"]))
    return 1 if result["findings"] else 0


if __name__ == "__main__":
    sys.exit(main())
