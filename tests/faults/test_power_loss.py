"""Power loss: the broker SIGKILLed and every write it had not fsynced forgotten (mmlog/testing/lazyfs.py).

Each test runs a real broker whose data directory is on the power-loss file system, cuts the power
(SIGKILL of every broker process, then the file system forgets what was not synced), starts the
broker again on the same directory and checks what its flush policy promises (docs/durability.md).
Losses come at seeded random points of a mixed load: produce (idempotent, acks=all), rolls (small
segments), retention, compaction, transaction markers, group offset commits, topic creation and
deletion. Each loss draws, with the same seed, whether directory entries not yet synced survive
(a journal that committed them) and whether unsynced data comes back empty or zero-filled. The seeds
fix the load's sequence of operations, the crash times and what survives; which operation a crash
interrupts also depends on the machine's speed, as with any fault injected by time.
"""

from __future__ import annotations

import multiprocessing
import random
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from mmlog.client.admin import Admin
from mmlog.client.producer import Producer
from mmlog.client.records import TopicPartition
from mmlog.config.settings import LogConfig
from mmlog.log import lock, rolled_flush, touched
from mmlog.log.files import segment_bases
from mmlog.log.partition import Partition
from mmlog.protocol import records as rec
from mmlog.system.files import fsync_dir
from mmlog.testing import EmbeddedBroker
from mmlog.testing.connections import connect, fetch_one
from mmlog.testing.lazyfs import LazyFS, available
from tests.log.logtools import check_indexes, stored_batches

pytestmark = pytest.mark.skipif(available() is not None, reason=str(available()))

SEGMENT_BYTES = 8192
INDEX_INTERVAL = 256
BROKER = {  # small segments, so that rolls, retention and compaction happen within a second or two
    "log.segment.bytes": SEGMENT_BYTES, "log.index.size.max.bytes": 8192, "log.index.interval.bytes": INDEX_INTERVAL,
    "log.retention.check.interval.ms": 200, "log.cleaner.backoff.ms": 200, "log.flush.scheduler.interval.ms": 200,
    "log.cleaner.min.cleanable.ratio": 0.01, "transaction.state.log.segment.bytes": 16384,
    "group.initial.rebalance.delay.ms": 0, "transaction.state.log.num.partitions": 1,
}
EVERY_MESSAGE = {"log.flush.interval.messages": 1}
GROUP = "power"
OFFSET_OUT_OF_RANGE = 1
# rolled by time by the control thread's timer (as well as by size) and deleted 2 s later, however slow the load
RETAINED = {"retention.ms": "2000", "segment.ms": "300"}
COMPACTED = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01", "segment.ms": "500"}
VALUE_PAD = b"." * 150  # ~230-byte batches: a segment holds about 35
LOG_CONFIG = LogConfig(segment_bytes=SEGMENT_BYTES, segment_index_bytes=8192, index_interval_bytes=INDEX_INTERVAL)


@pytest.fixture
def fs(tmp_path):
    lazy = LazyFS(tmp_path / "mnt")
    yield lazy
    lazy.stop()


def provision(fs: LazyFS):
    """The data directory, made and synced as an operator's provisioning would (the broker never creates it
    on a real machine, so its own name is not the broker's to make durable)."""
    data = fs.mountpoint / "data"
    data.mkdir()
    fsync_dir(fs.mountpoint)
    return data


def start(data, config) -> EmbeddedBroker:
    return EmbeddedBroker(data, processors=1, config={**BROKER, **config}, ready_timeout=90).start()


def crash(broker: EmbeddedBroker, fs: LazyFS, rng: random.Random) -> tuple[str, ...]:
    """SIGKILL the broker, then, two times in three, cut the power (which names and data survive: drawn).
    A process crash alone loses nothing acknowledged whatever the policy; it also leaves the next power
    loss a log whose recovery ran on unsynced pages (which recovery must sync before trusting them)."""
    broker.kill()
    if rng.random() < 1 / 3:
        return ("process crash",)
    how = rng.choice(["synced", "all"]), rng.choice(["empty", "zeros"])
    fs.lose_power(*how)
    return how


# ---------------------------------------------------------------- reading back


