"""Copy a SQLite library into an empty PostgreSQL database at the same schema revision, row for row,
for measuring the dashboard on PostgreSQL with the rows dashboard_library.py generated.

The target is migrated first (same tables, indexes and revision); rows go through COPY in the
order foreign keys need, then ``VACUUM ANALYZE`` -- what autovacuum does on a live server, and
what index-only scans need (the visibility map) -- and the sequences are moved past the copied ids.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import psycopg
from sqlalchemy import Integer
from sqlalchemy.engine import make_url

from evokernel.db import upgrade
from evokernel.db.models import Base

BATCH = 50_000


def copy_library(source: Path, url: str) -> dict[str, float]:
    """Fill the database at ``url`` from the SQLite file ``source``; seconds per step."""
    upgrade(url)
    target = make_url(url)
    conninfo = {"host": target.host, "port": target.port, "user": target.username, "dbname": target.database}
    lite = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    took: dict[str, float] = {}
    with psycopg.connect(**conninfo) as pg:
        for table in Base.metadata.sorted_tables:
            columns = [c.name for c in table.columns]
            t = time.perf_counter()
            names = ", ".join(f'"{c}"' for c in columns)
            rows = lite.execute(f"SELECT {names} FROM {table.name}")
            with pg.cursor() as cur, cur.copy(f"COPY {table.name} ({names}) FROM STDIN") as copy:
                while batch := rows.fetchmany(BATCH):
                    for row in batch:
                        copy.write_row(row)
            pg.commit()
            took[table.name] = round(time.perf_counter() - t, 1)
        for table in Base.metadata.sorted_tables:
            if "id" in table.columns and isinstance(table.columns["id"].type, Integer):
                pg.execute(
                    f"SELECT setval(pg_get_serial_sequence('{table.name}', 'id'), "
                    f"COALESCE((SELECT max(id) FROM {table.name}), 0) + 1, false)"
                )
        pg.commit()
        pg.autocommit = True
        t = time.perf_counter()
        pg.execute("VACUUM ANALYZE")
        took["vacuum_analyze"] = round(time.perf_counter() - t, 1)
    lite.close()
    return took
