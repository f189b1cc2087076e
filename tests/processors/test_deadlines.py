"""A processor's deadlines heap: items come out as they fall due, ties in the order they were added."""

from mmlog.processors.deadlines import Deadlines


def test_items_come_out_in_due_order_ties_in_the_order_added():
    deadlines = Deadlines()
    assert not deadlines and deadlines.next_due() is None
    for due, item in ((2.0, "c"), (1.0, "a"), (1.0, "b"), (3.0, "d")):
        deadlines.add(due, item)
    assert deadlines and deadlines.next_due() == 1.0
    assert list(deadlines.due(2.0)) == ["a", "b", "c"]
    assert deadlines.next_due() == 3.0 and list(deadlines.due(2.9)) == []


def test_an_item_added_while_taking_them_out_comes_out_too_if_due():
    deadlines = Deadlines()
    deadlines.add(1.0, "first")
    taken = []
    for item in deadlines.due(5.0):
        taken.append(item)
        if item == "first":
            deadlines.add(2.0, "added meanwhile")
    assert taken == ["first", "added meanwhile"] and not deadlines