@dataclass
class Stored:
    offset: int
    key: bytes | None
    value: bytes | None
    producer_id: int
    producer_epoch: int
    sequence: int  # the record's own sequence (batch base sequence + its index), -1 if not idempotent
    control: bool


class OutOfRange(Exception):
    """A read met OFFSET_OUT_OF_RANGE: retention moved the log start past it."""


def read_partition(conn, topic: str, partition: int, start: int) -> list[Stored]:
    """Every record from `start` to the high watermark, with its batch's producer fields."""
    out: list[Stored] = []
    offset = start
    while True:
        part = fetch_one(conn, topic, partition, offset)
        if part.error_code == OFFSET_OUT_OF_RANGE:
            raise OutOfRange(offset)  # retention deleted what we were reading: the caller starts again
        assert part.error_code == 0, (topic, partition, offset, part.error_code)
        data = bytes(part.records)
        if not data:
            return out
        for pos, h in rec.iter_batches(data):
            for i, r in enumerate(rec.decode_records(data, pos)):
                if r.offset >= offset:
                    seq = h.base_sequence + (r.offset - h.base_offset) if h.base_sequence >= 0 else -1
                    out.append(Stored(r.offset, r.key, r.value, h.producer_id, h.producer_epoch, seq, h.is_control))
        if not out or out[-1].offset < offset:
            return out
        offset = out[-1].offset + 1


def check_consistent(records: list[Stored], dense: bool) -> None:
    """No record served twice under two offsets, offsets increasing (dense unless compacted), and each
    producer's sequences increasing with offsets (never backwards)."""
    offsets = [r.offset for r in records]
    assert offsets == sorted(set(offsets)), "an offset served twice or out of order"
    if dense and offsets:
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets))), "a gap in a log that is not compacted"
    values = [r.value for r in records if not r.control]
    assert len(values) == len(set(values)), "a record served twice under two offsets"
    last: dict[tuple[int, int], int] = {}
    for r in records:
        if r.sequence >= 0 and not r.control:
            key = (r.producer_id, r.producer_epoch)
            assert r.sequence > last.get(key, -1), f"producer {key}: sequence {r.sequence} after {last[key]}"
            last[key] = r.sequence


# ---------------------------------------------------------------- the load


@dataclass
class Acked:
    """What the broker acknowledged in one round, by kind."""

    records: dict[str, list[tuple[int, bytes, bytes | None]]] = field(default_factory=lambda: defaultdict(list))
    acked_at: dict[bytes, float] = field(default_factory=dict)  # value -> time.monotonic() of its ack
    commits: list[int] = field(default_factory=list)
    commit_times: list[float] = field(default_factory=list)
    transactions: list[list[bytes]] = field(default_factory=list)  # committed ones' values
    topics_made: list[str] = field(default_factory=list)


