from django.apps import AppConfig


class FederationConfig(AppConfig):
    name = "federation"

    def ready(self):
        # a cluster that joins or is relabelled gets what the approved placements now select
        from clusters.services import register_membership_listener
        from federation.membership import on_membership_change, on_memberships_change

        register_membership_listener(on_membership_change, many=on_memberships_change)
