"""The broker's metrics: counters and histogram buckets in one shared block, one region per writing process.

Theory of operation. The main process maps the block (anonymous, MAP_SHARED)
before it forks anything, so every processor, the log cleaner and the main
process itself see the same int64 words. The block is cut into equal *regions*:

    region 0        BASE: what dead processes counted (folded in when they are reaped)
    region 1        MAIN: the main process (processor restarts, flushes on the control thread)
    region 2        CLEANER: the log cleaner process
    region 3 + s    the processor of slot s

Each region has one writing process (in the main process, each word one thread),
so an increment is a plain `words[i] += n` on a memoryview: no lock, no atomic
instruction, no message. A reader (the main process, when Prometheus scrapes)
sums the regions word by word with numpy; aligned 8-byte stores are atomic on the
machines we run on, so a word is never torn, and counters only ever grow.

A process that dies leaves its region behind: the supervisor, after reaping it and
before starting its replacement, `fold`s the region's counters into BASE and zeroes
the region (gauges are zeroed, not folded: a dead processor has no connections).
So every counter a scrape shows stays monotonic across processor restarts, and a
survivor's counts are never touched. Folding and scraping hold one lock (main
process only), so no scrape sees a count in both places.

Region layout (int64 words; API = a Kafka API key, below MAX_API):

    REQUESTS   + api                              requests done (their responses written)
    ERRORS     + api * ERROR_SLOTS + code + 1     error codes answered (code -1 .. 126; 0 never counted)
    LATENCY    + (kind * MAX_API + api) * HIST    histograms per API and phase (KINDS: queue, local,
                                                  remote, send, total)
    FLUSH      + HIST                             log flush time
    SCALARS    + one word per name in SCALARS     counters (bytes in/out, cleaner figures, ...)
    GAUGES     + one word per name in GAUGES      values (connections open, ...), not folded

A histogram is BUCKETS words (one per upper bound in BOUNDS_US, then +Inf), not
cumulative, and one word of summed microseconds; its count is the sum of its
buckets, so a scrape's `_count` always equals its `+Inf` bucket.

A request is counted once, when its response's last byte is written (or, with no
response, when its handler is done), as Kafka's RequestChannel does: one call of the
numba kernel `record_request` (plain-Python reference `record_request_py`; tests
compare them), which counts it and updates its four or five phase histograms. In
Python that was 4-5 µs a request on the loaded 2-core machine, in the kernel about
a third of it (docs/benchmarks.md).
"""

from __future__ import annotations

import mmap
import threading
from bisect import bisect_left

import numpy as np
from numba import njit

MAX_API = 80  # Kafka's API keys stay below this (75 is the highest in Kafka 3.9)
ERROR_SLOTS = 128  # error codes -1 .. 126; anything above counts in the last slot
# Latency bucket upper bounds, in microseconds (shown in ms): sub-ms for Produce/Metadata,
# seconds for long polls and acks=all waits.
BOUNDS_US = (100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
             1_000_000, 2_500_000, 5_000_000, 10_000_000, 30_000_000)
BUCKETS = len(BOUNDS_US) + 1
HIST = BUCKETS + 1  # buckets, then the sum in microseconds
# The phases of a request, as Kafka's RequestMetrics times them (RequestChannel.updateRequestMetrics):
#   QUEUE   its frame fully received (the read that completed it) -> its handler starts
#   LOCAL   in its handler (and encoding its response, when answered at once)
#   REMOTE  waiting after its handler: a parked fetch, an acks=all produce, the control plane; only
#           requests that waited are counted (most never wait: their zeros would bury the waits)
#   SEND    its response queued -> the last byte written to the socket (a sendfile fetch to a slow reader)
#   TOTAL   received -> last byte written (the four above, and the response's wait behind earlier ones)
# Requests answered with nothing (acks=0) count a send time of 0 and end when their handler does.
KINDS = ("queue", "local", "remote", "send", "total")
QUEUE, LOCAL, REMOTE, SEND, TOTAL = range(len(KINDS))

