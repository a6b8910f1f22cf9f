"""Mapping keys YAML reads as numbers or booleans become the strings Kubernetes' YAML -> JSON
conversion makes of them, and two keys that become one string are refused, not overwritten.

Found by a reviewer: a rollout strategy written as ``1: x`` reached ``sorted()`` beside string keys
(a 500 on the resource form and the API); every parser of user YAML had the same exposure.
"""

import pytest

from fedportal.strict_yaml import StrictYAMLError, go_float32_text, load_documents

# From sigs.k8s.io/yaml's yaml_test.go, TestYAMLToJSON (Apache-2.0): YAML in, JSON keys out.
SIGS_YAML_KEY_CASES = [
    ("True: a", {"true": "a"}),
    ("no: a", {"false": "a"}),
    ("1: a", {"1": "a"}),
    ("1.2: a", {"1.2": "a"}),
    ("1000000000000000000000000000000000000: a", {"1e+36": "a"}),
    ("1e+36: a", {"1e+36": "a"}),
    ('"1e+36": a\n', {"1e+36": "a"}),
    ('"1.2": a\n', {"1.2": "a"}),
]
# ... and its cases that must fail ("~ key", "null key").
SIGS_YAML_REFUSED_KEYS = ["~: a", "null: a"]


def load_one(text):
    return load_documents(text, max_bytes=10_000)[0]


@pytest.mark.parametrize("text, expected", SIGS_YAML_KEY_CASES)
def test_keys_become_the_strings_sigs_yaml_makes(text, expected):
    assert load_one(text) == expected


@pytest.mark.parametrize("text", SIGS_YAML_REFUSED_KEYS)
def test_a_null_key_is_refused(text):
    with pytest.raises(StrictYAMLError, match="not a string"):
        load_one(text)


def test_nested_keys_are_converted_too():
    assert load_one("spec:\n  waves:\n  - 1: x\n") == {"spec": {"waves": [{"1": "x"}]}}


def test_keys_python_confuses_stay_apart():
    # 1 and True are one key in a Python dict; in JSON they are "1" and "true"
    assert load_one("{1: a, true: b}") == {"1": "a", "true": "b"}


@pytest.mark.parametrize("text", ["{1: a, 1.0: b}", '{true: a, "true": b}', "{yes: a, true: b}", '{1: a, "1": b}'])
def test_two_keys_that_make_one_string_are_refused(text):
    # in a Python dict 1, 1.0 and True are one key: the later value silently won
    with pytest.raises(StrictYAMLError, match="Duplicate key"):
        load_one(text)


def test_a_collection_key_is_refused_with_a_reason():
    with pytest.raises(StrictYAMLError, match="must be a string, not a list"):
        load_one("{[a]: b}")


# Go's strconv.FormatFloat(f, 'g', -1, 32): shortest float32 digits, exponent below 1e-4 or from 1e6.
@pytest.mark.parametrize(
    "value, text",
    [
        (1.0, "1"),
        (1.5, "1.5"),
        (0.1, "0.1"),
        (100.0, "100"),
        (999999.0, "999999"),
        (1e6, "1e+06"),
        (1234567.0, "1.234567e+06"),
        (0.0001, "0.0001"),
        (1e-5, "1e-05"),
        (3.14159265, "3.1415927"),
        (-2.5e-7, "-2.5e-07"),
        (0.0, "0"),
        (1e39, ".inf"),
        (-1e39, "-.inf"),
        (float("nan"), ".nan"),
    ],
)
def test_float_keys_are_written_as_go_writes_a_float32(value, text):
    assert go_float32_text(value) == text


@pytest.mark.parametrize(
    "text, expected",
    [
        ("a: {<<: {x: 1}, x: 2}", {"a": {"x": 2}}),  # the mapping's own key wins over a merged one
        ("<<: [{x: 1}, {x: 2}]", {"x": 1}),  # of merged mappings, the first listed wins
    ],
)
def test_merge_keys_are_overridden_not_duplicates(text, expected):
    assert load_one(text) == expected
