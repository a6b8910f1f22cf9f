"""The benchmarks run the production profile: it must start with the secrets the harness gives it."""

import os
import subprocess
import sys

from tests.bench.harness import ROOT, production_secrets


def test_production_profile_starts_with_the_benchmark_secrets(tmp_path):
    env = {
        **os.environ,
        **production_secrets(),
        "DJANGO_SETTINGS_MODULE": "fedportal.settings",
        "FEDPORTAL_PROFILE": "production",
        "FEDPORTAL_VAR_DIR": str(tmp_path),
        "ALLOWED_HOSTS": "127.0.0.1",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
    }
    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