class Load:
    """A seeded mix of every kind of write, one at a time, until the broker dies under it."""

    KINDS = ["events"] * 5 + ["retained"] * 3 + ["compacted"] * 2 + ["txn", "commit", "commit", "topics"]

    def __init__(self, broker: EmbeddedBroker, rng: random.Random, round_: int, kinds=None) -> None:
        self.broker, self.rng, self.round = broker, rng, round_
        self.kinds = kinds or self.KINDS
        self.acked = Acked()
        self.done = threading.Event()
        self.running = threading.Event()  # its clients are connected: the crash timer starts from here
        self.count = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "Load":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.done.set()
        self.thread.join(60)
        assert not self.thread.is_alive()

    def _run(self) -> None:
        opts = dict(linger_ms=0, retries=2, request_timeout_ms=3000, delivery_timeout_ms=6000, max_block_ms=3000)
        producer = txn = admin = None
        try:
            producer = Producer(self.broker.bootstrap, acks="all", enable_idempotence=True, **opts)
            txn = Producer(self.broker.bootstrap, transactional_id=f"power-{self.round}", **opts)
            txn.init_transactions(timeout=10)
            admin = Admin(self.broker.bootstrap, timeout=5)
            self.running.set()
            while not self.done.is_set():
                self._one(self.rng.choice(self.kinds), producer, txn, admin)
                self.count += 1
        except Exception:  # noqa: BLE001 - the power went: whatever was not acknowledged is not counted
            pass
        finally:
            self.running.set()
            for client in (producer, txn):
                if client is not None:
                    try:
                        client.close(timeout=0)
                    except Exception:  # noqa: BLE001
                        pass

    def _one(self, kind: str, producer: Producer, txn: Producer, admin: Admin) -> None:
        n = self.count
        if kind in ("events", "retained", "compacted"):
            key = b"k%d" % self.rng.randrange(8) if kind == "compacted" else None
            value = b"%s-%d-%d" % (kind.encode(), self.round, n) + VALUE_PAD
            meta = producer.send(kind, value, key=key, partition=0).get(timeout=8)
            self.acked.records[kind].append((meta.offset, value, key))
            self.acked.acked_at[value] = time.monotonic()
        elif kind == "txn":
            values = [b"txn-%d-%d-%d" % (self.round, n, i) for i in range(3)]
            txn.begin_transaction()
            futures = [txn.send("txn", v, partition=0) for v in values]
            if self.rng.random() < 0.3:
                txn.abort_transaction(timeout=8)
                return
            txn.commit_transaction(timeout=8)
            for f in futures:
                f.get(timeout=1)
            self.acked.transactions.append(values)
        elif kind == "commit":
            committed = (self.acked.commits[-1] if self.acked.commits else 0) + 1 + self.rng.randrange(5)
            admin.alter_group_offsets(GROUP, {TopicPartition("events", 0): committed})
            self.acked.commits.append(committed)
            self.acked.commit_times.append(time.monotonic())
        else:  # a topic made and the one before deleted, each at a random point of a power loss
            name = f"tmp-{self.round}-{n}"
            admin.create_topic(name, partitions=2)
            self.acked.topics_made.append(name)
            if len(self.acked.topics_made) > 1:
                admin.delete_topic(self.acked.topics_made[-2])


def make_topics(broker: EmbeddedBroker) -> None:
    admin = Admin(broker.bootstrap, timeout=10)
    admin.create_topics({"events": (1, {}), "retained": (1, RETAINED), "compacted": (1, COMPACTED),
                         "txn": (1, {})})


# ---------------------------------------------------------------- the checks after a restart


def committed_offset(broker: EmbeddedBroker) -> int:
    offsets = Admin(broker.bootstrap, timeout=10).group_offsets(GROUP)
    got = offsets.get(TopicPartition("events", 0))
    return -1 if got is None or got.committed is None else got.committed


def check_round(broker: EmbeddedBroker, acked: Acked, every_message: bool, round_: int) -> dict[str, int]:
    """The guarantees of the flush policy after a restart; returns the acknowledged records lost, by topic
    (and, to show that retention and compaction ran, the retained log's start and the compacted records kept)."""
    admin = Admin(broker.bootstrap, timeout=10)
    lost: dict[str, int] = {}
    with connect(broker) as conn:
        for topic in ("events", "retained", "compacted", "txn"):
            for _ in range(10):
                try:
                    start = admin.earliest_offsets(topic)[0]
                    stored = read_partition(conn, topic, 0, start)
                    break
                except OutOfRange:
                    continue
            else:
                pytest.fail(f"{topic}: retention kept moving the log start past every read")
            check_consistent(stored, dense=topic != "compacted")
            at = {r.offset: r.value for r in stored}
            end = stored[-1].offset + 1 if stored else start
            mine = [(o, v, k) for o, v, k in acked.records.get(topic, []) if o >= start]
            if topic == "compacted":
                # compaction keeps the last record of each key: the last acknowledged one, or a later one
                newest = {}
                for o, v, k in mine:
                    newest[k] = (o, v)
                last_of_key = {}
                for r in stored:
                    last_of_key[r.key] = r.offset
                missing = [k for k, (o, v) in newest.items() if last_of_key.get(k, -1) < o]
            else:
                # no offset reused for another record: what survived at an acknowledged offset is that record
                assert all(at[o] == v for o, v, _ in mine if o in at), f"{topic}: an offset holds another record"
                missing = [o for o, v, _ in mine if o not in at]
                # only a tail was lost: nothing acknowledged is missing below the recovered log end
                assert all(o >= end for o in missing), f"{topic}: a hole below the log end {end}: {missing[:5]}"
            lost[topic] = len(missing)
            if topic == "retained":
                lost["retained log start"] = start  # retention ran: the log no longer starts at 0
            elif topic == "compacted":
                lost["compacted records kept"] = len(stored)  # the cleaner ran: fewer than were written
            if topic == "txn" and every_message:
                present = {r.value for r in stored}
                assert all(v in present for values in acked.transactions for v in values), "a committed txn lost"
    if every_message:
        assert not any(lost[t] for t in ("events", "retained", "compacted", "txn")), \
            f"acknowledged records lost: {lost}"
        if acked.commits:
            assert committed_offset(broker) >= acked.commits[-1], "an acknowledged offset commit was lost"
    # every topic the broker lists is whole: each of its partitions takes an acks=all write
    with Producer(broker.bootstrap, acks="all", linger_ms=0, delivery_timeout_ms=20000) as probe:
        for topic, partitions in admin.list_topics().items():
            if not topic.startswith("__"):
                for p in range(partitions):
                    value = b"probe-%d-%s-%d" % (round_, topic.encode(), p)
                    probe.send(topic, value, key=value, partition=p).get(timeout=20)
    return lost


