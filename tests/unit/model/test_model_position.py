import json
import pickle
import random

import pytest

from cdc.model import Flavor, GtidSet, Position

U1 = "3e11fa47-71ca-11e1-9e33-c80aa9429562"


def pos(text: str) -> Position:
    return Position.parse(text)


# --- order -----------------------------------------------------------------------------------


def test_file_rollover_orders_by_sequence_number_not_text():
    nine, ten = pos("mysql-bin.000009:900"), pos("mysql-bin.000010:4")
    assert "mysql-bin.000009" < "mysql-bin.000010"
    assert nine < ten and ten > nine
    assert nine <= ten and ten >= nine
    # Without the numeric parse, 'mysql-bin.9' > 'mysql-bin.10' as text.
    assert pos("mysql-bin.9:4") < pos("mysql-bin.10:4")
    assert pos("mysql-bin.999999:4") < pos("mysql-bin.1000000:4")


def test_offsets_order_within_a_file():
    assert pos("mysql-bin.000003:1234") < pos("mysql-bin.000003:1235")
    assert not pos("mysql-bin.000003:1235") < pos("mysql-bin.000003:1234")


def test_equal_offsets_are_neither_less_nor_greater():
    a, b = pos("mysql-bin.000003:1234"), pos("mysql-bin.000003:1234")
    assert a == b and hash(a) == hash(b)
    assert not a < b and not a > b
    assert a <= b and a >= b


def test_same_coordinate_different_gtid_is_unequal_but_order_equal():
    plain = Position("mysql-bin.000003", 1234)
    with_gtid = Position("mysql-bin.000003", 1234, GtidSet.parse("0-1-100"))
    assert plain != with_gtid
    assert plain.key() == with_gtid.key() == (3, 1234)
    assert not plain < with_gtid and not plain > with_gtid
    assert plain <= with_gtid and plain >= with_gtid


def test_sorting_a_shuffled_list_min_and_max():
    expected = [
        pos("mysql-bin.000001:4"),
        pos("mysql-bin.000001:120"),
        pos("mysql-bin.000001:5000"),
        pos("mysql-bin.000002:4"),
        pos("mysql-bin.000009:77"),
        pos("mysql-bin.000010:4"),
        pos("mysql-bin.000010:8"),
        pos("mysql-bin.000100:4"),
    ]
    shuffled = expected[:]
    random.Random(7).shuffle(shuffled)
    assert shuffled != expected
    assert sorted(shuffled) == expected
    assert min(shuffled) == expected[0]
    assert max(shuffled) == expected[-1]


def test_comparing_different_binlog_base_names_raises():
    with pytest.raises(ValueError) as err:
        _ = pos("mysql-bin.000003:4") < pos("mariadb-bin.000003:4")
    message = str(err.value)
    assert "different binlogs" in message
    assert "'mysql-bin.000003' and 'mariadb-bin.000003'" in message
    for op in ("__le__", "__gt__", "__ge__"):
        with pytest.raises(ValueError, match="different binlogs"):
            getattr(pos("a.1:4"), op)(pos("b.1:4"))
    with pytest.raises(ValueError, match="different binlogs"):
        min([pos("a.1:4"), pos("b.1:4")])


def test_comparing_with_other_types_is_a_type_error():
    with pytest.raises(TypeError):
        _ = pos("mysql-bin.000003:4") < (3, 4)


def test_file_parts():
    p = pos("mysql-bin.000012:4")
    assert p.file_base == "mysql-bin"
    assert p.file_seq == 12
    assert pos("host.example.com-bin.000007:4").file_base == "host.example.com-bin"


# --- text ------------------------------------------------------------------------------------


def test_parse_and_str():
    p = Position.parse(" mysql-bin.000003:1234 ")
    assert p == Position("mysql-bin.000003", 1234)
    assert str(p) == "mysql-bin.000003:1234"


def test_str_with_gtid_parses_back():
    gtid = GtidSet.parse(f"{U1}:1-5:7")
    p = Position("mysql-bin.000003", 1234, gtid)
    assert str(p) == f"mysql-bin.000003:1234 gtid={U1}:1-5:7"
    assert Position.parse(str(p)) == p
    maria = Position("mariadb-bin.000001", 4, GtidSet.parse("0-1-9,1-1-3"))
    assert Position.parse(str(maria)) == maria


