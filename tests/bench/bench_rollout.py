"""Benchmark rollout_100: a 4-wave staged rollout of one Deployment over 100 clusters, zero bake time.

    .venv/bin/python tests/bench/bench_rollout.py [--rounds 5] [--workers 2] [--threads 8]

Throwaway database and broker (tests/bench/harness.py), a generated 100-cluster simulator fleet whose
Deployments become available at once (``--rollout-seconds 0``), real ``celery worker`` processes.
Each round edits the Deployment twice and applies each edit through an approved change request:

* ``single``: the request's own strategy is ``{}`` (one wave: every cluster at once, as before
  strategies existed); timed from the deciding ``approve()`` until all 100 PropagatedVersions
  record the new revision with status OK (what propagate_100 times).
* ``staged``: four waves of 10, 20, 30 and 40 clusters (maxParallel 100%, bakeSeconds 0); timed from
  the deciding ``approve()`` until the rollout is Completed (every wave's gates passed).

The gates' own cost is measured apart: ``check_gates`` of each wave's clusters (one GET per
Deployment) in this process, summed over the four waves. Goal (issue 20):
``staged <= 1.5 x (single + gate checks)``; both are reported, with the medians over ``--rounds``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.bench.bench_propagate import federate_namespace, ftype, ok_count, template, users  # noqa: E402
from tests.bench.harness import BenchEnv, fleet_versions, register_clusters, start_worker, wait_until  # noqa: E402
from tests.fleet_fixtures import start_fleet  # noqa: E402

WAVE_SIZES = (10, 20, 30, 40)
PHASES: list = []  # per round, per wave: (start after the rollout began, apply seconds, gate seconds)


def strategy(names) -> dict:
    waves, start = [], 0
    for index, size in enumerate(WAVE_SIZES):
        waves.append({"name": f"w{index + 1}", "clusters": list(names[start : start + size]), "maxParallel": "100%"})
        start += size
    return {"autoRollback": False, "waves": waves}


def approve(cr, operator, approvers):
    """Submit, then approve up to the deciding approval; returns perf_counter() just before it."""
    from federation.approvals import services as approvals
    from federation.approvals.choices import ChangeState

    cr = approvals.submit(cr, actor=operator)
    for first in approvers[:-1]:
        cr = approvals.approve(cr, actor=first)
        if cr.state != ChangeState.SUBMITTED:
            return time.perf_counter()
    started = time.perf_counter()
    approvals.approve(cr, actor=approvers[-1])
    return started


def one_round(resource, names, round_no: int, operator, approvers, waves: dict) -> tuple[float, float, float]:
    from federation import services
    from federation.approvals import services as approvals
    from federation.approvals.choices import RolloutState
    from federation.approvals.models import Rollout
    from federation.propagation.gates import check_gates

    # single wave: the request overrides the strategy with {}
    services.update_resource(resource, template=template(2 * round_no), placement={"clusters": list(names)})
    resource.refresh_from_db()
    revision = resource.current_revision
    cr = approvals.create_change_request(resource, actor=operator, rollout_strategy={})
    started = approve(cr, operator, approvers)
    wait_until(lambda: ok_count(resource, revision) >= len(names), timeout=300, interval=0.02, message="single wave")
    single = time.perf_counter() - started
    # staged: the resource's four waves
    services.update_resource(resource, template=template(2 * round_no + 1), placement={"clusters": list(names)})
    resource.refresh_from_db()
    cr = approvals.create_change_request(resource, actor=operator)
    started = approve(cr, operator, approvers)
    wait_until(
        lambda: Rollout.objects.filter(change_request=cr, state=RolloutState.COMPLETED).exists(),
        timeout=600,
        interval=0.02,
        message="staged rollout completed",
    )
    staged = time.perf_counter() - started
    from federation.approvals.models import RolloutWave

    rollout = Rollout.objects.get(change_request=cr)
    first = rollout.created_at
    PHASES.append(
        [
            (
                round((w.started_at - first).total_seconds(), 2),
                round((w.applied_at - w.started_at).total_seconds(), 2),
                round((w.finished_at - w.applied_at).total_seconds(), 2),
            )
            for w in RolloutWave.objects.filter(rollout=rollout).order_by("index")
        ]
    )
    gate_started = time.perf_counter()
    for clusters in waves.values():
        results = check_gates(resource, clusters)
        assert all(r.verdict == "healthy" for r in results.values()), results
    gates = time.perf_counter() - gate_started
    return single, staged, gates


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args()
    env = BenchEnv("rollout")
    env.setup()
    fleet = start_fleet({"generate": 100, "versions": "1.27-1.33"}, rollout_seconds=0, timeout=300)
    workers = []
    try:
        from federation import services as federation_services

        names = fleet.names
        register_clusters(fleet, names, versions=fleet_versions(fleet))
        operator, approvers = users()
        extra = {"FEDERATION_THREADS": str(args.threads), "FEDPORTAL_ROLLOUT_POLL_SECONDS": "0.2"}
        workers = [
            start_worker(env.env, f"rollout{i}", concurrency=args.threads, extra_env=extra) for i in range(args.workers)
        ]
        federate_namespace(names, timeout=600)
        resource = federation_services.create_resource(
            ftype("Deployment"), namespace="bench", name="web", template=template(0), placement={"clusters": names}
        )
        plan = strategy(names)
        federation_services.set_rollout_strategy(resource, plan, actor=operator)
        waves = {w["name"]: w["clusters"] for w in plan["waves"]}
        rounds = [one_round(resource, names, r + 1, operator, approvers, waves) for r in range(args.rounds)]
        single, staged, gates = (statistics.median(r[i] for r in rounds) for i in range(3))
        budget = 1.5 * (single + gates)
        result = {
            "rollout_100": {
                "staged_seconds": round(staged, 2),
                "single_wave_seconds": round(single, 2),
                "gate_check_seconds": round(gates, 2),
                "ratio": round(staged / (single + gates), 2),
                "goal_seconds": round(budget, 2),
                "staged_each": [round(r[1], 2) for r in rounds],
                "single_each": [round(r[0], 2) for r in rounds],
                "waves": list(WAVE_SIZES),
                "wave_phases": PHASES,
                "rounds": len(rounds),
                "workers": args.workers,
                "threads_per_worker": args.threads,
                "poll_seconds": 0.2,
                "database": env.database,
                "broker": env.broker,
            }
        }
    finally:
        for worker in workers:
            worker.stop()
        fleet.stop()
        env.teardown()
    print(json.dumps(result))
    sys.exit(0 if result["rollout_100"]["staged_seconds"] <= result["rollout_100"]["goal_seconds"] else 1)


if __name__ == "__main__":
    main()
