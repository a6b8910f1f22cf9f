"""fedportal.bulk: many rows with one statement, stored exactly as the ORM stores them."""

from datetime import timedelta

import pytest
from django.db import DataError, IntegrityError, connection, transaction
from django.utils import timezone

from clusters.models import Cluster
from federation import services
from federation.choices import PropagationReason, SyncState
from federation.models import PropagatedVersion
from fedportal import bulk
from fedportal.models import AuditEvent
from tests.federation.factories import WEB_TEMPLATE, ftype

pytestmark = pytest.mark.django_db


@pytest.fixture
def resource(clusters):
    return services.create_resource(
        ftype("Deployment"),
        namespace="shop",
        name="web",
        template=WEB_TEMPLATE,
        placement={"clusters": ["a", "b", "c"]},
    )


@pytest.fixture
def clusters():
    return [Cluster.objects.create(name=name, api_server=f"https://{name}.example:6443") for name in ("a", "b", "c")]


def test_inserted_rows_read_back_as_the_orm_would_have_stored_them(resource, clusters):
    stamp = timezone.now() - timedelta(minutes=3)
    bulk.insert_values(
        PropagatedVersion,
        [
            dict(
                resource=resource,
                cluster=cluster,
                revision=resource.current_revision,
                status=PropagationReason.OK,
                applied_manifest={"spec": {"replicas": i, "labels": {"ü": "ok"}}},
                drift=[{"path": "/x"}],
                propagated_at=stamp,
            )
            for i, cluster in enumerate(clusters)
        ],
    )
    rows = {pv.cluster.name: pv for pv in PropagatedVersion.objects.select_related("cluster")}
    assert sorted(rows) == ["a", "b", "c"]
    assert rows["c"].applied_manifest == {"spec": {"replicas": 2, "labels": {"ü": "ok"}}}
    assert rows["a"].drift == [{"path": "/x"}] and rows["a"].remote_status is None
    assert rows["b"].propagated_at == stamp and rows["b"].updated_at is not None  # auto_now filled in
    assert rows["b"].revision_id == resource.current_revision_id and rows["b"].sync_state == SyncState.UNKNOWN


def test_update_rows_sets_each_rows_own_values_and_only_the_named_fields(resource, clusters):
    pvs = [PropagatedVersion.objects.create(resource=resource, cluster=c, message="kept") for c in clusters]
    gone = pvs.pop()
    gone_pk = gone.pk
    gone.delete()
    bulk.update_rows(
        PropagatedVersion,
        {
            **{
                pv.pk: {"revision": resource.current_revision, "version": f"gen:{i}", "remote_status": {"replicas": i}}
                for i, pv in enumerate(pvs)
            },
            gone_pk: {"revision": None, "version": "gen:9", "remote_status": None},  # deleted meanwhile: not made again
        },
    )
    rows = list(PropagatedVersion.objects.order_by("pk"))
    assert [(r.version, r.remote_status, r.message) for r in rows] == [
        ("gen:0", {"replicas": 0}, "kept"),
        ("gen:1", {"replicas": 1}, "kept"),
    ]
    assert {r.revision_id for r in rows} == {resource.current_revision_id}
    assert not PropagatedVersion.objects.filter(pk=gone_pk).exists()


def test_nothing_to_write_runs_no_query(django_assert_num_queries):
    with django_assert_num_queries(0):
        bulk.insert_values(PropagatedVersion, [])
        bulk.update_rows(PropagatedVersion, {})


def test_a_value_rows_share_is_written_to_each_of_them(resource, clusters):
    pvs = [PropagatedVersion.objects.create(resource=resource, cluster=c) for c in clusters]
    shared, now = {"spec": {"replicas": 3}}, timezone.now()
    bulk.update_rows(
        PropagatedVersion,
        {
            pv.pk: {
                "applied_manifest": shared if i < 2 else {"spec": {"replicas": 1}},
                "propagated_at": now,
                "live_uid": f"u{i}",
            }
            for i, pv in enumerate(pvs)
        },
    )
    rows = list(PropagatedVersion.objects.order_by("pk"))
    assert [r.applied_manifest["spec"]["replicas"] for r in rows] == [3, 3, 1]
    assert [r.live_uid for r in rows] == ["u0", "u1", "u2"] and {r.propagated_at for r in rows} == {now}


