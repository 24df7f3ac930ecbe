"""Column definitions from DDL text, turned into :class:`~cdc.model.Column` the server's way.

A column definition in a statement leaves much unsaid: the display width of
an ``INT``, the length of a ``CHAR``, the character set, the nullability.
The server fills those in; this module fills them in the same way, so a
column built from DDL equals the one ``information_schema`` reports after the
DDL ran (``tests/integration/schema`` checks it against a real MariaDB):

1. :func:`column_spec` reads a sqlglot ``ColumnDef`` into a :class:`ColumnSpec`
   (what the statement says, type aliases resolved).
2. :func:`build_column` applies the server's defaults for a flavour and the
   table's default character set (when the statement told us one).

What differs between the flavours is text only: MariaDB shows integer display
widths (``int(11)``) and ``year(4)`` where MySQL 8 shows ``int`` and ``year``;
MariaDB stores ``JSON`` as ``longtext`` (utf8mb4_bin); string defaults are
quoted by MariaDB (``'x'``) and bare in MySQL (``x``); the default collation
of utf8mb4 is ``utf8mb4_general_ci`` (MariaDB 10.x) or ``utf8mb4_0900_ai_ci``.

Assumptions: ``explicit_defaults_for_timestamp=ON`` (default of MySQL 8 and
MariaDB 10.10+), no ``REAL_AS_FLOAT`` sql mode. A column whose character set
comes from a table default this package does not know (``ALTER TABLE ... ADD
c VARCHAR(5)``: ``TableSchema`` keeps no table charset) gets charset and
collation None, meaning "the table's default". Defaults are rendered as
written (``DEFAULT 1.5`` on a ``DECIMAL(6,3)`` stays ``1.5`` where the server
shows ``1.500``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from cdc.model import Column, Flavor

__all__ = [
    "CHARACTER_TYPES",
    "ColumnSpec",
    "build_column",
    "canonical_charset",
    "canonical_collation",
    "charset_of_collation",
    "column_spec",
    "default_collation",
    "format_elements",
    "key_column",
    "max_bytes_per_char",
    "parse_elements",
    "render_default",
]

if TYPE_CHECKING:  # the enum's own name; older sqlglot releases only have the alias
    from sqlglot.expressions.datatypes import DType
else:
    DType = exp.DataType.Type

# sqlglot type -> (MySQL base type, unsigned).
_TYPES: dict[DType, tuple[str, bool]] = {
    DType.TINYINT: ("tinyint", False),
    DType.UTINYINT: ("tinyint", True),
    DType.SMALLINT: ("smallint", False),
    DType.USMALLINT: ("smallint", True),
    DType.MEDIUMINT: ("mediumint", False),
    DType.UMEDIUMINT: ("mediumint", True),
    DType.INT: ("int", False),
    DType.UINT: ("int", True),
    DType.BIGINT: ("bigint", False),
    DType.UBIGINT: ("bigint", True),
    DType.DECIMAL: ("decimal", False),
    DType.UDECIMAL: ("decimal", True),
    DType.FLOAT: ("float", False),
    DType.DOUBLE: ("double", False),
    DType.UDOUBLE: ("double", True),
    DType.BIT: ("bit", False),
    DType.BOOLEAN: ("bool", False),
    DType.SERIAL: ("serial", False),
    DType.CHAR: ("char", False),
    DType.NCHAR: ("nchar", False),
    DType.VARCHAR: ("varchar", False),
    DType.NVARCHAR: ("nvarchar", False),
    DType.BINARY: ("binary", False),
    DType.VARBINARY: ("varbinary", False),
    DType.TINYTEXT: ("tinytext", False),
    DType.TEXT: ("text", False),
    DType.MEDIUMTEXT: ("mediumtext", False),
    DType.LONGTEXT: ("longtext", False),
    DType.TINYBLOB: ("tinyblob", False),
    DType.BLOB: ("blob", False),
    DType.MEDIUMBLOB: ("mediumblob", False),
    DType.LONGBLOB: ("longblob", False),
    DType.ENUM: ("enum", False),
    DType.SET: ("set", False),
    DType.JSON: ("json", False),
    DType.DATE: ("date", False),
    DType.TIME: ("time", False),
    DType.DATETIME: ("datetime", False),
    DType.TIMESTAMP: ("timestamp", False),
    DType.TIMESTAMPTZ: ("timestamp", False),
    DType.YEAR: ("year", False),
    DType.GEOMETRY: ("geometry", False),
    DType.UUID: ("uuid", False),
    DType.VECTOR: ("vector", False),
}

_INTEGERS = ("tinyint", "smallint", "mediumint", "int", "bigint")
# information_schema NUMERIC_PRECISION and the default display width, (signed, unsigned).
_INT_PRECISION = {
    "tinyint": (3, 3),
    "smallint": (5, 5),
    "mediumint": (7, 8),
    "int": (10, 10),
    "bigint": (19, 20),
}
_INT_WIDTH = {
    "tinyint": (4, 3),
    "smallint": (6, 5),
    "mediumint": (9, 8),
    "int": (11, 10),
    "bigint": (20, 20),
}
_TEXTS = ("tinytext", "text", "mediumtext", "longtext")
_BLOBS = ("tinyblob", "blob", "mediumblob", "longblob")
_SIZED_LIMITS = (255, 65535, 16777215)
_TEMPORAL_FSP = ("time", "datetime", "timestamp")
CHARACTER_TYPES = frozenset(("char", "varchar", *_TEXTS, "enum", "set"))
_NUMERIC_DEFAULTS = frozenset((*_INTEGERS, "decimal", "float", "double", "bit", "year"))

# Bytes per character, for sizing TEXT(n) and converting a table's character set.
_MB_MAXLEN = {
    "big5": 2,
    "cp932": 2,
    "eucjpms": 3,
    "euckr": 2,
    "gb2312": 2,
    "gb18030": 4,
    "gbk": 2,
    "sjis": 2,
    "ucs2": 2,
    "ujis": 3,
    "utf16": 4,
    "utf16le": 4,
    "utf32": 4,
    "utf8mb3": 3,
    "utf8mb4": 4,
}
_MARIADB_COLLATIONS = {"utf8mb4": "utf8mb4_general_ci"}
_MYSQL_COLLATIONS = {"utf8mb4": "utf8mb4_0900_ai_ci"}
_COMMON_COLLATIONS = {
    "armscii8": "armscii8_general_ci",
    "ascii": "ascii_general_ci",
    "big5": "big5_chinese_ci",
    "binary": "binary",
    "cp1250": "cp1250_general_ci",
    "cp1251": "cp1251_general_ci",
    "cp1256": "cp1256_general_ci",
    "cp1257": "cp1257_general_ci",
    "cp850": "cp850_general_ci",
    "cp852": "cp852_general_ci",
    "cp866": "cp866_general_ci",
    "cp932": "cp932_japanese_ci",
    "dec8": "dec8_swedish_ci",
    "eucjpms": "eucjpms_japanese_ci",
    "euckr": "euckr_korean_ci",
    "gb18030": "gb18030_chinese_ci",
    "gb2312": "gb2312_chinese_ci",
    "gbk": "gbk_chinese_ci",
    "geostd8": "geostd8_general_ci",
    "greek": "greek_general_ci",
    "hebrew": "hebrew_general_ci",
    "hp8": "hp8_english_ci",
    "keybcs2": "keybcs2_general_ci",
    "koi8r": "koi8r_general_ci",
    "koi8u": "koi8u_general_ci",
    "latin1": "latin1_swedish_ci",
    "latin2": "latin2_general_ci",
    "latin5": "latin5_turkish_ci",
    "latin7": "latin7_general_ci",
    "macce": "macce_general_ci",
    "macroman": "macroman_general_ci",
    "sjis": "sjis_japanese_ci",
    "swe7": "swe7_swedish_ci",
    "tis620": "tis620_thai_ci",
    "ucs2": "ucs2_general_ci",
    "ujis": "ujis_japanese_ci",
    "utf16": "utf16_general_ci",
    "utf16le": "utf16le_general_ci",
    "utf32": "utf32_general_ci",
    "utf8mb3": "utf8mb3_general_ci",
}


def canonical_charset(name: str | None) -> str | None:
    """Lower-case charset name with the ``utf8`` alias resolved to ``utf8mb3``."""
    if name is None:
        return None
    lowered = name.lower()
    return "utf8mb3" if lowered == "utf8" else lowered


def canonical_collation(name: str | None) -> str | None:
    """``name`` lower-cased, ``utf8_...`` spelled ``utf8mb3_...`` as the server reports it."""
    if name is None:
        return None
    lowered = name.lower()
    return "utf8mb3_" + lowered[5:] if lowered.startswith("utf8_") else lowered


def charset_of_collation(collation: str) -> str:
    """The character set a collation belongs to (``latin1_bin`` -> ``latin1``)."""
    lowered = canonical_collation(collation) or ""
    return "binary" if lowered == "binary" else lowered.split("_", 1)[0]


def default_collation(charset: str, flavor: Flavor) -> str | None:
    """The server's default collation of ``charset``; None when this table does not know it."""
    charset = canonical_charset(charset) or ""
    special = _MARIADB_COLLATIONS if flavor is Flavor.MARIADB else _MYSQL_COLLATIONS
    return special.get(charset) or _COMMON_COLLATIONS.get(charset)


