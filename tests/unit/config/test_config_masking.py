"""mask_uri / mask_secret: passwords never survive, other text does, nothing raises."""

import pytest

from cdc.masking import MASK, mask_secret, mask_uri


@pytest.mark.parametrize(
    ("uri", "masked"),
    [
        ("mysql://root:secret@h:3306/", "mysql://root:******@h:3306/"),
        ("mysql://root@h:3306/", "mysql://root@h:3306/"),
        ("mysql://:secret@h", "mysql://:******@h"),
        # an unencoded '@' or '/' or '?' in the password: the last '@' ends the user info
        ("mysql://root:p@ss@h:3306/?server-id=3", "mysql://root:******@h:3306/?server-id=3"),
        ("mysql://u:a/b@h", "mysql://u:******@h"),
        ("mysql://u:p?x=1@h/", "mysql://u:******@h/"),
        ("mysql://u:p#x@h/", "mysql://u:******@h/"),
        # an '@' inside a query value is not the end of the user info
        ("mysql://u:pw@h/?password-file=/a@b", "mysql://u:******@h/?password-file=/a@b"),
        ("mysql://u@h/?password-file=/a@b", "mysql://u@h/?password-file=/a@b"),
        # secret query parameters, but not password references
        (
            "mysql://u@h/?password=pw&passwd=pw2&token=t&secret=s&ssl-key-password=k&x=1",
            "mysql://u@h/?password=******&passwd=******&token=******&secret=******"
            "&ssl-key-password=******&x=1",
        ),
        ("mysql://u@h/?password-env=PW", "mysql://u@h/?password-env=PW"),
        ("kafka://user:pw@broker:9092/topic", "kafka://user:******@broker:9092/topic"),
        ("file:///var/lib/cdc", "file:///var/lib/cdc"),
        ("not a uri at all", "not a uri at all"),
        ("", ""),
    ],
)
def test_mask_uri(uri: str, masked: str) -> None:
    assert mask_uri(uri) == masked


def test_mask_uri_on_garbage_never_raises() -> None:
    for junk in ["://", "mysql://", "mysql://@", "mysql://:@", "a://b:c", "@@@", "?password="]:
        assert isinstance(mask_uri(junk), str)
    assert mask_uri(None) == "None"  # type: ignore[arg-type]


def test_mask_secret_masks_every_uri_in_text() -> None:
    text = (
        "failed to connect to 'mysql://root:first@h1:3306/' then mysql://u:second@h2/?x=1, "
        "retrying with mariadb://u:third@h3 and file:///tmp/out; contact admin@example.com"
    )
    masked = mask_secret(text)
    for secret in ("first", "second", "third"):
        assert secret not in masked
    assert masked.count(MASK) == 3
    assert "file:///tmp/out" in masked
    assert "admin@example.com" in masked
    assert masked.startswith("failed to connect to 'mysql://root:******@h1:3306/'")


def test_mask_secret_handles_multiline_tracebacks() -> None:
    text = 'Traceback:\n  uri = "mysql://u:topsecret@h/"\nValueError: token=abc in ?token=abc'
    masked = mask_secret(text)
    assert "topsecret" not in masked
    assert "?token=******" in masked