def check_files(data, topics=("events", "retained", "txn")) -> None:
    """After a clean stop: every index entry points into the log and at a batch (what the documented rules give)."""
    for topic in topics:
        p = Partition(data / f"{topic}-0", LOG_CONFIG)
        try:
            check_indexes(p)
        finally:
            p.close(clean=False)
    lock.release(data)  # the files this process keeps per log dir: the mount can go once the test is done
    touched.release(data)


def active_base(data, topic: str) -> int:
    return segment_bases(data / f"{topic}-0")[-1]


def crash_rounds(fs: LazyFS, seed: int, config: dict, nothing_lost) -> list[dict[str, int]]:
    """ROUNDS rounds of the mixed load on one broker with `config`, each ended by a crash at a seeded moment
    (`crash`: a power loss, or a process crash alone), the broker started again and the round checked
    (`check_round`; `nothing_lost(how)`: whether that crash may lose nothing acknowledged); the files are
    checked at the end. Each round's losses, by topic."""
    rng = random.Random(seed)  # the crashes: when, and what survives (the load has its own, per round)
    data = provision(fs)
    broker = start(data, config)
    losses = []
    try:
        make_topics(broker)
        for round_ in range(ROUNDS):
            with Load(broker, random.Random(seed * 1000 + round_), round_) as load:
                load.running.wait(30)
                time.sleep(rng.uniform(1.0, 2.5))
                how = crash(broker, fs, rng)
            broker.start()
            losses.append(check_round(broker, load.acked, every_message=nothing_lost(how), round_=round_))
            print(f"round {round_}: {load.count} writes, {' '.join(how)}, lost {losses[-1]}")
    finally:
        broker.stop()
    check_files(data)
    return losses


# ---------------------------------------------------------------- the tests


def _roll_twice_and_flush(directory: str, out) -> None:
    """In a process of its own, whose exit lets go of every file as a killed broker's does: appends until the
    partition has rolled twice, the flusher thread never getting to the rolls, a flush, one append more;
    sends (the values appended before the flush, the flushed log end)."""
    rolled_flush.submit = lambda *args, **kwargs: None
    p = Partition(Path(directory), LOG_CONFIG)
    values = []
    while len(p.segment_bases()) < 3:
        values.append(b"rolled-%d" % len(values) + VALUE_PAD)
        p.append(rec.build_batch([(None, values[-1])]))
    p.flush()
    out.put((values, p.snapshot().log_end))
    p.append(rec.build_batch([(None, b"after the flush")]))  # unflushed: may go


def _recovered(directory: str, out) -> None:
    """In a process of its own: open the partition (recovery runs) and send its log end and stored values."""
    p = Partition(Path(directory), LOG_CONFIG)
    out.put((p.snapshot().log_end, [r.value for b in stored_batches(Path(directory))
                                    for r in rec.decode_records(b.data, 0)]))
    p.close(clean=False)


def in_child(target, *args):
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    child = ctx.Process(target=target, args=(*args, out))
    child.start()
    try:
        return out.get(timeout=120)
    finally:
        child.join(30)


