import copy
import pickle

import pytest

from cdc.model import Flavor, GtidSet, MariadbGtid

U1 = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
U2 = "8a94f357-aab4-11df-86ab-c80aa9429562"
BOTH_FORMS = ("domain-server-seq", "uuid:interval", "0-1-100,1-2-5")


def assert_shows_both_forms(message: str) -> None:
    for form in BOTH_FORMS:
        assert form in message, message


# --- MariaDB ---------------------------------------------------------------------------------


def test_mariadb_parse_sorts_domains_and_keeps_one_entry_per_domain():
    gtids = GtidSet.parse("1-2-5,0-1-100")
    assert gtids.flavor is Flavor.MARIADB
    assert str(gtids) == "0-1-100,1-2-5"
    assert gtids.mariadb_gtids == (MariadbGtid(0, 1, 100), MariadbGtid(1, 2, 5))


def test_mariadb_binlog_state_collapses_to_highest_seq_per_domain():
    # @@gtid_binlog_state lists one entry per (domain, server); the newest one wins.
    gtids = GtidSet.parse("0-1-100,0-2-90,0-3-120,5-1-1")
    assert str(gtids) == "0-3-120,5-1-1"


def test_mariadb_whitespace_and_empty_entries_are_tolerated():
    assert str(GtidSet.parse(" 0-1-100 ,\n 1-2-5,, ")) == "0-1-100,1-2-5"


def test_mariadb_contains_compares_seq_per_domain_ignoring_server_id():
    big = GtidSet.parse("0-1-100,1-2-5")
    assert big.contains(GtidSet.parse("0-1-100"))
    assert big.contains(GtidSet.parse("0-7-99,1-2-5"))
    assert not big.contains(GtidSet.parse("0-1-101"))
    assert not big.contains(GtidSet.parse("2-1-1"))  # unknown domain
    assert not GtidSet.parse("0-1-100").contains(big)
    assert big.contains(big)
    assert big.contains(GtidSet.parse(""))


def test_mariadb_union_takes_the_highest_seq_of_each_domain():
    left = GtidSet.parse("0-1-100,1-2-5")
    right = GtidSet.parse("0-1-90,1-3-9,2-1-4")
    assert str(left.union(right)) == "0-1-100,1-3-9,2-1-4"
    assert left.union(right) == right.union(left)


def test_mariadb_add_advances_a_domain_and_adds_new_ones():
    gtids = GtidSet.parse("0-1-100")
    assert str(gtids.add("0-1-101")) == "0-1-101"
    assert str(gtids.add("3-1-1")) == "0-1-100,3-1-1"
    assert str(gtids.add("0-1-50")) == "0-1-100"  # never moves a domain backwards
    assert str(gtids) == "0-1-100"  # immutable: the original is unchanged


@pytest.mark.parametrize(
    ("text", "bad", "why"),
    [
        ("0-1", "'0-1'", "domain-server-seq"),
        ("0-1-100,abc", "'abc'", "domain-server-seq"),
        ("0-1-x", "'0-1-x'", "domain-server-seq"),
        ("-1-1-5", "'-1-1-5'", "domain-server-seq"),
        ("4294967296-1-1", "'4294967296-1-1'", "at most 4294967295"),
        ("0-1-18446744073709551616", "'0-1-18446744073709551616'", "at most 18446744073709551615"),
    ],
)
def test_mariadb_malformed_text_quotes_the_bad_part(text, bad, why):
    with pytest.raises(ValueError) as err:
        GtidSet.parse(text)
    message = str(err.value)
    assert f"bad GTID {bad}" in message
    assert why in message
    assert_shows_both_forms(message)


# --- MySQL -----------------------------------------------------------------------------------


def test_mysql_parse_merges_and_sorts_intervals():
    gtids = GtidSet.parse(f"{U1}:7-9:1-3:4-6")
    assert gtids.flavor is Flavor.MYSQL
    assert str(gtids) == f"{U1}:1-9"


def test_mysql_keeps_holes_between_intervals():
    assert str(GtidSet.parse(f"{U1}:1-5:7-9:11")) == f"{U1}:1-5:7-9:11"


def test_mysql_overlapping_intervals_merge():
    assert str(GtidSet.parse(f"{U1}:1-5:3-8:8-10:20-30:25")) == f"{U1}:1-10:20-30"


