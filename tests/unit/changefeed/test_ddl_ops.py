"""Deciding about a refused DDL: only the failing DDL, only with SQL, never anything else."""

from __future__ import annotations

import pytest

from cdc.changefeed import BarrierDdl, ChangefeedState, ChangefeedStatus, ErrorInfo
from cdc.changefeed.ddl_decision import DdlAction, DdlDecision
from cdc.changefeed.ddl_ops import SQL_MAX, DdlNotPending, check_replacement, decide_ddl, decided
from cdc.changefeed.history import Actor
from cdc.errors import ConfigError
from cdc.model.position import Position
from cdc.store import Put, Versioned
from cdc.store.codec import encode
from cdc.store.keys import KeySpace

FAILING = Position.parse("binlog.000003:1200 gtid=0-1-44")
DDL = BarrierDdl(FAILING, "add index", "ALTER TABLE t ADD UNIQUE KEY u (v)", ("db.t",))


def stopped(state: ChangefeedState = ChangefeedState.ERROR) -> ChangefeedStatus:
    error = ErrorInfo("SinkError: DDL at ... refused", 1.0, None, False, DDL)
    return ChangefeedStatus(state=state, error=error, error_history=(1.0,), retry_at=3.0)


@pytest.mark.parametrize(
    "state", [ChangefeedState.ERROR, ChangefeedState.FAILED, ChangefeedState.STOPPED]
)
@pytest.mark.parametrize("typed", ["binlog.000003:1200", "binlog.000003:1200 gtid=0-1-44"])
def test_a_skip_at_the_failing_ddl_resumes_with_the_decision(
    state: ChangefeedState, typed: str
) -> None:
    new = decided("cf", stopped(state), DdlAction.SKIP, typed, "", 5.0)
    assert new.state is ChangefeedState.NORMAL
    assert (new.error, new.error_history, new.retry_at) == (None, (), None)
    assert new.ddl_decision == DdlDecision(FAILING, DdlAction.SKIP, None, 5.0)


def test_a_replace_keeps_its_sql_without_the_trailing_semicolon() -> None:
    new = decided(
        "cf", stopped(), DdlAction.REPLACE, str(FAILING), " ALTER TABLE t ADD c INT;\n", 5.0
    )
    assert new.ddl_decision is not None and new.ddl_decision.sql == "ALTER TABLE t ADD c INT"


@pytest.mark.parametrize(
    "typed", ["binlog.000003:1201", "binlog.000004:1200", "binlog.000003:1200 gtid=0-1-45"]
)
def test_another_position_is_refused_naming_the_failing_one(typed: str) -> None:
    with pytest.raises(
        DdlNotPending, match=r"stopped at the DDL at binlog.000003:1200 gtid=0-1-44"
    ):
        decided("cf", stopped(), DdlAction.SKIP, typed, "", 5.0)


@pytest.mark.parametrize(
    ("status", "said"),
    [
        (ChangefeedStatus(), "is normal and has no error"),
        (
            ChangefeedStatus(state=ChangefeedState.ERROR, error=ErrorInfo("lost", 1.0)),
            "stopped at an error that is not a DDL",
        ),
        (
            ChangefeedStatus(
                state=ChangefeedState.ERROR,
                error=ErrorInfo("x", 1.0, None, False, DDL),
                ddl_position=FAILING,
            ),
            "has been applied since",
        ),
    ],
)
def test_a_changefeed_not_stopped_at_a_ddl_is_refused(status: ChangefeedStatus, said: str) -> None:
    with pytest.raises(DdlNotPending, match=said):
        decided("cf", status, DdlAction.SKIP, str(FAILING), "", 5.0)


