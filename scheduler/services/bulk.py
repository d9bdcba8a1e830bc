"""Set one column of many rows to per-row values in a few statements (the loop's queue positions).

Django's bulk_update builds one CASE WHEN per row and slows down quadratically with thousands of
rows; `UPDATE … FROM (VALUES …)` does the same work in one pass on PostgreSQL and SQLite ≥ 3.33.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connection
from django.db.models import Model

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
