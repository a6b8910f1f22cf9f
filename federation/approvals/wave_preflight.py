"""Preflight: a staged rollout's wave that names clusters by ``clusters:`` with a name no registered
cluster has (a typo, or one unjoined since). A warning per name: the cluster that was meant is then
in a later wave, or in the implicit last wave ``rest``, which has no approval of its own."""

from clusters.models import Cluster
from federation.approvals.choices import Severity
from federation.approvals.preflight import PreflightProblem
from federation.approvals.rollout import effective_strategy, is_staged
from federation.rollout_strategy import IMPLICIT_WAVE


def unknown_wave_clusters(change_request) -> list[PreflightProblem]:
    if not is_staged(change_request):
        return []
    named = {
        name: wave.get("name", "")
        for wave in effective_strategy(change_request).get("waves") or []
        for name in wave.get("clusters") or []
    }
    known = set(Cluster.objects.filter(name__in=list(named)).values_list("name", flat=True))
    return [
        PreflightProblem(
            name,
            Severity.WARNING,
            f"Wave {named[name]} names {name}, which is not a registered cluster (a typo?): the cluster meant "
            f"goes to a later wave, or to {IMPLICIT_WAVE!r}, which runs without an approval of its own.",
        )
        for name in sorted(set(named) - known)
    ]
