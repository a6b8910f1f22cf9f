"""The keyed audit chain (issue 16, finding 4): every column hashed, HMAC, head, checkpoints, legacy."""

import datetime
import io
import json

import pytest
from django.apps import apps as global_apps
from django.core.management import CommandError, call_command
from django.db import connection
from django_celery_beat.models import PeriodicTask

from fedportal.audit import (
    GENESIS_HASH,
    HASHED_FIELDS,
    legacy_hash,
    record_event,
    verify_chain,
    write_checkpoint,
)
from fedportal.models import AuditChainHead, AuditEvent
from fedportal.tasks import audit_checkpoint_task

TABLE = AuditEvent._meta.db_table

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def checkpoints(settings, tmp_path):
    settings.FEDPORTAL_AUDIT_CHECKPOINTS = tmp_path / "checkpoints"
    return settings.FEDPORTAL_AUDIT_CHECKPOINTS


def run_sql(sql, params=()):
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def verify(*args) -> str:
    out = io.StringIO()
    call_command("verify_audit", *args, stdout=out)
    return out.getvalue()


def events(count, **kwargs):
    return [
        record_event("test.event", summary=f"event {i}", before={"n": i}, after={"n": i + 1}, **kwargs)
        for i in range(count)
    ]


def column(name):
    return connection.ops.quote_name(AuditEvent._meta.get_field(name).column)


def test_every_column_but_the_id_and_the_hash_is_hashed():
    columns = {field.attname for field in AuditEvent._meta.concrete_fields}
    assert columns - {"id", "hash"} == {*HASHED_FIELDS, "created_at"}
    assert len(HASHED_FIELDS) + 1 == len(columns) - 2


# A different value for every hashed column, as stored (JSON columns as JSON text).
TAMPERED = {
    "created_at": datetime.datetime(2001, 1, 1, tzinfo=datetime.UTC),
    "actor_id": None,
    "actor_name": "mallory",
    "action": "cluster.delete",
    "object_type": "auth.user",
    "object_id": "999",
    "object_repr": "someone else",
    "cluster": "prod-1",
    "summary": "nothing to see here",
    "before": json.dumps({"n": 41}),
    "after": json.dumps({"n": 42}),
    "request_id": "f" * 32,
    "source_ip": "203.0.113.9",
    "prev_hash": "a" * 64,
}


def test_the_tampering_table_covers_every_hashed_column():
    assert set(TAMPERED) == {*HASHED_FIELDS, "created_at"}


@pytest.mark.parametrize("name", sorted(TAMPERED))
def test_changing_any_hashed_column_breaks_the_chain_at_that_event(name, admin_user):
    made = events(4, actor=admin_user)
    target = made[2]
    before_target = AuditEvent.objects.filter(pk__lt=target.pk).count()  # creating the admin is audited too
    run_sql(f"UPDATE {TABLE} SET {column(name)} = %s WHERE id = %s", [TAMPERED[name], target.pk])
    result = verify_chain()
    assert (result.ok, result.broken_id, result.checked) == (False, target.pk, before_target)
    assert ("prev_hash" if name == "prev_hash" else "content does not match its hash") in result.reason


def test_a_hash_recomputed_without_the_key_is_refused():
    made = events(3)
    forged = AuditEvent.objects.get(pk=made[1].pk)
    forged.summary = "forged"
    unkeyed = legacy_hash(vars(forged))
    run_sql(f"UPDATE {TABLE} SET summary = %s, hash = %s WHERE id = %s", ["forged", unkeyed, forged.pk])
    result = verify_chain()
    assert (result.ok, result.broken_id) == (False, forged.pk)
    assert "content does not match" in result.reason


def test_a_different_key_does_not_verify(settings):
    events(2)
    assert verify_chain().ok
    settings.FEDPORTAL_AUDIT_KEY = "another-key-" + "x" * 40
    result = verify_chain()
    assert not result.ok and "content does not match" in result.reason


def test_deleting_the_oldest_event_is_detected():
    made = events(4)
    run_sql(f"DELETE FROM {TABLE} WHERE id = %s", [made[0].pk])
    result = verify_chain()
    assert (result.ok, result.broken_id) == (False, made[1].pk)
    assert "the start of the chain" in result.reason


def test_deleting_a_middle_event_is_detected():
    made = events(5)
    run_sql(f"DELETE FROM {TABLE} WHERE id = %s", [made[2].pk])
    result = verify_chain()
    assert (result.ok, result.broken_id) == (False, made[3].pk)


def test_deleting_the_head_row_is_a_failure():
    events(3)
    run_sql(f"DELETE FROM {AuditChainHead._meta.db_table}")
    result = verify_chain()
    assert not result.ok
    assert result.reason == "the chain head row is missing (deleted from the database), but 3 events are stored"


def test_deleting_the_newest_events_and_fixing_up_the_head_is_caught_by_the_checkpoint():
    made = events(6)
    write_checkpoint()
    run_sql(f"DELETE FROM {TABLE} WHERE id >= %s", [made[4].pk])
    AuditChainHead.objects.filter(pk=1).update(last_hash=made[3].hash, length=4)
    result = verify_chain()
    assert not result.ok
    assert (
        f"recorded 6 events ending in {made[5].hash[:12]}…, found 4: the newest events after event {made[3].pk}"
        in result.reason
    )


def test_deleting_the_newest_events_and_the_head_row_is_caught():
    made = events(6)
    write_checkpoint()
    run_sql(f"DELETE FROM {TABLE} WHERE id >= %s", [made[4].pk])
    run_sql(f"DELETE FROM {AuditChainHead._meta.db_table}")
    assert verify_chain().reason == "the chain head row is missing (deleted from the database), but 4 events are stored"


