"""tools/soak_failover.py: its checks catch what they are for, one transactional round with a killed
transaction coordinator passes on three real brokers, and so does one round with a network partition and a
power loss (as root, with nftables and FUSE)."""

from __future__ import annotations

import random

import pytest

from mmlog.testing import lazyfs, network
from tools import soak_failover
from tools.soak_failover import TransactionalLoad, problems, txn_problems


class _Acked:
    def __init__(self, acked, errors=()):
        self.acked, self.errors = acked, list(errors)


def _load(outcomes: dict[int, str], size: int = 2) -> TransactionalLoad:
    load = TransactionalLoad([], "t", 2, size, 0.0, random.Random(0))
    load.outcomes = outcomes
    load.values = {n: [b"t%06d-%04d" % (n, i) for i in range(size)] for n in outcomes}
    return load


def test_the_idempotent_check_finds_loss_duplicates_and_disorder():
    acked = {b"v00000000": (0, 0), b"v00000001": (0, 1)}
    assert problems(_Acked(acked), {0: {0: b"v00000000", 1: b"v00000001"}}, 1) == []
    assert "not at their offsets" in problems(_Acked(acked), {0: {0: b"v00000000"}}, 1)[0]
    assert "stored twice" in problems(_Acked({}), {0: {0: b"v00000000", 1: b"v00000000"}}, 1)[0]
    assert "out of the order" in problems(_Acked({}), {0: {0: b"v00000001", 1: b"v00000000"}}, 1)[0]
    assert "failed deliveries" in problems(_Acked({}, ["boom"]), {0: {}}, 1)[0]
    timed = {b"all-00000000": (0, 0, 1.0), b"all-00000001": (0, 1, 2.0)}  # the partition soak's writer
    assert problems(_Acked(timed), {0: {0: b"all-00000000", 1: b"all-00000001"}}, 1) == []
    assert "out of the order" in problems(_Acked({}), {0: {0: b"all-00000001", 1: b"all-00000000"}}, 1)[0]


def test_the_transactional_check_finds_a_partial_a_leaked_and_a_duplicated_transaction():
    whole = {0: {0: b"t000000-0000"}, 1: {0: b"t000000-0001"}}
    assert txn_problems(_load({0: "committed"}), whole, 2) == []
    assert txn_problems(_load({0: "aborted"}), {0: {}, 1: {}}, 2) == []
    assert txn_problems(_load({0: "unknown"}), {0: {}, 1: {}}, 2) == []
    assert "1 of 2 values read" in txn_problems(_load({0: "committed"}), {0: whole[0], 1: {}}, 2)[0]
    assert "aborted transaction 0" in txn_problems(_load({0: "aborted"}), whole, 2)[0]
    assert "unknown outcome" in txn_problems(_load({0: "unknown"}), {0: whole[0], 1: {}}, 2)[0]
    assert "read twice" in txn_problems(_load({0: "committed"}), {0: {0: b"t000000-0000", 1: b"t000000-0000"},
                                                                   1: whole[1]}, 2)[0]
    disorder = {0: {0: b"t000001-0000", 1: b"t000000-0000"}, 1: {0: b"t000000-0001", 1: b"t000001-0001"}}
    assert any("out of the order" in p for p in txn_problems(_load({0: "committed", 1: "committed"}), disorder, 2))
    assert "never ended" in txn_problems(_load({}), {0: {0: b"t000005-0000"}, 1: {}}, 2)[0]


def test_a_transactional_round_with_its_coordinator_killed_passes(capsys):
    assert soak_failover.main(["--transactions", "--rounds", "1", "--faults", "1", "--kinds", "kill-coordinator",
                               "--partitions", "2", "--txn-size", "10"]) == 0
    out = capsys.readouterr().out
    assert "round 0: transactions" in out and "kill-coordinator" in out and ": ok" in out


def test_a_round_with_a_follower_cut_from_its_leader_and_a_follower_losing_power_passes(capsys):
    """Seed 1 draws cut-follower, then power-follower: each broker runs as its own user on its own power-loss
    file system, and the round's checks, the acks=1 report and the unavailabilities come out."""
    why = network.unavailable() or lazyfs.available()
    if why:
        pytest.skip(why)
    assert soak_failover.main(["--rounds", "1", "--faults", "2", "--kinds", "cut-follower,power-follower",
                               "--partitions", "2", "--rate", "300", "--loose-rate", "100", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert "round 0: cut-follower" in out and "; power-follower" in out and ": ok" in out, out
    assert "0 lost, 0 duplicated; acks=1" in out and "unavailability per partition over 4" in out, out
