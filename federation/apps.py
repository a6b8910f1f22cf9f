from django.apps import AppConfig


class FederationConfig(AppConfig):
    name = "federation"

    def ready(self):
        # a cluster that joins or is relabelled gets what the approved placements now select
        from clusters.services import register_membership_listener
        from federation.membership import on_membership_change, on_memberships_change

        register_membership_listener(on_membership_change, many=on_memberships_change)

        # an unjoined cluster's finished targets stay counted in /metrics (federation.outcome_totals)
        from django.db.models.signals import pre_delete

        from clusters.models import Cluster
        from federation.outcome_totals import retire_cluster_targets

        pre_delete.connect(retire_cluster_targets, sender=Cluster, dispatch_uid="federation_retire_cluster_targets")
