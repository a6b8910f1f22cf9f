"""fedportal.queueing: what a queued task's arguments look like in logs, events and Flower."""

import pytest

from fedportal.queueing import brief_repr


@pytest.mark.parametrize(
    "args, shown",
    [
        ((), "()"),
        ((7,), "(7,)"),
        ((7, "drift"), "(7, 'drift')"),
        ((7, [1, 2, 3, 4, 5]), "(7, [1, 2, 3, 4, 5])"),
        ((7, list(range(1, 126))), "(7, [1, 2, 3, 4, 5, ... (125 items)])"),
        (([1, 2, 3, 4, 5, 6], "joined", 0), "([1, 2, 3, 4, 5, ... (6 items)], 'joined', 0)"),
    ],
)
def test_a_long_list_argument_is_named_by_its_first_items_and_its_length(args, shown):
    assert brief_repr(args) == shown
    if "items)" not in shown:  # nothing shortened: exactly what Python shows
        assert shown == repr(args)
