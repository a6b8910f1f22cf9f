"""Many-row INSERTs and UPDATEs for the fan-out's hot paths, their SQL built once for all the rows.

Django's ``bulk_create`` compiles its SQL value by value for every row, which measured about two
thirds of its time for a thousand rows, and ``bulk_update`` builds a CASE per field and row. When
every row sets the same columns the SQL can be built once: INSERTs as multi-row VALUES statements,
UPDATEs as one statement executed for every row (``executemany``). On PostgreSQL both are one
statement reading from unnest(): an array per column whose values differ between rows, sent in
binary, and a single value for a column they share. The values still go through each field's own
``get_db_prep_save``, so they are stored exactly as the ORM stores them.

Rows are given as mappings of the fields they set, not as model instances: making an instance per
row was most of the time to create a run's targets and PropagatedVersions, and its audit events.

What these do not promise, unlike the ORM: primary keys read back. Neither sends signals
(``bulk_create`` does not either). Use them where a caller writes hundreds of rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import psycopg
from django.db import connections, router
from django.db.models import CharField, Model, TextField
from django.db.models.constants import OnConflict
from django.utils import timezone


def insert_values(model: type[Model], rows: Sequence[Mapping], *, ignore_conflicts: bool = False) -> None:
    """INSERT rows given as field name -> value mappings (the same names in every row; a foreign key
    as an instance or as its ``<name>_id``): multi-row VALUES statements of as many rows as the
    backend takes (``bulk_batch_size``, at most 500); on PostgreSQL ``_insert_unnest``, UNNEST_ROWS
    rows a statement. The other columns take their field's default,
    computed once for the statement (``auto_now``/``auto_now_add`` fields: one timestamp); no model
    instance is made per row. ``ignore_conflicts`` skips rows that would break a unique constraint
    (one that is already there), like ``bulk_create(ignore_conflicts=True)``."""
    if not rows:
        return
    connection = connections[router.db_for_write(model)]
    meta, ops, quote = model._meta, connection.ops, connection.ops.quote_name
    names = list(rows[0])
    given = [meta.get_field(name) for name in names]
    defaults = _defaults(meta, given)
    fields = [*given, *defaults]
    on_conflict = OnConflict.IGNORE if ignore_conflicts else None
    if connection.vendor == "postgresql":
        _insert_unnest(connection, model, rows, dict(zip(given, names)), defaults, on_conflict)
        return
    head = (
        f"{ops.insert_statement(on_conflict=on_conflict)} {quote(meta.db_table)} "
        f"({', '.join(quote(f.column) for f in fields)}) VALUES "
    )
    row_sql = f"({', '.join(['%s'] * len(fields))})"
    tail = ops.on_conflict_suffix_sql(fields, on_conflict, None, None)
    size = max(1, min(ops.bulk_batch_size(fields, rows), 500))
    convert = _converter(connection)
    constant = [convert(f, value) for f, value in defaults.items()]
    with connection.cursor() as cursor:
        for start in range(0, len(rows), size):
            batch = rows[start : start + size]
            params = []
            for row in batch:
                params += [convert(f, _column_value(f, row[name])) for f, name in zip(given, names)]
                params += constant
            cursor.execute(f"{head}{', '.join([row_sql] * len(batch))} {tail}".rstrip(), params)


def insert_selected(
    model: type[Model], selected: Mapping[str, str], source: str, params: Sequence, *, ignore_conflicts: bool = False
) -> None:
    """INSERT the rows a query gives, in one statement and without a value passing through Python
    per row: ``selected`` maps the fields it sets to their SQL expressions over ``source`` (``FROM
    ... WHERE ...``); ``params`` fill the placeholders of both, in that order. The other columns take
    their field's default, one parameter for every row (as ``insert_values``). ``ignore_conflicts``
    as there."""
    connection = connections[router.db_for_write(model)]
    meta, ops, quote = model._meta, connection.ops, connection.ops.quote_name
    given = [meta.get_field(name) for name in selected]
    defaults = _defaults(meta, given)
    fields = [*defaults, *given]  # the defaults' placeholders first, so ``params`` follow them
    on_conflict = OnConflict.IGNORE if ignore_conflicts else None
    convert = _converter(connection)
    # PostgreSQL types a bare parameter in a select list as text: each default is cast to its column's type
    casts = {
        f: f"::{f.db_type(connection).split('(')[0]}" if connection.vendor == "postgresql" else "" for f in defaults
    }
    expressions = [*(f"%s{casts[f]}" for f in defaults), *selected.values()]
    sql = (
        f"{ops.insert_statement(on_conflict=on_conflict)} {quote(meta.db_table)} "
        f"({', '.join(quote(f.column) for f in fields)}) SELECT {', '.join(expressions)} {source} "
        f"{ops.on_conflict_suffix_sql(fields, on_conflict, None, None)}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql.rstrip(), [*(convert(f, value) for f, value in defaults.items()), *params])


UNNEST_ROWS = 2000  # rows per PostgreSQL statement


def _insert_unnest(connection, model, rows, given: dict, defaults: dict, on_conflict) -> None:
    """PostgreSQL: ``INSERT ... SELECT ... FROM unnest(...)``, a column whose value differs between
    rows sent as one array, a value every row shares (the defaults, a run's id) once. Django 5.2's
    ``bulk_create`` sends an array for every column, each value prepared per row: 28,000 values for
    the 1,000 PropagatedVersions of a run, where this sends 1,000 cluster ids and 27 values."""
    quote = connection.ops.quote_name
    convert = _converter(connection)
    columns = [*given, *defaults]
    tail = connection.ops.on_conflict_suffix_sql(columns, on_conflict, None, None)
    with _server_bound_cursor(connection) as cursor:
        for start in range(0, len(rows), UNNEST_ROWS):
            batch = rows[start : start + UNNEST_ROWS]
            values = {
                field: [convert(field, _column_value(field, row[name])) for row in batch]
                for field, name in given.items()
            }
            values.update({field: [convert(field, value)] for field, value in defaults.items()})
            selects, source, source_params = _unnest_columns(connection, values, rows=len(batch))
            sql = (
                f"INSERT INTO {quote(model._meta.db_table)} ({', '.join(quote(f.column) for f in columns)}) "
                f"SELECT {', '.join(sql for sql, _ in selects)} FROM {source} {tail}"
            )
            cursor.execute(sql.rstrip(), [*(p for _, params in selects for p in params), *source_params])


def _update_unnest(connection, model, rows: list[list], fields: list) -> None:
    """PostgreSQL: ``UPDATE ... FROM unnest(...)``, one statement for the lot (``rows``: each row's
    converted values in ``fields``' order, then its primary key), a value every row shares sent once."""
    meta, quote = model._meta, connection.ops.quote_name
    values = {field: [row[i] for row in rows] for i, field in enumerate(fields)}
    values[meta.pk] = [row[-1] for row in rows]
    selects, source, source_params = _unnest_columns(connection, values, rows=len(rows))
    *assigned, (key, key_params) = selects
    sets = ", ".join(f"{quote(f.column)} = {sql}" for f, (sql, _) in zip(fields, assigned, strict=True))
    table = quote(meta.db_table)
    # parameters in the order their placeholders come: SET, FROM, WHERE (the key is a parameter of
    # its own, not an array, when there is one row)
    params = [*(p for _, params in assigned for p in params), *source_params, *key_params]
    with _server_bound_cursor(connection) as cursor:
        cursor.execute(f"UPDATE {table} SET {sets} FROM {source} WHERE {table}.{quote(meta.pk.column)} = {key}", params)


def _unnest_columns(connection, values: dict, *, rows: int) -> tuple[list[tuple[str, list]], str, list]:
    """For each column (``values``: field -> its converted values, one per row, or a single value
    for every row) its SELECT expression with that expression's parameters; the ``unnest(...) AS
    u(...)`` they read from, and its parameters. A column whose values are all the same object is
    one parameter; the others are arrays, sent in binary (``%b``): bound on the client, every element
    of an array was escaped and quoted into the SQL text in Python, which cost more than the rest of
    the statement."""
    selects, arrays, array_params = [], [], []
    for field, column in values.items():
        # the type without its length: a string cast to varchar(64) is cut to 64 characters,
        # where the column itself refuses one that is too long (as Django's own unnest does)
        cast = field.db_type(connection).split("(")[0]
        if all(value is column[0] for value in column):  # one value for every row
            selects.append((f"%s::{cast}", [column[0]]))
        else:
            selects.append((f"u.c{len(arrays)}", []))
            arrays.append(f"%b::{cast}[]")
            array_params.append(column)
    if not arrays:  # every row the same: as many as there are rows
        return selects, "generate_series(1, %s)", [rows]
    source = f"unnest({', '.join(arrays)}) AS u({', '.join(f'c{i}' for i in range(len(arrays)))})"
    return selects, source, array_params


def _server_bound_cursor(connection):
    """A cursor of ``connection`` (PostgreSQL) that sends its parameters apart from the SQL, as
    ``%b`` (binary) needs: Django's own binds on the client. Wrapped as Django wraps its cursors, so
    errors, query logging and execute wrappers are the same."""
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    connection.validate_thread_sharing()
    with connection.wrap_database_errors:
        cursor = psycopg.Cursor(connection.connection)
    return connection.make_debug_cursor(cursor) if connection.queries_logged else connection.make_cursor(cursor)


def _defaults(meta, given: list) -> dict:
    """The value of every column but the primary key and the ``given`` fields: its field's default."""
    return {f: _default(f) for f in meta.concrete_fields if not f.primary_key and f not in given}


def _default(field):
    if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False):
        return timezone.now()
    return field.get_default()


def update_rows(model: type[Model], values_by_pk: Mapping[object, Mapping]) -> None:
    """UPDATE the rows of ``model`` whose primary keys are the keys of ``values_by_pk``, each with its
    own values (a field name -> value mapping per row, the same fields in every row; a foreign key may
    be given as an instance). A row deleted meanwhile is simply not there to update."""
    if not values_by_pk:
        return
    connection = connections[router.db_for_write(model)]
    meta, quote = model._meta, connection.ops.quote_name
    fields = [meta.get_field(name) for name in next(iter(values_by_pk.values()))]
    convert = _converter(connection)
    # in primary-key order: two statements updating some of the same rows lock them in the same order
    rows = [
        [*(convert(f, _column_value(f, values[f.name])) for f in fields), pk]
        for pk, values in sorted(values_by_pk.items(), key=lambda item: item[0])
    ]
    if connection.vendor == "postgresql":
        _update_unnest(connection, model, rows, fields)
        return
    sql = (
        f"UPDATE {quote(meta.db_table)} SET {', '.join(f'{quote(f.column)} = %s' for f in fields)} "
        f"WHERE {quote(meta.pk.column)} = %s"
    )
    with connection.cursor() as cursor:
        cursor.executemany(sql, rows)


def _column_value(field, value):
    """A foreign key given as an instance is stored as its primary key."""
    return value.pk if field.is_relation and isinstance(value, Model) else value


# Fields that store a str exactly as given: their to_python returns a str unchanged, and neither
# overrides the conversions above it (exact classes only: a subclass may convert).
_TEXT_FIELDS = (CharField, TextField)


def _converter(connection):
    """``field.get_db_prep_save`` for one statement's values, a value many rows share (the same
    object: a timestamp, a manifest, a name; or an empty list or dict) converted once, a str for a
    text field not at all."""
    converted = {}

    def convert(field, value):
        if type(value) is str and type(field) in _TEXT_FIELDS:
            return value
        kind = type(value)
        # an empty list or dict is made afresh for each row (a PropagatedVersion's drift): one key for all
        key = (field.name, kind) if (kind is list or kind is dict) and not value else (field.name, id(value))
        if key not in converted:  # kept with the value itself, so its id cannot be reused meanwhile
            converted[key] = (value, field.get_db_prep_save(value, connection))
        return converted[key][1]

    return convert
