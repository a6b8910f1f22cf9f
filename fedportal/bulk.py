"""Many-row INSERTs and UPDATEs for the fan-out's hot paths: one statement, executed for every row
at once (``executemany``).

Django's ``bulk_create`` compiles its SQL value by value for every row, which measured about two
thirds of its time for a thousand rows, and ``bulk_update`` builds a CASE per field and row. When
every row sets the same columns the SQL can be built once; the values still go through each field's
own ``pre_save`` and ``get_db_prep_save``, so they are stored exactly as the ORM stores them.

What these do not do, unlike the ORM: set primary keys on the instances, or send signals (neither
does ``bulk_create``). Use them where a caller writes hundreds of rows and needs neither.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from django.db import connections, router
from django.db.models import Model
from django.db.models.constants import OnConflict


def insert_rows(model: type[Model], objs: Sequence[Model], *, ignore_conflicts: bool = False) -> None:
    """INSERT unsaved instances of ``model``. ``ignore_conflicts`` skips rows that would break a
    unique constraint (one that is already there), like ``bulk_create(ignore_conflicts=True)``."""
    if not objs:
        return
    connection = connections[router.db_for_write(model)]
    ops, quote = connection.ops, connection.ops.quote_name
    fields = [f for f in model._meta.concrete_fields if not f.primary_key]
    on_conflict = OnConflict.IGNORE if ignore_conflicts else None
    sql = (f"{ops.insert_statement(on_conflict=on_conflict)} {quote(model._meta.db_table)} "
           f"({', '.join(quote(f.column) for f in fields)}) VALUES ({', '.join(['%s'] * len(fields))}) "
           f"{ops.on_conflict_suffix_sql(fields, on_conflict, None, None)}").rstrip()
    rows = [[f.get_db_prep_save(f.pre_save(obj, True), connection) for f in fields] for obj in objs]
    with connection.cursor() as cursor:
        cursor.executemany(sql, rows)


def update_rows(model: type[Model], field_names: Iterable[str], values_by_pk: Mapping[object, Mapping]) -> None:
    """UPDATE the rows of ``model`` whose primary keys are the keys of ``values_by_pk``, each with its
    own values of ``field_names`` (a field name -> value mapping per row; a foreign key may be given as
    an instance). A row deleted meanwhile is simply not there to update."""
    if not values_by_pk:
        return
    connection = connections[router.db_for_write(model)]
    meta, quote = model._meta, connection.ops.quote_name
    fields = [meta.get_field(name) for name in field_names]
    sql = (f"UPDATE {quote(meta.db_table)} SET {', '.join(f'{quote(f.column)} = %s' for f in fields)} "
           f"WHERE {quote(meta.pk.column)} = %s")
    rows, converted = [], {}  # a value many rows share (the same object) is converted once
    for pk, values in values_by_pk.items():
        row = []
        for f in fields:
            value = values[f.name]
            if f.is_relation and isinstance(value, Model):
                value = value.pk
            if isinstance(value, (dict, list)):
                key = (f.name, id(value))  # the rows hold the value, so its id is not reused meanwhile
                if key not in converted:
                    converted[key] = f.get_db_prep_save(value, connection)
                row.append(converted[key])
            else:
                row.append(f.get_db_prep_save(value, connection))
        rows.append([*row, pk])
    with connection.cursor() as cursor:
        cursor.executemany(sql, rows)
