"""Migration 0011: a propagated resource's removals act on the retention its last applied change
request held, not on a switch nobody approved (a review's finding)."""

import importlib

import pytest
from django.apps import apps

from federation.choices import Retention
from federation.models import FederatedResource
from tests.approvals.test_four_eyes import applied, set_settings

pytestmark = pytest.mark.django_db

approved_retentions = importlib.import_module("federation.migrations.0011_approved_retention").approved_retentions


def retentions(*resources):
    FederatedResource.objects.update(approved_retention="")
    approved_retentions(apps, None)
    return [FederatedResource.objects.get(pk=r.pk).approved_retention for r in resources]


def test_a_switch_after_the_last_applied_request_is_not_adopted(dev_resource, operator, approver):
    set_settings(dev_resource, operator, retention=Retention.ORPHAN)
    resource = applied(dev_resource, operator, approver)
    set_settings(resource, operator, retention=Retention.DELETE)
    assert retentions(resource) == [Retention.ORPHAN]


def test_a_retention_an_applied_request_held_is_kept(dev_resource, operator, approver):
    resource = applied(dev_resource, operator, approver)
    assert retentions(resource) == [Retention.DELETE]


def test_a_resource_never_propagated_acts_on_none(dev_resource):
    assert retentions(dev_resource) == [""]