@pytest.mark.parametrize(
    ("action", "position", "sql", "field"),
    [
        (DdlAction.SKIP, "", "", "position"),
        (DdlAction.SKIP, "no-offset", "", "position"),
        (DdlAction.REPLACE, str(FAILING), "", "sql"),
        (DdlAction.REPLACE, str(FAILING), " ;; ", "sql"),
        (DdlAction.REPLACE, str(FAILING), "x" * (SQL_MAX + 1), "sql"),
        (DdlAction.SKIP, str(FAILING), "ALTER TABLE t ADD c INT", "sql"),
    ],
)
def test_bad_input_names_its_field(action: DdlAction, position: str, sql: str, field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        decided("cf", stopped(), action, position, sql, 5.0)
    assert caught.value.field == field
    assert "\n" not in str(caught.value)


def test_the_decision_round_trips_in_the_status() -> None:
    new = decided("cf", stopped(), DdlAction.REPLACE, str(FAILING), "ALTER TABLE t ADD c INT", 5.0)
    again = ChangefeedStatus.from_dict(new.to_dict())
    assert again.ddl_decision == new.ddl_decision
    old = ChangefeedStatus.from_dict(stopped().to_dict())
    assert old.error is not None and old.error.ddl == DDL


# --- found by review: a replacement runs at least once, and the history kept passwords ---


@pytest.mark.parametrize(
    "sql",
    [
        "DELETE FROM t WHERE id = 1",
        "UPDATE t SET v = 1",
        "INSERT INTO t VALUES (1)",
        "SELECT 1",
        "GRANT ALL ON db.* TO u",
        "CREATE USER u IDENTIFIED BY 'pw'",
        "CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW SET NEW.v = 1",
        "CALL cleanup()",
        "ALTER TABLE t ADD c INT; DELETE FROM t",
        "ALTER TABLE t ADD c INT; ALTER TABLE t ADD d INT",
        "/* only a comment */",
        "-- only a comment",
    ],
)
def test_a_replacement_is_one_ddl_statement(sql: str) -> None:
    """It may run twice after an owner failover: no DML, nothing after a ';'."""
    with pytest.raises(ConfigError) as caught:
        decided("cf", stopped(), DdlAction.REPLACE, str(FAILING), sql, 5.0)
    assert caught.value.field == "sql"
    assert "\n" not in str(caught.value)
    with pytest.raises(ConfigError) as typed:
        check_replacement(sql, "--sql")
    assert typed.value.field == "--sql"


@pytest.mark.parametrize(
    "sql",
    [
        "ALTER TABLE t ADD KEY k (v)",
        "CREATE INDEX k ON t (v)",
        "DROP INDEX k ON t",
        "RENAME TABLE t TO t_old",
        "TRUNCATE TABLE t",
        "CREATE TABLE t2 (id INT PRIMARY KEY)",
        "/*!40000 ALTER TABLE t ENGINE=InnoDB */;",
        "ALTER TABLE t COMMENT = 'a; b'",
        "ALTER TABLE t ADD KEY k (v) SOME_FUTURE_OPTION",
    ],
)
def test_ddl_statements_are_taken_as_replacements(sql: str) -> None:
    assert check_replacement(sql) == sql.strip().rstrip(";").strip()


class HistoryStore:
    """The keys ``decide_ddl`` reads and writes."""

    keys = KeySpace("/cdc/test")

    def __init__(self, status: ChangefeedStatus) -> None:
        self.values: dict[str, dict] = {
            str(self.keys.changefeed_status("cf")): status.to_dict(),
            str(self.keys.changefeed_info("cf")): {"v": 1},
        }

    def get(self, key: object) -> Versioned | None:
        value = self.values.get(str(key))
        return None if value is None else Versioned(str(key), encode(value), 1, 1)

    def txn(self, conditions: object, ops: list[Put]) -> bool:
        for op in ops:
            assert isinstance(op.value, dict)
            self.values[str(op.key)] = op.value
        return True


def test_the_history_masks_passwords_of_the_ddl_and_of_its_replacement() -> None:
    secret = BarrierDdl(
        FAILING,
        "create table",
        "CREATE TABLE t (id INT PRIMARY KEY) CONNECTION='mysql://u:pw1@h/db' "
        "COMMENT=\"x\" /* IDENTIFIED BY 'pw2' */ /* PASSWORD('pw3') */",
        ("db.t",),
    )
    error = ErrorInfo("SinkError: refused", 1.0, None, False, secret)
    store = HistoryStore(ChangefeedStatus(state=ChangefeedState.ERROR, error=error))
    replacement = (
        "CREATE TABLE t (id INT PRIMARY KEY) COMMENT=\"IDENTIFIED BY 'pw4' PASSWORD('pw5')\""
    )
    decide_ddl(
        store,  # type: ignore[arg-type]
        "cf",
        DdlAction.REPLACE,
        str(FAILING),
        replacement,
        Actor("admin", "alice"),
    )
    history = store.values[str(store.keys.changefeed_history("cf"))]
    stored = str(history)
    for password in ("pw1", "pw2", "pw3", "pw4", "pw5"):
        assert password not in stored
    detail = history["entries"][-1]["detail"]
    assert "IDENTIFIED BY '******'" in detail["sql"] and "PASSWORD('******')" in detail["sql"]
    assert "IDENTIFIED BY '******'" in detail["statement"]
