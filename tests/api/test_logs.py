"""LOG_FORMAT=json: every line is one JSON object, in the web process (an API call names its request
id, user and change request) and in a worker (a task's lines carry its id and the cluster)."""

import json
import logging
import os
import subprocess
import sys

import pytest

from fedportal.logs import JsonFormatter
from tests.utils import wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def parse_lines(text: str) -> list[dict]:
    lines = [line for line in text.splitlines() if line.strip()]
    assert lines, "no log lines"
    return [json.loads(line) for line in lines]  # fails on any line that is not one JSON object


def test_log_format_json_configures_every_process_from_the_settings():
    code = "import django, logging; django.setup(); logging.getLogger('fedportal.check').warning('hello %s', 'world')"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "fedportal.settings_test", "LOG_FORMAT": "json"}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    [entry] = [e for e in parse_lines(done.stderr) if e["logger"] == "fedportal.check"]
    assert entry["message"] == "hello world" and entry["level"] == "WARNING" and entry["time"].endswith("Z")
    assert set(entry) >= {"time", "level", "logger", "message", "request_id", "user", "cluster", "change_request"}


def test_a_bad_log_format_stops_start_up():
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "fedportal.settings_test", "LOG_FORMAT": "xml"}
    done = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode != 0 and "LOG_FORMAT='xml'" in done.stderr


REFUSAL = """
import django, logging, sys
django.setup()
from django.core.exceptions import PermissionDenied
try:
    raise PermissionDenied("This action needs the admin role.")
except PermissionDenied:
    logging.getLogger("django.request").warning("Forbidden (Permission denied): %s", "/clusters/new/", exc_info=sys.exc_info())
logging.getLogger("django.request").error("Internal Server Error: %s", "/x/", exc_info=(ValueError, ValueError("boom"), None))
"""


@pytest.mark.parametrize("debug", ["true", "false"])
def test_a_refusal_is_logged_once_without_its_traceback_and_an_error_keeps_its_own(debug):
    """With DEBUG on (the demo) Django's own console handler printed every django.* line a second
    time, and each expected 403 came with some twenty lines of traceback."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "fedportal.settings_test", "DEBUG": debug, "LOG_FORMAT": "plain"}
    done = subprocess.run(
        [sys.executable, "-c", REFUSAL], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("Forbidden (Permission denied): /clusters/new/") == 1, done.stderr
    assert "PermissionDenied" not in done.stderr
    assert done.stderr.count("Internal Server Error: /x/") == 1 and "ValueError: boom" in done.stderr


@pytest.fixture
def json_records():
    """Lines the 'fedportal.api' logger writes during the test, formatted as with LOG_FORMAT=json."""
    import io

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("fedportal.api")
    logger.addHandler(handler)
    old_level = logger.level
    logger.setLevel(logging.INFO)
    yield stream
    logger.removeHandler(handler)
    logger.setLevel(old_level)


@pytest.mark.django_db
def test_an_api_call_logs_one_json_line_with_request_id_user_and_change_request(json_records, api_as, operator):
    from tests.api.test_endpoints import CONFIGMAP_YAML

    client = api_as(operator)
    client.request("POST", "/api/v1/resources", data=CONFIGMAP_YAML, content_type="application/yaml")
    from federation.models import FederatedResource

    cr = client.post("/api/v1/change-requests", {"resource_id": FederatedResource.objects.get().pk}).json()
    response = client.get(f"/api/v1/change-requests/{cr['id']}", **{"X-Request-ID": "req-123"})
    entries = parse_lines(json_records.getvalue())
    assert len(entries) == 3
    last = entries[-1]
    assert last["message"].startswith(f"GET /api/v1/change-requests/{cr['id']} 200")
    assert (last["request_id"], last["user"], last["change_request"], last["cluster"]) == (
        "req-123",
        operator.username,
        cr["id"],
        None,
    )
    assert response["X-Request-ID"] == "req-123"
    assert entries[0]["change_request"] is None and entries[0]["user"] == operator.username


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_worker_logs_are_json_lines_with_the_task_id_and_cluster(celery_worker_factory):
    from clusters.models import Cluster
    from clusters.tasks import probe_cluster_task
    from tests.clusters.factories import ClusterFactory

    worker = celery_worker_factory("jsonlogs", env={"LOG_FORMAT": "json"})
    # the session's worker (if another test started it) consumes the same queues: probe until one
    # of the probes lands on this worker
    for attempt in range(40):  # the session worker takes its share: 12 probes all went there once
        cluster = ClusterFactory(
            name=f"nowhere-{attempt}", api_server=f"http://127.0.0.1:9/{attempt}", last_probe_at=None
        )
        result = probe_cluster_task.delay(cluster.pk)
        wait_for(
            lambda pk=cluster.pk: Cluster.objects.filter(pk=pk, last_probe_at__isnull=False).exists(),
            timeout=60,
            message="the probe",
        )
        if wait_for_line(worker, f"probe nowhere-{attempt} "):
            break
    else:
        pytest.fail("no probe ran on the JSON-logging worker")
    entries = parse_lines(worker.log())
    [probe] = [e for e in entries if e["message"].startswith(f"probe nowhere-{attempt} ")]
    assert probe["logger"] == "clusters.probing"
    assert (probe["request_id"], probe["cluster"], probe["user"]) == (result.id, cluster.pk, None)
    assert any(" ready." in e["message"] for e in entries)


def wait_for_line(worker, text: str, seconds: float = 3.0) -> bool:
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if text in worker.log():
            return True
        time.sleep(0.1)
    return False
