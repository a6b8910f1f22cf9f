"""The pages work under the Content-Security-Policy (no inline script, no eval): htmx swaps, the
override rows' remove button (static/js/fedportal.js), the print button; and the browser reports
no policy violation (issue 16, finding 15)."""

import pytest

pytestmark = pytest.mark.django_db(transaction=True)


def watch(page) -> list[str]:
    problems = []
    page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda exc: problems.append(str(exc)))
    return problems


def test_htmx_rows_and_the_remove_button_work_under_the_policy(page, live_server, login, operator):
    problems = watch(page)
    login(page, operator)
    page.goto(f"{live_server.url}/federation/new/")
    page.click("button[name=_add_override]")  # htmx GET, row appended (no reload)
    page.wait_for_selector("#id_ov-1-path")
    assert page.input_value("#id_ov-TOTAL_FORMS") == "2"
    row = page.locator("tr.override-row").nth(1)
    row.locator("button[data-remove-row]").click()
    assert row.is_hidden()
    assert page.is_checked("#id_ov-1-DELETE")
    assert page.locator("tr.override-row").nth(0).is_visible()
    assert not [p for p in problems if "Content Security Policy" in p or "Refused" in p], problems
    assert not [p for p in problems if "Failed to load resource" not in p], problems  # (a missing favicon is fine)


def test_the_print_button_prints(page, live_server, login, viewer):
    problems = watch(page)
    login(page, viewer)
    page.goto(f"{live_server.url}/drift/compliance/", wait_until="domcontentloaded", timeout=90_000)  # plotly is large
    page.evaluate("() => { window.printed = 0; window.print = () => { window.printed += 1; }; }")
    page.click("button[data-print]")
    assert page.evaluate("window.printed") == 1
    assert not [p for p in problems if "Content Security Policy" in p or "Refused" in p], problems


def test_the_periodic_task_admin_form_translates_the_crontab_under_the_policy(
    page, live_server, login, django_user_model
):
    """django-celery-beat's form did this in an inline script, which the policy blocked."""
    from django_celery_beat.models import CrontabSchedule

    from tests.browser_fixtures import PASSWORD

    schedule = CrontabSchedule.objects.create(minute="30", hour="4", day_of_week="*", day_of_month="*")
    root = django_user_model.objects.create_superuser("root-admin", "root@example.com", PASSWORD)
    problems = watch(page)
    login(page, root)
    page.goto(f"{live_server.url}/admin/django_celery_beat/periodictask/add/")
    page.select_option("#id_crontab", str(schedule.pk))
    assert "Translation: At 04:30" in page.inner_text(".field-crontab .help")
    assert not [p for p in problems if "Failed to load resource" not in p], problems
