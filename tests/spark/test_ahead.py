"""The read-ahead thread: items in order and unchanged, the producer's error raised in the consumer, and a
consumer that stops early stopping the producer and closing its iterator."""

from __future__ import annotations

import threading

import pytest

from mmlog.spark.ahead import ahead


def test_items_come_in_order_and_unchanged():
    items = [object() for _ in range(100)]
    assert list(ahead(iter(items))) == items
    assert list(ahead(iter(()))) == []


def test_items_are_made_in_another_thread():
    makers = []

    def made():
        for i in range(3):
            makers.append(threading.current_thread())
            yield i

    assert list(ahead(made(), depth=2)) == [0, 1, 2]
    assert set(makers) == {makers[0]} and makers[0] is not threading.current_thread()


def test_the_producers_error_is_raised_in_the_consumer_after_the_items_before_it():
    def failing():
        yield 1
        yield 2
        raise ValueError("offset 7: bad record")

    got = []
    with pytest.raises(ValueError, match="offset 7: bad record"):
        for item in ahead(failing()):
            got.append(item)
    assert got == [1, 2]


def test_a_consumer_that_stops_early_stops_the_producer_and_closes_its_iterator():
    closed, made = threading.Event(), []

    def endless():
        try:
            i = 0
            while True:
                made.append(i)
                yield i
                i += 1
        finally:
            closed.set()

    items = ahead(endless(), depth=1)
    assert [next(items) for _ in range(3)] == [0, 1, 2]
    items.close()
    assert closed.is_set()
    assert len(made) <= 3 + 2  # at most the queue's item and the one being handed over were made ahead
    assert not [t for t in threading.enumerate() if t.name == "mmlog-read-ahead"]
