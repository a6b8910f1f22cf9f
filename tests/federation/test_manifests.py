import pytest

from federation.manifests import (
    MAX_MANIFEST_BYTES,
    ManifestError,
    dump_yaml,
    load_yaml,
    load_yaml_documents,
    parse_template,
)


def test_multi_document_yaml_is_split_and_empty_documents_skipped():
    assert load_yaml_documents("a: 1\n---\n---\nb: [1, 2]\n") == [{"a": 1}, {"b": [1, 2]}]


def test_alias_bomb_is_refused_without_expanding():
    bomb = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    for i in range(ord("b"), ord("j")):
        prev = chr(i - 1)
        bomb += f"{chr(i)}: &{chr(i)} [*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev}]\n"
    with pytest.raises(ManifestError, match="aliases"):
        load_yaml(bomb)


def test_merge_key_aliases_are_refused_too():
    with pytest.raises(ManifestError, match="aliases"):
        load_yaml("base: &b {x: 1}\nother:\n  <<: *b\n")


def test_oversized_yaml_is_refused():
    with pytest.raises(ManifestError, match="larger than"):
        load_yaml("a: " + "x" * (MAX_MANIFEST_BYTES + 1))


def test_deep_nesting_is_refused():
    with pytest.raises(ManifestError, match="nested deeper"):
        load_yaml("[" * 200 + "]" * 200)


def test_duplicate_keys_are_refused_with_the_key_named():
    with pytest.raises(ManifestError, match="Duplicate key 'spec'"):
        load_yaml("spec: {}\nspec: {}\n")


def test_invalid_yaml_reports_line_and_column():
    with pytest.raises(ManifestError, match=r"Invalid YAML: .*line 1"):
        load_yaml("a: [1")


def test_python_tags_are_not_constructed():
    with pytest.raises(ManifestError):
        load_yaml("!!python/object/apply:os.system ['true']")


def test_several_documents_where_one_is_expected_is_an_error():
    with pytest.raises(ManifestError, match="one YAML document"):
        load_yaml("a: 1\n---\nb: 2\n")


def test_bytes_must_be_utf8():
    with pytest.raises(ManifestError, match="UTF-8"):
        load_yaml(b"\xff\xfe")


def test_template_kind_must_match_type():
    with pytest.raises(ManifestError, match="kind is 'Service'"):
        parse_template("kind: Service\nspec: {}\n", api_version="apps/v1", kind="Deployment")


def test_template_api_version_must_match_type():
    with pytest.raises(ManifestError, match="apiVersion is 'apps/v1beta1'"):
        parse_template("apiVersion: apps/v1beta1\nkind: Deployment\n", api_version="apps/v1", kind="Deployment")


def test_template_must_be_a_mapping():
    with pytest.raises(ManifestError, match="mapping"):
        parse_template("- a\n- b\n", api_version="v1", kind="ConfigMap")


def test_template_labels_must_be_strings():
    with pytest.raises(ManifestError, match="metadata.labels"):
        parse_template("metadata:\n  labels:\n    a: 1\n", api_version="v1", kind="ConfigMap")


def test_template_without_identity_is_accepted_and_empty_text_is_empty_template():
    assert parse_template("data:\n  a: b\n", api_version="v1", kind="ConfigMap") == {"data": {"a": "b"}}
    assert parse_template("", api_version="v1", kind="ConfigMap") == {}


def test_dump_is_stable():
    assert dump_yaml({"b": 1, "a": {"d": 2, "c": 3}}) == "a:\n  c: 3\n  d: 2\nb: 1\n"


def test_timestamps_stay_strings_like_kubectl():
    assert load_yaml("date: 2024-01-01\nwhen: 2001-12-14t21:59:43.10-05:00\n") == {
        "date": "2024-01-01",
        "when": "2001-12-14t21:59:43.10-05:00",
    }


@pytest.mark.parametrize(
    "text, message",
    [
        ("a: !!binary aGVsbG8=\n", r"tags \(tag:yaml.org,2002:binary\) are not allowed at line 1"),
        ("a: !!set {x, y}\n", r"tags \(tag:yaml.org,2002:set\)"),
        ("a: !custom x\n", r"tags \(!custom\)"),
        ("a: !!str 5\n", "tags"),
        ("a: .nan\n", "not finite"),
        ("a: .inf\n", "not finite"),
        ("? [1, 2]\n: x\n", "must be a string, not a list"),
    ],
)
def test_values_json_cannot_hold_are_refused(text, message):
    with pytest.raises(ManifestError, match=message):
        load_yaml(text)


@pytest.mark.parametrize(
    "text, message",
    [
        ('a: "x\\0y"\n', "The value at /a cannot be stored: Null characters are not allowed"),
        ('a: {b: ["ok", "x\\u0000"]}\n', "The value at /a/b/1 cannot be stored: Null characters"),
        ('"k\\x00": 1\n', "A key at / cannot be stored: Null characters"),
        ('{"a": {"k\\u0000": "v"}}', "A key at /a cannot be stored: Null characters"),  # JSON is YAML
        ('a: "\\ud800"\n', "The value at /a cannot be stored: Lone surrogate"),
    ],
)
def test_text_the_database_cannot_store_is_refused(text, message):
    # PostgreSQL refuses U+0000 in text and jsonb, and a lone surrogate is not UTF-8: each was a 500 on save
    with pytest.raises(ManifestError, match=message):
        load_yaml(text)


def test_other_control_characters_and_non_ascii_text_are_kept():
    assert load_yaml('a: "tab\\there \\x01 é 😀"\n') == {"a": "tab\there \x01 é 😀"}


# apimachinery's ValidateLabels / ValidateAnnotations (k8s.io/apimachinery/pkg/api/validation,
# Apache-2.0): what kube-apiserver answers 422 for, refused when new content is saved (a reviewer
# saved invalid keys, had them approved, and the simulator took them).
@pytest.mark.parametrize(
    "metadata, message",
    [
        ({"labels": {"bad key!": "x"}}, "metadata.labels: label key 'bad key!'"),
        ({"labels": {"a": "v" * 64}}, "metadata.labels: label value"),
        ({"labels": {"a": "-lead"}}, "metadata.labels: label value '-lead'"),
        ({"labels": {"a": "web\n"}}, "metadata.labels: label value 'web\\n'"),
        ({"labels": {"Not_A.Subdomain/x": "y"}}, "the prefix must be a DNS-1123 subdomain"),
        ({"annotations": {"Also Bad Key": "y"}}, "metadata.annotations: key 'Also Bad Key'"),
        ({"annotations": {"a": "x" * (256 * 1024)}}, "may not be more than 256 KiB in all"),
    ],
)
def test_labels_and_annotations_kube_apiserver_refuses_are_named(metadata, message):
    from federation.manifests import metadata_problems

    (problem,) = metadata_problems({"metadata": metadata})
    assert message in problem


def test_labels_and_annotations_kube_apiserver_takes_are_taken():
    from federation.manifests import metadata_problems

    metadata = {
        "labels": {"app.kubernetes.io/name": "web", "empty": "", "a": "v" * 63},
        # annotation keys are compared in lower case; their values are free text
        "annotations": {"Example.com/Owner": "Team A <a@example.com>!", "note": "x" * 1000},
    }
    assert metadata_problems({"metadata": metadata}) == []
