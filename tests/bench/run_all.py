"""`make bench`: run every tests/bench/bench_*.py scenario, print a table, write var/bench/latest.json.

Each scenario is a script that prints one JSON object ``{"<scenario>": {"<metric>": number}}`` as its
last line of output. Scenarios run one after another (2 cores: running them together would measure
contention, not FedPortal). The machine description is recorded with every scenario.
"""

import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "var" / "bench"
TIME_LIMIT = int(os.environ.get("FEDPORTAL_BENCH_SCENARIO_TIMEOUT", "900"))


def machine() -> dict:
    db = os.environ.get("DATABASE_URL", "sqlite (embedded)").split("://")[0]
    broker = os.environ.get("CELERY_BROKER_URL", "filesystem (embedded)").split("://")[0]
    return {
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "database": db,
        "broker": broker,
    }


def run_scenario(script: Path) -> dict:
    started = time.monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=TIME_LIMIT
        )
    except subprocess.TimeoutExpired:
        return {script.stem: {"error": f"timed out after {TIME_LIMIT}s"}}
    lines = [line for line in proc.stdout.strip().splitlines() if line.startswith("{")]
    if not lines:
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-4000:])
        return {script.stem: {"error": f"exit {proc.returncode}"}}
    # A scenario that missed its goal still reports its figures (and exits non-zero): keep them.
    result = json.loads(lines[-1])
    for figures in result.values():
        figures["wall_seconds"] = round(time.monotonic() - started, 1)
        figures["exit_code"] = proc.returncode
    return result


def main(argv: list[str]) -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    wanted = set(argv)
    scripts = sorted(p for p in Path(__file__).parent.glob("bench_*.py") if not wanted or p.stem in wanted)
    results: dict = {}
    info = machine()
    for script in scripts:
        print(f"running {script.name} …", flush=True)
        for scenario, figures in run_scenario(script).items():
            figures["machine"] = info
            results[scenario] = figures
    (OUT / "latest.json").write_text(json.dumps(results, indent=2, sort_keys=True))
    print(f"\n{'scenario':<18} {'metric':<28} value")
    failed = False
    for scenario, figures in sorted(results.items()):
        for metric, value in figures.items():
            if metric == "machine":
                continue
            failed |= metric == "error" or (metric == "exit_code" and value != 0)
            print(f"{scenario:<18} {metric:<28} {value}")
    print(f"\nmachine: {json.dumps(info)}\nwritten: {OUT / 'latest.json'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
