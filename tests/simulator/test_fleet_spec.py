"""Fleet file parsing, generated fleets and runfleet's answers to bad input."""

import pytest
from django.core.management import CommandError, call_command

from clusters.simulator.fleet import FleetSpecError, generate_fleet, parse_fleet, parse_version_range


def test_fleet_file_defaults_and_nodes():
    spec = parse_fleet(
        {
            "defaults": {"version": "v1.28.3", "rolloutSeconds": 4, "nodes": 2},
            "clusters": [
                {"name": "a"},
                {
                    "name": "b",
                    "version": "v1.30.0",
                    "role": "host",
                    "nodes": {"count": 3, "kubeletVersions": ["v1.30.0", "v1.29.1"], "region": "r1", "zones": ["z1"]},
                },
            ],
        }
    )
    a, b = spec.clusters
    assert a.version == "v1.28.3" and a.rollout_seconds == 4 and len(a.nodes) == 2 and a.role == "member"
    assert a.token and a.readonly_token and a.token != a.readonly_token
    assert [n.kubelet_version for n in b.nodes] == ["v1.30.0", "v1.29.1", "v1.30.0"]
    assert {n.zone for n in b.nodes} == {"z1"} and b.nodes[0].region == "r1"


@pytest.mark.parametrize(
    "data,message",
    [
        ({}, "non-empty"),
        ({"clusters": []}, "non-empty"),
        ({"clusters": [{"name": "Bad_Name", "version": "v1.29.0"}]}, "bad cluster name"),
        ({"clusters": [{"name": "a", "version": "1.29"}]}, "bad Kubernetes version"),
        ({"clusters": [{"name": "a", "version": "v1.29.0"}, {"name": "a", "version": "v1.29.0"}]}, "unique"),
        ({"clusters": [{"name": "a", "version": "v1.29.0", "role": "boss"}]}, "role"),
        ({"clusters": [{"name": "a", "version": "v1.29.0", "faults": {"down": "maybe"}}]}, "faults.down"),
        ({"clusters": [{"name": "a", "version": "v1.29.0", "faults": {"errorRate": 2}}]}, "errorRate"),
        ("clusters: [unclosed", "not valid YAML"),
    ],
)
def test_bad_fleet_specs_are_rejected_with_a_reason(data, message):
    with pytest.raises(FleetSpecError, match=message):
        parse_fleet(data)


def test_generated_fleet_spreads_versions_regions_and_roles():
    spec = generate_fleet(20, "1.25-1.28")
    assert spec.clusters[0].role == "host" and all(c.role == "member" for c in spec.clusters[1:])
    assert {c.version.split(".")[1] for c in spec.clusters} == {"25", "26", "27", "28"}
    assert len({c.labels["region"] for c in spec.clusters}) > 3
    assert len({c.name for c in spec.clusters}) == 20


@pytest.mark.parametrize("text", ["1.30-1.25", "latest", "2.1-2.3"])
def test_bad_version_ranges(text):
    with pytest.raises(FleetSpecError):
        parse_version_range(text)


def test_runfleet_rejects_a_bad_fleet_file(tmp_path):
    bad = tmp_path / "fleet.yaml"
    bad.write_text("clusters:\n  - name: x\n    version: nope\n")
    with pytest.raises(CommandError, match="bad Kubernetes version"):
        call_command("runfleet", "--fleet", str(bad), "--kubeconfig-out", str(tmp_path / "kc"))
    with pytest.raises(CommandError, match="cannot read"):
        call_command("runfleet", "--fleet", str(tmp_path / "missing.yaml"), "--kubeconfig-out", str(tmp_path / "kc"))


@pytest.mark.parametrize("name", ["demo", "drift"])
def test_shipped_fleets_parse(name):
    from pathlib import Path

    spec = parse_fleet(Path(__file__).resolve().parents[2] / "clusters/simulator/fleets" / f"{name}.yaml")
    assert sum(c.role == "host" for c in spec.clusters) == 1 and len(spec.clusters) >= 7