SCALARS = ("bytes_in", "messages_in", "bytes_out", "replication_bytes_out", "connections_created",
           "connections_closed", "processor_restarts", "processor_failures",
           "cleaner_passes", "cleaner_bytes_read", "cleaner_bytes_written", "cleaner_records_read",
           "cleaner_records_kept", "partition_evictions", "requests_compiled")
GAUGES = ("connections", "cleaner_last_pass_us", "catalogue_checks")

REQUESTS = 0
ERRORS = REQUESTS + MAX_API
LATENCY = ERRORS + MAX_API * ERROR_SLOTS
FLUSH = LATENCY + len(KINDS) * MAX_API * HIST
SCALAR = {name: FLUSH + HIST + i for i, name in enumerate(SCALARS)}
GAUGE_BASE = FLUSH + HIST + len(SCALARS)
GAUGE = {name: GAUGE_BASE + i for i, name in enumerate(GAUGES)}
REGION_WORDS = GAUGE_BASE + len(GAUGES)

BASE, MAIN, CLEANER = 0, 1, 2
FIRST_PROCESSOR = 3
# Word offsets the hot-path methods use, computed once (a dict lookup per increment shows at 50k requests/s).
_BYTES_IN, _MESSAGES_IN = SCALAR["bytes_in"], SCALAR["messages_in"]
_BYTES_OUT, _REPLICATION_BYTES_OUT = SCALAR["bytes_out"], SCALAR["replication_bytes_out"]


_KIND_STRIDE = MAX_API * HIST


def latency_at(kind: int, api: int) -> int:
    """The first word of an API's histogram of one phase (QUEUE ... TOTAL)."""
    return LATENCY + (kind * MAX_API + api) * HIST


def latency(totals, kind: int, api: int) -> tuple:
    """(bucket counts, summed µs) of an API's histogram of one phase, from summed regions."""
    at = latency_at(kind, api)
    return totals[at:at + BUCKETS], int(totals[at + BUCKETS])


def bucket_of(us: int) -> int:
    """The bucket a duration falls in: the first bound it does not exceed (+Inf past the last)."""
    return bisect_left(BOUNDS_US, us)


_BOUNDS = np.array(BOUNDS_US, dtype=np.int64)  # a constant in the kernel: one array fewer to pass a call


def record_request_py(words, api, count, arrived, received, handled, answered, written):
    """Count `count` requests of one API and their phases (seconds, monotonic): frame complete at `arrived`,
    handler from `received` to `handled`, response queued at `answered` (after `handled` only if it
    waited: remote time, else not counted), its last byte written at `written`."""
    words[REQUESTS + api] += count
    stamps = (arrived, received, handled, answered, written)
    at = LATENCY + api * HIST
    for kind in range(SEND + 1):  # QUEUE, LOCAL, REMOTE, SEND: from one stamp to the next
        if kind != REMOTE or answered > handled:
            us = max(int((stamps[kind + 1] - stamps[kind]) * 1e6), 0)  # a resumed starved reader's frame
            words[at + np.searchsorted(_BOUNDS, us)] += count
            words[at + BUCKETS] += us * count
        at += _KIND_STRIDE
    us = max(int((written - arrived) * 1e6), 0)  # TOTAL
    words[at + np.searchsorted(_BOUNDS, us)] += count
    words[at + BUCKETS] += us * count


record_request = njit(cache=True, nogil=True)(record_request_py)


def warm() -> None:
    """Compile the kernel (before forking: processors inherit it)."""
    record_request(np.zeros(REGION_WORDS, np.int64), 0, 1, 0.0, 0.0, 0.0, 0.0, 0.0)