def max_bytes_per_char(charset: str | None) -> int | None:
    """Longest character of ``charset`` in bytes; None when the charset is unknown."""
    if charset is None:
        return None
    return _MB_MAXLEN.get(canonical_charset(charset) or "", 1)


_ESCAPES = {"0": "\0", "b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a"}
_UNESCAPES = {"\\": "\\\\", "\0": "\\0", "\n": "\\n", "\r": "\\r", "\x1a": "\\Z", "'": "''"}


def parse_elements(column_type: str) -> tuple[str, ...]:
    """Members of an ``enum(...)``/``set(...)`` column type, quotes and escapes undone.

    Members are quoted with ``'``; a quote inside is doubled (``''``) and
    backslash escapes follow MySQL string literals (``\\\\``, ``\\n``, ...).
    """
    open_paren = column_type.find("(")
    if open_paren < 0:
        return ()
    members: list[str] = []
    i = open_paren + 1
    n = len(column_type)
    while i < n:
        c = column_type[i]
        if c == "'":
            i, member = _read_quoted(column_type, i)
            members.append(member)
        elif c == ")":
            break
        else:
            i += 1
    return tuple(members)


def _read_quoted(text: str, i: int) -> tuple[int, str]:
    out: list[str] = []
    i += 1
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n:
            nxt = text[i + 1]
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
        elif c == "'":
            if i + 1 < n and text[i + 1] == "'":
                out.append("'")
                i += 2
            else:
                return i + 1, "".join(out)
        else:
            out.append(c)
            i += 1
    raise ValueError(f"unterminated quoted member in column type {text!r}")


