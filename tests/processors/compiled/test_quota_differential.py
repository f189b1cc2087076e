"""With client quotas, the compiled path serves the clients no quota limits, records a produce quota's bytes
and leaves every throttle to the Python handlers: the same requests get the same answers from both paths
while within the quota, and a quota'd producer is throttled once its bytes pass the quota on either.

Two brokers alike but for `compiled.request.path.enable`, each sampling rates over 2 windows of 1 s, with a
produce quota for client id `limited`, a fetch quota for `reader` and a request quota for `busy`.
"""

from __future__ import annotations

import random

import pytest

from mmlog.client import Admin
from mmlog.protocol.messages import fetch, produce
from mmlog.protocol.records import build_batch
from mmlog.replication.peer import PeerConnection
from mmlog.security.client import ClientSecurity
from mmlog.testing import EmbeddedBroker
from mmlog.testing.scrape import METRICS_ON, processors_caught_up, scrape

TOPIC = "quotas"
PRODUCE_QUOTA = 100_000  # bytes a second
QUOTAS = {(("client-id", "limited"),): {"producer_byte_rate": PRODUCE_QUOTA},
          (("client-id", "reader"),): {"consumer_byte_rate": 1_000_000},
          (("client-id", "busy"),): {"request_percentage": 50}}


@pytest.fixture(scope="module")
def brokers(tmp_path_factory):
    """(compiled, python), with the same topic and quotas."""
    made = []
    try:
        for enable in ("true", "false"):
            broker = EmbeddedBroker(tmp_path_factory.mktemp(f"quota-compiled-{enable}"), processors=1, config={
                "quota.window.num": 2, "compiled.request.path.enable": enable, **METRICS_ON}).start()
            made.append(broker)
            with Admin(broker.bootstrap) as admin:
                admin.create_topic(TOPIC, 1)
                admin.alter_client_quotas(QUOTAS)
            processors_caught_up(broker)
        yield tuple(made)
    finally:
        for broker in made:
            broker.stop()


def connect(broker, client_id: str) -> PeerConnection:
    host, port = broker.bootstrap.rsplit(":", 1)
    return PeerConnection((host, int(port)), client_id, ClientSecurity.from_options("PLAINTEXT"))


def produce_request(records: bytes):
    return produce.REQUEST(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
        {"name": TOPIC, "partition_data": [{"index": 0, "records": records}]}])


def fetch_request(offset: int):
    return fetch.REQUEST(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                         session_id=0, session_epoch=-1, topics=[{"topic": TOPIC, "partitions": [
                             {"partition": 0, "current_leader_epoch": -1, "fetch_offset": offset,
                              "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}], forgotten_topics_data=[],
                         rack_id="")


def compiled_requests(broker) -> float:
    return scrape(broker).get("mmlog_processor_requests_compiled_total", 0)


def batches(seed: int, n: int, size: int) -> list[bytes]:
    rng = random.Random(seed)
    return [build_batch([(None, rng.randbytes(size))], base_timestamp=1_700_000_000_000 + i) for i in range(n)]


@pytest.mark.parametrize("client_id, compiled_at_least", [("free", 20), ("limited", 20), ("reader", 10),
                                                           ("busy", 0)])
def test_requests_within_the_quotas_get_the_same_answers_and_only_request_quotas_keep_python(
        brokers, client_id, compiled_at_least):
    compiled, python = brokers
    sent = batches(len(client_id), 10, 100)
    before = compiled_requests(compiled)
    answers = []
    for broker in brokers:
        peer = connect(broker, client_id)
        try:
            got = [peer.request(produce.API_KEY, 8, produce_request(records), 5) for records in sent]
            got += [peer.request(fetch.API_KEY, 11, fetch_request(0), 5) for _ in range(10)]
        finally:
            peer.close()
        answers.append(got)
    assert answers[0] == answers[1]
    assert all(a.throttle_time_ms == 0 for a in answers[0])
    served = compiled_requests(compiled) - before
    # The first request of a connection is Python's (it learns the client id); a fetch quota keeps fetches there.
    assert served >= (compiled_at_least - 2) if compiled_at_least else served == 0
    if client_id == "reader":
        assert served <= 10
    assert compiled_requests(python) == 0


def test_a_produce_quota_throttles_once_its_bytes_pass_the_quota_on_both_paths(brokers):
    compiled, python = brokers
    sent = batches(9, 30, 10_000)  # 300 kB: past what a quota of 100 kB/s allows over the 2 windows
    first_throttled = []
    for broker in brokers:
        before = compiled_requests(broker)
        peer = connect(broker, "limited")
        throttles = []
        try:
            for records in sent[:30]:
                throttles.append(peer.request(produce.API_KEY, 8, produce_request(records), 10).throttle_time_ms)
                if throttles[-1]:
                    break  # the connection is muted for that long now
        finally:
            peer.close()
        at = len(throttles) - 1
        first_throttled.append(at)
        # Not before the quota's first windows' worth (1 to 2 windows of 100 kB/s, at 10 kB a request).
        assert 9 <= at <= 21, throttles
        if broker is compiled:
            assert compiled_requests(broker) - before >= at - 1  # the unthrottled ones, recorded by compiled code
    assert abs(first_throttled[0] - first_throttled[1]) <= 11
