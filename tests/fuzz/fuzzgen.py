"""The seeded workload of the randomized differential test: SQL and faults from one seed.

    generate(seed, operations=..., max_faults=...) -> Plan
        Plan.setup      the captured tables and their pre-filled rows (run before the
                        changefeed is created, so its snapshot has something to read)
        Plan.operations transactions, DDL and faults, in the order they are applied

Everything random comes from one ``random.Random(seed)``: the same seed gives the
same plan, statement for statement, on any machine, so a failing seed replays.
The plan is made up front from a model of the tables (columns and their types,
indexes, the keys of the live rows, the next free key), never from what the
source answers, and every statement is valid against that model: DML after an
``ADD COLUMN`` writes the new column, nothing writes a dropped one, values fit
the column's current width, updated and deleted keys exist, inserted and moved
keys are new. The statements run one after another on one connection, faults
between transactions, so the model is exact.

Statements use unqualified table names; the runner sets the database.
"""

from __future__ import annotations

import enum
import random
from dataclasses import dataclass, field

__all__ = [
    "Fault",
    "OpKind",
    "Operation",
    "Plan",
    "TEXT_KEY_COLLATIONS",
    "generate",
]

#: Rows pre-filled per table, and how many tables are captured at the start.
DEFAULT_ROWS = 3000
START_TABLES = 3
MAX_TABLES = 6
#: The largest transaction, in rows.
LARGE_ROWS = (100, 400)


class OpKind(enum.Enum):
    TRANSACTION = "txn"
    DDL = "ddl"
    FAULT = "fault"


class Fault(enum.Enum):
    """A fault the runner does to the cluster or the source."""

    KILL_OWNER_RESTART = "kill-owner-restart"  # SIGKILL the owner, start it again at once
    KILL_OWNER_TAKEOVER = "kill-owner-takeover"  # SIGKILL the owner, others take over
    KILL_PROCESSOR_RESTART = "kill-processor-restart"
    KILL_PROCESSOR_TAKEOVER = "kill-processor-takeover"
    RESTART_SOURCE = "restart-source"  # stop the source MariaDB and start it again
    FLUSH_BINLOGS = "flush-binary-logs"  # rotate the source's binlog
    # new table rules without one captured table, then with it again once it is removed
    REMOVE_AND_ADD_BACK = "remove-and-add-back"
    # the changefeed paused by the admin API, the next operations applied, then resumed
    PAUSE_RESUME = "pause-resume"


#: The faults a plan draws at random (its ``max_faults``); REMOVE_AND_ADD_BACK comes only
#: from ``readds``, drawn from a stream of its own, and PAUSE_RESUME only in a plan with
#: variety, so that other seeds' plans stay as they were (the regression seeds replay
#: the plans that found their bugs).
_DRAWN = tuple(f for f in Fault if f not in (Fault.REMOVE_AND_ADD_BACK, Fault.PAUSE_RESUME))
_WEIGHTS = (1.0, 1.0, 1.0, 1.0, 1.0, 1.5)


@dataclass(frozen=True)
class Operation:
    """One step of the plan: a transaction's statements, one DDL statement, or a fault."""

    n: int
    kind: OpKind
    label: str
    statements: tuple[str, ...] = ()
    fault: Fault | None = None

    def describe(self) -> str:
        head = f"#{self.n:04d} {self.kind.value:5s} {self.label}"
        if self.kind is OpKind.TRANSACTION:
            body = "\n".join(f"    {_shorten(s)}" for s in self.statements)
            return f"{head}\n    BEGIN\n{body}\n    COMMIT"
        if self.kind is OpKind.DDL:
            return f"{head}\n    {self.statements[0]}"
        return head


@dataclass(frozen=True)
class Plan:
    seed: int
    setup: tuple[str, ...]
    operations: tuple[Operation, ...]
    tables: tuple[str, ...]  # the tables the source holds at the end, by the model
    #: The workload starts once this many snapshot chunks are done: 0 (the chunk plan
    #: exists, Spark has read nothing yet) or 1 (chunks are being read).
    start_after_chunks: int = 0

    def count(self, kind: OpKind) -> int:
        return sum(1 for op in self.operations if op.kind is kind)

    def render(self) -> str:
        """The whole plan as text: the operations log of a seed."""
        lines = [f"# seed {self.seed}: setup ({len(self.setup)} statements)"]
        lines += [f"    {_shorten(s)}" for s in self.setup]
        lines.append(
            f"# {len(self.operations)} operations: {self.count(OpKind.TRANSACTION)} "
            f"transactions, {self.count(OpKind.DDL)} DDL, {self.count(OpKind.FAULT)} faults"
        )
        lines += [op.describe() for op in self.operations]
        lines.append(f"# tables at the end: {', '.join(self.tables)}")
        lines.append(f"# the workload starts after {self.start_after_chunks} snapshot chunks")
        return "\n".join(lines) + "\n"