class Region:
    """One process's words: what that process counts. Methods are its hot-path increments."""

    __slots__ = ("words", "array")
    on = True  # False for NULL_REGION: callers skip work that only feeds metrics

    def __init__(self, words: memoryview) -> None:
        self.words = words
        self.array = np.frombuffer(words, dtype=np.int64)  # the same words, for the kernel

    def request(self, api: int, count: int, arrived: float, received: float, handled: float, answered: float,
                written: float) -> None:
        """`count` requests of one API done: their count and phases (`record_request`). About 1 µs: a run of
        pipelined Produce requests answered together is counted with one call."""
        record_request(self.array, api, count, arrived, received, handled, answered, written)

    def error(self, api: int, code: int, count: int = 1) -> None:
        """A non-zero error code answered by an API (once per partition or resource that carries it)."""
        self.words[ERRORS + api * ERROR_SLOTS + min(max(code, -1), ERROR_SLOTS - 2) + 1] += count

    def add(self, name: str, n: int) -> None:
        self.words[SCALAR[name]] += n

    def produced(self, nbytes: int, messages: int) -> None:
        w = self.words
        w[_BYTES_IN] += nbytes
        w[_MESSAGES_IN] += messages

    def fetched(self, nbytes: int, replica: bool) -> None:
        self.words[_REPLICATION_BYTES_OUT if replica else _BYTES_OUT] += nbytes

    def set(self, name: str, value: int) -> None:
        self.words[GAUGE[name]] = value

    def flushed(self, seconds: float) -> None:
        """A log flush (fsync of a partition's segments) took `seconds`."""
        w = self.words
        us = int(seconds * 1e6)
        w[FLUSH + bisect_left(BOUNDS_US, us)] += 1
        w[FLUSH + BUCKETS] += us


class NullRegion(Region):
    """What a process counts into when metrics are off: nothing (each call returns at once)."""

    __slots__ = ()
    on = False

    def __init__(self) -> None:
        self.words = memoryview(b"")

    def request(self, api, count, arrived, received, handled, answered, written) -> None:
        pass

    def error(self, api, code, count=1) -> None:
        pass

    def add(self, name, n) -> None:
        pass

    def produced(self, nbytes, messages) -> None:
        pass

    def fetched(self, nbytes, replica) -> None:
        pass

    def set(self, name, value) -> None:
        pass

    def flushed(self, seconds) -> None:
        pass


NULL_REGION = NullRegion()


class MetricsBlock:
    """The shared block of a broker with `processors` processor slots (made before forking)."""

    def __init__(self, processors: int) -> None:
        self.processors = processors
        self.regions = FIRST_PROCESSOR + processors
        size = self.regions * REGION_WORDS * 8
        self._page = mmap.mmap(-1, -(-size // mmap.PAGESIZE) * mmap.PAGESIZE)  # MAP_SHARED | MAP_ANONYMOUS
        self._words = memoryview(self._page).cast("q")
        self.array = np.frombuffer(self._page, dtype=np.int64, count=self.regions * REGION_WORDS).reshape(
            self.regions, REGION_WORDS)
        self.lock = threading.Lock()  # fold vs scrape, in the main process only
        warm()

    def region(self, index: int) -> Region:
        return Region(self._words[index * REGION_WORDS:(index + 1) * REGION_WORDS])

    def processor(self, slot: int) -> Region:
        return self.region(FIRST_PROCESSOR + slot)

    def fold(self, index: int) -> None:
        """A dead process's region: counters into BASE, everything zeroed (its replacement starts from 0)."""
        with self.lock:
            self.array[BASE, :GAUGE_BASE] += self.array[index, :GAUGE_BASE]
            self.array[index, :] = 0

    def fold_processor(self, slot: int) -> None:
        self.fold(FIRST_PROCESSOR + slot)

    def totals(self) -> np.ndarray:
        """Every word summed over the regions (gauges too: connections open in all processors)."""
        with self.lock:
            return self.array.sum(axis=0)

    def per_processor(self, word: int) -> list[int]:
        """One word of each processor slot's region."""
        return [int(v) for v in self.array[FIRST_PROCESSOR:, word]]
