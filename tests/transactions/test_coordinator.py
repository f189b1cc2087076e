"""The transaction coordinator through the wire, on a real broker: ids, epochs, fencing, states, restarts.

Whole transactions through real clients are in tests/interop/test_transactions.py, and markers and
what consumers see of them in tests/interop/test_read_committed.py; these requests are what a
transactional client sends to its coordinator, one at a time.
"""

from __future__ import annotations

import time

import pytest

from mmlog.protocol.messages import (add_offsets_to_txn, add_partitions_to_txn, describe_transactions, end_txn,
                                     find_coordinator, init_producer_id, list_transactions, metadata)
from mmlog.testing import EmbeddedBroker
from mmlog.testing.connections import connect

CONFIG = {"transaction.state.log.num.partitions": 3, "transaction.max.timeout.ms": 120_000}
INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE, INVALID_PRODUCER_ID_MAPPING = 47, 48, 49
INVALID_TRANSACTION_TIMEOUT, UNKNOWN_TOPIC_OR_PARTITION, OPERATION_NOT_ATTEMPTED, PRODUCER_FENCED = 50, 3, 55, 90
CONCURRENT_TRANSACTIONS = 51


@pytest.fixture
def txn_broker(tmp_path):
    with EmbeddedBroker(tmp_path / "b", processors=2, config=CONFIG) as broker:
        yield broker


def init(conn, txn_id, timeout_ms=60_000):
    assert conn.request(find_coordinator.API_KEY, 2, key=txn_id, key_type=1).error_code == 0
    return conn.request(init_producer_id.API_KEY, 1, transactional_id=txn_id, transaction_timeout_ms=timeout_ms)


def add(conn, txn_id, ids, topics, version=1):
    r = conn.request(add_partitions_to_txn.API_KEY, version, v3_and_below_transactional_id=txn_id,
                     v3_and_below_producer_id=ids.producer_id, v3_and_below_producer_epoch=ids.producer_epoch,
                     v3_and_below_topics=[{"name": t, "partitions": ps} for t, ps in topics])
    return {(t.name, p.partition_index): p.partition_error_code for t in r.results_by_topic_v3_and_below
            for p in t.results_by_partition}


def end(conn, txn_id, ids, commit, version=1):
    return conn.request(end_txn.API_KEY, version, transactional_id=txn_id, producer_id=ids.producer_id,
                        producer_epoch=ids.producer_epoch, committed=commit).error_code


def describe(conn, txn_id):
    return conn.request(describe_transactions.API_KEY, 0, transactional_ids=[txn_id]).transaction_states[0]


def make_topic(conn, name):
    conn.request(metadata.API_KEY, 8, metadata.REQUEST(topics=[{"name": name}]))  # auto-created


def test_init_producer_id_gives_a_transactional_id_one_producer_id_and_bumps_its_epoch(txn_broker):
    with connect(txn_broker) as conn:
        first = init(conn, "app-1")
        again = init(conn, "app-1")
        other = init(conn, "app-2")
    assert (first.error_code, first.producer_epoch) == (0, 0)
    assert (again.error_code, again.producer_id, again.producer_epoch) == (0, first.producer_id, 1)
    assert other.producer_id != first.producer_id


def test_a_timeout_above_the_broker_maximum_is_refused(txn_broker):
    with connect(txn_broker) as conn:
        assert init(conn, "slow", timeout_ms=120_001).error_code == INVALID_TRANSACTION_TIMEOUT
        assert init(conn, "slow", timeout_ms=120_000).error_code == 0


def test_partitions_join_the_transaction_and_describe_shows_them(txn_broker):
    with connect(txn_broker) as conn:
        make_topic(conn, "orders")
        ids = init(conn, "adder")
        assert add(conn, "adder", ids, [("orders", [0])]) == {("orders", 0): 0}
        state = describe(conn, "adder")
        listed = conn.request(list_transactions.API_KEY, 0, state_filters=["Ongoing"], producer_id_filters=[])
    assert (state.error_code, state.transaction_state, state.producer_id) == (0, "Ongoing", ids.producer_id)
    assert [(t.topic, list(t.partitions)) for t in state.topics] == [("orders", [0])]
    assert [t.transactional_id for t in listed.transaction_states] == ["adder"]