def test_inserted_rows_take_each_fields_default_for_the_columns_not_given(resource, clusters):
    before = timezone.now()
    bulk.insert_values(
        PropagatedVersion,
        [{"resource_id": resource.pk, "cluster": cluster, "message": f"m{i}"} for i, cluster in enumerate(clusters)],
    )
    rows = {pv.cluster.name: pv for pv in PropagatedVersion.objects.select_related("cluster")}
    assert sorted(rows) == ["a", "b", "c"] and rows["b"].message == "m1" and rows["a"].resource_id == resource.pk
    for row in rows.values():  # what PropagatedVersion(resource=..., cluster=...).save() would have stored
        assert (row.status, row.sync_state, row.drift, row.applied_manifest) == (
            PropagationReason.PENDING,
            SyncState.UNKNOWN,
            [],
            None,
        )
        assert row.updated_at >= before and row.propagated_at is None and row.version == ""


def test_ignore_conflicts_skips_rows_already_there_and_a_plain_insert_refuses_them(resource, clusters):
    PropagatedVersion.objects.create(resource=resource, cluster=clusters[0], status=PropagationReason.OK)
    bulk.insert_values(
        PropagatedVersion, [{"resource": resource, "cluster": c} for c in clusters], ignore_conflicts=True
    )
    assert PropagatedVersion.objects.count() == 3
    assert PropagatedVersion.objects.get(cluster=clusters[0]).status == PropagationReason.OK, "the row there is kept"
    with pytest.raises(IntegrityError), transaction.atomic():
        bulk.insert_values(PropagatedVersion, [{"resource": resource, "cluster": clusters[1]}])
    assert PropagatedVersion.objects.count() == 3


def test_a_column_holding_none_in_some_rows_and_rows_sharing_every_value_are_stored(resource, clusters):
    stamp = timezone.now()
    bulk.insert_values(
        PropagatedVersion,
        [
            dict(resource=resource, cluster=cluster, remote_status=status, propagated_at=when)
            for cluster, status, when in zip(clusters, [None, {"ready": 1}, None], [stamp, None, None], strict=True)
        ],
    )
    rows = {pv.cluster.name: pv for pv in PropagatedVersion.objects.select_related("cluster")}
    assert [rows[n].remote_status for n in "abc"] == [None, {"ready": 1}, None]
    assert [rows[n].propagated_at for n in "abc"] == [stamp, None, None]
    PropagatedVersion.objects.all().delete()
    shared = {"ready": 2}  # one value for every row (on PostgreSQL: one parameter, not an array)
    bulk.insert_values(
        PropagatedVersion, [dict(resource_id=resource.pk, remote_status=shared, cluster_id=c.pk) for c in clusters[:1]]
    )
    bulk.insert_values(
        PropagatedVersion, [dict(resource_id=resource.pk, remote_status=shared, cluster_id=c.pk) for c in clusters[1:]]
    )
    assert sorted(PropagatedVersion.objects.values_list("cluster__name", "remote_status")) == [
        ("a", {"ready": 2}),
        ("b", {"ready": 2}),
        ("c", {"ready": 2}),
    ]


@pytest.mark.parametrize("shared", [True, False], ids=["one value for every row", "a value per row"])
def test_a_value_too_long_for_its_column_is_refused_or_stored_whole_never_cut(resource, clusters, shared):
    # PropagatedVersion.status is a CharField(max_length=32); on PostgreSQL a shared value is one
    # parameter and values per row one array, each cast to the column's type
    values = {c.name: "x" * 80 if shared else c.name * 80 for c in clusters}
    try:
        with transaction.atomic():
            bulk.insert_values(
                PropagatedVersion, [dict(resource=resource, cluster=c, status=values[c.name]) for c in clusters]
            )
    except DataError:  # PostgreSQL: "value too long for type character varying(32)", as the ORM gets
        assert not PropagatedVersion.objects.exists()
    else:  # SQLite does not enforce lengths: the values are kept whole
        assert dict(PropagatedVersion.objects.values_list("cluster__name", "status")) == values


