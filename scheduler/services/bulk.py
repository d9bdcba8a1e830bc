"""Writes of many rows in a few statements (the loop's admissions, queue positions, reasons).

- `set_column`: one column of many rows to per-row values. Django's bulk_update builds one CASE WHEN
  per row and slows down quadratically with thousands of rows; `UPDATE … FROM (VALUES …)` does the
  same work in one pass on PostgreSQL and SQLite ≥ 3.33.
- `in_ids`: filter on thousands of ids with one array parameter (PostgreSQL).
- `insert_rows` / `insert_values`: insert thousands of new rows (model instances, or plain values)
  with one array parameter per column (PostgreSQL).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Sequence

from django.db import connection
from django.db.models import Field, Model
from django.db.models.expressions import RawSQL
from django.utils import timezone

CHUNK = 4000  # rows per statement: 2 parameters each, under SQLite's 32,766-variable limit


def set_column(model: type[Model], column: str, values: Sequence[tuple[int, int | None]]) -> None:
    """values: (primary key, new value) pairs for an integer column."""
    if not values:
        return
    table = connection.ops.quote_name(model._meta.db_table)
    target = connection.ops.quote_name(model._meta.get_field(column).column)
    pk = connection.ops.quote_name(model._meta.pk.column)
    row = "(%s::bigint, %s::integer)" if connection.vendor == "postgresql" else "(%s, %s)"
    with connection.cursor() as cursor:
        for start in range(0, len(values), CHUNK):
            chunk = values[start : start + CHUNK]
            rows = ", ".join([row] * len(chunk))
            params = [item for pair in chunk for item in pair]
            cursor.execute(
                f"UPDATE {table} SET {target} = v.column2 FROM (VALUES {rows}) AS v WHERE {table}.{pk} = v.column1",
                params,
            )


def in_ids(ids: Collection[int], *, cast: str = "bigint") -> Collection[int] | RawSQL:
    """The right side of `pk__in=` for many ids: one array parameter on PostgreSQL (`IN (SELECT
    unnest(%s))`), not one placeholder per id, which the driver would have to splice into the SQL
    text one by one; the plain list elsewhere."""
    if connection.vendor != "postgresql":
        return ids
    return RawSQL(f"SELECT unnest(%s::{cast}[])", [list(ids)])


def _converter(field: Field) -> Callable[[object], object]:
    """How one column's Python values go into its array parameter, chosen once per column."""
    kind = field.get_internal_type()
    if kind == "JSONField":
        encoder = getattr(field, "encoder", None)
        return lambda value: None if value is None else json.dumps(value, cls=encoder)
    if kind in ("CharField", "TextField", "SlugField"):  # choices are str subclasses: send plain str
        return lambda value: value if value is None or type(value) is str else str(value)
    return lambda value: value


def insert_rows(model: type[Model], objects: Sequence[Model], *, returning: bool = False,
                batch_size: int = 5000) -> None:
    """Insert new model instances (every concrete column but the primary key, `auto_now(_add)` set to
    now) in a few statements; with `returning` each instance gets its primary key. PostgreSQL:
    `insert_values`; elsewhere: Django's bulk_create."""
    if not objects:
        return
    if connection.vendor != "postgresql":
        model.objects.bulk_create(objects, batch_size=500)  # type: ignore[attr-defined]
        return
    columns = [field for field in model._meta.concrete_fields if not field.primary_key]
    now = timezone.now()
    for field in columns:
        if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False):
            for obj in objects:
                setattr(obj, field.attname, now)
    attnames = [field.attname for field in columns]
    pks = insert_values(model, attnames, [[getattr(obj, name) for name in attnames] for obj in objects],
                        returning=returning, batch_size=batch_size)
    for obj, pk in zip(objects, pks, strict=True) if returning else ():
        obj.pk = pk
        obj._state.adding = False
        obj._state.db = connection.alias


def insert_values(model: type[Model], fields: Sequence[str], rows: Sequence[Sequence[object]], *,
                  returning: bool = False, batch_size: int = 5000) -> list[int]:
    """Insert rows given as values of `fields` (attribute names: `job_id` for a foreign key), without
    building model instances on PostgreSQL (`INSERT … SELECT FROM unnest(array, …)`, one array
    parameter per column). The other columns get their field's default (`auto_now(_add)`: now), as
    the ORM would write them. Elsewhere the rows become instances for bulk_create. Returns the new
    primary keys in row order when `returning`."""
    if not rows:
        return []
    if connection.vendor != "postgresql":
        objects = [model(**dict(zip(fields, row, strict=True))) for row in rows]
        model.objects.bulk_create(objects, batch_size=500)  # type: ignore[attr-defined]
        return [obj.pk for obj in objects] if returning else []
    meta = model._meta
    given = [next(f for f in meta.concrete_fields if f.attname == name) for name in fields]
    now = timezone.now()
    defaults = [
        (field, now if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False)
         else field.get_default())
        for field in meta.concrete_fields
        if not field.primary_key and field.attname not in fields
    ]
    columns = given + [field for field, _ in defaults]
    quote = connection.ops.quote_name
    names = ", ".join(quote(field.column) for field in columns)
    arrays = ", ".join(f"%s::{field.db_type(connection)}[]" for field in columns)
    sql = f"INSERT INTO {quote(meta.db_table)} ({names}) SELECT * FROM unnest({arrays})"
    if returning:
        sql += f" RETURNING {quote(meta.pk.column)}"
    converters = [_converter(field) for field in given]
    pks: list[int] = []
    with connection.cursor() as cursor:
        for start in range(0, len(rows), batch_size):
            chunk = rows[start : start + batch_size]
            params = [[convert(row[i]) for row in chunk] for i, convert in enumerate(converters)]
            params += [[_converter(field)(value)] * len(chunk) for field, value in defaults]
            cursor.execute(sql, params)
            if returning:
                pks.extend(pk for (pk,) in cursor.fetchall())
    return pks
