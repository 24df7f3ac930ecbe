"""The mask methods, once in Python (binlog and snapshot rows) and once in SQL (``cdcctl diff``).

Both forms must give the same text for the same value, so that a downstream
written through the changefeed compares equal to the source seen through the
masks:

    hash      lower-case hex SHA-256 of the UTF-8 bytes of salt + value (64 characters)
              SHA2(CONCAT(salt, CONVERT(col USING utf8mb4)), 256)
    redact    the replacement text            IF(col IS NULL, NULL, replacement)
    truncate  the first n characters          LEFT(col, n)

NULL stays NULL under every method (it hides nothing, and a NULL-able
downstream column keeps meaning "no value"). Masks apply to character
columns only (CHAR, VARCHAR, TEXT): their values are text on both paths. A
salted hash resists a dictionary of likely values (e-mail addresses, phone
numbers) only as long as the salt stays secret; without a salt anyone can hash
a guess and compare.
"""

from __future__ import annotations

import hashlib
from typing import Any

from cdc.filter.columns import ColumnMask, MaskMethod

__all__ = ["HASH_LENGTH", "mask_sql", "mask_value"]

#: Characters of a hashed value (hex SHA-256).
HASH_LENGTH = 64


def mask_value(mask: ColumnMask, value: Any) -> Any:
    """``value`` (text, or bytes of a text column the decoder could not read) masked."""
    if value is None:
        return None
    method = mask.method
    if method is MaskMethod.REDACT:
        return mask.replacement
    if method is MaskMethod.TRUNCATE:
        assert mask.length is not None
        return value[: mask.length]
    data = value if isinstance(value, bytes) else str(value).encode("utf-8")
    return hashlib.sha256(mask.salt.encode("utf-8") + data).hexdigest()


def _text_literal(text: str) -> str:
    """``text`` as an SQL literal that no quoting or character set can change."""
    if not text:
        return "''"
    return f"CONVERT(X'{text.encode('utf-8').hex()}' USING utf8mb4)"


def mask_sql(mask: ColumnMask, column_sql: str) -> str:
    """The SQL expression giving what :func:`mask_value` gives for the column
    ``column_sql`` (a quoted name) of a character column."""
    method = mask.method
    if method is MaskMethod.REDACT:
        return f"IF({column_sql} IS NULL, NULL, {_text_literal(mask.replacement)})"
    if method is MaskMethod.TRUNCATE:
        return f"LEFT({column_sql}, {int(mask.length or 0)})"
    text = f"CONVERT({column_sql} USING utf8mb4)"
    if mask.salt:
        text = f"CONCAT({_text_literal(mask.salt)}, {text})"
    return f"SHA2({text}, 256)"