def test_an_unknown_partition_fails_alone_and_the_rest_is_not_attempted(txn_broker):
    with connect(txn_broker) as conn:
        make_topic(conn, "known")
        ids = init(conn, "partly")
        codes = add(conn, "partly", ids, [("known", [0]), ("missing-topic", [0])])
        state = describe(conn, "partly")
    assert codes == {("known", 0): OPERATION_NOT_ATTEMPTED, ("missing-topic", 0): UNKNOWN_TOPIC_OR_PARTITION}
    assert state.transaction_state == "Empty"


def test_a_fenced_producer_is_told_so_in_the_error_its_request_version_knows(txn_broker):
    with connect(txn_broker) as conn:
        make_topic(conn, "fenced")
        old = init(conn, "zombie")
        new = init(conn, "zombie")
        assert new.producer_epoch == old.producer_epoch + 1
        assert add(conn, "zombie", old, [("fenced", [0])], version=1) == {("fenced", 0): INVALID_PRODUCER_EPOCH}
        assert add(conn, "zombie", old, [("fenced", [0])], version=2) == {("fenced", 0): PRODUCER_FENCED}
        assert end(conn, "zombie", old, True, version=2) == PRODUCER_FENCED
        wrong = type(old)(error_code=0, producer_id=old.producer_id + 1000, producer_epoch=new.producer_epoch)
        assert end(conn, "zombie", wrong, True) == INVALID_PRODUCER_ID_MAPPING


def test_ending_a_transaction_that_was_never_begun_is_an_invalid_state(txn_broker):
    with connect(txn_broker) as conn:
        ids = init(conn, "idle")
        assert end(conn, "idle", ids, True) == INVALID_TXN_STATE


def test_add_offsets_puts_a_group_in_the_transaction(txn_broker):
    with connect(txn_broker) as conn:
        ids = init(conn, "offsets")
        r = conn.request(add_offsets_to_txn.API_KEY, 1, transactional_id="offsets", producer_id=ids.producer_id,
                         producer_epoch=ids.producer_epoch, group_id="readers")
        state = describe(conn, "offsets")
    assert (r.error_code, state.transaction_state) == (0, "Ongoing")


def test_the_coordinator_state_survives_a_restart_from_the_transaction_log(tmp_path):
    with EmbeddedBroker(tmp_path / "b", processors=1, config=CONFIG) as broker:
        with connect(broker) as conn:
            make_topic(conn, "kept")
            ids = init(conn, "durable")
            assert add(conn, "durable", ids, [("kept", [0])]) == {("kept", 0): 0}
    with EmbeddedBroker(tmp_path / "b", processors=1, config=CONFIG) as broker:
        with connect(broker) as conn:
            deadline = time.monotonic() + 10
            while (state := describe(conn, "durable")).error_code and time.monotonic() < deadline:
                time.sleep(0.05)  # the coordinator loads the partition on its next ownership check
            again = init(conn, "durable")
    assert (state.transaction_state, state.producer_id, state.producer_epoch) == ("Ongoing", ids.producer_id, 0)
    assert [(t.topic, list(t.partitions)) for t in state.topics] == [("kept", [0])]
    # The open transaction of the old producer is being aborted: the new one is asked to retry.
    assert again.error_code == 51  # CONCURRENT_TRANSACTIONS


