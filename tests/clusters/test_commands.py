"""Management commands: import_kubeconfig (against the simulator) and poll_versions --inline."""

import pytest
from django.core.management import CommandError, call_command

from clusters.choices import ClusterRole, ClusterState
from clusters.models import Cluster

pytestmark = pytest.mark.django_db


def test_import_kubeconfig_registers_one_cluster_per_api_server_by_default(fleet, capsys):
    call_command("import_kubeconfig", str(fleet.kubeconfig_path), "--host", "host", "--label", "env=lab")
    names = sorted(Cluster.objects.values_list("name", flat=True))
    assert names == ["host", "m127", "m128", "m130", "m131"]  # not the *-readonly duplicates
    assert Cluster.objects.get(name="host").role == ClusterRole.HOST
    assert all(c.labels == {"env": "lab"} for c in Cluster.objects.all())
    out = capsys.readouterr().out
    assert "Imported 5 cluster(s)" in out and "v1.27.3" in out
    assert fleet.token("m127") not in out


def test_import_kubeconfig_with_chosen_contexts(fleet):
    call_command("import_kubeconfig", str(fleet.kubeconfig_path), "--context", "m127", "--context", "m128-readonly")
    assert sorted(Cluster.objects.values_list("name", flat=True)) == ["m127", "m128-readonly"]
    assert Cluster.objects.get(name="m128-readonly").get_credentials()["token"] == fleet.readonly_token("m128")


@pytest.mark.parametrize(
    "args, message",
    [
        (["--context", "nope"], "Unknown context(s): nope"),
        (["--label", "bad key=x"], "is not key=value"),
        (["--label=-x=y"], "label key"),
    ],
)
def test_import_kubeconfig_bad_arguments_change_nothing(fleet, args, message):
    with pytest.raises(CommandError) as info:
        call_command("import_kubeconfig", str(fleet.kubeconfig_path), *args)
    assert message in str(info.value)
    assert not Cluster.objects.exists()


def test_import_kubeconfig_missing_or_malformed_file(tmp_path):
    with pytest.raises(CommandError, match="Cannot read"):
        call_command("import_kubeconfig", str(tmp_path / "missing"))
    bad = tmp_path / "config"
    bad.write_text("clusters: [")
    with pytest.raises(CommandError, match="not valid YAML"):
        call_command("import_kubeconfig", str(bad))


def test_import_kubeconfig_reads_referenced_files_next_to_it(fleet, tmp_path):
    import yaml

    config = yaml.safe_load(fleet.kubeconfig_path.read_text())
    user = next(u for u in config["users"] if u["name"] == "m127-admin")
    (tmp_path / "token").write_text(user["user"].pop("token") + "\n")
    user["user"]["tokenFile"] = "token"
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(config))
    call_command("import_kubeconfig", str(path), "--context", "m127")
    assert Cluster.objects.get(name="m127").get_credentials()["token"] == fleet.token("m127")


def test_poll_versions_inline_probes_without_a_worker(fleet, capsys):
    call_command("import_kubeconfig", str(fleet.kubeconfig_path), "--context", "m127", "--context", "m130")
    fleet.set_down("m130")
    call_command("poll_versions", "--inline", "--concurrency", "1")
    assert dict(Cluster.objects.values_list("name", "state")) == {
        "m127": ClusterState.READY,
        "m130": ClusterState.NOT_READY,
    }
    assert "m130" in capsys.readouterr().out


def test_import_kubeconfig_update_existing_refreshes_credentials_and_keeps_role_and_labels(fleet, capsys):
    call_command(
        "import_kubeconfig", str(fleet.kubeconfig_path), "--context", "host", "--host", "host", "--label", "env=a"
    )
    with pytest.raises(CommandError, match="already registered"):
        call_command("import_kubeconfig", str(fleet.kubeconfig_path), "--context", "host")
    Cluster.objects.filter(name="host").update(api_server="http://127.0.0.1:9/old")
    call_command(
        "import_kubeconfig", str(fleet.kubeconfig_path), "--context", "host", update_existing=True, host_context="host"
    )
    cluster = Cluster.objects.get(name="host")
    assert cluster.api_server == fleet.url("host") and cluster.credential_version == 2
    assert cluster.role == ClusterRole.HOST and cluster.labels == {"env": "a"}
    call_command("import_kubeconfig", str(fleet.kubeconfig_path), "--context", "host", "--update-existing")
    assert Cluster.objects.get(name="host").credential_version == 2  # nothing changed: no new version
    assert Cluster.objects.count() == 1


def test_import_kubeconfig_update_existing_merges_labels_given_on_the_command_line(fleet):
    call_command("import_kubeconfig", str(fleet.kubeconfig_path), "--context", "host", "--label", "env=a")
    call_command(
        "import_kubeconfig",
        str(fleet.kubeconfig_path),
        "--context",
        "host",
        "--update-existing",
        "--label",
        "region=eu",
        "--label",
        "env=b",
    )
    assert Cluster.objects.get(name="host").labels == {"env": "b", "region": "eu"}


# --- issue 23 item 9: re-import skips existing clusters with a report; labels per context by pattern ---


def test_import_kubeconfig_skip_existing_imports_the_new_ones_and_says_which_it_skipped(fleet, capsys):
    call_command("import_kubeconfig", str(fleet.kubeconfig_path), "--context", "m127", "--context", "m128")
    capsys.readouterr()
    with pytest.raises(CommandError, match="already"):  # without the switch a clash fails the whole import
        call_command("import_kubeconfig", str(fleet.kubeconfig_path))
    assert sorted(Cluster.objects.values_list("name", flat=True)) == ["m127", "m128"]
    call_command("import_kubeconfig", str(fleet.kubeconfig_path), "--skip-existing", "--host", "host")
    assert sorted(Cluster.objects.values_list("name", flat=True)) == ["host", "m127", "m128", "m130", "m131"]
    out = capsys.readouterr().out
    assert "skipped    m127" in out and "a cluster named m127 is already registered" in out
    assert "Imported 3 cluster(s); first probes are queued. Skipped 2 already registered." in out


def test_import_kubeconfig_labels_for_all_and_derived_from_the_context_name(fleet):
    call_command(
        "import_kubeconfig",
        str(fleet.kubeconfig_path),
        "--label",
        "team=fed",
        "--labels-from-context",
        r"m(?P<minor>1\d\d)",
    )
    labels = dict(Cluster.objects.values_list("name", "labels"))
    assert labels["m127"] == {"team": "fed", "minor": "127"}
    assert labels["host"] == {"team": "fed"}  # no match: only the labels for all


@pytest.mark.parametrize("pattern, message", [("(", "not a regular expression"), ("m1", "needs named groups")])
def test_import_kubeconfig_bad_label_pattern_imports_nothing(fleet, pattern, message):
    with pytest.raises(CommandError, match=message):
        call_command("import_kubeconfig", str(fleet.kubeconfig_path), "--labels-from-context", pattern)
    assert not Cluster.objects.exists()
