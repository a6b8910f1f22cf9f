"""Migration 0010: a propagated resource acts on the drift policy its last applied change request
held, not on a switch nobody approved (a review's finding)."""

import importlib

import pytest
from django.apps import apps

from federation.choices import DriftPolicy
from federation.models import FederatedResource
from tests.approvals.test_four_eyes import applied, set_settings

pytestmark = pytest.mark.django_db

approved_policies = importlib.import_module("federation.migrations.0010_approved_drift_policy").approved_policies


def policies(*resources):
    FederatedResource.objects.update(approved_drift_policy="")
    approved_policies(apps, None)
    return [FederatedResource.objects.get(pk=r.pk).approved_drift_policy for r in resources]


def test_a_switch_after_the_last_applied_request_is_not_adopted(dev_resource, operator, approver):
    resource = applied(dev_resource, operator, approver)
    set_settings(resource, operator, drift_policy=DriftPolicy.ENFORCE)
    assert policies(resource) == [DriftPolicy.REPORT]


def test_a_policy_an_applied_request_held_is_kept(dev_resource, operator, approver):
    set_settings(dev_resource, operator, drift_policy=DriftPolicy.ENFORCE)
    resource = applied(dev_resource, operator, approver)
    assert policies(resource) == [DriftPolicy.ENFORCE]


def test_a_resource_never_propagated_acts_on_none(dev_resource):
    assert policies(dev_resource) == [""]
