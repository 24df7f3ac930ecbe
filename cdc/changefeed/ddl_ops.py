"""``cdcctl changefeed ddl skip|replace``: an operator's decision on the DDL the downstream refused.

    owner: the sink refuses the DDL at P ──► status: state error (later failed),
           error.ddl = that DDL; the barrier holds every table before P
    operator: ddl skip|replace -c cf --position P [--sql S]
           ──► checked here (``decided``): the changefeed's error is a refused DDL,
               not applied since, at exactly P; the SQL of a replace is one DDL
               statement (``check_replacement``)
           ──► one transaction: status (state normal, error cleared, ddl_decision)
               and the history entry (who, when, what)
    owner: reaches the DDL at P again ──► skips it (recorded as skipped, with the
           operator's reason) or runs S downstream instead; clears the decision

The decision names the failing DDL's own position, never the text the operator
typed, and the owner carries it out only for the DDL at that position: a
decision can never skip another DDL. Anything else is refused with one line
saying what the changefeed is stopped at and nothing is written.

A replacement runs at least once, not exactly once: an owner that dies after
running it and before recording the DDL done leaves the decision in the status,
and the next owner runs it again. Hence only one DDL statement is taken (no DML,
nothing after a ``;``): a DDL run twice at the same barrier either finds its
effect in place (the sink takes that for applied) or fails, stopping the
changefeed at the same DDL again. The history keeps the DDL and the replacement
with their passwords masked (``redact_statement``).
"""

from __future__ import annotations

import time

from cdc.changefeed.ddl_decision import DdlAction, DdlDecision
from cdc.changefeed.errors import ChangefeedError, ChangefeedNotFound
from cdc.changefeed.history import Actor, HistoryEntry, appended
from cdc.changefeed.state import ChangefeedState, check_transition
from cdc.changefeed.status import ChangefeedStatus
from cdc.errors import ConfigError
from cdc.logs import get_logger
from cdc.model.events import DdlKind
from cdc.model.position import Position
from cdc.sink.mysql.errors import redact_statement
from cdc.store import ConflictError, EtcdStore, ModRevisionIs, Put
from cdc.store.keys import check_name

__all__ = ["SQL_MAX", "DdlNotPending", "check_replacement", "decide_ddl", "decided"]

#: The longest replacement SQL accepted (characters).
SQL_MAX = 65536

_RETRIES = 16

#: The first words of the statements a replacement may be.
_DDL_VERBS = frozenset({"CREATE", "ALTER", "DROP", "RENAME", "TRUNCATE"})


class DdlNotPending(ChangefeedError):
    """The changefeed is not stopped at the DDL the operator named (FAILED_PRECONDITION)."""


def _position(text: str) -> Position:
    if not text or not text.strip():
        raise ConfigError(
            "position",
            "is empty; give the position of the refused DDL as the changefeed's error "
            "shows it (cdcctl changefeed query)",
        )
    try:
        return Position.parse(text)
    except ValueError as exc:
        raise ConfigError("position", str(exc)) from None


def _sql(action: DdlAction, sql: str) -> str | None:
    if action is DdlAction.SKIP:
        if sql.strip():
            raise ConfigError("sql", "is for ddl replace; ddl skip runs nothing downstream")
        return None
    return check_replacement(sql)


def check_replacement(sql: str, field: str = "sql") -> str:
    """The replacement SQL of ``ddl replace`` as stored (blanks and a final ``;`` cut);
    ``ConfigError`` (one line, naming ``field``) unless it is exactly one DDL statement
    of a kind the changefeed knows (``cdc.schema.ddl.analyze``: CREATE, ALTER, DROP,
    RENAME, TRUNCATE of tables, indexes, views, databases; or one of these verbs in a
    syntax the reader does not follow): no DML, no second statement, no user or routine,
    nothing empty. It may run twice (the module docstring)."""
    # the DDL parser (sqlglot), imported here: every cdcctl command imports this module
    from cdc.schema.ddl import analyze
    from cdc.schema.dialect import DdlSyntaxError, tokenize, unwrap_executable_comments

    text = sql.strip().rstrip(";").strip()
    empty = "is empty; give the DDL statement the downstream runs in place of the DDL"
    if not text:
        raise ConfigError(field, empty)
    if len(text) > SQL_MAX:
        raise ConfigError(field, f"is {len(text)} characters long; at most {SQL_MAX}")
    try:
        words = tokenize(unwrap_executable_comments(text))
    except DdlSyntaxError as exc:
        raise ConfigError(field, f"cannot be read as SQL ({exc})") from None
    if not words:
        raise ConfigError(field, empty)
    if any(w.kind == "punct" and w.text == ";" for w in words):
        raise ConfigError(
            field,
            "holds more than one statement; give one DDL statement (it may run twice after "
            "an owner failover, so nothing may follow it)",
        )
    first = words[0].text.upper()
    analysis = analyze(text, "db")  # (unqualified names need some database)
    # a statement of a DDL verb the reader cannot follow is taken (the downstream judges it)
    unread = analysis.problem is not None and first in _DDL_VERBS
    if analysis.kind is DdlKind.OTHER and not unread:
        raise ConfigError(
            field,
            f"is not a DDL statement the changefeed knows ({first} ...); give one CREATE, "
            "ALTER, DROP, RENAME or TRUNCATE statement of a table, index, view or database "
            "(no DML: it may run twice after an owner failover)",
        )
    return text