def test_mysql_multiline_output_with_upper_case_and_repeated_uuid():
    # MySQL prints long sets as "uuid:...,\nuuid:..."; the same uuid twice is merged.
    text = f"{U2}:1-3,\n{U1.upper()}:1-5,\n  {U1}:6-7\n"
    assert str(GtidSet.parse(text)) == f"{U1}:1-7,{U2}:1-3"


def test_mysql_tags_are_separate_sources_of_one_uuid():
    gtids = GtidSet.parse(f"{U1}:Beta:3:1-2,{U1}:5,{U1}:alpha:1")
    assert str(gtids) == f"{U1}:5:alpha:1:beta:1-3"
    assert gtids.contains(GtidSet.parse(f"{U1}:beta:2"))
    assert not gtids.contains(GtidSet.parse(f"{U1}:2"))
    assert str(GtidSet.parse(str(gtids))) == str(gtids)


def test_mysql_contains_needs_every_interval_covered():
    big = GtidSet.parse(f"{U1}:1-5:7-9,{U2}:1-100")
    assert big.contains(GtidSet.parse(f"{U1}:2-4:8"))
    assert big.contains(GtidSet.parse(f"{U1}:1-5:7-9"))
    assert not big.contains(GtidSet.parse(f"{U1}:5-7"))  # spans the hole at 6
    assert not big.contains(GtidSet.parse(f"{U1}:6"))
    assert not big.contains(GtidSet.parse(f"{U1}:10"))
    assert not big.contains(GtidSet.parse("00000000-0000-0000-0000-000000000001:1"))
    assert big.contains(GtidSet.empty())
    assert not GtidSet.empty().contains(big)


def test_mysql_union_merges_touching_and_overlapping_intervals():
    left = GtidSet.parse(f"{U1}:1-5:10-12")
    right = GtidSet.parse(f"{U1}:6-8:11-20,{U2}:4")
    assert str(left.union(right)) == f"{U1}:1-8:10-20,{U2}:4"
    assert left.union(right) == right.union(left)


def test_mysql_add_fills_holes():
    gtids = GtidSet.parse(f"{U1}:1-5:7-9")
    assert str(gtids.add(f"{U1}:6")) == f"{U1}:1-9"
    assert str(gtids.add(f"{U2}:1")) == f"{U1}:1-5:7-9,{U2}:1"
    assert str(gtids.add(f"{U1}:3")) == f"{U1}:1-5:7-9"
    assert str(gtids.add(f"{U1}:tag:3")) == f"{U1}:1-5:7-9:tag:3"


@pytest.mark.parametrize(
    ("text", "bad", "why"),
    [
        ("zz:1", "'zz:1'", "'zz' is not a uuid"),
        (f"{U1}:x-y", f"'{U1}:x-y'", "'x-y' is not an interval"),
        (f"{U1}:5-3", f"'{U1}:5-3'", "interval '5-3' ends before it starts"),
        (f"{U1}:0-3", f"'{U1}:0-3'", "between 1 and 9223372036854775807"),
        (f"{U1}:1-9223372036854775808", "9223372036854775808", "between 1 and"),
        (U1, f"'{U1}'", "needs at least one interval"),
        (f"{U1}:", f"'{U1}:'", "'' is not an interval"),
        (f"{U1}:t1:t2:1", f"'{U1}:t1:t2:1'", "tag 't1' has no intervals"),
        (f"{U1}:1:t1", f"'{U1}:1:t1'", "needs at least one interval"),
        (f"{U1}:1,{U2}:-4", f"'{U2}:-4' in GTID set", "'-4' is not an interval"),
    ],
)
def test_mysql_malformed_text_quotes_the_bad_part(text, bad, why):
    with pytest.raises(ValueError) as err:
        GtidSet.parse(text)
    message = str(err.value)
    assert bad in message
    assert why in message
    assert_shows_both_forms(message)


# --- both flavours -----------------------------------------------------------------------------


def test_empty_text_is_the_empty_set():
    empty = GtidSet.parse("")
    assert not empty
    assert str(empty) == ""
    assert empty.flavor is None
    assert GtidSet.parse(" \n,", Flavor.MYSQL).flavor is Flavor.MYSQL
    assert GtidSet.parse("", Flavor.MARIADB) == GtidSet.parse("", Flavor.MYSQL) == empty