def format_elements(elements: tuple[str, ...]) -> str:
    """``'a','b''c'``: members quoted the way ``information_schema.COLUMN_TYPE`` shows them."""
    quoted = ("'" + "".join(_UNESCAPES.get(c, c) for c in member) + "'" for member in elements)
    return ",".join(quoted)


@dataclass(frozen=True)
class ColumnSpec:
    """A column definition as the statement writes it, before server defaults apply.

    ``type_name`` is the MySQL base type with aliases resolved, except the
    pseudo types ``bool``, ``serial``, ``nchar``, ``nvarchar`` and ``json``,
    which :func:`build_column` expands per flavour.
    """

    name: str
    type_name: str
    params: tuple[int, ...] = ()
    elements: tuple[str, ...] = ()
    unsigned: bool = False
    zerofill: bool = False
    nullable: bool | None = None
    charset: str | None = None
    collation: str | None = None
    binary: bool = False
    default: exp.Expr | None = None
    generated: bool = False
    primary_key: bool = False
    unique: bool = False


def _int_param(expr: exp.Expr) -> int:
    value = expr.this if isinstance(expr, exp.DataTypeParam) else expr
    try:
        return int(value.name)
    except (AttributeError, ValueError):
        raise ValueError(f"type parameter {expr.sql()!r} is not an integer") from None


def column_spec(column_def: exp.ColumnDef) -> ColumnSpec:
    """Read a sqlglot column definition; raises ``ValueError`` for a type it cannot map."""
    name = column_def.name
    data_type = column_def.args.get("kind")
    if not isinstance(data_type, exp.DataType):
        raise ValueError(f"column {name!r} has no data type")
    dtype = data_type.this
    elements: tuple[str, ...] = ()
    params: tuple[int, ...] = ()
    if dtype == DType.USERDEFINED:
        type_name, unsigned = str(data_type.args.get("kind", "")).lower(), False
        if type_name == "float_unsigned":
            type_name, unsigned = "float", True
    elif dtype in _TYPES:
        type_name, unsigned = _TYPES[dtype]
    else:
        raise ValueError(f"column {name!r}: unsupported data type {data_type.sql('mysql')!r}")
    if dtype in (DType.ENUM, DType.SET):
        elements = tuple(e.name for e in data_type.expressions)
    else:
        params = tuple(_int_param(p) for p in data_type.expressions)
    values: dict[str, Any] = {}
    for constraint in column_def.args.get("constraints") or []:
        _read_constraint(constraint.args.get("kind"), values)
    if values.get("zerofill"):
        unsigned = True
    return ColumnSpec(
        name=name,
        type_name=type_name,
        params=params,
        elements=elements,
        unsigned=unsigned,
        **values,
    )


