import csv
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.db import connection
from django.utils import timezone

from fedportal.audit import record_event, verify_chain
from fedportal.csv_export import BOM
from fedportal.models import AuditChainHead, AuditEvent

ROOT = Path(__file__).resolve().parents[2]
TABLE = AuditEvent._meta.db_table

pytestmark = pytest.mark.django_db


def run_sql(sql, params=()):
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def verify() -> str:
    """verify_audit's first line (the verdict)."""
    out = io.StringIO()
    call_command("verify_audit", "--no-checkpoint", stdout=out)
    return out.getvalue().splitlines()[0]


# --- verify_audit --------------------------------------------------------------------------------


def test_clean_log_verifies(make_events):
    make_events(12)
    assert verify().strip() == "OK: 12 events verified"


def test_empty_log_verifies():
    assert verify().strip() == "OK: 0 events verified"


def test_editing_one_row_with_raw_sql_fails_and_names_it(make_events):
    events = make_events(10)
    run_sql(f"UPDATE {TABLE} SET summary = %s WHERE id = %s", ["nothing to see here", events[6].pk])
    with pytest.raises(CommandError, match=rf"broken at event {events[6].pk}: its content does not match its hash"):
        verify()


def test_editing_a_row_and_recomputing_its_hash_still_breaks_the_next_link(make_events):
    from fedportal.audit import compute_hash

    events = make_events(5)
    forged = AuditEvent.objects.get(pk=events[2].pk)
    forged.summary = "forged"
    run_sql(f"UPDATE {TABLE} SET summary = %s, hash = %s WHERE id = %s", ["forged", compute_hash(forged), forged.pk])
    with pytest.raises(CommandError, match=rf"broken at event {events[3].pk}: its prev_hash"):
        verify()


def test_deleting_a_row_fails_naming_the_event_after_the_gap(make_events):
    events = make_events(8)
    run_sql(f"DELETE FROM {TABLE} WHERE id = %s", [events[3].pk])
    with pytest.raises(CommandError, match=rf"broken at event {events[4].pk}: .*event {events[2].pk}.* removed"):
        verify()


def test_deleting_the_newest_rows_fails(make_events):
    events = make_events(5)
    run_sql(f"DELETE FROM {TABLE} WHERE id >= %s", [events[3].pk])
    with pytest.raises(CommandError, match=rf"newest events after event {events[2].pk} were removed"):
        verify()


def test_deleting_every_row_fails(make_events):
    make_events(3)
    run_sql(f"DELETE FROM {TABLE}")
    with pytest.raises(CommandError, match="expects 3 events .* found 0"):
        verify()


def test_the_orm_refuses_to_change_or_delete_events(make_events):
    from fedportal.models import AppendOnlyError

    event = make_events(1)[0]
    with pytest.raises(AppendOnlyError):
        AuditEvent.objects.filter(pk=event.pk).update(summary="x")
    with pytest.raises(AppendOnlyError):
        AuditEvent.objects.all().delete()
    with pytest.raises(AppendOnlyError):
        event.save()
    assert verify_chain().ok


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(settings.DATABASES["default"]["ENGINE"] != "django.db.backends.sqlite3", reason="SQLite file DB")
def test_verify_audit_exits_non_zero_from_the_command_line(make_events, tmp_path):
    events = make_events(4)
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "fedportal.settings",
        "DATABASE_URL": f"sqlite:///{connection.settings_dict['NAME']}",
        "FEDPORTAL_AUDIT_CHECKPOINTS": str(tmp_path),
    }
    command = [sys.executable, "manage.py", "verify_audit"]
    ok = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    chain_id = AuditChainHead.objects.get().chain_id
    assert ok.returncode == 0 and ok.stdout.splitlines() == [
        "OK: 4 events verified",
        f"Checkpoint written: chain {chain_id}, 5 events.",
    ]  # 4 + its own audit.verify event
    assert len((tmp_path / f"{chain_id}.jsonl").read_text().splitlines()) == 1
    run_sql(f"UPDATE {TABLE} SET actor_name = 'mallory' WHERE id = %s", [events[1].pk])
    broken = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert broken.returncode != 0
    assert f"Audit chain broken at event {events[1].pk}" in broken.stderr


# --- export_audit --------------------------------------------------------------------------------


def read_file(path) -> list[list[str]]:
    text = Path(path).read_text(encoding="utf-8")
    assert text.startswith(BOM)
    return list(csv.reader(io.StringIO(text[1:])))


def test_export_audit_writes_the_same_columns_as_the_web_export(tmp_path, make_events, viewer_client):
    make_events(3, summary="=cmd|' /C calc'!A0")
    target = tmp_path / "audit.csv"
    out = io.StringIO()
    call_command("export_audit", "--action", "test.event", "-o", str(target), stdout=out)
    rows = read_file(target)
    web = viewer_client.get("/audit/export.csv", {"action": "test.event"})
    web_rows = list(csv.reader(io.StringIO(b"".join(web.streaming_content).decode()[1:])))
    assert rows[0] == web_rows[0]
    assert len(rows) == 4 and rows[1:] == web_rows[1:]
    assert all(row[8].startswith("'=") for row in rows[1:])
    assert "Wrote 3 events" in out.getvalue()
    assert not list(tmp_path.glob(".*partial"))