def _shorten(statement: str, limit: int = 600) -> str:
    if len(statement) <= limit:
        return statement
    return f"{statement[:limit]}... ({len(statement)} characters)"


# --- the model ---------------------------------------------------------------------------------

# Column kinds, the SQL type for each width step (MODIFY COLUMN widens to the next step).
_WIDTHS: dict[str, tuple[str, ...]] = {
    "int": ("INT", "BIGINT"),
    "uint": ("INT UNSIGNED", "BIGINT UNSIGNED"),
    "varchar": ("VARCHAR(16)", "VARCHAR(40)", "VARCHAR(120)"),
    "varbinary": ("VARBINARY(8)", "VARBINARY(32)"),
    "decimal": ("DECIMAL(8,2)", "DECIMAL(12,2)", "DECIMAL(20,2)"),
    "datetime": ("DATETIME(3)", "DATETIME(6)"),
    "date": ("DATE",),
    "text": ("TEXT",),
    # The kinds a plan with ``variety`` draws as well: the other integer widths, floats,
    # the temporal types with binlog encodings of their own, ENUM and SET (widened by a
    # member), BIT, JSON, CHAR (trailing spaces), BINARY (zero padding), BLOB, wide
    # decimals and text in a one-byte character set.
    "small": ("TINYINT", "SMALLINT", "MEDIUMINT", "INT"),
    "usmall": ("TINYINT UNSIGNED", "SMALLINT UNSIGNED", "MEDIUMINT UNSIGNED"),
    "float": ("FLOAT", "DOUBLE"),
    "timestamp": ("TIMESTAMP(3)", "TIMESTAMP(6)"),
    "time": ("TIME", "TIME(3)"),
    "year": ("YEAR",),
    "enum": ("ENUM('a','b','c')", "ENUM('a','b','c','d é')"),
    "set": ("SET('x','y','z')", "SET('x','y','z','w')"),
    "bit": ("BIT(5)", "BIT(17)"),
    "json": ("JSON",),
    "char": ("CHAR(10)", "CHAR(30)"),
    "blob": ("BLOB",),
    "binary": ("BINARY(6)", "BINARY(12)"),
    "latin1": ("VARCHAR(20) CHARACTER SET latin1", "VARCHAR(60) CHARACTER SET latin1"),
    "wide-decimal": ("DECIMAL(30,10)", "DECIMAL(45,10)"),
}
#: The kinds of a plan without variety (the regression seeds' plans stay what they were).
_CLASSIC = ("int", "uint", "varchar", "varbinary", "decimal", "datetime", "date", "text")
_INDEXABLE = frozenset(_WIDTHS) - {"text", "json", "blob"}
#: The row key of a table in a plan with variety: ``id`` as the primary key (as
#: without variety), ``(g, id)`` with a small ``g`` first (chunks split on a
#: composite key whose first part has few values), ``id`` as a NOT NULL unique
#: key and no primary key, or a text key ``k`` (``id`` then an unindexed column) in a
#: collation of ``TEXT_KEY_COLLATIONS``. Such a table may also have a generated column,
#: stored or virtual (``Table.generated``).
KEY_SHAPES = ("primary", "composite", "unique", "text")
#: A text key is ``<prefix>#<id>``, sometimes with a trailing space: the id keeps keys
#: of different rows apart in any collation, and a row's key is often respelled to
#: one its collation calls equal ('s' and 'ß' in general_ci, 'oe' and 'Œ' in
#: unicode_ci, case and trailing spaces in both), which the binlog shows as a key
#: change and the downstream sees as the same row.
TEXT_KEY_COLLATIONS = ("utf8mb4_general_ci", "utf8mb4_unicode_ci", "utf8mb4_bin")
_KEY_PREFIXES = (
    *("s", "S", "ß", "ss", "SS", "e", "E", "é", "É", "oe", "OE", "Œ", "œ"),
    *("i", "I", "ı", "a", "á", "Å", "\U0001f600", "\U0001f601"),
)


