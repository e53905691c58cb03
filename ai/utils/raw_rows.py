"""Rows written and read in plain SQL, each value as the ORM's own field would make it.

On a tick's hot paths the ORM's query building costs several times the query itself (see
docs/benchmarks.md). These skip it, but not the fields: what is written is prepared by
each field (``ai.fields`` escapes NUL there), and what is read goes through the
converters the ORM would apply (NUL restored, JSON decoded, dates made aware). The one
exception, ``insert_column``, takes only values the database stores as they are.
"""

import json
import re
from functools import lru_cache

from django.db import DEFAULT_DB_ALIAS, connection, connections


def insert_row(model, values):
    """Insert one row of ``model`` as ``model.objects.create(**values)`` would.

    Args:
        model (type): The model class.
        values (dict): Field attnames (``db_script_id``, not ``db_script``) -> values; the
            other fields take their defaults.

    Returns:
        int: The new row's primary key.
    """
    fields, sql, returning = _insert_statement(model, connection.vendor)
    params = _prepared(fields, values)
    with connection.cursor() as cursor:
        cursor.execute(returning or sql, params)
        return cursor.fetchone()[0] if returning else cursor.lastrowid


def insert_rows(model, rows):
    """Insert rows of ``model`` with one statement executed for each (``insert_row``'s
    values, each a dict); their primary keys are not returned."""
    fields, sql, _ = _insert_statement(model, connection.vendor)
    with connection.cursor() as cursor:
        cursor.executemany(sql, [_prepared(fields, values) for values in rows])


def insert_column(model, fixed, name, values):
    """Insert a row of ``model`` for each of ``values`` in the field ``name`` (an attname),
    the fields ``fixed`` (attnames -> values) alike in every row.

    One statement whatever their number, the values sent as one parameter (SQLite reads
    them from a JSON array, PostgreSQL from an array): for thousands of rows a third or less
    of what a statement a row costs. No field prepares the values, so they must be what the
    database stores as they are (numbers, text that holds no NUL); the other fields must
    have database defaults or allow NULL.
    """
    meta, quote = model._meta, connection.ops.quote_name
    columns = ", ".join(quote(meta.get_field(attname).column) for attname in [*fixed, name])
    insert, given = f"INSERT INTO {quote(meta.db_table)} ({columns})", list(fixed.values())
    each = "%s, " * len(fixed)
    values = list(values)
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            sent = json.dumps(values, ensure_ascii=False)
            cursor.execute(f"{insert} SELECT {each}value FROM json_each(%s)", [*given, sent])
        elif connection.vendor == "postgresql":
            # The column's type without its length: a cast would cut a longer value, where
            # the insert refuses it, as a row's own insert does.
            array = re.sub(r"\(\d+\)$", "", meta.get_field(name).db_type(connection)) + "[]"
            cursor.execute(
                f"{insert} SELECT {each}value FROM unnest(%s::{array}) AS value", [*given, values]
            )
        else:
            cursor.executemany(f"{insert} VALUES ({each}%s)", [[*given, value] for value in values])


def update_row(model, pk, values):
    """Set the fields ``values`` (attnames -> values) of the ``model`` row ``pk``, each
    prepared by its field, as ``save(update_fields=...)`` would."""
    meta = model._meta
    fields = [meta.get_field(name) for name in values]
    quote = connection.ops.quote_name
    assignments = ", ".join(f"{quote(field.column)} = %s" for field in fields)
    params = _prepared(fields, values) + [pk]
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {quote(meta.db_table)} SET {assignments} WHERE {quote(meta.pk.column)} = %s",
            params,
        )


@lru_cache(maxsize=None)
def _insert_statement(model, vendor):
    """Return the fields of a ``model`` row but its primary key, their INSERT, and the same
    returning the new key (None where the ``vendor``'s database cannot)."""
    meta = model._meta
    fields = [field for field in meta.concrete_fields if field is not meta.pk]
    quote = connection.ops.quote_name
    sql = (
        f"INSERT INTO {quote(meta.db_table)} ({', '.join(quote(f.column) for f in fields)}) "
        f"VALUES ({', '.join(['%s'] * len(fields))})"
    )
    returning = connection.features.can_return_columns_from_insert
    return fields, sql, f"{sql} RETURNING {quote(meta.pk.column)}" if returning else None


def _prepared(fields, values):
    return [
        field.get_db_prep_save(
            values[field.attname] if field.attname in values else field.get_default(),
            connection,
        )
        for field in fields
    ]


def select_rows(model, names, where, params, tail=""):
    """Return the values of the fields ``names`` of the ``model`` rows matching ``where``,
    one tuple a row, converted as the ORM converts them.

    Args:
        model (type): The model class.
        names (list): Field names.
        where (str): The SQL condition, with ``%s`` for each of ``params``.
        params (list): Its values, as the database takes them.
        tail (str): SQL after the condition (``ORDER BY``, ``LIMIT``).
    """
    select, columns, converters = _select_statement(
        model, tuple(names), connections[DEFAULT_DB_ALIAS]
    )
    with connection.cursor() as cursor:
        cursor.execute(f"{select} WHERE {where} {tail}", params)
        rows = cursor.fetchall()
    return [tuple(_converted(row, columns, converters)) for row in rows]


@lru_cache(maxsize=256)
def _select_statement(model, names, database):
    """Return the SELECT of the fields ``names`` of ``model`` (up to its WHERE), their
    columns and each column's converters, for ``database`` (a thread's connection: the
    converters are its own)."""
    meta = model._meta
    columns = [meta.get_field(name).get_col(meta.db_table) for name in names]
    converters = [
        database.ops.get_db_converters(column) + column.get_db_converters(database)
        for column in columns
    ]
    quote = database.ops.quote_name
    select = ", ".join(quote(column.target.column) for column in columns)
    return f"SELECT {select} FROM {quote(meta.db_table)}", columns, converters


def db_value(model, name, value):
    """Return ``value`` as the database takes it for the field ``name`` of ``model``."""
    return model._meta.get_field(name).get_db_prep_value(value, connection)


def _converted(row, columns, converters):
    for value, column, convert in zip(row, columns, converters):
        for converter in convert:
            value = converter(value, column, connection)
        yield value


def rows_by(model, names, keys, key=None):
    """Return key -> the values of the fields ``names`` (a tuple) of the ``model`` rows whose
    field ``key`` (the primary key if None) is one of ``keys`` (None left out)."""
    keys = [value for value in keys if value is not None]
    if not keys:
        return {}
    marks = ", ".join(["%s"] * len(keys))
    key = key or model._meta.pk.name
    column = model._meta.get_field(key).column
    rows = select_rows(model, [key, *names], f"{column} IN ({marks})", keys)
    return {row[0]: row[1:] for row in rows}
