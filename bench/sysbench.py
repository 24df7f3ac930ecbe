"""The sysbench-shaped table the benchmarks share: id, k, c char(120), pad char(60)."""

from __future__ import annotations

import random
import string
from typing import Any

CREATE = (
    "CREATE TABLE {db}.{table} (id INT NOT NULL PRIMARY KEY, k INT NOT NULL DEFAULT 0,"
    " c CHAR(120) NOT NULL DEFAULT '', pad CHAR(60) NOT NULL DEFAULT '', KEY k_1 (k))"
)

#: Each byte value to a letter or digit: random bytes become random text ten times faster
#: than a choice per character (10M rows filled in minutes, not a quarter of an hour).
_LETTERS = ((string.ascii_letters + string.digits) * 5)[:256].encode()


def fill(
    conn: Any,
    rows: int,
    db: str = "sbtest",
    batch: int = 1000,
    *,
    table: str = "sbtest1",
    create_db: bool = True,
) -> None:
    """Creates `db`.`table` with `rows` random rows, `batch` rows per INSERT."""
    rnd = random.Random(7)
    with conn.cursor() as cur:
        if create_db:
            cur.execute(f"CREATE DATABASE {db}")
        cur.execute(CREATE.format(db=db, table=table))
        for first in range(1, rows + 1, batch):
            values = []
            for i in range(first, min(first + batch, rows + 1)):
                c = rnd.randbytes(119).translate(_LETTERS).decode()
                pad = rnd.randbytes(59).translate(_LETTERS).decode()
                values.append(f"({i},{rnd.randint(1, rows)},'{c}','{pad}')")
            cur.execute(f"INSERT INTO {db}.{table} VALUES " + ",".join(values))
