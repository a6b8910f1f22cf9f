import pytest

from fedportal.audit import record_event


@pytest.fixture
def viewer_client(client, viewer):
    client.force_login(viewer)
    return client


@pytest.fixture
def nobody_client(client, nobody):
    client.force_login(nobody)
    return client


@pytest.fixture
def make_events():
    """make_events(n, **record_event kwargs) -> the events, oldest first."""

    def make(count: int = 1, action: str = "test.event", summary: str | None = None, **kwargs):
        return [record_event(action, summary=summary or f"event {i}", **kwargs) for i in range(count)]

    return make
