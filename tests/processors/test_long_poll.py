"""Fetch long polls: parked until min_bytes arrive (from any processor) or max_wait_ms passes."""

import threading
import time

from mmlog.protocol.messages import metadata
from mmlog.protocol.records import build_batch
from tests.processors.test_bad_input import connect, fetch_one, produce_one


def test_a_parked_fetch_wakes_within_milliseconds_of_a_produce_on_any_processor(broker):
    # Connections go to processors round-robin, so over five rounds the waiter sits
    # both on the producer's processor and on the other one.
    producer = connect(broker)
    producer.request(metadata.API_KEY, 8, metadata.REQUEST(topics=[{"name": "longpoll"}]))
    delays = []
    for offset in range(5):
        with connect(broker) as waiter:
            done = {}

            def wait():
                done["part"] = fetch_one(waiter, "longpoll", 0, offset, max_wait_ms=10_000)
                done["at"] = time.monotonic()

            thread = threading.Thread(target=wait)
            thread.start()
            time.sleep(0.3)  # let it park
            sent = time.monotonic()
            assert produce_one(producer, "longpoll", 0, build_batch([(None, b"%d" % offset)])).error_code == 0
            thread.join(15)
            assert len(done["part"].records) > 0
            delays.append(done["at"] - sent)
    producer.close()
    # max_wait is 10 s: answers well under a second were woken by the append, not timed out.
    assert max(delays) < 1.0, delays


def test_a_fetch_with_nothing_to_read_answers_empty_after_max_wait(broker):
    with connect(broker) as conn:
        conn.request(metadata.API_KEY, 8, metadata.REQUEST(topics=[{"name": "quiet"}]))
        start = time.monotonic()
        part = fetch_one(conn, "quiet", 0, 0, max_wait_ms=300)
        waited = time.monotonic() - start
        assert part.error_code == 0 and len(part.records) == 0
        assert 0.25 <= waited < 5
