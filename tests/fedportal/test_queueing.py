"""fedportal.queueing: what a queued task's arguments look like in logs, events and Flower."""

import pytest
from celery.signals import before_task_publish

from fedportal.queueing import REPR_MAX, brief_repr, send


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


def test_a_long_argument_is_cut_as_celery_cuts_the_argsrepr_it_makes():
    shown = brief_repr(("x" * 5000,))
    assert len(shown) == REPR_MAX and shown.startswith("('xxx") and shown.endswith("...")


def test_a_queued_task_carries_the_brief_argsrepr():
    seen = {}

    def capture(headers=None, **_):
        if headers and headers.get("task") == "fedportal.tests.never_run":
            seen.update(headers)

    before_task_publish.connect(capture, weak=False)
    try:
        # a queue no worker reads: the message only has to be published
        send("fedportal.tests.never_run", (7, list(range(1, 126))), queue="test-argsrepr-unread")
    finally:
        before_task_publish.disconnect(capture)
    assert seen["argsrepr"] == "(7, [1, 2, 3, 4, 5, ... (125 items)])"
