"""The principals of a processor's connections as bits of the partition table's ACL decisions: a bit per
(principal, host), shared by its connections, freed with the last of them; decisions the authoriser's,
forgotten when the ACLs change."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from mmlog.log import partition_table as t
from mmlog.processors.compiled.principals import MAX_BITS, Principals
from mmlog.security import acls
from mmlog.security.acls import READ, WRITE
from mmlog.security.authorizer import Authorizer


@pytest.fixture
def authorizer(tmp_path):
    acls.save(acls.path_in(tmp_path), [acls.Binding(acls.TOPIC, "granted", acls.LITERAL, "User:alice", "*",
                                                    WRITE, acls.ALLOW)])
    authorizer = Authorizer(tmp_path, enabled=True)
    authorizer.refresh()
    return authorizer


def conn(fd: int, user: str = "alice", host: str = "127.0.0.1"):
    """What Principals reads of a connection (and the authoriser's per-connection cache)."""
    return SimpleNamespace(fd=fd, principal=f"User:{user}", peer=(host, 40000 + fd), acl_cache=None)


def test_connections_of_one_principal_and_host_share_a_bit_and_others_get_their_own(authorizer):
    principals = Principals(authorizer)
    a, b = principals.bit(conn(10)), principals.bit(conn(11))
    assert a == b and a > 0 and a & (a - 1) == 0  # one bit
    assert principals.bit(conn(12, "bob")) not in (0, a)
    assert principals.bit(conn(13, host="127.0.0.2")) not in (0, a)


def test_decisions_are_the_authorisers_and_forgotten_when_the_acls_change(authorizer, tmp_path):
    principals = Principals(authorizer)
    rows = np.zeros((2, t.ROW_FIELDS), np.int64)
    alice = conn(10)
    bit = principals.bit(alice)
    principals.learn(alice, rows, 0, WRITE, "granted")
    principals.learn(alice, rows, 1, READ, "granted")
    assert t.permits(rows, 0, t.WRITE_KNOWN, bit)
    assert not t.permits(rows, 1, t.READ_KNOWN, bit) and rows[1, t.READ_KNOWN] & bit  # known, refused
    acls.save(acls.path_in(tmp_path), [])
    authorizer.refresh()
    principals.refresh(rows)
    assert not rows[:, [t.WRITE_KNOWN, t.READ_KNOWN]].any()


def test_the_last_connection_of_a_pair_frees_its_bit_and_its_decisions(authorizer):
    principals = Principals(authorizer)
    rows = np.zeros((1, t.ROW_FIELDS), np.int64)
    first, second = conn(10), conn(11)
    bit = principals.bit(first)
    principals.bit(second)
    principals.learn(first, rows, 0, WRITE, "granted")
    principals.release(first, rows)
    assert t.permits(rows, 0, t.WRITE_KNOWN, bit)  # the pair still has a connection
    principals.release(second, rows)
    assert rows[0, t.WRITE_KNOWN] == 0


def test_past_the_bits_a_connection_is_pythons(authorizer):
    principals = Principals(authorizer)
    assert all(principals.bit(conn(i, f"user{i}")) for i in range(MAX_BITS))
    assert principals.bit(conn(MAX_BITS, "one-too-many")) is None


def test_without_an_authoriser_every_connection_is_bit_zero():
    assert Principals(Authorizer()).bit(conn(10)) == 0
