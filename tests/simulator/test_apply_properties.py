"""Properties of server-side apply with a single manager, checked in-process (no HTTP):
after any sequence of applies the live object holds exactly what was applied last (plus server
defaults), list items are never duplicated, and re-applying is a no-op."""

from hypothesis import given, settings
from hypothesis import strategies as st

from clusters.simulator import objects
from clusters.simulator.fleet import parse_fleet
from clusters.simulator.store import ClusterState

names = st.sampled_from(["web", "log", "proxy", "init"])
env = st.lists(
    st.fixed_dictionaries({"name": st.sampled_from(["A", "B", "C"]), "value": st.text("xyz", max_size=3)}),
    max_size=3,
    unique_by=lambda e: e["name"],
)
ports = st.lists(
    st.fixed_dictionaries({"containerPort": st.sampled_from([80, 443, 8080])}),
    max_size=2,
    unique_by=lambda p: p["containerPort"],
)
container = st.builds(
    lambda n, img, e, p: {"name": n, "image": img, **({"env": e} if e else {}), **({"ports": p} if p else {})},
    names,
    st.sampled_from(["nginx:1.25", "nginx:1.27", "redis:7"]),
    env,
    ports,
)
containers = st.lists(container, min_size=1, max_size=3, unique_by=lambda c: c["name"])
labels = st.dictionaries(st.sampled_from(["a", "b", "c"]), st.sampled_from(["1", "2"]), max_size=3)


def manifest(cs, lab, replicas):
    body = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "p", "labels": lab},
        "spec": {
            "selector": {"matchLabels": {"app": "p"}},
            "template": {"metadata": {"labels": {"app": "p"}}, "spec": {"containers": cs}},
        },
    }
    if replicas is not None:
        body["spec"]["replicas"] = replicas
    return body


def fresh_cluster():
    spec = parse_fleet({"clusters": [{"name": "prop", "version": "v1.29.2", "rolloutSeconds": 100}]}).clusters[0]
    return ClusterState(spec)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(containers, labels, st.none() | st.integers(0, 5)), min_size=1, max_size=5))
def test_single_manager_apply_sequences(steps):
    cluster = fresh_cluster()
    res = cluster.find_resource("apps/v1", "deployments")
    for cs, lab, replicas in steps:
        ctx = objects.Ctx(cluster, res, "default", "p", field_manager="fedportal")
        live, _ = objects.apply(ctx, manifest(cs, lab, replicas), force=False)
        got = live["spec"]["template"]["spec"]["containers"]
        assert [c["name"] for c in got] == [c["name"] for c in cs] or sorted(c["name"] for c in got) == sorted(
            c["name"] for c in cs
        )
        by_name = {c["name"]: c for c in got}
        for c in cs:
            assert by_name[c["name"]]["image"] == c["image"]
            assert [e["name"] for e in by_name[c["name"]].get("env", [])] == [
                e["name"] for e in c.get("env", [])
            ] or sorted(e["name"] for e in by_name[c["name"]].get("env", [])) == sorted(
                e["name"] for e in c.get("env", [])
            )
            assert sorted(p["containerPort"] for p in by_name[c["name"]].get("ports", [])) == sorted(
                p["containerPort"] for p in c.get("ports", [])
            )
        assert (live["metadata"].get("labels") or {}) == lab
        assert live["spec"]["replicas"] == (replicas if replicas is not None else 1)
        again, _ = objects.apply(
            objects.Ctx(cluster, res, "default", "p", field_manager="fedportal"),
            manifest(cs, lab, replicas),
            force=False,
        )
        assert again["metadata"]["resourceVersion"] == live["metadata"]["resourceVersion"]
