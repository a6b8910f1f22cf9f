"""Attacks on the audit chain from a security review: someone who can write to the database but
does not hold FEDPORTAL_AUDIT_KEY, ordinary changes that must not break the chain (a user deleted,
a large number in a template on PostgreSQL), and a verification running while the app appends."""

import copy
import hmac
import threading

import pytest
from django.contrib.auth import get_user_model
from django.db import connection, connections

from federation import services
from fedportal import audit
from fedportal.audit import GENESIS_HASH, legacy_hash, record_event, verify_chain, write_checkpoint
from fedportal.models import AuditChainHead, AuditEvent
from fedportal.tasks import audit_checkpoint_task
from tests.clusters.factories import ClusterFactory
from tests.federation.factories import WEB_TEMPLATE, ftype

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def checkpoints(settings, tmp_path):
    settings.FEDPORTAL_AUDIT_CHECKPOINTS = tmp_path / "checkpoints"


def run_sql(sql, params=()):
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def rewrite_without_the_key(rows, *, altered_pk: int) -> str:
    """Rewrite every event with plain SHA-256 (no key needed), one summary changed; the new head hash."""
    prev = GENESIS_HASH
    for event in rows:
        if event.pk == altered_pk:
            event.summary = "nothing happened"
        event.prev_hash = prev
        event.hash = prev = legacy_hash(vars(event))
        run_sql(
            f"UPDATE {AuditEvent._meta.db_table} SET summary=%s, prev_hash=%s, hash=%s WHERE id=%s",
            [event.summary, event.prev_hash, event.hash, event.pk],
        )
    return prev


def test_history_rewritten_as_legacy_events_does_not_verify():
    """The head's legacy length decides which events plain SHA-256 vouches for: set to the whole
    chain, and with a new chain id (no checkpoint file), every rewritten event verified."""
    made = [record_event("cluster.unjoin", summary=f"Unjoined cluster prod-{i}") for i in range(6)]
    write_checkpoint()
    rows = list(AuditEvent.objects.order_by("id"))
    last = rewrite_without_the_key(rows, altered_pk=made[2].pk)
    AuditChainHead.objects.filter(pk=1).update(legacy_length=len(rows), last_hash=last, chain_id="f" * 32)

    result = verify_chain()

    assert not result.ok and "chain head row was altered" in result.reason
    # ordinary traffic and the next automatic checkpoint do not bless it
    record_event("test.later", summary="later")
    audit_checkpoint_task()
    assert not verify_chain().ok


def test_a_new_chain_id_does_not_disown_the_checkpoints():
    made = [record_event("test.event", summary=f"event {i}") for i in range(6)]
    write_checkpoint()
    run_sql(f"DELETE FROM {AuditEvent._meta.db_table} WHERE id >= %s", [made[4].pk])
    AuditChainHead.objects.filter(pk=1).update(last_hash=made[3].hash, length=4, chain_id="f" * 32)

    result = verify_chain()

    assert not result.ok and "chain head row was altered" in result.reason


def test_a_truncated_tail_is_not_laundered_by_later_checkpoints():
    """The newest events removed and the head fixed up; the app appends and beat signs checkpoints of
    what it finds: the earlier checkpoint still vouches for the removed events' position."""
    made = [record_event("test.event", summary=f"event {i}") for i in range(6)]
    write_checkpoint()
    run_sql(f"DELETE FROM {AuditEvent._meta.db_table} WHERE id >= %s", [made[4].pk])
    AuditChainHead.objects.filter(pk=1).update(last_hash=made[3].hash, length=4)
    assert not verify_chain().ok
    for i in range(5):
        record_event("test.later", summary=f"later {i}")
    audit_checkpoint_task()

    result = verify_chain()

    assert not result.ok
    assert AuditChainHead.objects.get(pk=1).mac == "", "an append re-signed a head altered outside FedPortal"


