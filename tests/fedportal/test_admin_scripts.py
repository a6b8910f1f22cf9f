"""Every admin page runs under the Content-Security-Policy (script-src 'self'): no inline script.
django-celery-beat's periodic-task form had one (its crontab translation), which the browser blocked."""

import re

import pytest
from django.apps import apps
from django.contrib import admin
from django.urls import reverse

pytestmark = pytest.mark.django_db

SCRIPT = re.compile(r"<script\b([^>]*)>(.*?)</script>", re.S)


def inline_scripts(html: str) -> list[str]:
    """The <script> elements that would run and are not a static file (JSON data blocks are not run)."""
    return [
        body.strip()[:200]
        for attrs, body in SCRIPT.findall(html)
        if "src=" not in attrs and 'type="application/json"' not in attrs
    ]


@pytest.fixture
def superuser(django_user_model):
    return django_user_model.objects.create_superuser("root-admin", "root@example.com", "pw-not-used")


def admin_pages():
    for model in (m for m in apps.get_models() if admin.site.is_registered(m)):
        name = f"admin:{model._meta.app_label}_{model._meta.model_name}"
        yield pytest.param(f"{name}_changelist", id=f"{name}_changelist")
        yield pytest.param(f"{name}_add", id=f"{name}_add")


@pytest.mark.parametrize("url_name", admin_pages())
def test_an_admin_page_has_no_inline_script(client, superuser, url_name):
    client.force_login(superuser)
    response = client.get(reverse(url_name))
    assert response.status_code in (200, 403), response.status_code  # 403: an add page for read-only models
    if response.status_code == 200:
        assert inline_scripts(response.content.decode()) == []


def test_the_periodic_task_form_keeps_its_crontab_translation_as_a_static_script(client, superuser):
    client.force_login(superuser)
    html = client.get(reverse("admin:django_celery_beat_periodictask_add")).content.decode()
    assert 'id="readable-crontabs" type="application/json"' in html
    assert "js/periodic-task-admin.js" in html