def test_rows_mixing_nulls_addresses_of_both_families_and_json_read_back_as_given(django_user_model):
    # on PostgreSQL each column that differs between rows is one array sent in binary: a list holding
    # None beside values, IPv4 beside IPv6, text with quotes, braces and backslashes, JSON of any shape
    user = django_user_model.objects.create_user("bulk-actor")
    stamp = timezone.now()
    values = [
        (user.pk, "10.0.0.1", 'say "hi" {x} \\ back', {"nested": {"list": [1, None, "ü"]}}),
        (None, "2001:db8::7", "", None),
        (user.pk, None, "NULL", ["a", {"b": 2}]),
    ]
    bulk.insert_values(
        AuditEvent,
        [
            dict(
                created_at=stamp - timedelta(seconds=i),
                actor_id=actor,
                actor_name="x",
                action="test.bulk",
                summary=summary,
                after=after,
                source_ip=ip,
                prev_hash=str(i),
                hash=f"h{i}",
            )
            for i, (actor, ip, summary, after) in enumerate(values)
        ],
    )
    rows = list(AuditEvent.objects.filter(action="test.bulk").order_by("hash"))
    assert [(r.actor_id, r.source_ip, r.summary, r.after) for r in rows] == values
    assert [r.created_at for r in rows] == [stamp - timedelta(seconds=i) for i in range(3)]


def test_update_rows_of_one_row_or_of_rows_sharing_every_value_sets_only_those_rows(resource, clusters):
    # on PostgreSQL: no array but the keys (two rows), or none at all (one row)
    pvs = [PropagatedVersion.objects.create(resource=resource, cluster=c) for c in clusters]
    bulk.update_rows(PropagatedVersion, {pvs[1].pk: {"version": "only", "remote_status": {"r": 1}}})
    assert [(r.version, r.remote_status) for r in PropagatedVersion.objects.order_by("pk")] == [
        ("", None),
        ("only", {"r": 1}),
        ("", None),
    ]
    shared = {"r": 2}
    bulk.update_rows(PropagatedVersion, {pv.pk: {"version": "both", "remote_status": shared} for pv in pvs[::2]})
    assert [(r.version, r.remote_status) for r in PropagatedVersion.objects.order_by("pk")] == [
        ("both", {"r": 2}),
        ("only", {"r": 1}),
        ("both", {"r": 2}),
    ]


def test_every_database_sees_the_statements_through_djangos_wrappers(resource, clusters, django_assert_num_queries):
    # on PostgreSQL they run on a cursor of their own (server-side binding): still Django's wrapper,
    # so execute wrappers, query logging and Django's exception classes apply to them
    seen = []

    def wrapper(execute, sql, params, many, context):
        seen.append(sql.split()[0])
        return execute(sql, params, many, context)

    with connection.execute_wrapper(wrapper), django_assert_num_queries(3):
        bulk.insert_values(PropagatedVersion, [{"resource": resource, "cluster": c} for c in clusters])
        bulk.update_rows(
            PropagatedVersion, {pk: {"version": "v"} for pk in PropagatedVersion.objects.values_list("pk", flat=True)}
        )
    assert seen == ["INSERT", "SELECT", "UPDATE"]
    with pytest.raises(IntegrityError), transaction.atomic():
        bulk.insert_values(PropagatedVersion, [{"resource": resource, "cluster": clusters[0]}])


def test_rows_inserted_from_a_query_take_the_defaults_and_skip_the_rows_already_there(resource, clusters):
    PropagatedVersion.objects.create(resource=resource, cluster=clusters[0], status=PropagationReason.OK)
    before = timezone.now()
    cluster_table = connection.ops.quote_name(Cluster._meta.db_table)
    # every cluster but "c", from a query: no row passes through Python
    bulk.insert_selected(
        PropagatedVersion,
        {"resource": "%s", "cluster": "c.id"},
        f"FROM {cluster_table} c WHERE c.name <> %s",
        [resource.pk, "c"],
        ignore_conflicts=True,
    )
    rows = {pv.cluster.name: pv for pv in PropagatedVersion.objects.select_related("cluster")}
    assert sorted(rows) == ["a", "b"]
    assert rows["a"].status == PropagationReason.OK, "the row there is kept"
    new = rows["b"]  # what PropagatedVersion(resource=..., cluster=...).save() would have stored
    assert (new.resource_id, new.status, new.sync_state, new.drift, new.applied_manifest, new.version) == (
        resource.pk,
        PropagationReason.PENDING,
        SyncState.UNKNOWN,
        [],
        None,
        "",
    )
    assert new.updated_at >= before and new.propagated_at is None and new.revision_id is None
    with pytest.raises(IntegrityError), transaction.atomic():  # without ignore_conflicts, a row there is refused
        bulk.insert_selected(
            PropagatedVersion, {"resource": "%s", "cluster": "c.id"}, f"FROM {cluster_table} c", [resource.pk]
        )
    assert PropagatedVersion.objects.count() == 2