@pytest.mark.parametrize("data_loss", ["empty", "zeros"])
def test_records_a_flush_claimed_in_a_segment_a_roll_created_survive_though_the_flusher_never_ran(fs, data_loss):
    """Guarantee: a roll waits for no fsync (its snapshot, the sealed segment and the directory are the
    flusher thread's), yet what a flush claims survives a power loss: the flush syncs the directory that
    names the new segment before its recovery point passes a record of it. Here the flusher thread never
    gets to the rolls, and no name that was not synced survives."""
    directory = str(provision(fs) / "t-0")
    values, flushed = in_child(_roll_twice_and_flush, directory)
    fs.lose_power("synced", data_loss)
    log_end, stored = in_child(_recovered, directory)
    assert log_end >= flushed
    assert stored[:flushed] == values


@pytest.mark.parametrize("data_loss", ["empty", "zeros"])
def test_a_topic_created_just_before_a_power_loss_does_not_stop_the_broker(fs, data_loss):
    """Guarantee: whatever the flush policy, the broker starts after a power loss that follows a topic
    creation, and the topic (named in the durable catalogue) takes writes on every partition.
    The names reach the disk and the data does not (a journal commit between): the case that left an
    empty or zero-filled leader-epoch-checkpoint."""
    data = provision(fs)
    broker = start(data, {})
    try:
        Admin(broker.bootstrap, timeout=10).create_topic("fresh", partitions=8)
        broker.kill()
        fs.lose_power("all", data_loss)
        broker.start()
        with Producer(broker.bootstrap, acks="all", linger_ms=0) as producer:
            for p in range(Admin(broker.bootstrap, timeout=10).list_topics().get("fresh", 0)):
                assert producer.send("fresh", b"after", partition=p).get(timeout=20).offset == 0
    finally:
        broker.stop()


def test_with_the_default_policy_a_rolled_segment_survives_a_power_loss(fs):
    """Guarantee: with no flush setting, only the active segment is at risk: every record acknowledged in a
    segment that rolled (and was handed to the flusher before the loss) is there after it."""
    data = provision(fs)
    broker = start(data, {})
    try:
        make_topics(broker)
        acked = []
        with Producer(broker.bootstrap, acks="all", linger_ms=0) as producer:
            for i in range(150):
                value = b"rolled-%d" % i + VALUE_PAD
                acked.append((producer.send("events", value, partition=0).get(timeout=20).offset, value))
        active = active_base(data, "events")
        assert active > 0, "no roll"
        time.sleep(0.5)  # the flusher thread syncs a rolled segment within milliseconds
        broker.kill()
        fs.lose_power("synced", "empty")
        broker.start()
        with connect(broker) as conn:
            stored = {r.offset: r.value for r in read_partition(conn, "events", 0, 0)}
        assert [(o, v) for o, v in acked if o < active and stored.get(o) != v] == []
    finally:
        broker.stop()


def test_with_flush_messages_1_an_acknowledged_offset_commit_survives_a_power_loss(fs):
    """Guarantee: with log.flush.interval.messages=1 a committed group offset, once acknowledged, is on disk."""
    data = provision(fs)
    broker = start(data, EVERY_MESSAGE)
    try:
        make_topics(broker)
        admin = Admin(broker.bootstrap, timeout=10)
        for committed in range(1, 21):
            admin.alter_group_offsets(GROUP, {TopicPartition("events", 0): committed})
        broker.kill()
        fs.lose_power("synced", "empty")
        broker.start()
        assert committed_offset(broker) == 20
    finally:
        broker.stop()


def test_with_flush_messages_1_records_in_every_log_dir_survive_a_power_loss(fs):
    """Guarantee: with log.flush.interval.messages=1 and two log dirs, every acknowledged record survives a
    power loss that comes before anything else synced the second log dir (its replication-offset-checkpoint,
    every few seconds): a new partition's directory name is synced when it is made, in whichever log dir."""
    first, second = provision(fs), fs.mountpoint / "second"
    second.mkdir()
    fsync_dir(fs.mountpoint)
    broker = EmbeddedBroker(f"{first},{second}", processors=1, config={**BROKER, **EVERY_MESSAGE}).start()
    try:
        Admin(broker.bootstrap, timeout=10).create_topic("spread", partitions=4)
        assert any(second.glob("spread-*")), "no partition in the second log dir"
        acked = []
        with Producer(broker.bootstrap, acks="all", linger_ms=0) as producer:
            for i in range(40):
                value = b"spread-%d" % i
                meta = producer.send("spread", value, partition=i % 4).get(timeout=20)
                acked.append((meta.partition, meta.offset, value))
        broker.kill()
        fs.lose_power("synced", "empty")
        broker.start()
        with connect(broker) as conn:
            stored = {(p, r.offset): r.value for p in range(4) for r in read_partition(conn, "spread", p, 0)}
        assert [a for a in acked if stored.get(a[:2]) != a[2]] == []
    finally:
        broker.stop()