@dataclass
class Column:
    name: str
    kind: str
    width: int = 0  # index into _WIDTHS[kind]
    nullable: bool = True
    default: str | None = None  # an SQL literal

    def sql_type(self) -> str:
        return _WIDTHS[self.kind][self.width]

    def definition(self) -> str:
        text = f"`{self.name}` {self.sql_type()} {'NULL' if self.nullable else 'NOT NULL'}"
        if self.default is not None:
            text += f" DEFAULT {self.default}"
        return text


@dataclass
class Table:
    name: str
    columns: list[Column]  # without the key `id`
    indexes: dict[str, str] = field(default_factory=dict)  # index name -> column
    ids: set[int] = field(default_factory=set)
    next_id: int = 1
    key: str = "primary"  # one of KEY_SHAPES
    generated: str = ""  # "STORED" or "VIRTUAL": a column `gen` computed from `id`
    collation: str = ""  # of the text key `k`
    #: With a second unique key: the values of its column `u` (NULL for a row not here).
    unique: dict[int, int] | None = None
    next_unique: int = 1

    def create_sql(self) -> str:
        key = {
            "primary": ["PRIMARY KEY (`id`)"],
            "composite": ["PRIMARY KEY (`g`, `id`)"],
            "unique": ["UNIQUE KEY `uk_id` (`id`)"],
            "text": ["PRIMARY KEY (`k`)"],
        }[self.key]
        parts = [
            "`id` BIGINT NOT NULL",
            *([f"`k` VARCHAR(40) COLLATE {self.collation} NOT NULL"] if self.key == "text" else []),
            *(["`g` TINYINT NOT NULL"] if self.key == "composite" else []),
            *([f"`gen` BIGINT AS (`id` * 2) {self.generated}"] if self.generated else []),
            *(["`u` BIGINT NULL"] if self.unique is not None else []),
            *(c.definition() for c in self.columns),
            *key,
            *(["UNIQUE KEY `uk_u` (`u`)"] if self.unique is not None else []),
        ]
        parts += [f"KEY `{i}` (`{c}`)" for i, c in self.indexes.items()]
        return f"CREATE TABLE `{self.name}` ({', '.join(parts)})"

    def fresh_ids(self, count: int) -> list[int]:
        first = self.next_id
        self.next_id += count
        return list(range(first, first + count))

    def fresh_unique(self) -> int:
        self.next_unique += 1
        return self.next_unique - 1

    def forget(self, rows: list[int]) -> None:
        """Rows deleted: gone from the keys and from the unique values."""
        self.ids.difference_update(rows)
        if self.unique is not None:
            for row in rows:
                self.unique.pop(row, None)

    def move(self, moves: dict[int, int]) -> None:
        """Rows given new keys (old -> new), keeping their unique values."""
        self.ids.difference_update(moves)
        self.ids.update(moves.values())
        if self.unique is not None:
            held = {moves[r]: self.unique.pop(r) for r in moves if r in self.unique}
            self.unique.update(held)


# --- values ------------------------------------------------------------------------------------

_INT_EDGES = {
    "INT": (-2147483648, 2147483647, 0, -1, 1),
    "BIGINT": (-9223372036854775808, 9223372036854775807, 0, -1, 2147483648),
    "INT UNSIGNED": (0, 4294967295, 2147483648, 1),
    "BIGINT UNSIGNED": (0, 18446744073709551615, 9223372036854775808, 4294967296),
    "TINYINT": (-128, 127, 0, -1),
    "SMALLINT": (-32768, 32767, 0, 128),
    "MEDIUMINT": (-8388608, 8388607, 0, -32769),
    "TINYINT UNSIGNED": (0, 255, 128),
    "SMALLINT UNSIGNED": (0, 65535, 32768),
    "MEDIUMINT UNSIGNED": (0, 16777215, 8388608),
}
_FLOAT_EDGES = {
    "FLOAT": ("0", "-1.5", "3.40282e38", "-3.40282e38", "1.17549e-38", "0.1"),
    "DOUBLE": ("0", "-2.5", "1.7976931348623157e308", "2.2250738585072014e-308", "0.1"),
}
#: Text a latin1 column holds: accented letters, a quote and a backslash.
_LATIN1 = "abcXYZ éüÿßÆ'\\-"
_JSON_VALUES = ('{"a": 1, "b": [1, 2.5, "x"]}', "[]", '"text"', "null", '{"k": {"é": true}}')
_TEXT_EDGES = ("", " ", "it's", 'say "hi"', "back\\slash", "ü€😀", "tab\tnew\nline", "x  ")
_BINARY_EDGES = (b"", b"\x00", b"\xff\x00\xfe", b"\x00\x00\x00")


