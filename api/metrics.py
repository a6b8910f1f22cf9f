"""/metrics for Prometheus.

Gauges and counters are computed from the database when Prometheus scrapes (a custom collector),
so every web process answers the same and nothing is lost when a worker restarts: the database is
the one place every gunicorn and Celery process writes to. The propagation-duration and
approval-latency histograms are computed from stored timestamps the same way (a target's finish
minus its run's start; a request's decision minus its submission) — their counts only grow as
rows are added, as a Prometheus histogram must. The probe-latency histogram is the exception: a
probe's duration is not stored, so it is observed in the probing process (fedportal/metrics.py) and
merged over processes with prometheus-client's multiprocess mode when PROMETHEUS_MULTIPROC_DIR is set.

Access: ``Authorization: Bearer $FEDPORTAL_METRICS_TOKEN``, or a source address in
FEDPORTAL_METRICS_ALLOWED_NETWORKS; neither configured -> 403 for everyone."""

import hmac
import ipaddress
import logging
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.db import connection, transaction
from django.db.models import Count, DurationField, ExpressionWrapper, F, Q, Sum
from django.http import HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)
from prometheus_client.multiprocess import MultiProcessCollector

from clusters.choices import ClusterState
from clusters.models import Cluster
from federation.approvals.choices import ChangeState
from federation.approvals.models import ChangeRequest
from federation.models import PropagatedVersion, RetiredTargetTotal
from federation.outcome_totals import PROPAGATION_BUCKETS, bucket_counts, finished_targets
from fedportal import metrics as process_metrics
from fedportal.client_ip import forwarded_client_ip
from fedportal.models import AuditChainHead, AuditEvent

logger = logging.getLogger(__name__)

APPROVAL_BUCKETS = (60.0, 300.0, 900.0, 3600.0, 4 * 3600.0, 24 * 3600.0, 3 * 24 * 3600.0, 7 * 24 * 3600.0)
DRIFT_ACTIONS = {
    "federation.drift.detect": "detected",
    "federation.drift.enforce": "repaired",
    "federation.drift.enforce_failed": "repair_failed",
    "federation.drift.resolve": "resolved",
}
APPROVED_STATES = (
    ChangeState.APPROVED,
    ChangeState.APPLYING,
    ChangeState.APPLIED,
    ChangeState.PARTIALLY_FAILED,
    ChangeState.FAILED,
)


def _histogram(name: str, doc: str, queryset, duration, buckets) -> HistogramMetricFamily:
    """One aggregate query: cumulative counts per bucket, the total, and the sum (seconds)."""
    queryset = queryset.annotate(duration=ExpressionWrapper(duration, output_field=DurationField()))
    aggregates = {
        f"le{i}": Count("pk", filter=Q(duration__lte=timedelta(seconds=bound))) for i, bound in enumerate(buckets)
    }
    row = queryset.aggregate(total=Count("pk"), seconds=Sum("duration"), **aggregates)
    total = row["total"] or 0
    seconds = row["seconds"].total_seconds() if row["seconds"] is not None else 0.0
    family = HistogramMetricFamily(name, doc)
    family.add_metric(
        [], [(str(float(b)), row[f"le{i}"] or 0) for i, b in enumerate(buckets)] + [("+Inf", total)], sum_value=seconds
    )
    return family


def _propagation_histogram(retired: list[RetiredTargetTotal]) -> HistogramMetricFamily:
    """The propagation-duration histogram: the finished targets stored (one aggregate query) and
    those retired with their resource or cluster."""
    row = finished_targets().aggregate(**bucket_counts())
    cumulative = [row[f"le{i}"] or 0 for i in range(len(PROPAGATION_BUCKETS))]
    total = row["total"] or 0
    seconds = row["seconds"].total_seconds() if row["seconds"] is not None else 0.0
    for r in retired:
        total, seconds = total + r.count, seconds + r.seconds
        if len(r.buckets) == len(PROPAGATION_BUCKETS):
            cumulative = [n + m for n, m in zip(cumulative, r.buckets, strict=True)]
    family = HistogramMetricFamily(
        "fedportal_propagation_duration_seconds",
        "From a propagation run's start to one cluster's result (applied or failed).",
    )
    family.add_metric(
        [],
        [(str(float(b)), n) for b, n in zip(PROPAGATION_BUCKETS, cumulative, strict=True)] + [("+Inf", total)],
        sum_value=seconds,
    )
    return family


