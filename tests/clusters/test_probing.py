"""clusters.probing.next_state: KubeFed's cluster health state machine, the one copy."""

import pytest

from clusters.choices import ClusterState
from clusters.probing import next_state

READY, NOT_READY, OFFLINE, UNKNOWN = (
    ClusterState.READY,
    ClusterState.NOT_READY,
    ClusterState.OFFLINE,
    ClusterState.UNKNOWN,
)


@pytest.mark.parametrize(
    ("current", "reachable", "ready", "failures", "successes", "expected"),
    [
        (UNKNOWN, True, True, 0, 1, UNKNOWN),  # success threshold 2 not met yet: unchanged
        (UNKNOWN, True, True, 0, 2, READY),
        (OFFLINE, True, True, 0, 2, READY),
        (READY, True, False, 0, 0, NOT_READY),  # answers but not ready (5xx, 401): never Offline
        (OFFLINE, True, False, 0, 0, NOT_READY),
        (READY, False, False, 1, 0, NOT_READY),  # unreachable: NotReady at once ...
        (READY, False, False, 2, 0, NOT_READY),
        (NOT_READY, False, False, 3, 0, OFFLINE),  # ... Offline at the failure threshold (3)
        (OFFLINE, False, False, 1, 0, OFFLINE),  # Offline stays Offline while unreachable
    ],
)
def test_next_state_follows_kubefeds_thresholds(settings, current, reachable, ready, failures, successes, expected):
    settings.FEDPORTAL_HEALTH_FAILURE_THRESHOLD = 3
    settings.FEDPORTAL_HEALTH_SUCCESS_THRESHOLD = 2
    assert next_state(current, reachable=reachable, ready=ready, failures=failures, successes=successes) == expected