def _read_constraint(kind: exp.Expr | None, values: dict[str, Any]) -> None:
    """Record what one column attribute says in ``values`` (ColumnSpec field -> value)."""
    if isinstance(kind, exp.NotNullColumnConstraint):
        values["nullable"] = bool(kind.args.get("allow_null"))
    elif isinstance(kind, exp.DefaultColumnConstraint):
        values["default"] = kind.this
    elif isinstance(kind, exp.CharacterSetColumnConstraint):
        values["charset"] = canonical_charset(kind.this.name)
    elif isinstance(kind, exp.CollateColumnConstraint):
        values["collation"] = canonical_collation(kind.this.name)
    elif isinstance(kind, exp.BinaryColumnConstraint):
        values["binary"] = True
    elif isinstance(kind, exp.ZeroFillColumnConstraint):
        values["zerofill"] = True
    elif isinstance(kind, exp.ComputedColumnConstraint):
        values["generated"] = True
    elif isinstance(kind, exp.GeneratedAsIdentityColumnConstraint):
        values["generated"] = kind.args.get("expression") is not None
    elif isinstance(kind, exp.PrimaryKeyColumnConstraint):
        values["primary_key"] = True
    elif isinstance(kind, exp.UniqueColumnConstraint):
        values["unique"] = True


def key_column(expr: exp.Expr) -> str | None:
    """The column a key part names: ``a``, ``a(10)`` (prefix), ``a DESC``; None for ``(expr)``."""
    if isinstance(expr, exp.Ordered):
        expr = expr.this
    if isinstance(expr, exp.Identifier | exp.Column | exp.ColumnPrefix):
        return expr.name
    if isinstance(expr, exp.Anonymous) and len(expr.expressions) == 1:
        return expr.name
    return None


@dataclass(frozen=True)
class _Type:
    data_type: str
    column_type: str
    unsigned: bool = False
    precision: int | None = None
    scale: int | None = None
    fsp: int | None = None
    character: bool = False


def build_column(
    spec: ColumnSpec,
    flavor: Flavor,
    table_charset: str | None = None,
    table_collation: str | None = None,
) -> Column:
    """The column the server makes of ``spec`` in a table with the given default charset."""
    charset, collation = _charset(spec, flavor, table_charset, table_collation)
    type_name = spec.type_name
    if charset == "binary" and type_name in ("char", "varchar", *_TEXTS):
        type_name = {"char": "binary", "varchar": "varbinary"}.get(type_name) or _BLOBS[
            _TEXTS.index(type_name)
        ]
        charset = collation = None
    typ = _type(spec, type_name, flavor, charset)
    if not typ.character:
        charset = collation = None
    elif typ.data_type == "longtext" and spec.type_name == "json":
        charset, collation = "utf8mb4", "utf8mb4_bin"
    nullable = spec.nullable if spec.nullable is not None else True
    if spec.primary_key or spec.type_name == "serial":
        nullable = False
    return Column(
        name=spec.name,
        data_type=typ.data_type,
        column_type=typ.column_type,
        nullable=nullable,
        unsigned=typ.unsigned,
        charset=charset,
        collation=collation,
        precision=typ.precision,
        scale=typ.scale,
        fsp=typ.fsp,
        elements=spec.elements,
        generated=spec.generated,
        default=render_default(
            None if spec.generated else spec.default, typ.data_type, nullable, flavor
        ),
    )


def _charset(
    spec: ColumnSpec, flavor: Flavor, table_charset: str | None, table_collation: str | None
) -> tuple[str | None, str | None]:
    if spec.type_name in ("nchar", "nvarchar"):
        charset: str | None = "utf8mb3"
    else:
        charset = spec.charset
    if charset is None and spec.collation is not None:
        charset = charset_of_collation(spec.collation)
    from_table = charset is None
    if from_table:
        charset = canonical_charset(table_charset)
        if charset is None and table_collation is not None:
            charset = charset_of_collation(table_collation)
    if charset is None:
        return None, None
    if spec.collation is not None:
        collation: str | None = spec.collation
    elif spec.binary:
        collation = "binary" if charset == "binary" else f"{charset}_bin"
    elif from_table and table_collation is not None:
        collation = canonical_collation(table_collation)
    else:
        collation = default_collation(charset, flavor)
    return charset, collation