def test_checkpoints_are_each_checked_against_their_position():
    """With the key (a rewrite by someone holding it), a checkpoint signed after the rewrite does not
    hide an earlier one recording another hash for the same position."""
    made = [record_event("test.event", summary=f"event {i}") for i in range(3)]
    write_checkpoint()
    for i in range(3):
        record_event("test.later", summary=f"later {i}")
    write_checkpoint()
    # the third event rewritten, with the key, and everything after it re-chained
    rows = list(AuditEvent.objects.order_by("id"))
    prev = rows[1].hash
    for event in rows[2:]:
        if event.pk == made[2].pk:
            event.summary = "nothing happened"
        event.prev_hash = prev
        event.hash = prev = audit.compute_hash(event)
        run_sql(
            f"UPDATE {AuditEvent._meta.db_table} SET summary=%s, prev_hash=%s, hash=%s WHERE id=%s",
            [event.summary, event.prev_hash, event.hash, event.pk],
        )
    head = AuditChainHead.objects.get(pk=1)
    AuditChainHead.objects.filter(pk=1).update(
        last_hash=prev, mac=audit.head_mac(head.chain_id, head.length, prev, head.legacy_length)
    )

    result = verify_chain()

    assert not result.ok and "recorded a different hash for event number 3" in result.reason


def test_deleting_a_user_keeps_the_chain_verifiable(make_user):
    alice = make_user("alice-operator", "operator")
    event = record_event("test.event", actor=alice, summary="something alice did")
    alice_id = alice.pk
    assert verify_chain().ok

    get_user_model().objects.filter(pk=alice_id).delete()

    assert verify_chain().ok, verify_chain()
    stored = AuditEvent.objects.get(pk=event.pk)
    assert (stored.actor_id, stored.actor_name) == (alice_id, "alice-operator")


@pytest.mark.parametrize("value", [1e16, 1.5e300, -2.5e20, 1.0, 0.1, 1e-7, 2.5, 123456789.125, -0.0, 5e-324])
def test_numbers_verify_as_the_database_gives_them_back(value):
    """PostgreSQL's jsonb gives 1e16 back as the integer 10000000000000000 (CI runs this on both)."""
    record_event("test.event", after={"spec": {"x": value, "list": [value]}})
    assert verify_chain().ok, verify_chain()


