"""An event's before/after as stored and hashed (``fedportal.audit.normalise``): the shortcut for
flat dicts gives exactly what the JSON round trip with redaction and masking gives."""

import json

import pytest
from django.core.serializers.json import DjangoJSONEncoder

from federation.choices import PropagationReason, TargetState
from fedportal import audit
from fedportal.masking import mask_secrets
from fedportal.models import AuditEvent


def round_trip(value):
    """The general path: redact, mask, JSON round trip."""
    text = json.dumps(mask_secrets(audit.redact(value)), sort_keys=True, separators=(",", ":"), cls=DjangoJSONEncoder)
    return json.loads(text)


class Text(str):
    pass


CASES = [
    {"status": "Pending", "version": ""},
    {"version": "gen:3", "status": "OK", "replicas": None},
    {"replicas": 3, "ready": True, "paused": False, "big": 2**70},
    {"token": "s3cr3t", "password": "", "client_key": None, "name": "c1"},
    {"Secret_Ref": "x", "credential_version": 4},  # secret-looking keys, any case
    {"ünïcode": "☃ 😀", "lone": "\udc80", "control": "\x00\x7f"},
    {"status": PropagationReason.OK, "version": "gen:1", "replicas": None},  # a choice's member: its value
    {"state": TargetState.DONE, "token": PropagationReason.OK},
    {},
    # not flat: the general path decides
    {"kind": "Secret", "apiVersion": "v1", "data": "aGk="},
    {"path": "/data/password", "value": "hunter2", "op": "replace"},
    {"ratio": 1.5, "status": "OK"},
    {1: "int keys", 2: "become str"},
    {"name": Text("a str subclass")},
    {"nested": {"token": "x"}},
    {"items": ["a", "b"]},
]


@pytest.mark.parametrize("value", CASES, ids=range(len(CASES)))
def test_normalise_gives_what_the_round_trip_gives(value):
    got = audit.normalise(value)
    assert got == round_trip(value)
    assert list(got) == list(round_trip(value))  # the same key order: sorted
    assert json.dumps(got) == json.dumps(round_trip(value))  # the same types (True is not 1)
    if got is not None:
        # exact types, as the database gives them back (a choice's member is a str subclass)
        assert [type(item) for item in got.values()] == [type(item) for item in round_trip(value).values()]


def test_flat_secret_values_are_redacted():
    assert audit.normalise({"token": "abc", "status": "OK"}) == {"status": "OK", "token": audit.REDACTED}


def test_which_credential_version_a_cluster_uses_is_not_a_secret():
    """A rotation's event says which version the credentials moved to (it was blanked, as a key
    holding the word "credential")."""
    assert audit.normalise({"credential_version": 3, "credentials": "x"}) == {
        "credential_version": 3,
        "credentials": audit.REDACTED,
    }


@pytest.mark.django_db
def test_events_recorded_together_share_a_timestamp_and_verify():
    audit.record_events(
        [
            dict(action="test.one", summary="one", before={"status": "Pending"}, after={"status": "OK"}),
            dict(action="test.two", summary="two", after={"token": "t", "n": 2}),
        ]
    )
    one, two = AuditEvent.objects.order_by("id")
    assert one.created_at == two.created_at
    assert two.after == {"n": 2, "token": audit.REDACTED}
    assert audit.verify_chain().ok
