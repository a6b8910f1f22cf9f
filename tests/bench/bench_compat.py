"""Compatibility checks per second: drift.compat (cached per content and minor, compiled validators)
against calling ``kubernetes_validate.validate`` for every (resource, cluster) cell.

Workload: 200 distinct Deployments (a third use a v1.28-only field) × 1,000 clusters spread over
v1.25–v1.31. One "check" is one (resource, cluster) cell. The cached figure starts from an empty
cache (cold), so it includes the real validations; the naive figure is measured on a sample of
cells and extrapolated (doing all 200,000 would take many minutes).

Last line of output: {"compat": {"checks_per_second": ..., "naive_checks_per_second": ..., "ratio": ...}}
"""

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import kubernetes_validate  # noqa: E402

from drift import compat  # noqa: E402

RESOURCES = 200
CLUSTERS = 1000
NAIVE_SAMPLE = 300


def deployment(i: int) -> dict:
    pod = {"containers": [{"name": "app", "image": f"registry.local/app:{i}", "ports": [{"containerPort": 8080}]}]}
    if i % 3 == 0:
        pod["initContainers"] = [{"name": "proxy", "image": "envoy", "restartPolicy": "Always"}]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": f"app-{i}", "namespace": "default", "labels": {"app": f"app-{i}"}},
        "spec": {
            "replicas": 1 + i % 5,
            "selector": {"matchLabels": {"app": f"app-{i}"}},
            "template": {"metadata": {"labels": {"app": f"app-{i}"}}, "spec": pod},
        },
    }


def naive(manifest: dict, version: str) -> str:
    try:
        kubernetes_validate.validate(manifest, version, strict=True)
        return "compatible"
    except kubernetes_validate.ValidationError:
        return "incompatible"
    except (kubernetes_validate.SchemaNotFoundError, kubernetes_validate.VersionNotSupportedError):
        return "unverifiable"


def main() -> None:
    manifests = {f"r{i}": deployment(i) for i in range(RESOURCES)}
    clusters = {f"c{i}": f"v1.{25 + i % 7}.{i % 4}" for i in range(CLUSTERS)}
    cells = RESOURCES * CLUSTERS

    compat.clear_cache()
    started = time.perf_counter()
    matrix = compat.check_fleet(manifests, clusters)
    cold = time.perf_counter() - started
    started = time.perf_counter()
    compat.check_fleet(manifests, clusters)
    warm = time.perf_counter() - started

    names = list(clusters)
    sample = [(f"r{i % RESOURCES}", names[(i * 37) % CLUSTERS]) for i in range(NAIVE_SAMPLE)]
    started = time.perf_counter()
    disagreements = 0
    for resource, cluster in sample:
        status = naive(manifests[resource], clusters[cluster])
        if status != matrix.results[resource][cluster].status:
            disagreements += 1
    naive_rate = NAIVE_SAMPLE / (time.perf_counter() - started)

    rate = cells / cold
    print(
        json.dumps(
            {
                "compat": {
                    "checks_per_second": round(rate, 1),
                    "naive_checks_per_second": round(naive_rate, 1),
                    "ratio": round(rate / naive_rate, 1),
                    "cells": cells,
                    "cold_fleet_seconds": round(cold, 3),
                    "warm_fleet_seconds": round(warm, 3),
                    "distinct_validations": matrix.checks,
                    "naive_disagreements_in_sample": disagreements,
                }
            }
        )
    )


if __name__ == "__main__":
    main()
