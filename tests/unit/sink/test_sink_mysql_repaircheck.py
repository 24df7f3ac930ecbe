"""Whether a table can be re-snapshotted into a MySQL/MariaDB downstream
(``cdc.sink.mysql.repaircheck``), on given facts of both sides."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cdc.model.schema import TableName
from cdc.schema.tablefacts import TableFacts
from cdc.sink.mysql.repaircheck import key_matcher, refusal

T = TableName("shop", "t")
BIN = ("utf8mb4", "utf8mb4_bin")
CI = ("utf8mb4", "utf8mb4_general_ci")


def facts(
    engine: str | None = "InnoDB",
    key: tuple[str | None, str | None] = (None, None),
    **unique: tuple[str | None, ...],
) -> TableFacts:
    return TableFacts(T, engine, {"k": key, "v": CI}, {"PRIMARY": ("k",), **unique})


def test_the_same_tables_can_be_re_snapshotted() -> None:
    assert refusal(T, ("k",), facts(key=BIN), facts(key=BIN)) is None
    assert refusal(T, ("K",), facts(), facts()) is None  # numeric key: no collation


@pytest.mark.parametrize("engine", ["MyISAM", "Aria", "MEMORY", None])
def test_a_downstream_engine_without_row_locks_is_refused(engine: str | None) -> None:
    why = refusal(T, ("k",), facts(), facts(engine=engine))
    assert why is not None and "needs InnoDB" in why and "\n" not in why


def test_a_source_engine_is_not_the_downstream_s_business() -> None:
    assert refusal(T, ("k",), facts(engine="MyISAM"), facts()) is None


def test_a_key_collation_differing_between_the_sides_is_refused() -> None:
    why = refusal(T, ("k",), facts(key=BIN), facts(key=CI))
    assert why is not None and "utf8mb4_bin on the source" in why
    assert "utf8mb4_general_ci downstream" in why and "\n" not in why
    why = refusal(T, ("k",), facts(key=BIN), facts(key=("latin1", "latin1_bin")))
    assert why is not None and "latin1" in why
    assert refusal(T, ("k",), facts(key=BIN), facts(key=(None, None))) is not None


@pytest.mark.parametrize("side", ["source", "downstream"])
def test_a_unique_key_besides_the_row_key_is_refused(side: str) -> None:
    other = facts(email=("email",))
    src, dst = (other, facts()) if side == "source" else (facts(), other)
    why = refusal(T, ("k",), src, dst)
    assert why is not None and f"unique key besides its row key (k) on the {side}" in why
    assert "email" in why and "\n" not in why


def test_an_expression_unique_key_is_refused() -> None:
    why = refusal(T, ("k",), facts(), facts(lower_v=(None,)))
    assert why is not None and "(expression)" in why


def test_a_second_unique_index_on_the_row_key_is_fine() -> None:
    assert refusal(T, ("k",), facts(again=("k",)), facts(again=("k",))) is None


def test_a_downstream_without_the_row_key_is_refused() -> None:
    dst = replace(facts(), unique_keys={})
    why = refusal(T, ("k",), facts(), dst)
    assert why is not None and "no primary or unique key on (k)" in why


def test_a_missing_table_is_refused() -> None:
    assert "does not exist downstream" in (refusal(T, ("k",), facts(), None) or "")
    assert "does not exist on the source" in (refusal(T, ("k",), None, facts()) or "")
    assert "has no key" in (refusal(T, (), facts(), facts()) or "")


def test_keys_of_a_binary_collation_compare_exactly() -> None:
    canonical, exact = key_matcher(("k",), facts(key=BIN))
    assert exact
    assert canonical(("A",)) != canonical(("a",))  # 'A' is not 'a' downstream
    assert canonical(("a  ",)) == canonical(("a",))  # PAD SPACE
    canonical, exact = key_matcher(("k",), facts(key=("utf8mb4", "utf8mb4_nopad_bin")))
    assert exact and canonical(("a ",)) != canonical(("a",))
    canonical, exact = key_matcher(("k",), facts())
    assert exact and canonical((1,)) == (1,)


def test_keys_of_a_linguistic_collation_are_left_to_the_downstream() -> None:
    canonical, exact = key_matcher(("k",), facts(key=CI))
    assert not exact
    assert canonical(("a ",)) == canonical(("a",))
    assert canonical(("A",)) != canonical(("a",))  # not known equal: the downstream tells


def test_a_chunk_column_besides_the_key_is_checked_too() -> None:
    src = replace(facts(), columns={"k": (None, None), "v": BIN})
    why = refusal(T, ("k",), src, facts(), "v")
    assert why is not None and "chunk key column v" in why and "utf8mb4_bin" in why
    assert refusal(T, ("k",), src, facts()) is None
    assert refusal(T, ("k",), facts(), facts(), "k") is None