def _arguments(sql_type: str) -> str:
    """What a type's parentheses hold: ``16`` of ``VARCHAR(16) CHARACTER SET latin1``."""
    return sql_type[sql_type.index("(") + 1 : sql_type.index(")")]


def _decimal_shape(sql_type: str) -> tuple[int, int]:
    """The largest integral part of a DECIMAL type, and its scale."""
    precision, scale = (int(p) for p in _arguments(sql_type).split(","))
    return 10 ** (precision - scale) - 1, scale


def value_sql(rnd: random.Random, column: Column) -> str:
    """A random SQL literal that fits ``column`` as it is now: often an edge, sometimes NULL."""
    if column.nullable and rnd.random() < 0.12:
        return "NULL"
    edge = rnd.random() < 0.25
    sql_type = column.sql_type()
    kind = column.kind
    if kind in ("int", "uint", "small", "usmall"):
        edges = _INT_EDGES[sql_type]
        if edge:
            return str(rnd.choice(edges))
        low = 0 if kind in ("uint", "usmall") else max(-100000, min(edges))
        return str(rnd.randint(low, min(100000, max(edges))))
    if kind == "float":
        if edge:
            return rnd.choice(_FLOAT_EDGES[sql_type])
        return f"{rnd.uniform(-1e6, 1e6):.{rnd.randint(0, 6)}f}"
    if kind == "timestamp":
        if edge:
            return _string(rnd.choice(("1970-01-02 00:00:00", "2038-01-18 23:59:59.999999")))
        return _string(
            f"{rnd.randint(1990, 2030)}-{rnd.randint(1, 12):02d}-{rnd.randint(1, 28):02d} "
            f"{rnd.randint(0, 23):02d}:{rnd.randint(0, 59):02d}:{rnd.randint(0, 59):02d}"
            f".{rnd.randint(0, 999999):06d}"
        )
    if kind == "time":
        if edge:
            return _string(rnd.choice(("-838:59:59", "838:59:59", "00:00:00", "-00:00:01.5")))
        sign = "-" if rnd.random() < 0.2 else ""
        return _string(
            f"{sign}{rnd.randint(0, 838)}:{rnd.randint(0, 59):02d}:{rnd.randint(0, 59):02d}"
            f".{rnd.randint(0, 999):03d}"
        )
    if kind == "year":
        return str(rnd.choice((1901, 2155, 0)) if edge else rnd.randint(1901, 2155))
    if kind in ("enum", "set"):
        members = [m.strip("'") for m in _arguments(sql_type).split(",")]
        if kind == "enum":
            return _string(rnd.choice(members))
        return _string(",".join(m for m in members if rnd.random() < 0.5))
    if kind == "bit":
        bits = int(_arguments(sql_type))
        value = rnd.choice((0, 2**bits - 1)) if edge else rnd.getrandbits(bits)
        return f"b'{value:b}'"
    if kind == "json":
        return _string(rnd.choice(_JSON_VALUES))
    if kind == "char":
        size = int(_arguments(sql_type))
        text = (
            rnd.choice(_TEXT_EDGES)
            if edge
            else f"c{rnd.getrandbits(30):x}" + " " * rnd.randint(0, 2)
        )
        return _string(text[:size])
    if kind == "blob":
        data = rnd.choice(_BINARY_EDGES) if edge else rnd.randbytes(rnd.randint(1, 300))
        return "0x" + data.hex() if data else "''"
    if kind == "latin1":
        size = int(_arguments(sql_type))
        return _string("".join(rnd.choice(_LATIN1) for _ in range(rnd.randint(0, size))))
    if kind == "varchar":
        size = int(_arguments(sql_type))
        if edge:
            text = rnd.choice((*_TEXT_EDGES, "z" * size, "é" * size))
        else:
            text = "".join(rnd.choice("abcdefghij KLM-_.") for _ in range(rnd.randint(1, size)))
        return _string(text[:size])
    if kind in ("varbinary", "binary"):
        size = int(_arguments(sql_type))
        data = rnd.choice(_BINARY_EDGES) if edge else rnd.randbytes(rnd.randint(1, size))
        return "0x" + data[:size].hex() if data else "''"
    if kind in ("decimal", "wide-decimal"):
        bound, scale = _decimal_shape(sql_type)
        nines = "9" * scale
        if edge:
            return rnd.choice((f"{bound}.{nines}", f"-{bound}.{nines}", "0.00", "0.01", "-0.01"))
        return f"{rnd.randint(-bound, bound)}.{rnd.randint(0, 10**scale - 1):0{scale}d}"
    if kind == "datetime":
        if edge:
            return _string(
                rnd.choice(
                    (
                        "1000-01-01 00:00:00",
                        "9999-12-31 23:59:59.999",
                        "1970-01-01 00:00:01",
                        "2038-01-19 03:14:08.5",
                    )
                )
            )
        return _string(
            f"{rnd.randint(1990, 2030)}-{rnd.randint(1, 12):02d}-{rnd.randint(1, 28):02d} "
            f"{rnd.randint(0, 23):02d}:{rnd.randint(0, 59):02d}:{rnd.randint(0, 59):02d}"
            f".{rnd.randint(0, 999):03d}"
        )
    if kind == "date":
        if edge:
            return _string(rnd.choice(("1000-01-01", "9999-12-31", "1970-01-01")))
        return _string(
            f"{rnd.randint(1990, 2030)}-{rnd.randint(1, 12):02d}-{rnd.randint(1, 28):02d}"
        )
    if kind == "text":
        if edge:
            return _string(rnd.choice((*_TEXT_EDGES, "long " * 2000)))
        return _string(f"text-{rnd.getrandbits(40):x}" * rnd.randint(1, 5))
    raise AssertionError(f"unknown column kind {kind}")


