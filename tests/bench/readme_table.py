"""Rewrite the README's benchmark table from two fresh-clone runs of `make bench`'s script.

    .venv/bin/python tests/bench/readme_table.py SQLITE.json POSTGRES.json "<commit>" "<when>" "<loop note>"

SQLITE.json and POSTGRES.json are `var/bench/latest.json` of a run without and with
DATABASE_URL / CELERY_BROKER_URL. Each row's newest figures (the text before "Before:") become
its "Before" part; the goal column keeps the newest marks as "before". The paragraph above the
table ("Figures: ...") is written by hand.
"""

import json
import re
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def n(value, digits=2) -> str:
    return f"{value:,.{digits}f}"


def poll(f):
    return (
        f"{n(f['seconds'])} s vs a bare `/version` loop {n(f['baseline_seconds'])} s: ratio {n(f['ratio'])}; "
        f"every inventory due: {n(f['inventory_seconds'])} s, ratio {n(f['inventory_ratio'])}, "
        f"{n(f['inventory_same_calls_ratio'])} against the same calls"
    ), f["ratio"] <= 1.5 and f["seconds"] <= 20


def propagate_100(f):
    return (
        f"p50 {f['p50_ms']:.0f} ms, p99 {f['p99_ms']:.0f} ms from the deciding approval, {f['rounds']} rounds; "
        f"`approve()` p50 {f['approve_call_p50_ms']:.0f} ms"
    ), f["p50_ms"] <= 500 and f["p99_ms"] <= 1000


def propagate_1000(f):
    database = f", PostgreSQL {n(f['database_cpu_seconds'])} s" if f.get("database_cpu_seconds") is not None else ""
    phases = f["phases_median_seconds"]
    return (
        f"{n(f['seconds'])} s vs a bare server-side-apply loop {n(f['baseline_seconds'])} s: ratio **{n(f['ratio'])}** "
        f"(medians of {f['rounds']} rounds); workers {n(f['worker_cpu_seconds'])} s of CPU, simulator "
        f"{n(f['simulator_cpu_seconds'])} s{database}; the bare loop's client {n(f['baseline_client_cpu_seconds'])} s, "
        f"simulator {n(f['baseline_simulator_cpu_seconds'])} s; phases: returns at {n(phases['queued'])} s, first "
        f"target recorded at {n(phases['first_recorded'])} s, last at {n(phases['last_recorded'])} s"
    ), f["ratio"] <= 1.5


PAGES = ("cluster_list", "drift_matrix", "compat_matrix", "compliance_report")


def pages(f):
    queries = ", ".join(str(f[f"{p}_queries"]) for p in PAGES)
    cold = ", ".join(f"{f[f'{p}_cold_ms']:.0f}" for p in PAGES)
    met = (
        all(f[f"{p}_cold_ms"] <= 500 for p in PAGES)
        and f["p95_ms"] <= 300
        and f["errors"] == 0
        and not any(k.endswith("_missing") for k in f)
    )
    return (
        f"queries {queries}; cold: cluster list, drift matrix, compatibility, compliance report {cold} ms; "
        f"{f['clients']} clients (gunicorn {f['gunicorn_workers']} sync workers) p50 {f['p50_ms']:.0f} ms, "
        f"p95 {f['p95_ms']:.0f} ms ({n(f['server_cpu_ms_per_request'])} ms of server CPU a request), "
        f"{f['errors']} errors"
    ), met


def api(f):
    fixed = all(f[f"{k}_queries"] == f[f"{k}_deep_page_queries"] for k in ("clusters", "change_requests"))
    met = fixed and f["errors"] == 0 and f["p95_ms"] <= 100
    database = (
        f", {n(f['database_cpu_ms_per_request'])} ms in PostgreSQL"
        if f.get("database_cpu_ms_per_request") is not None
        else ""
    )
    return (
        f"queries {f['clusters_queries']}/{f['clusters_deep_page_queries']} and {f['change_requests_queries']}/"
        f"{f['change_requests_deep_page_queries']} (first/deep page); in-process {n(f['clusters_ms'], 1)} / "
        f"{n(f['change_requests_ms'], 1)} ms a page; p95 {n(f['p95_ms'], 1)} ms {'✓' if met else '✗'} "
        f"(p50 {f['p50_ms']:.0f} ms, {f['requests_per_second']:.0f} requests/s, {n(f['server_cpu_ms_per_request'])} ms "
        f"of server CPU a request{database}; gunicorn 4 sync workers), {f['errors']} errors"
    ), met