FORM = "expected FILE:OFFSET, e.g. 'mysql-bin.000003:1234'"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("mysql-bin.000003", "has no ':' between file and offset; " + FORM),
        (":1234", "has no binlog file name before ':'; " + FORM),
        ("mysql-bin.000003:-5", "has a negative offset; offsets are >= 0"),
        ("mysql-bin.000003:12x", "has a non-numeric offset '12x'; " + FORM),
        ("mysql-bin.000003:", "has a non-numeric offset ''; " + FORM),
        ("mysql-bin.000003:1.5", "has a non-numeric offset '1.5'; " + FORM),
    ],
)
def test_parse_errors_quote_the_text(text, expected):
    with pytest.raises(ValueError) as err:
        Position.parse(text)
    assert str(err.value) == f"position {text!r} {expected}"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("mysql-bin:1234", "binlog file name 'mysql-bin' must end in '.<number>'"),
        ("/var/lib/mysql/mysql-bin.000003:4", "without a directory"),
        ("mysql-bin.000003:4 gtid=0-1", "bad GTID '0-1'"),
    ],
)
def test_parse_passes_on_file_and_gtid_errors(text, expected):
    with pytest.raises(ValueError) as err:
        Position.parse(text)
    assert expected in str(err.value)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("mysql-bin.000003", -1), "binlog offset must be >= 0, not -1"),
        (("mysql-bin.000003", "4"), "binlog offset must be an int, not '4'"),
        (("mysql-bin.000003", True), "binlog offset must be an int, not True"),
        (("mysql-bin", 4), "binlog file name 'mysql-bin' must end in '.<number>'"),
        (("", 4), "binlog file name '' must end in '.<number>'"),
        (("mysql-bin.000003", 4, "0-1-1"), "gtid must be a GtidSet or None, not str"),
    ],
)
def test_constructor_validates(args, expected):
    with pytest.raises(ValueError) as err:
        Position(*args)
    assert expected in str(err.value)


def test_parse_rejects_non_strings():
    with pytest.raises(TypeError, match="must be a str, not int"):
        Position.parse(1234)


# --- serialisation ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "position",
    [
        Position("mysql-bin.000003", 1234),
        Position("mariadb-bin.000010", 4, GtidSet.parse("0-1-100,1-2-5")),
        Position("mysql-bin.000003", 1234, GtidSet.parse(f"{U1}:1-5:7-9")),
        Position("mysql-bin.000003", 0, GtidSet.parse("", Flavor.MYSQL)),
        Position("mysql-bin.000003", 0, GtidSet.empty()),
    ],
    ids=["no-gtid", "mariadb", "mysql", "empty-mysql", "empty"],
)
def test_json_and_dict_round_trip(position):
    text = position.to_json()
    assert json.loads(text)["v"] == 1
    back = Position.from_json(text)
    assert back == position
    assert back.gtid is None or back.gtid.flavor is position.gtid.flavor
    assert Position.from_json(text.encode()) == position
    assert Position.from_dict(position.to_dict()) == position
    assert pickle.loads(pickle.dumps(position)) == position


def test_to_dict_layout():
    p = Position("mysql-bin.000003", 1234, GtidSet.parse("0-1-100"))
    assert p.to_dict() == {
        "v": 1,
        "file": "mysql-bin.000003",
        "offset": 1234,
        "gtid": "0-1-100",
        "gtid_flavor": "mariadb",
    }
    assert Position("mysql-bin.000003", 1234).to_dict()["gtid"] is None


def test_equal_positions_give_equal_json():
    a = Position("mysql-bin.000003", 4, GtidSet.parse(f"{U1}:1-3:4-5"))
    b = Position("mysql-bin.000003", 4, GtidSet.parse(f"{U1.upper()}:1-5"))
    assert a.to_json() == b.to_json()


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            {"v": 2, "file": "mysql-bin.000003", "offset": 4},
            "unsupported position format version 2",
        ),
        ({"file": "mysql-bin.000003", "offset": 4}, "unsupported position format version None"),
        ({"v": 1, "file": "mysql-bin.000003"}, "stored position lacks offset"),
        ({"v": 1}, "stored position lacks file, offset"),
        ({"v": 1, "file": "mysql-bin.000003", "offset": "4"}, "offset must be an int"),
        (
            {"v": 1, "file": "x.1", "offset": 4, "gtid": "0-1-1", "gtid_flavor": "pg"},
            "unknown gtid_flavor 'pg'; expected one of ['mariadb', 'mysql'] or null",
        ),
        (
            {"v": 1, "file": "x.1", "offset": 4, "gtid": "0-1-1", "gtid_flavor": "mysql"},
            "looks like MariaDB, but MySQL was expected",
        ),
        ({"v": 1, "file": "x.1", "offset": 4, "gtid": 5}, "gtid must be a string, not 5"),
        ([1, 2], "must be a JSON object"),
    ],
)
def test_from_dict_errors(data, expected):
    with pytest.raises(ValueError) as err:
        Position.from_dict(data)
    assert expected in str(err.value)


def test_unknown_version_message_says_what_this_build_reads():
    with pytest.raises(ValueError) as err:
        Position.from_json('{"v": 7, "file": "mysql-bin.000003", "offset": 4}')
    assert "version 7 (this build reads version 1)" in str(err.value)


def test_from_json_rejects_bad_json():
    with pytest.raises(ValueError, match="stored position is not valid JSON"):
        Position.from_json("{not json")
