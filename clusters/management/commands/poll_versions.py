"""python manage.py poll_versions [--wait] [--timeout S] [--inline]"""

import time
from concurrent.futures import ThreadPoolExecutor

from django.core.management.base import BaseCommand, CommandError
from django.db import close_old_connections

from clusters import probing, services
from clusters.models import Cluster


class Command(BaseCommand):
    help = "Probe every cluster now (queued to the workers); --wait shows the result."

    def add_arguments(self, parser):
        parser.add_argument("--wait", action="store_true", help="wait for every probe and print the fleet")
        parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait with --wait (default 120)")
        parser.add_argument(
            "--inline", action="store_true", help="probe from this process instead of the workers (no worker needed)"
        )
        parser.add_argument("--concurrency", type=int, default=8, help="parallel probes with --inline (default 8)")

    def handle(self, wait, timeout, inline, concurrency, **options):
        if inline:
            ids = list(Cluster.objects.values_list("pk", flat=True))

            def probe(cluster_id):
                try:
                    return probing.probe_cluster(cluster_id)
                finally:
                    close_old_connections()

            if concurrency <= 1:
                for cluster_id in ids:
                    probing.probe_cluster(cluster_id)
            else:
                with ThreadPoolExecutor(max_workers=concurrency) as pool:
                    list(pool.map(probe, ids))
            self._print()
            return
        poll = services.request_poll()
        self.stdout.write(f"Queued a probe of {poll.total} cluster(s) (poll {poll.pk}).")
        if not wait:
            return
        deadline = time.monotonic() + timeout
        while True:
            progress = services.poll_progress(poll)
            if progress.finished:
                break
            if time.monotonic() > deadline:
                self._print()
                raise CommandError(
                    f"Only {progress.done} of {progress.total} probed after {timeout:g}s: is a worker consuming "
                    "the 'probes' queue?"
                )
            time.sleep(0.5)
        self._print()

    def _print(self):
        for cluster in Cluster.objects.order_by("name"):
            self.stdout.write(
                f"{cluster.name:<30} {cluster.state:<9} {cluster.server_version or '?':<14} {cluster.last_error[:80]}"
            )
