"""The preview's per-target warnings come from registered manifest checks, else the version schema."""

import pytest

from clusters.models import Cluster
from federation.preview_checks import (
    manifest_warnings,
    register_manifest_check,
    registered_manifest_checks,
    unregister_manifest_check,
)

V128_SIDECAR = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "shop"},
    "spec": {
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {
                "initContainers": [{"name": "proxy", "image": "envoy", "restartPolicy": "Always"}],
                "containers": [{"name": "web", "image": "nginx"}],
            },
        },
    },
}


@pytest.fixture
def only(monkeypatch):
    """Run with exactly the given checks registered (drift's is registered at start-up)."""
    from federation.plugins import Registry
    from federation.preview_checks import CHECKS

    def use(*checks):
        replacement = Registry()
        for check in checks:
            replacement.register(check)
        monkeypatch.setattr(CHECKS, "_functions", replacement._functions)

    return use


def test_without_checks_the_schema_of_the_clusters_version_is_used(only):
    only()
    (warning,) = manifest_warnings(V128_SIDECAR, Cluster(name="old", server_version="v1.27.3"))
    assert warning.startswith("old (v1.27.3): ") and "restartPolicy" in warning
    assert manifest_warnings(V128_SIDECAR, Cluster(name="new", server_version="v1.28.1")) == []
    assert manifest_warnings(V128_SIDECAR, Cluster(name="never-polled", server_version="")) == []


def test_the_first_check_that_answers_wins_and_none_passes_on(only):
    seen = []

    def abstains(manifest, cluster):
        seen.append(cluster.name)
        return None

    only(abstains, lambda manifest, cluster: [f"checked {cluster.name}"], lambda manifest, cluster: ["never asked"])
    assert manifest_warnings(V128_SIDECAR, Cluster(name="a", server_version="v1.27.3")) == ["checked a"]
    assert seen == ["a"]
    only(lambda manifest, cluster: [])
    assert manifest_warnings(V128_SIDECAR, Cluster(name="a", server_version="v1.27.3")) == []  # "fine" is an answer


def test_a_broken_check_is_skipped(only, caplog):
    def broken(manifest, cluster):
        raise RuntimeError("plugin bug")

    only(broken)
    (warning,) = manifest_warnings(V128_SIDECAR, Cluster(name="old", server_version="v1.27.3"))
    assert "restartPolicy" in warning  # the schema fallback still answers
    assert "plugin bug" in caplog.text


def test_register_is_idempotent_and_unregister_removes(only):
    only()

    def check(manifest, cluster):
        return []

    register_manifest_check(check)
    register_manifest_check(check)
    assert registered_manifest_checks() == [check]
    unregister_manifest_check(check)
    assert registered_manifest_checks() == []
