"""fedportal.text: text the database can store (no NUL, no lone surrogate), wherever input comes from."""

import pytest

from fedportal.text import NUL_MESSAGE, SURROGATE_MESSAGE, find_text_error, text_error


@pytest.mark.parametrize(
    "value,expected",
    [
        ("", None),
        ("plain", None),
        ("tab\t, \x01, é, 😀", None),  # other control characters and any real character are fine
        ("a\x00b", NUL_MESSAGE),
        ("\x00", NUL_MESSAGE),
        ("\ud800", SURROGATE_MESSAGE),
        ("ok \udfff", SURROGATE_MESSAGE),
    ],
)
def test_text_error(value, expected):
    assert text_error(value) == expected


def test_find_text_error_looks_at_every_key_and_nested_value():
    assert find_text_error({"a": [1, True, None, {"b": "ok"}]}) is None
    assert find_text_error({"a": [1, {"b": "x\x00"}]}) == NUL_MESSAGE
    assert find_text_error({"k\x00": 1}) == NUL_MESSAGE
    assert find_text_error(("x", "\udc80")) == SURROGATE_MESSAGE
    assert find_text_error(None) is None and find_text_error(5) is None