def _same(given: Position, failing: Position) -> bool:
    """``given`` (typed) names ``failing``: same file and offset, and the same GTID set
    when one was typed."""
    return (given.file, given.offset) == (failing.file, failing.offset) and (
        given.gtid is None or given.gtid == failing.gtid
    )


def decided(
    changefeed_id: str,
    status: ChangefeedStatus,
    action: DdlAction,
    position: str,
    sql: str,
    now: float,
) -> ChangefeedStatus:
    """The status with the operator's decision and the changefeed running again; raises
    ``ConfigError`` (bad position text, SQL) or ``DdlNotPending`` (see the module)."""
    given = _position(position)
    text = _sql(action, sql)
    error = status.error
    failing = error.ddl if error is not None else None
    if failing is None:
        problem = "has no error" if error is None else "stopped at an error that is not a DDL"
        raise DdlNotPending(
            f"changefeed {changefeed_id} is {status.state.value} and {problem}: ddl "
            f"{action.value} acts only on a DDL the downstream refused; nothing was changed"
        )
    done = status.ddl_position
    if done is not None and failing.position.key() <= done.key():
        raise DdlNotPending(
            f"changefeed {changefeed_id}: the DDL at {failing.position} has been applied "
            "since it failed; nothing was changed"
        )
    if not _same(given, failing.position):
        raise DdlNotPending(
            f"changefeed {changefeed_id} is stopped at the DDL at {failing.position} "
            f"({failing.kind}), not at {given}; nothing was changed: check the position "
            f"in cdcctl changefeed query and give --position '{failing.position}'"
        )
    if status.state is ChangefeedState.FINISHED:
        raise DdlNotPending(f"changefeed {changefeed_id} is finished; nothing was changed")
    check_transition(changefeed_id, status.state, ChangefeedState.NORMAL)
    decision = DdlDecision(failing.position, action, text, now)
    return status.changed(
        state=ChangefeedState.NORMAL,
        error=None,
        error_history=(),
        retry_at=None,
        ddl_decision=decision,
    )


def decide_ddl(
    store: EtcdStore,
    changefeed_id: str,
    action: DdlAction,
    position: str,
    sql: str,
    who: Actor,
) -> ChangefeedStatus:
    """Records the decision and its history entry in one transaction (compare-and-swap on
    both keys, retried); the new status. ``ChangefeedNotFound`` for an unknown id."""
    check_name("changefeed id", changefeed_id)
    status_key = store.keys.changefeed_status(changefeed_id)
    history_key = store.keys.changefeed_history(changefeed_id)
    for _ in range(_RETRIES):
        current = store.get(status_key)
        if current is None or store.get(store.keys.changefeed_info(changefeed_id)) is None:
            raise ChangefeedNotFound(changefeed_id)
        status = ChangefeedStatus.from_dict(current.json())
        new = decided(changefeed_id, status, action, position, sql, time.time())
        decision = new.ddl_decision
        assert decision is not None and status.error is not None and status.error.ddl is not None
        ddl = status.error.ddl
        detail = {
            "position": str(ddl.position),
            "kind": ddl.kind,
            "statement": redact_statement(ddl.statement),
        }
        if decision.sql is not None:
            detail["sql"] = redact_statement(decision.sql)
        entry = HistoryEntry(f"ddl {action.value}", who, detail, at=decision.at)
        history = store.get(history_key)
        if store.txn(
            [
                ModRevisionIs(status_key, current.mod_revision),
                ModRevisionIs(history_key, 0 if history is None else history.mod_revision),
            ],
            [
                Put(status_key, new.to_dict()),
                Put(history_key, appended(None if history is None else history.json(), entry)),
            ],
        ):
            get_logger(__name__, changefeed=changefeed_id).info(
                "DDL at %s (%s): %s by %s, changefeed resumed",
                ddl.position,
                ddl.kind,
                action.value
                if decision.sql is None
                else f"replace with {redact_statement(decision.sql)!r:.200}",
                who,
            )
            return new
    raise ConflictError(f"changefeed {changefeed_id}: status kept changing, try again")