def test_empty_set_combines_with_both_flavours():
    maria = GtidSet.parse("0-1-1")
    mysql = GtidSet.parse(f"{U1}:1")
    assert GtidSet.empty().union(maria) == maria
    assert mysql.union(GtidSet.empty()) == mysql
    assert GtidSet.empty().union(maria).flavor is Flavor.MARIADB
    assert str(GtidSet.empty().add("0-1-5")) == "0-1-5"
    assert str(GtidSet.empty(Flavor.MYSQL).add(f"{U1}:5")) == f"{U1}:5"


def test_explicit_flavor_must_match_the_text():
    assert GtidSet.parse("0-1-1", Flavor.MARIADB).flavor is Flavor.MARIADB
    with pytest.raises(ValueError) as err:
        GtidSet.parse("0-1-1", Flavor.MYSQL)
    assert "'0-1-1' looks like MariaDB, but MySQL was expected" in str(err.value)
    assert_shows_both_forms(str(err.value))
    with pytest.raises(ValueError, match="looks like MySQL, but MariaDB was expected"):
        GtidSet.parse(f"{U1}:1", Flavor.MARIADB)


def test_mixed_flavours_in_one_text_are_rejected():
    with pytest.raises(ValueError) as err:
        GtidSet.parse(f"0-1-100,{U1}:1")
    assert f"mixes MariaDB entry '0-1-100' with MySQL entry '{U1}:1'" in str(err.value)


@pytest.mark.parametrize("method", ["union", "contains"])
def test_mixing_flavours_in_operations_is_rejected(method):
    maria = GtidSet.parse("0-1-100")
    mysql = GtidSet.parse(f"{U1}:1-5")
    with pytest.raises(ValueError) as err:
        getattr(maria, method)(mysql)
    message = str(err.value)
    assert "MariaDB GTID set '0-1-100'" in message
    assert f"MySQL GTID set '{U1}:1-5'" in message
    with pytest.raises(ValueError, match="MySQL GTID set"):
        getattr(mysql, method)(GtidSet.empty(Flavor.MARIADB))


def test_add_mixing_flavours_is_rejected():
    with pytest.raises(ValueError, match="cannot combine MariaDB GTID set '0-1-1' with MySQL"):
        GtidSet.parse("0-1-1").add(f"{U1}:1")


@pytest.mark.parametrize(
    ("gtid", "why"),
    [
        ("0-1-1,0-1-2", "is not a single GTID"),
        ("", "is not a single GTID"),
        (f"{U1}:1-5", "not intervals"),
        (f"{U1}:1:3", "not intervals"),
        ("0-1", "bad GTID '0-1'"),
    ],
)
def test_add_rejects_anything_but_one_gtid(gtid, why):
    with pytest.raises(ValueError) as err:
        GtidSet.empty().add(gtid)
    assert why in str(err.value)
    assert repr(gtid) in str(err.value)


def test_equality_and_hash_follow_the_canonical_content():
    a = GtidSet.parse(f"{U1}:1-3:4-5")
    b = GtidSet.parse(f"{U1.upper()}:1-5")
    assert a == b
    assert hash(a) == hash(b)
    assert len({a, b, GtidSet.parse(f"{U1}:1-6")}) == 2
    assert GtidSet.parse("0-1-5") != GtidSet.parse("0-2-5")
    assert GtidSet.parse("0-1-5") != "0-1-5"


@pytest.mark.parametrize("text", ["0-1-100,1-2-5", f"{U1}:1-5:7,{U2}:t:1", ""])
def test_str_parse_round_trip_pickle_and_copy(text):
    gtids = GtidSet.parse(text)
    assert GtidSet.parse(str(gtids)) == gtids
    assert pickle.loads(pickle.dumps(gtids)) == gtids
    assert copy.deepcopy(gtids) == gtids
    assert repr(gtids).startswith("GtidSet(")


def test_gtid_set_is_immutable_and_built_only_by_parse():
    gtids = GtidSet.parse("0-1-1")
    with pytest.raises(AttributeError, match="immutable"):
        gtids._flavor = Flavor.MYSQL
    with pytest.raises(TypeError, match=r"GtidSet.parse\(text\)"):
        GtidSet()


def test_non_string_input_is_a_type_error():
    with pytest.raises(TypeError, match="must be a str, not int"):
        GtidSet.parse(5)
    with pytest.raises(TypeError, match="flavor must be a Flavor"):
        GtidSet.parse("0-1-1", "mariadb")
    with pytest.raises(TypeError, match="expected a GtidSet, not str"):
        GtidSet.empty().union("0-1-1")
