"""A DDL event as the statements that apply it downstream, replay-safe.

    CREATE DATABASE IF NOT EXISTS `db`    for every database the DDL touches
    USE `schema`                          the statement's default database, when it had one
    <the DDL statement, verbatim>         an "already exists / doesn't exist" error that a
                                          replay causes is logged and skipped (errors.py)

Schema-level DDL (CREATE / DROP / ALTER DATABASE) gets no ``CREATE DATABASE``
for its own database: creating it first would turn ``CREATE DATABASE d
CHARACTER SET latin1`` into a skipped duplicate with the wrong charset. Only
its default database (for ``USE``) is created.
"""

from __future__ import annotations

from cdc.logs import ContextLogger
from cdc.model.events import DdlEvent, DdlKind
from cdc.sink.mysql.errors import describe_error, is_ddl_already_applied, redact_statement
from cdc.sink.mysql.statements import Statement

__all__ = ["databases_touched", "ddl_statements"]

_SCHEMA_LEVEL = frozenset(
    {DdlKind.CREATE_SCHEMA, DdlKind.DROP_SCHEMA, DdlKind.MODIFY_SCHEMA_CHARSET_AND_COLLATE}
)


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def databases_touched(ddl: DdlEvent) -> list[str]:
    """The databases to create before ``ddl`` runs, in a stable order."""
    names = [ddl.schema] if ddl.schema else []
    if ddl.kind not in _SCHEMA_LEVEL:
        names.extend(table.schema for table in ddl.tables)
    return list(dict.fromkeys(names))


def ddl_statements(ddl: DdlEvent, log: ContextLogger) -> list[Statement]:
    """The statements applying ``ddl``; its own failure is tolerated when a replay explains it."""
    text = redact_statement(ddl.statement)

    def already_applied(exc: BaseException) -> bool:
        if not is_ddl_already_applied(exc, ddl.kind):
            return False
        log.info("DDL already applied downstream, skipped (%s): %s", describe_error(exc), text)
        return True

    statements = [
        Statement(f"CREATE DATABASE IF NOT EXISTS {_quote(db)}", f"CREATE DATABASE {db}")
        for db in databases_touched(ddl)
    ]
    if ddl.schema:
        statements.append(Statement(f"USE {_quote(ddl.schema)}", f"USE {ddl.schema}"))
    statements.append(Statement(ddl.statement, text, tolerate=already_applied))
    return statements
