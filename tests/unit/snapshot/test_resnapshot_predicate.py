"""The re-snapshot predicate (``--where``): one condition over the table's own columns."""

from __future__ import annotations

import pytest

from cdc.snapshot.predicate import MAX_LENGTH, PredicateError, parse_predicate

COLUMNS = ["id", "status", "note"]


@pytest.mark.parametrize(
    ("text", "sql"),
    [
        ("id < 100", "`id` < 100"),
        ("(id < 5 OR note LIKE 'a%')", "(`id` < 5 OR `note` LIKE 'a%')"),
        ("status IN (1, 2) AND note IS NULL", "`status` IN (1, 2) AND `note` IS NULL"),
        ("NOT id = 3", "NOT `id` = 3"),
        ("note = 'a;b'", "`note` = 'a;b'"),
        ("ID BETWEEN 1 AND 9", "`ID` BETWEEN 1 AND 9"),
    ],
)
def test_a_condition_over_the_columns_is_rendered_with_quoted_names(text: str, sql: str) -> None:
    assert parse_predicate(text, COLUMNS).sql == sql


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "is empty"),
        ("   ", "is empty"),
        ("id <", "is not valid SQL"),
        ("id < 10;", "more than one statement"),
        ("id < 10; DROP TABLE t", "more than one statement"),
        ("id IN (SELECT id FROM other)", "subquery"),
        ("EXISTS (SELECT 1)", "subquery"),
        ("other.id = 1", "qualified column"),
        ("nope = 1", "unknown column 'nope'"),
        ("SLEEP(5) = 0", "unsupported function SLEEP"),
        ("@v = 1", "unsupported variable"),
        ("id + 1", "is a value, not a condition"),
        ("1", "is a value, not a condition"),
        ("id = " + "1" * MAX_LENGTH, "characters long"),
    ],
)
def test_anything_else_is_refused_in_one_line(text: str, says: str) -> None:
    with pytest.raises(PredicateError) as caught:
        parse_predicate(text, COLUMNS)
    message = str(caught.value)
    assert says in message and "\n" not in message and message.startswith("--where: ")