def test_a_template_with_a_large_number_keeps_the_chain_verifiable(operator):
    ClusterFactory(name="east")
    template = copy.deepcopy(WEB_TEMPLATE)
    template["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"memory": 1e16}}
    services.create_resource(
        ftype("Deployment"),
        namespace="shop",
        name="web",
        template=template,
        placement={"clusters": ["east"]},
        actor=operator,
    )
    assert verify_chain().ok, verify_chain()


@pytest.mark.django_db(transaction=True)
def test_an_event_appended_during_the_walk_is_not_reported_as_removed(monkeypatch):
    for i in range(5):
        record_event("test.event", summary=f"event {i}")
    real_compare = hmac.compare_digest
    appended = []

    def append_elsewhere():
        record_event("system.heartbeat", summary="meanwhile")
        connections.close_all()

    def compare_and_append_once(a, b):
        # the walk compares the first event's hash: another connection appends an event right then
        if not appended:
            appended.append(True)
            thread = threading.Thread(target=append_elsewhere)
            thread.start()
            thread.join()
        return real_compare(a, b)

    monkeypatch.setattr(hmac, "compare_digest", compare_and_append_once)
    result = verify_chain(batch_size=2)
    monkeypatch.undo()

    assert appended and result.ok and result.checked == 5, result
    assert verify_chain().checked == 6


def test_the_django_admin_hides_url_userinfo_as_every_page_does(client):
    event = record_event("cluster.register", summary="Registered cluster c1 (https://admin:hunter2@10.0.0.1:6443)")
    superuser = get_user_model().objects.create_superuser("root", password="pw-for-tests-1")
    client.force_login(superuser)
    for url in ("/admin/fedportal/auditevent/", f"/admin/fedportal/auditevent/{event.pk}/change/"):
        response = client.get(url)
        assert response.status_code == 200
        body = response.content.decode()
        assert "hunter2" not in body and "Registered cluster c1" in body, url


def test_a_head_reset_to_a_new_chains_does_not_hide_edited_events():
    """A second review: the head set back to a new chain's values (no chain id, no events counted,
    which needs no signature) while events are stored."""
    made = [record_event("test.event", summary=f"event {i}") for i in range(4)]
    write_checkpoint()
    rewrite_without_the_key(list(AuditEvent.objects.order_by("id")), altered_pk=made[1].pk)
    AuditChainHead.objects.filter(pk=1).update(length=0, chain_id="", last_hash=GENESIS_HASH, mac="")
    assert not verify_chain().ok
    # untouched events and a reset head: still a reset (the tail could be gone unnoticed)
    AuditEvent.objects.all()._raw_delete(AuditEvent.objects.db)
    kept = [record_event("test.event", summary=f"kept {i}") for i in range(3)]
    AuditChainHead.objects.filter(pk=1).update(length=0, chain_id="", last_hash=GENESIS_HASH, mac="")
    result = verify_chain()
    assert not result.ok and "was reset" in result.reason and kept


def test_an_event_forged_past_the_head_is_checked():
    """A row inserted with an id beyond every other (PostgreSQL's sequence does not move): the walk
    covers every stored event, not only as many as the head counts."""
    record_event("test.event", summary="real")
    forged = AuditEvent.objects.order_by("id").last()
    run_sql(
        f"INSERT INTO {AuditEvent._meta.db_table} (created_at, actor_name, action, object_type, object_id, "
        "object_repr, cluster, summary, request_id, prev_hash, hash) VALUES (%s, 'mallory', 'cluster.unjoin', '', '', "
        "'', '', 'forged', '', %s, %s)",
        [forged.created_at, forged.hash, "f" * 64],
    )
    run_sql(f"UPDATE {AuditEvent._meta.db_table} SET id = 1000000000 WHERE hash = %s", ["f" * 64])
    result = verify_chain()
    assert not result.ok and "does not match its hash" in result.reason


def test_a_checkpoint_written_after_the_head_was_read_is_no_false_alarm(monkeypatch):
    record_event("test.event", summary="first")
    real_checkpoints = audit.checkpoints

    def checkpoints_after_more_events(chain_id):
        record_event("test.event", summary="appended meanwhile")
        write_checkpoint()
        return real_checkpoints(chain_id)

    monkeypatch.setattr(audit, "checkpoints", checkpoints_after_more_events)
    result = verify_chain()
    assert result.ok and result.checked == 2, result


def test_wiping_the_log_and_starting_a_new_chain_is_caught_by_the_old_chains_checkpoints(settings):
    """Every event and the head deleted; the next action starts a new chain with a head FedPortal
    signs: the earlier chain's checkpoints say its events were there (a reviewer's finding: verify
    read the new chain's checkpoints only, and said OK)."""
    for i in range(5):
        record_event("test.event", summary=f"event {i}")
    old = audit.write_checkpoint().chain_id
    run_sql(f"DELETE FROM {AuditEvent._meta.db_table}")
    run_sql(f"DELETE FROM {AuditChainHead._meta.db_table}")
    record_event("auth.login", summary="a login after the wipe")

    result = audit.verify_chain()

    assert not result.ok and f"holds checkpoints of chain {old}" in result.reason
    assert AuditChainHead.objects.get().chain_id in result.reason
    # moving the old chain's files away is how an operator starts a new database on purpose
    (settings.FEDPORTAL_AUDIT_CHECKPOINTS / f"{old}.jsonl").rename(
        settings.FEDPORTAL_AUDIT_CHECKPOINTS / "old.archived"
    )
    assert audit.verify_chain().ok


def test_a_chain_id_edited_into_a_path_writes_no_checkpoint_anywhere(settings):
    record_event("test.event", summary="one")
    AuditChainHead.objects.filter(pk=1).update(chain_id="../evil")

    assert audit.write_checkpoint() is None
    assert not (settings.FEDPORTAL_AUDIT_CHECKPOINTS.parent / "evil.jsonl").exists()
    result = audit.verify_chain()
    assert not result.ok and "not one FedPortal makes" in result.reason


def test_an_unsigned_head_gets_no_checkpoint():
    record_event("test.event", summary="one")
    AuditChainHead.objects.filter(pk=1).update(length=7)
    assert audit.write_checkpoint() is None


def test_a_checkpoint_file_with_bytes_that_are_not_utf8_is_reported_as_altered(settings):
    record_event("test.event", summary="one")
    point = audit.write_checkpoint()
    with open(settings.FEDPORTAL_AUDIT_CHECKPOINTS / f"{point.chain_id}.jsonl", "ab") as handle:
        handle.write(b"\xff\xfe garbage\n")
    result = audit.verify_chain()
    assert not result.ok and result.reason.startswith("the checkpoint file was altered (line 2 of")
