"""One simulated fleet per test module (starting one takes seconds); every test gets it back healthy.

Overrides the project-wide function-scoped ``fleet`` fixture for tests/clusters only. Tests that
need a different fleet (TLS, more clusters) still use ``fleet_factory``.
"""

import pytest

from tests.fleet_fixtures import DEFAULT_FLEET, start_fleet


@pytest.fixture(scope="module")
def _module_fleet(tmp_path_factory):
    running = start_fleet(DEFAULT_FLEET, workdir=tmp_path_factory.mktemp("clusters-fleet"))
    yield running
    running.stop()


@pytest.fixture
def fleet(_module_fleet):
    versions = {c["name"]: c["version"] for c in DEFAULT_FLEET["clusters"]}
    yield _module_fleet
    for name in _module_fleet.names:
        _module_fleet.set_up(name)
        _module_fleet.set_latency(name, 0)
        _module_fleet.set_error_rate(name, 0)
        if name in versions:
            _module_fleet.set_version(name, versions[name])