def queue_depths() -> dict[str, int] | None:
    """Messages waiting per FedPortal queue, read from the broker; None when it cannot be read."""
    from fedportal.celery import app

    queues = sorted({settings.CELERY_TASK_DEFAULT_QUEUE, *(r["queue"] for r in settings.CELERY_TASK_ROUTES.values())})
    depths = {}
    try:
        with app.connection_for_read() as conn:
            conn.ensure_connection(max_retries=1)
            channel = conn.default_channel
            for queue in queues:
                try:
                    depths[queue] = channel.queue_declare(queue=queue, passive=True).message_count
                except Exception:  # noqa: BLE001 - a queue nobody declared yet holds nothing
                    depths[queue] = 0
    except Exception as exc:  # noqa: BLE001 - the broker is down: say so, the rest still scrapes
        logger.warning("metrics: cannot read the broker's queues: %s", exc)
        return None
    return depths


class DatabaseCollector:
    """Everything /metrics shows that the database knows, read at scrape time."""

    def collect(self):
        yield from self.clusters()
        yield from self.propagation()
        yield from self.change_requests()
        yield from self.audit()
        yield from self.broker()
        yield from self.compliance()

    def clusters(self):
        state = GaugeMetricFamily(
            "fedportal_cluster_state",
            "1 for the cluster's current state (KubeFed's conditions).",
            labels=["cluster", "state"],
        )
        info = GaugeMetricFamily(
            "fedportal_cluster_info",
            "Always 1; the labels carry the cluster's role and version.",
            labels=["cluster", "role", "version"],
        )
        isolated = GaugeMetricFamily(
            "fedportal_cluster_isolated", "1 when the cluster is isolated from propagation.", labels=["cluster"]
        )
        for name, current, role, version, is_isolated in Cluster.objects.order_by("name").values_list(
            "name", "state", "role", "server_version", "isolated"
        ):
            for value in ClusterState.values:
                state.add_metric([name, value], 1.0 if value == current else 0.0)
            info.add_metric([name, role, version or "unknown"], 1.0)
            isolated.add_metric([name], 1.0 if is_isolated else 0.0)
        yield from (state, info, isolated)

    def propagation(self):
        versions = GaugeMetricFamily(
            "fedportal_propagated_versions",
            "PropagatedVersions by sync state and status reason.",
            labels=["sync_state", "status"],
        )
        for sync_state, status, n in (
            PropagatedVersion.objects.values_list("sync_state", "status")
            .annotate(n=Count("pk"))
            .order_by("sync_state", "status")
        ):
            versions.add_metric([sync_state, status], n)
        yield versions
        outcomes = CounterMetricFamily(
            "fedportal_propagation_outcomes",
            "Finished per-cluster propagations by state and reason.",
            labels=["state", "reason"],
        )
        # the rows of deleted resources and unjoined clusters count on (federation.outcome_totals), read
        # in one snapshot with the live rows: a deletion committed between two reads would be in neither
        outermost = not connection.in_atomic_block  # the isolation level is a transaction's first statement
        with transaction.atomic():
            if connection.vendor == "postgresql" and outermost:
                with connection.cursor() as cursor:
                    cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            retired = list(RetiredTargetTotal.objects.order_by("state", "reason"))
            live = list(finished_targets().values_list("state", "reason").annotate(n=Count("pk")))
            histogram = _propagation_histogram(retired)
        counts = {(r.state, r.reason): r.count for r in retired}
        for target_state, reason, n in live:
            counts[(target_state, reason)] = counts.get((target_state, reason), 0) + n
        for (target_state, reason), n in sorted(counts.items()):
            outcomes.add_metric([target_state, reason or "none"], n)
        yield outcomes
        yield histogram
        drift = CounterMetricFamily(
            "fedportal_drift_events",
            "Resource drift detected, repaired (Enforce), failed repairs, resolved.",
            labels=["event"],
        )
        counts = dict(
            AuditEvent.objects.filter(action__in=list(DRIFT_ACTIONS))
            .values_list("action")
            .annotate(n=Count("pk"))
            .order_by()
        )
        for action, event in DRIFT_ACTIONS.items():
            drift.add_metric([event], counts.get(action, 0))
        yield drift

    def change_requests(self):
        states = GaugeMetricFamily("fedportal_change_requests", "Change requests by state.", labels=["state"])
        counts = dict(ChangeRequest.objects.values_list("state").annotate(n=Count("pk")).order_by())
        for value in ChangeState.values:
            states.add_metric([value], counts.get(value, 0))
        yield states
        decided = ChangeRequest.objects.filter(
            state__in=APPROVED_STATES, submitted_at__isnull=False, decided_at__isnull=False
        )
        yield _histogram(
            "fedportal_change_request_approval_latency_seconds",
            "From submission to the deciding approval, for approved change requests.",
            decided,
            F("decided_at") - F("submitted_at"),
            APPROVAL_BUCKETS,
        )

    def audit(self):
        head = AuditChainHead.objects.filter(pk=1).values_list("length", flat=True).first() or 0
        yield GaugeMetricFamily("fedportal_audit_chain_length", "Events in the audit log's hash chain.", value=head)
        last = (
            AuditEvent.objects.filter(action="audit.verify").order_by("-id").values_list("after", "created_at").first()
        )
        ok = GaugeMetricFamily(
            "fedportal_audit_last_verification_ok",
            "1 when the last `verify_audit` found the chain intact, 0 when broken, -1 never run.",
            value=-1 if last is None else (1 if (last[0] or {}).get("ok") else 0),
        )
        yield ok
        if last is not None:
            yield GaugeMetricFamily(
                "fedportal_audit_last_verification_timestamp_seconds",
                "When `verify_audit` last ran (Unix time).",
                value=last[1].timestamp(),
            )

    def broker(self):
        depths = queue_depths()
        yield GaugeMetricFamily(
            "fedportal_broker_up", "1 when the broker's queues could be read.", value=0 if depths is None else 1
        )
        depth = GaugeMetricFamily(
            "fedportal_celery_queue_depth", "Messages waiting in each Celery queue.", labels=["queue"]
        )
        for queue, n in sorted((depths or {}).items()):
            depth.add_metric([queue], n)
        yield depth

    def compliance(self):
        from drift import selectors as drift_selectors

        report, _ = drift_selectors.fleet_compliance()
        score = GaugeMetricFamily(
            "fedportal_compliance_score", "Compliance score per cluster (0-100).", labels=["cluster"]
        )
        for cluster in report.clusters:
            score.add_metric([cluster.name], cluster.score)
        yield score
        yield GaugeMetricFamily(
            "fedportal_fleet_compliance_score", "The fleet's compliance score (0-100).", value=report.score
        )


