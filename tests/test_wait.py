"""tests.wait.wait_for: the value once the condition holds; a failure that says what was awaited and seen."""

import itertools

import pytest

from mmlog.testing.wait import wait_for


def test_the_condition_s_first_truthy_value_is_returned():
    counter = itertools.count()
    assert wait_for(lambda: next(counter) >= 3 and "done", interval=0) == "done"


def test_a_deadline_passed_fails_with_what_was_awaited_and_the_last_value_seen():
    with pytest.raises(AssertionError, match=r"waiting for the thing \(last value 0.*last seen: 'shown'"):
        wait_for(lambda: 0, timeout=0.05, what="the thing", interval=0.01, show=lambda: "shown")


def test_a_failed_try_is_tried_again_and_reported_if_it_never_succeeds():
    tries = iter([OSError("down"), OSError("down"), "up"])

    def condition():
        value = next(tries)
        if isinstance(value, Exception):
            raise value
        return value

    assert wait_for(condition, interval=0) == "up"

    def down():
        raise OSError("down")

    with pytest.raises(AssertionError, match="last error OSError"):
        wait_for(down, timeout=0.05, interval=0.01)


def test_an_exception_not_to_retry_propagates_at_once():
    with pytest.raises(ZeroDivisionError):
        wait_for(lambda: 1 / 0, retry=(OSError,))