def test_export_audit_filters_by_iso_since_and_until(tmp_path, make_events):
    make_events(2)
    first_time = AuditEvent.objects.order_by("id").first().created_at
    target = tmp_path / "audit.csv"
    call_command(
        "export_audit", "--since", "2000-01-01", "--until", "2000-01-02", "-o", str(target), stdout=io.StringIO()
    )
    assert len(read_file(target)) == 1
    call_command("export_audit", "--since", first_time.isoformat(), "-o", str(target), stdout=io.StringIO())
    assert [row[3] for row in read_file(target)[1:]] == ["test.event", "test.event", "audit.export"]
    # the same moment at an offset PostgreSQL would refuse (beyond 15:59): searched in UTC
    far = first_time.astimezone(timezone.get_fixed_timezone(-(19 * 60 + 31))).isoformat()
    call_command("export_audit", "--since", far, "-o", str(target), stdout=io.StringIO())
    assert [row[3] for row in read_file(target)[1:]][:2] == ["test.event", "test.event"]


def test_export_audit_is_itself_audited(tmp_path):
    call_command("export_audit", "--since", "2026-01-01T00:00:00Z", "-o", str(tmp_path / "a.csv"), stdout=io.StringIO())
    event = AuditEvent.objects.get(action="audit.export")
    assert event.actor_name == "system"
    assert event.after["filter"] == {"since": "2026-01-01T00:00:00Z"}
    assert verify_chain().ok


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--since", "last tuesday"], "--since 'last tuesday' is not an ISO 8601 date"),
        (["--until", "2026-02-30"], "--until '2026-02-30' is not a valid date"),
        (["--since", "2026-11-02", "--until", "2026-11-01"], "must be earlier than --until"),
        (["--action", "*"], "use \\* only once"),
        (["--since", "0001-01-01T00:00:00+01:00"], "Out of the range of dates"),
        (["--action", "a**"], "use \\* only once"),
        # longer than the column: the filter form's refusal, before the export is audited
        (["--actor", "a" * 151], "actor"),
        (["--cluster", "c" * 64], "cluster"),
    ],
)
def test_export_audit_bad_arguments_are_clear_command_errors(tmp_path, args, message):
    target = tmp_path / "audit.csv"
    with pytest.raises(CommandError, match=message):
        call_command("export_audit", *args, "-o", str(target), stdout=io.StringIO())
    assert not target.exists()
    assert not AuditEvent.objects.filter(action="audit.export").exists()


def test_export_audit_to_a_missing_directory_is_a_command_error(tmp_path):
    with pytest.raises(CommandError, match="does not exist"):
        call_command("export_audit", "-o", str(tmp_path / "nope" / "a.csv"), stdout=io.StringIO())


def test_export_audit_to_stdout(make_events):
    make_events(1, summary="@evil")
    out = io.StringIO()
    call_command("export_audit", "--action", "test.event", "-o", "-", stdout=out)
    rows = list(csv.reader(io.StringIO(out.getvalue()[1:])))
    assert rows[1][8] == "'@evil"


def test_chain_head_tracks_every_event(make_events):
    make_events(4)
    head = AuditChainHead.objects.get(pk=1)
    assert head.length == 4 and head.last_hash == AuditEvent.objects.order_by("-id").first().hash
    record_event("test.more")
    assert AuditChainHead.objects.get(pk=1).length == 5


def test_the_benchmarks_bulk_inserted_chain_verifies(make_events):
    from tests.bench.bench_audit_export import fill_audit_log

    make_events(2)
    fill_audit_log(1200)
    record_event("test.after_bulk")
    assert verify().strip() == "OK: 1203 events verified"


def test_export_audit_filters_by_object_and_cluster(tmp_path):
    record_event("cluster.edit", object_type="clusters.cluster", object_id=3, cluster="east-1", summary="wanted")
    record_event("cluster.edit", object_type="clusters.cluster", object_id=4, cluster="east-1", summary="other")
    target = tmp_path / "a.csv"
    call_command(
        "export_audit",
        "--object-type",
        "clusters.cluster",
        "--object-id",
        "3",
        "--cluster",
        "east-1",
        "-o",
        str(target),
        stdout=io.StringIO(),
    )
    assert [row[8] for row in read_file(target)[1:]] == ["wanted"]


def test_a_batch_of_events_is_stored_as_single_events_are_and_the_chain_still_verifies(admin_user):
    from fedportal.audit import record_events

    spec = dict(
        actor=admin_user, obj=admin_user, summary="s", before={"pair": (1, 2)}, after={"token": "s3cret", "n": 1}
    )
    single = AuditEvent.objects.get(pk=record_event("test.single", cluster="c1", **spec).pk)
    record_events([dict(action="test.batch", cluster="c2", **spec), dict(action="test.batch", summary="by nobody")])
    first, second = AuditEvent.objects.filter(action="test.batch").order_by("id")
    same = (
        "actor_id",
        "actor_name",
        "object_type",
        "object_id",
        "object_repr",
        "summary",
        "before",
        "after",
        "source_ip",
    )
    assert [getattr(first, f) for f in same] == [getattr(single, f) for f in same]
    assert first.after == {"token": "[redacted]", "n": 1} and first.before == {"pair": [1, 2]} and first.cluster == "c2"
    assert (second.actor_id, second.actor_name, second.object_type) == (None, "system", "")
    assert first.prev_hash == single.hash and second.prev_hash == first.hash
    assert verify_chain().ok