def rollout(f):
    return (
        f"{n(f['staged_seconds'])} s vs {n(f['single_wave_seconds'])} + {n(f['gate_check_seconds'])} s, "
        f"ratio {n(f['ratio'])}"
    ), f["staged_seconds"] <= f["goal_seconds"]


def compat(f):
    return (
        f"{f['checks_per_second']:,.0f} vs {n(f['naive_checks_per_second'], 1)} checks/s: ratio {f['ratio']:,.0f}; "
        f"a cold fleet {n(f['cold_fleet_seconds'], 3)} s"
    ), f["ratio"] >= 10


def simulator(f):
    return (f"RSS {f['rss_mb']:.0f} MB, `/version` p50 {n(f['version_p50_ms'])} ms, boot {n(f['boot_s'], 1)} s"), f[
        "rss_mb"
    ] <= 1024 and f["version_p50_ms"] <= 10


def audit_export(f):
    return f"{n(f['seconds'])} s, peak RSS {f['peak_rss_mb']:.0f} MB", f["peak_rss_mb"] <= 200


def drift(f):
    met = (
        f["detect_p95_ms"] <= 5000
        and f["watcher_rss_mb"] <= 512
        and f["idle_cpu_percent"] <= 5
        and f["sweep_ratio"] <= 1.5
    )
    return (
        f"detect p50 {n(f['detect_p50_ms'], 1)} ms, p95 {n(f['detect_p95_ms'], 1)} ms; watcher RSS "
        f"{f['watcher_rss_mb']:.0f} MB; idle CPU {n(f['idle_cpu_percent'])} %; sweep {n(f['sweep_seconds'])} s vs "
        f"{n(f['sweep_baseline_seconds'])} s, ratio {n(f['sweep_ratio'])}"
    ), met


# the README row (its first cell starts with this) -> (latest.json key, formatter)
ROWS = {
    "`poll_1000`": ("poll_1000", poll),
    "`propagate_100`": ("propagate_100", propagate_100),
    "`propagate_1000`": ("propagate_1000", propagate_1000),
    "`pages`": ("pages", pages),
    "`api`": ("api", api),
    "`rollout_100`": ("rollout_100", rollout),
    "`compat`": ("compat", compat),
    "`simulator_1000`": ("simulator_1000", simulator),
    "`audit_export_1m`": ("audit_export_1m", audit_export),
    "`drift_1000x200`": ("drift_1000x200", drift),
}


def mark(met: bool) -> str:
    return "✓" if met else "✗"


def rewrite_row(line: str, runs: tuple[dict, dict], commit: str, header: str) -> str:
    cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
    name, figures, goal = cells[0], cells[1], cells[2]
    key, formatter = next(value for prefix, value in ROWS.items() if name.startswith(prefix))
    texts, marks = [], []
    for run in runs:
        text, met = formatter(run[key])
        texts.append(text)
        marks.append(mark(met))
    newest = figures.split(" Before: ")[0].rstrip(".")
    goal_text, _, rest = goal.partition(": ")
    newest_marks = re.match(r"(\S) · (\S) \(SQLite · PostgreSQL\) in (\S+)'s run", rest)
    before_goal = f"before: {newest_marks[1]} · {newest_marks[2]} in {newest_marks[3]}'s run" if newest_marks else ""
    new_figures = f"{header}: {texts[0]} · {texts[1]}. Before: {newest}."
    new_goal = f"{goal_text}: {marks[0]} · {marks[1]} (SQLite · PostgreSQL) in {commit}'s run; {before_goal}"
    return f"| {name} | {new_figures} | {new_goal} |"


def main(argv: list[str]) -> int:
    sqlite_path, postgres_path, commit, when, loop = argv
    runs = tuple(json.loads(Path(p).read_text()) for p in (sqlite_path, postgres_path))
    header = f"Fresh clone of {commit} on {when}, SQLite then PostgreSQL + Redis ({loop})"
    lines = README.read_text().splitlines()
    for i, line in enumerate(lines):
        if line.startswith("| `") and any(line[2:].startswith(prefix) for prefix in ROWS):
            lines[i] = rewrite_row(line, runs, commit, header)
    README.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