ROUNDS = 4


@pytest.mark.parametrize("seed", [1])
def test_with_flush_messages_1_nothing_acknowledged_is_lost_at_any_point(fs, seed):
    """Guarantee: log.flush.interval.messages=1 on a single broker: after a power loss (or a process crash) at
    any point of the mixed load, every acknowledged acks=all record, committed transaction and group offset
    commit is there, the broker starts, and every log is consistent (no record twice, no offset reused,
    sequences forward, indexes inside the log)."""
    crash_rounds(fs, seed, EVERY_MESSAGE, nothing_lost=lambda how: True)


@pytest.mark.parametrize("seed", [8])
def test_with_the_default_policy_only_the_unflushed_tail_is_lost_and_everything_comes_back_consistent(fs, seed):
    """Guarantee: with the default flush policy (the OS's), a power loss at any point of the mixed load loses
    at most the tail of each log that was in its active segment (with the rolled flush: at most about two
    segments' worth if it came right at a roll); what survived is a prefix, no offset holds another record
    than the one acknowledged at it, no record is served twice, producer sequences never go backwards,
    indexes point into the log, and the broker always starts. A round that is a process crash only (no
    power loss) loses nothing acknowledged."""
    per_segment = SEGMENT_BYTES // (len(VALUE_PAD) + 70) + 1
    for lost in crash_rounds(fs, seed, {}, nothing_lost=lambda how: how == ("process crash",)):
        assert lost["events"] <= 2 * per_segment and lost["retained"] <= 2 * per_segment, lost


FLUSH_MS = 500


@pytest.mark.parametrize("seed", [5])
def test_with_flush_ms_a_power_loss_takes_only_records_younger_than_the_interval(fs, seed):
    """Guarantee: with log.flush.interval.ms=T, a power loss loses only what was acknowledged in the last
    T + log.flush.scheduler.interval.ms (the flush timer's period) plus the time a flush takes: records and
    group offset commits alike. (Slack for a loaded test machine: 0.5 s.)"""
    rng = random.Random(seed)
    data = provision(fs)
    # segments large enough not to roll in a round: what the flush timer bounds, not the flush at each roll
    broker = start(data, {"log.flush.interval.ms": FLUSH_MS, "log.segment.bytes": 1 << 20,
                          "log.index.size.max.bytes": 1 << 16})
    bound = (FLUSH_MS + BROKER["log.flush.scheduler.interval.ms"] + 500) / 1000
    try:
        make_topics(broker)
        for round_ in range(2):
            with Load(broker, random.Random(seed * 1000 + round_), round_, kinds=["events"] * 4 + ["commit"]) as load:
                load.running.wait(30)
                time.sleep(rng.uniform(2.0, 3.0))
                cut_at = time.monotonic()
                broker.kill()
                fs.lose_power(rng.choice(["synced", "all"]), rng.choice(["empty", "zeros"]))
            broker.start()
            check_round(broker, load.acked, every_message=False, round_=round_)
            with connect(broker) as conn:
                present = {r.value for r in read_partition(conn, "events", 0, 0)}
            ages = [cut_at - load.acked.acked_at[v] for _, v, _ in load.acked.records["events"] if v not in present]
            print(f"round {round_}: {load.count} writes, {len(ages)} acknowledged records lost, the oldest "
                  f"{max(ages, default=0):.2f} s old at the loss")
            assert max(ages, default=0) < bound, f"a record acknowledged {max(ages):.2f} s before the loss was lost"
            survived = committed_offset(broker)
            old_enough = [c for c, t in zip(load.acked.commits, load.acked.commit_times) if cut_at - t >= bound]
            assert not old_enough or survived >= old_enough[-1], "a commit older than the flush interval was lost"
    finally:
        broker.stop()