def test_the_transaction_log_is_compacted_and_a_compacted_log_loads_the_same_state(tmp_path):
    from mmlog.log.cleaner.manager import read_status
    from mmlog.protocol.messages import describe_configs

    config = dict(CONFIG, **{"transaction.state.log.num.partitions": 1, "transaction.state.log.segment.bytes": 16384,
                             "log.cleaner.backoff.ms": 100, "log.cleaner.dedupe.buffer.size": 1 << 20})
    with EmbeddedBroker(tmp_path / "b", processors=1, config=config) as broker:
        with connect(broker) as conn:
            for _ in range(300):  # 300 transitions of 3 ids: several segments, mostly superseded
                for txn_id in ("compact-a", "compact-b", "compact-c"):
                    last = init(conn, txn_id)
            policy = conn.request(describe_configs.API_KEY, 1, resources=[{
                "resource_type": 2, "resource_name": "__transaction_state", "configuration_keys": ["cleanup.policy"]}],
                include_synonyms=False).results[0].configs[0].value
        deadline = time.monotonic() + 30
        while "__transaction_state-0" not in read_status(broker.data_dir) or \
                "last_run" not in read_status(broker.data_dir)["__transaction_state-0"]:
            assert time.monotonic() < deadline, "the cleaner never cleaned __transaction_state"
            time.sleep(0.1)
        kept = read_status(broker.data_dir)["__transaction_state-0"]["last_run"]["records_kept"]
    with EmbeddedBroker(tmp_path / "b", processors=1, config=config) as broker:
        with connect(broker) as conn:
            deadline = time.monotonic() + 10
            while (state := describe(conn, "compact-c")).error_code and time.monotonic() < deadline:
                time.sleep(0.05)
    assert policy == "compact" and kept < 300
    assert (state.producer_id, state.producer_epoch) == (last.producer_id, last.producer_epoch) == \
        (last.producer_id, 299)


def test_an_abort_right_after_an_add_refused_while_the_previous_commit_completes_succeeds(txn_broker):
    """librdkafka's sequence (tests/interop/test_transactions.py): EndTxn(commit) is answered, the next
    transaction's AddPartitionsToTxn is refused while the commit's markers are written, EndTxn(abort)."""
    with connect(txn_broker) as conn:
        make_topic(conn, "early")
        ids = init(conn, "early")
        for _ in range(20):  # until the add lands while the markers are written (nearly always at once)
            assert add(conn, "early", ids, [("early", [0])]) == {("early", 0): 0}
            assert end(conn, "early", ids, True) == 0
            if add(conn, "early", ids, [("early", [0])]) == {("early", 0): CONCURRENT_TRANSACTIONS}:
                break
            assert end(conn, "early", ids, True) == 0
        else:
            pytest.fail("the add never arrived while the commit was completing")
        deadline, code = time.monotonic() + 10, None
        while time.monotonic() < deadline and code != 0:
            code = end(conn, "early", ids, False)  # CONCURRENT_TRANSACTIONS until the commit is complete
            assert code in (0, CONCURRENT_TRANSACTIONS)
        state = describe(conn, "early")
        assert (code, state.transaction_state) == (0, "CompleteCommit")  # the commit stands; nothing to abort
        assert add(conn, "early", ids, [("early", [0])]) == {("early", 0): 0}  # and the producer goes on
        assert end(conn, "early", ids, True) == 0


def test_an_abort_after_a_commit_with_no_next_transaction_begun_is_still_an_invalid_state(txn_broker):
    with connect(txn_broker) as conn:
        make_topic(conn, "settled")
        ids = init(conn, "settled")
        assert add(conn, "settled", ids, [("settled", [0])]) == {("settled", 0): 0}
        assert end(conn, "settled", ids, True) == 0
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and describe(conn, "settled").transaction_state != "CompleteCommit":
            time.sleep(0.01)
        assert end(conn, "settled", ids, False) == INVALID_TXN_STATE  # as Kafka: the client learns it committed


def test_an_abort_after_an_add_refused_for_an_unknown_topic_succeeds_with_nothing_to_abort(txn_broker):
    with connect(txn_broker) as conn:
        ids = init(conn, "typo")
        assert add(conn, "typo", ids, [("no-such-topic", [0])]) == {("no-such-topic", 0): UNKNOWN_TOPIC_OR_PARTITION}
        assert end(conn, "typo", ids, False) == 0  # librdkafka sends it: it counts the refused add
        assert end(conn, "typo", ids, True) == INVALID_TXN_STATE  # a commit of nothing is still refused
        assert describe(conn, "typo").transaction_state == "Empty"