def test_emptying_the_table_and_resetting_the_head_is_caught_by_the_checkpoint():
    events(3)
    write_checkpoint()
    run_sql(f"DELETE FROM {TABLE}")
    AuditChainHead.objects.filter(pk=1).update(last_hash=GENESIS_HASH, length=0)
    result = verify_chain()
    assert not result.ok and "recorded 3 events" in result.reason and "found 0" in result.reason
    with pytest.raises(CommandError, match="found 0"):
        verify()


def test_emptying_the_table_and_deleting_the_head_is_caught_by_the_checkpoint_file(checkpoints):
    events(3)
    chain_id = write_checkpoint().chain_id
    run_sql(f"DELETE FROM {TABLE}")
    run_sql(f"DELETE FROM {AuditChainHead._meta.db_table}")
    result = verify_chain()
    assert not result.ok and f"holds checkpoints of chain {chain_id}" in result.reason


def test_rewriting_the_chain_after_a_checkpoint_with_the_key_is_still_caught(settings):
    """Someone holding the key but not the checkpoint file rewrites history: the hash differs."""
    made = events(3)
    write_checkpoint()
    run_sql(f"DELETE FROM {TABLE} WHERE id = %s", [made[2].pk])
    AuditChainHead.objects.filter(pk=1).update(last_hash=made[1].hash, length=2)
    events(1)  # a new third event: same length as the checkpoint, different hash
    result = verify_chain()
    assert not result.ok and "recorded a different hash for event number 3" in result.reason


def test_an_edited_checkpoint_line_is_a_failure(checkpoints):
    events(2)
    point = write_checkpoint()
    path = checkpoints / f"{point.chain_id}.jsonl"
    data = json.loads(path.read_text())
    data["length"] = 1
    path.write_text(json.dumps(data) + "\n")
    result = verify_chain()
    assert not result.ok and result.reason.startswith("the checkpoint file was altered (line 1 of")


def test_checkpoints_are_appended_signed_and_checked(checkpoints):
    assert write_checkpoint() is None  # no events, no chain yet
    made = events(2)
    first = write_checkpoint()
    events(1)
    second = write_checkpoint()
    assert first.chain_id == second.chain_id == AuditChainHead.objects.get().chain_id
    assert len(first.chain_id) == 32
    lines = [json.loads(line) for line in (checkpoints / f"{first.chain_id}.jsonl").read_text().splitlines()]
    assert [(line["length"], line["head"]) for line in lines] == [(2, made[1].hash), (3, second.head)]
    assert all(len(line["mac"]) == 64 for line in lines)
    result = verify_chain()
    assert result.ok and result.checkpoint == second


def test_a_fresh_database_starts_a_fresh_chain(checkpoints):
    events(1)
    old = write_checkpoint().chain_id
    run_sql(f"DELETE FROM {TABLE}")
    run_sql(f"DELETE FROM {AuditChainHead._meta.db_table}")
    (checkpoints / f"{old}.jsonl").rename(checkpoints.parent / "archived.jsonl")  # the operator archives them
    events(2)
    new = write_checkpoint().chain_id
    assert new != old and verify_chain().ok
    assert sorted(p.stem for p in checkpoints.iterdir()) == [new]


def test_verify_audit_writes_a_checkpoint_and_the_beat_task_does_too(checkpoints):
    events(2)
    out = verify()
    chain_id = AuditChainHead.objects.get().chain_id
    # the verification is itself an audit event (for /metrics), so the checkpoint covers it too
    assert out.splitlines() == ["OK: 2 events verified", f"Checkpoint written: chain {chain_id}, 3 events."]
    audit_checkpoint_task()
    assert len((checkpoints / f"{chain_id}.jsonl").read_text().splitlines()) == 2
    assert verify("--no-checkpoint").splitlines()[1].endswith("(3 events).")


def test_the_checkpoint_beat_entry_exists():
    task = PeriodicTask.objects.get(task="fedportal.tasks.audit_checkpoint_task")
    assert task.enabled and task.interval.every == 300 and task.interval.period == "seconds"


def test_a_legacy_unkeyed_chain_is_reanchored_and_still_verifies():
    """Events written before the key: the migration counts them; they verify with plain SHA-256 and
    the first keyed event links onto them."""
    prev = GENESIS_HASH
    for i in range(3):
        event = AuditEvent(action="old.event", actor_name="system", summary=f"old {i}", prev_hash=prev)
        event.hash = prev = legacy_hash(vars(event))
        event.save()
    AuditChainHead.objects.create(pk=1, last_hash=prev, length=3)
    migration = __import__("fedportal.migrations.0003_auditsec_audit_key", fromlist=["reanchor_legacy_chain"])
    migration.reanchor_legacy_chain(global_apps, None)
    signing = __import__("fedportal.migrations.0004_audit_head_signature_and_kept_actor", fromlist=["x"])
    signing.sign_existing_head(global_apps, None)
    head = AuditChainHead.objects.get()
    assert head.legacy_length == 3 and len(head.chain_id) == 32
    new = events(2)
    assert new[0].prev_hash == prev
    result = verify_chain()
    assert (result.ok, result.checked, result.legacy) == (True, 5, 3)
    assert "the first 3 events predate FEDPORTAL_AUDIT_KEY" in verify("--no-checkpoint")
    oldest = AuditEvent.objects.order_by("id").first()
    run_sql(f"UPDATE {TABLE} SET summary = 'x' WHERE id = %s", [oldest.pk])
    assert verify_chain().broken_id == oldest.pk