def _string(text: str) -> str:
    escaped = (
        text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n").replace("\t", "\\t")
    )
    return f"'{escaped}'"


# --- the generator -----------------------------------------------------------------------------


class _Generator:
    def __init__(self, seed: int, rows: int, max_faults: int, variety: bool) -> None:
        self.rnd = random.Random(seed)
        self.seed = seed
        self.kinds = tuple(_WIDTHS) if variety else _CLASSIC
        self.variety = variety
        self.rows = rows
        self.faults_left = max_faults
        self.tables: dict[str, Table] = {}
        self.names = 0  # counter for new column, index and table names
        self.operations: list[Operation] = []

    def fresh(self, prefix: str) -> str:
        self.names += 1
        return f"{prefix}{self.names}"

    def new_column(self) -> Column:
        """A new column: nullable with or without a default, or NOT NULL with a default."""
        rnd = self.rnd
        kind = rnd.choice(self.kinds)
        column = Column(self.fresh("c"), kind, nullable=rnd.random() < 0.7)
        if not column.nullable or rnd.random() < 0.4:
            column.default = value_sql(rnd, Column(column.name, kind, nullable=False))
        return column

    # setup

    def setup(self) -> list[str]:
        statements = []
        for n in range(START_TABLES):
            table = Table(f"t{n + 1}", [self.new_column() for _ in range(self.rnd.randint(3, 5))])
            self.vary(table)
            self.tables[table.name] = table
            statements.append(table.create_sql())
            statements += self.prefill(table, self.rows)
        return statements

    def vary(self, table: Table) -> None:
        """With variety: the table's key shape, and whether it has a generated column."""
        if self.variety:
            table.key = self.rnd.choice(KEY_SHAPES)
            table.generated = self.rnd.choice(("", "", "STORED", "VIRTUAL"))
            if table.key == "text":
                table.collation = self.rnd.choice(TEXT_KEY_COLLATIONS)
            if self.rnd.random() < 0.4:
                table.unique = {}

    def prefill(self, table: Table, rows: int) -> list[str]:
        statements = []
        ids = table.fresh_ids(rows)
        for start in range(0, rows, 500):
            batch = ids[start : start + 500]
            statements.append(self.insert_sql(table, batch))
        table.ids.update(ids)
        return statements

    def insert_sql(self, table: Table, ids: list[int]) -> str:
        """An INSERT of the rows ``ids``; a composite key's ``g`` is ``id % 3`` (it never
        changes: a moved row keeps its ``g``)."""
        composite, text = table.key == "composite", table.key == "text"
        unique = table.unique
        names = ", ".join(
            [
                "`id`",
                *(["`g`"] if composite else []),
                *(["`k`"] if text else []),
                *(["`u`"] if unique is not None else []),
                *(f"`{c.name}`" for c in table.columns),
            ]
        )
        rows = ", ".join(
            "("
            + ", ".join(
                [
                    str(i),
                    *([str(i % 3)] if composite else []),
                    *([_string(self.spelling(i))] if text else []),
                    *([self.new_unique(table, i)] if unique is not None else []),
                    *(value_sql(self.rnd, c) for c in table.columns),
                ]
            )
            + ")"
            for i in ids
        )
        return f"INSERT INTO `{table.name}` ({names}) VALUES {rows}"

    def new_unique(self, table: Table, row: int) -> str:
        """The unique value of a new row: a fresh one, or NULL (which any rows may share)."""
        assert table.unique is not None
        if self.rnd.random() < 0.2:
            return "NULL"
        table.unique[row] = table.fresh_unique()
        return str(table.unique[row])

    def spelling(self, row: int) -> str:
        """A text key of row ``row``: ``<prefix>#<id>``, sometimes with a trailing space."""
        rnd = self.rnd
        return f"{rnd.choice(_KEY_PREFIXES)}#{row}{rnd.choice(('', '', ' '))}"

    # transactions

    def transaction(self) -> Operation:
        rnd = self.rnd
        count = 1 if rnd.random() < 0.7 else rnd.randint(2, 3)
        tables = rnd.sample(sorted(self.tables), min(count, len(self.tables)))
        size = rnd.choices(("1-row", "few-rows", "large"), (0.5, 0.35, 0.15))[0]
        statements: list[str] = []
        for name in tables:
            statements += self.table_changes(self.tables[name], size)
        label = f"{size} on {', '.join(tables)}"
        return Operation(len(self.operations) + 1, OpKind.TRANSACTION, label, tuple(statements))

    def table_changes(self, table: Table, size: str) -> list[str]:
        rnd = self.rnd
        kinds: tuple[str, ...] = ("insert", "update", "move", "delete")
        respell = ("respell",) if table.key == "text" else ()
        kinds += respell
        if table.unique is not None:
            kinds += ("unique",)
        if size == "1-row":
            return self.one_change(table, rnd.choice(kinds))
        if size == "few-rows":
            return [
                s
                for _ in range(rnd.randint(2, 8))
                for s in self.one_change(table, rnd.choice(kinds))
            ]
        rows = rnd.randint(*LARGE_ROWS)
        what = rnd.choice(("insert", "update", "move", "delete", "mixed", *respell))
        if what == "insert":
            ids = table.fresh_ids(rows)
            table.ids.update(ids)
            return [self.insert_sql(table, ids)]
        if what == "mixed":
            return [s for _ in range(rows // 10) for s in self.one_change(table, rnd.choice(kinds))]
        live = sorted(table.ids)
        if not live:
            return self.one_change(table, "insert")
        start = rnd.randrange(len(live))
        chosen = live[start : start + rows]
        low, high = chosen[0], chosen[-1]
        where = f"WHERE `id` BETWEEN {low} AND {high}"
        if what == "update":
            column = rnd.choice(table.columns)
            return [f"UPDATE `{table.name}` SET {self.assignment(table, column)} {where}"]
        if what == "delete":
            table.forget(chosen)
            return [f"DELETE FROM `{table.name}` {where}"]
        if what == "respell":
            prefix = _string(rnd.choice(_KEY_PREFIXES) + "#")
            return [f"UPDATE `{table.name}` SET `k` = CONCAT({prefix}, `id`) {where}"]
        offset = table.next_id - low  # every moved key lands past every key in use
        table.next_id = high + offset + 1
        table.move({i: i + offset for i in chosen})
        # assignments run left to right: `k` is built from the moved `id`
        respelled = ", `k` = CONCAT(SUBSTRING_INDEX(`k`, '#', 1), '#', `id`)"
        extra = respelled if table.key == "text" else ""
        return [f"UPDATE `{table.name}` SET `id` = `id` + {offset}{extra} {where}"]

    def assignment(self, table: Table, column: Column) -> str:
        return f"`{column.name}` = {value_sql(self.rnd, column)}"

    def one_change(self, table: Table, what: str) -> list[str]:
        rnd = self.rnd
        if what != "insert" and not table.ids:
            what = "insert"
        if what == "insert":
            ids = table.fresh_ids(1)
            table.ids.update(ids)
            return [self.insert_sql(table, ids)]
        key = rnd.choice(sorted(table.ids))
        if what == "update":
            columns = rnd.sample(table.columns, rnd.randint(1, len(table.columns)))
            sets = ", ".join(self.assignment(table, c) for c in columns)
            return [f"UPDATE `{table.name}` SET {sets} WHERE `id` = {key}"]
        if what == "delete":
            table.forget([key])
            return [f"DELETE FROM `{table.name}` WHERE `id` = {key}"]
        if what == "respell":
            spelling = _string(self.spelling(key))
            return [f"UPDATE `{table.name}` SET `k` = {spelling} WHERE `id` = {key}"]
        if what == "unique":
            return self.unique_change(table, key)
        new = table.fresh_ids(1)[0]
        table.move({key: new})
        extra = ""
        if table.key == "text":
            extra = f", `k` = {_string(self.spelling(new))}"
        if rnd.random() < 0.5:
            extra += ", " + self.assignment(table, rnd.choice(table.columns))
        return [f"UPDATE `{table.name}` SET `id` = {new}{extra} WHERE `id` = {key}"]

    def unique_change(self, table: Table, key: int) -> list[str]:
        """Values of the second unique key moving between rows: two rows swap theirs
        (through NULL, as an application must), a deleted row's value goes to another
        row, or a row gets a fresh value or NULL. Rows of one transaction collide on
        that key unless applied in order."""
        unique, name = table.unique, table.name
        assert unique is not None
        rnd = self.rnd
        other = rnd.choice(sorted(table.ids))
        old = unique.pop(key, None)
        held = str(old) if old is not None else "NULL"
        if other != key and rnd.random() < 0.5:
            theirs = unique.pop(other, None)
            if theirs is not None:
                unique[key] = theirs
            if old is not None:
                unique[other] = old
            return [
                f"UPDATE `{name}` SET `u` = NULL WHERE `id` = {key}",
                f"UPDATE `{name}` SET `u` = {held} WHERE `id` = {other}",
                f"UPDATE `{name}` SET `u` = {theirs if theirs is not None else 'NULL'} "
                f"WHERE `id` = {key}",
            ]
        if other != key and rnd.random() < 0.5:
            table.forget([key])
            unique.pop(other, None)
            if old is not None:
                unique[other] = old
            return [
                f"DELETE FROM `{name}` WHERE `id` = {key}",
                f"UPDATE `{name}` SET `u` = {held} WHERE `id` = {other}",
            ]
        value = self.new_unique(table, key)
        return [f"UPDATE `{name}` SET `u` = {value} WHERE `id` = {key}"]

    # DDL

    def ddl(self) -> Operation:
        rnd = self.rnd
        choices = ["add-column", "add-column", "modify-widen", "add-index", "rename", "truncate"]
        if len(self.tables) < MAX_TABLES:
            choices.append("create-table")
        name = rnd.choice(sorted(self.tables))
        table = self.tables[name]
        if len(table.columns) > 2:
            choices.append("drop-column")
        if table.indexes:
            choices.append("drop-index")
        if self.variety:
            choices += ["add-column-placed", "rename-column", "two-clauses"]
        what = rnd.choice(choices)
        statement = getattr(self, "ddl_" + what.replace("-", "_"))(table)
        if statement is None:  # nothing to widen or index: add a column instead
            what, statement = "add-column", self.ddl_add_column(table)
        label = f"{what} on {name}" if what != "create-table" else what
        return Operation(len(self.operations) + 1, OpKind.DDL, label, (statement,))

    def ddl_add_column(self, table: Table) -> str:
        return f"ALTER TABLE `{table.name}` {self.added(table)}"

    def added(self, table: Table) -> str:
        """A new column in the model, as the clause that adds it."""
        column = self.new_column()
        table.columns.append(column)
        return f"ADD COLUMN {column.definition()}"

    def dropped(self, table: Table) -> str:
        """One of the table's columns gone from the model, as the clause that drops it."""
        column = self.rnd.choice(table.columns)
        table.columns.remove(column)
        table.indexes = {i: c for i, c in table.indexes.items() if c != column.name}
        return f"DROP COLUMN `{column.name}`"

    def ddl_add_column_placed(self, table: Table) -> str:
        """A column added FIRST or AFTER another: every later column of the binlog's row
        images moves by one."""
        column = self.new_column()
        after = self.rnd.choice(["", "id", *(c.name for c in table.columns)])
        table.columns.append(column)
        place = f"AFTER `{after}`" if after else "FIRST"
        return f"ALTER TABLE `{table.name}` ADD COLUMN {column.definition()} {place}"

    def ddl_rename_column(self, table: Table) -> str:
        """A column renamed, by RENAME COLUMN or by CHANGE with its definition."""
        column = self.rnd.choice(table.columns)
        old, column.name = column.name, self.fresh("c")
        table.indexes = {i: column.name if c == old else c for i, c in table.indexes.items()}
        if self.rnd.random() < 0.5:
            return f"ALTER TABLE `{table.name}` RENAME COLUMN `{old}` TO `{column.name}`"
        return f"ALTER TABLE `{table.name}` CHANGE COLUMN `{old}` {column.definition()}"

    def ddl_two_clauses(self, table: Table) -> str:
        """One ALTER adding a column and dropping another (or adding a second)."""
        first = self.new_column()
        second = self.dropped(table) if len(table.columns) > 2 else self.added(table)
        table.columns.append(first)
        return f"ALTER TABLE `{table.name}` ADD COLUMN {first.definition()}, {second}"

    def ddl_drop_column(self, table: Table) -> str:
        return f"ALTER TABLE `{table.name}` {self.dropped(table)}"

    def ddl_modify_widen(self, table: Table) -> str | None:
        widenable = [c for c in table.columns if c.width + 1 < len(_WIDTHS[c.kind])]
        if not widenable:
            return None
        column = self.rnd.choice(widenable)
        column.width += 1
        return f"ALTER TABLE `{table.name}` MODIFY COLUMN {column.definition()}"

    def ddl_add_index(self, table: Table) -> str | None:
        free = [
            c.name
            for c in table.columns
            if c.kind in _INDEXABLE and c.name not in table.indexes.values()
        ]
        if not free:
            return None
        column = self.rnd.choice(free)
        index = self.fresh("ix")
        table.indexes[index] = column
        return f"ALTER TABLE `{table.name}` ADD INDEX `{index}` (`{column}`)"

    def ddl_drop_index(self, table: Table) -> str:
        index = self.rnd.choice(sorted(table.indexes))
        del table.indexes[index]
        return f"ALTER TABLE `{table.name}` DROP INDEX `{index}`"

    def ddl_rename(self, table: Table) -> str:
        old = table.name
        table.name = f"{old.split('_')[0]}_r{self.fresh('')}"
        self.tables[table.name] = self.tables.pop(old)
        return f"RENAME TABLE `{old}` TO `{table.name}`"

    def ddl_truncate(self, table: Table) -> str:
        table.forget(sorted(table.ids))
        return f"TRUNCATE TABLE `{table.name}`"

    def ddl_create_table(self, _: Table) -> str:
        table = Table(self.fresh("n"), [self.new_column() for _ in range(self.rnd.randint(2, 4))])
        self.vary(table)
        self.tables[table.name] = table
        return table.create_sql()

    # faults

    def fault(self) -> Operation:
        self.faults_left -= 1
        if self.variety:
            fault = self.rnd.choices((*_DRAWN, Fault.PAUSE_RESUME), (*_WEIGHTS, 2.0))[0]
        else:
            fault = self.rnd.choices(_DRAWN, _WEIGHTS)[0]
        return Operation(len(self.operations) + 1, OpKind.FAULT, fault.value, fault=fault)

    def plan(self, operations: int, readds: int = 0) -> Plan:
        setup = self.setup()
        extra = random.Random(f"readds-{self.seed}")
        at = set(extra.sample(range(3, operations), min(readds, max(0, operations - 3))))
        while len(self.operations) < operations + len(at):
            if len(self.operations) in at:
                fault = Fault.REMOVE_AND_ADD_BACK
                n = len(self.operations) + 1
                self.operations.append(Operation(n, OpKind.FAULT, fault.value, fault=fault))
                continue
            roll = self.rnd.random()
            if roll < 0.06 and self.faults_left > 0 and len(self.operations) > 2:
                op = self.fault()
            elif roll < 0.2:
                op = self.ddl()
            else:
                op = self.transaction()
            self.operations.append(op)
        return Plan(
            self.seed,
            tuple(setup),
            tuple(self.operations),
            tuple(sorted(self.tables)),
            start_after_chunks=self.rnd.choice((0, 1)),
        )


def generate(
    seed: int,
    *,
    operations: int = 40,
    max_faults: int = 2,
    rows: int = DEFAULT_ROWS,
    readds: int = 0,
    variety: bool = False,
) -> Plan:
    """The plan of ``seed``: ``rows`` rows in each of the starting tables, then
    ``operations`` steps with at most ``max_faults`` faults among them, and ``readds``
    more: a captured table removed by new rules, then added back. With ``variety``,
    columns of every kind in ``_WIDTHS`` and tables of every one of ``KEY_SHAPES``."""
    return _Generator(seed, rows, max_faults, variety).plan(operations, readds)