def registry() -> CollectorRegistry:
    """A registry per scrape: the database collector, plus the in-process histograms (merged over
    every process's files in multiprocess mode)."""
    scrape = CollectorRegistry(auto_describe=False)
    scrape.register(DatabaseCollector())
    if settings.PROMETHEUS_MULTIPROC_DIR:
        MultiProcessCollector(scrape, path=settings.PROMETHEUS_MULTIPROC_DIR)
    else:
        scrape.register(process_metrics.PROBE_LATENCY)
    return scrape


def _allowed_network(request) -> bool:
    try:
        address = ipaddress.ip_address(forwarded_client_ip(request) or "")
    except ValueError:
        return False
    return any(address in ipaddress.ip_network(n, strict=False) for n in settings.FEDPORTAL_METRICS_ALLOWED_NETWORKS)


def check_access(request) -> HttpResponse | None:
    """None when the scrape may go ahead, else the 401/403 answer."""
    expected = settings.FEDPORTAL_METRICS_TOKEN
    scheme, _, sent = request.headers.get("Authorization", "").partition(" ")
    if expected and scheme.lower() == "bearer" and hmac.compare_digest(sent.strip().encode(), expected.encode()):
        return None
    if _allowed_network(request):
        return None
    if expected:
        response = HttpResponse(
            "Send Authorization: Bearer $FEDPORTAL_METRICS_TOKEN.\n", status=401, content_type="text/plain"
        )
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    return HttpResponse(
        "Metrics are off: set FEDPORTAL_METRICS_TOKEN or FEDPORTAL_METRICS_ALLOWED_NETWORKS.\n",
        status=403,
        content_type="text/plain",
    )


@login_not_required
@require_GET
def metrics_view(request):
    refused = check_access(request)
    if refused is not None:
        return refused
    return HttpResponse(generate_latest(registry()), content_type="text/plain; version=0.0.4; charset=utf-8")