def _type(spec: ColumnSpec, name: str, flavor: Flavor, charset: str | None) -> _Type:
    params = spec.params
    mariadb = flavor is Flavor.MARIADB
    if name in ("bool", "serial") or name in _INTEGERS:
        return _integer(spec, name, mariadb)
    suffix = (" unsigned" if spec.unsigned else "") + (" zerofill" if spec.zerofill else "")
    if name == "decimal":
        precision = params[0] if params else 10
        scale = params[1] if len(params) > 1 else 0
        return _Type(
            "decimal", f"decimal({precision},{scale}){suffix}", spec.unsigned, precision, scale
        )
    if name in ("float", "double"):
        if len(params) == 2:
            text = f"{name}({params[0]},{params[1]}){suffix}"
            return _Type(name, text, spec.unsigned, params[0], params[1])
        if name == "float" and params and params[0] > 24:
            name = "double"
        return _Type(name, name + suffix, spec.unsigned, 12 if name == "float" else 22)
    if name == "bit":
        length = params[0] if params else 1
        return _Type("bit", f"bit({length})", precision=length)
    if name in ("char", "nchar", "binary"):
        base = "binary" if name == "binary" else "char"
        return _Type(base, f"{base}({params[0] if params else 1})", character=base == "char")
    if name in ("varchar", "nvarchar", "varbinary"):
        if not params:
            raise ValueError(f"column {spec.name!r}: {name.upper()} needs a length")
        base = "varbinary" if name == "varbinary" else "varchar"
        return _Type(base, f"{base}({params[0]})", character=base == "varchar")
    if name in _TEXTS or name in _BLOBS:
        if params:
            family = _TEXTS if name in _TEXTS else _BLOBS
            per_char = (max_bytes_per_char(charset) or 4) if family is _TEXTS else 1
            name = _sized(family, params[0] * per_char)
        return _Type(name, name, character=name in _TEXTS)
    if name in ("enum", "set"):
        return _Type(name, f"{name}({format_elements(spec.elements)})", character=True)
    if name in _TEMPORAL_FSP:
        fsp = params[0] if params else 0
        return _Type(name, f"{name}({fsp})" if fsp else name, fsp=fsp)
    if name == "year":
        return _Type("year", "year(4)" if mariadb else "year")
    if name == "json":
        return _Type("longtext", "longtext", character=True) if mariadb else _Type("json", "json")
    text = f"{name}({','.join(str(p) for p in params)})" if params else name
    return _Type(name, text)


def _integer(spec: ColumnSpec, name: str, mariadb: bool) -> _Type:
    unsigned = spec.unsigned
    width: int | None = spec.params[0] if spec.params else None
    if name == "bool":
        name, width = "tinyint", 1
    elif name == "serial":
        name, unsigned = "bigint", True
    precision = _INT_PRECISION[name][unsigned]
    if width is None and (mariadb or spec.zerofill):
        width = _INT_WIDTH[name][unsigned]
    show_width = mariadb or spec.zerofill or (name == "tinyint" and width == 1)
    text = f"{name}({width})" if show_width and width is not None else name
    text += (" unsigned" if unsigned else "") + (" zerofill" if spec.zerofill else "")
    return _Type(name, text, unsigned, precision, 0)


def _sized(family: tuple[str, ...], length: int) -> str:
    for name, limit in zip(family, _SIZED_LIMITS, strict=False):
        if length <= limit:
            return name
    return family[-1]


def render_default(
    value: exp.Expr | None, data_type: str, nullable: bool, flavor: Flavor
) -> str | None:
    """``COLUMN_DEFAULT`` as the flavour reports it; ``value`` None means no DEFAULT clause.

    MariaDB reports a nullable column without a default (generated columns
    included) as the text ``NULL`` and quotes string literals; MySQL reports
    SQL NULL and bare text.
    """
    mariadb = flavor is Flavor.MARIADB
    if value is None or isinstance(value, exp.Null):
        return "NULL" if nullable and mariadb else None
    if isinstance(value, exp.Literal):
        text = value.name
        if value.is_string and not (data_type in _NUMERIC_DEFAULTS and _is_number(text)):
            return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'" if mariadb else text
        return text
    if isinstance(value, exp.Boolean):
        return "1" if value.this else "0"
    if isinstance(value, exp.Neg) and isinstance(value.this, exp.Literal):
        return "-" + value.this.name
    rendered = value.sql("mysql")
    return rendered.lower() if mariadb else rendered


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
