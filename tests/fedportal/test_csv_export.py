import csv
import datetime
import io
import itertools
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fedportal.csv_export import BOM, CHUNK_CHARS, FORMULA_TRIGGERS, iter_csv, neutralise_cell, stream_csv


@pytest.mark.parametrize("payload", ["=1+1", "+1", "-1+2", "@SUM(A1)", "\t=1", "\r=1", "\n=1", "  =cmd", "＝1+1"])
def test_formula_looking_text_is_prefixed_with_a_quote(payload):
    assert neutralise_cell(payload) == "'" + payload


@pytest.mark.parametrize(
    "payload",
    [
        "\u00a0=1+1",  # NBSP
        "\u3000=1+1",  # ideographic space
        "\u200b=1+1",  # zero-width space
        "\ufeff=1+1",  # byte-order mark
        "\u000b=1+1",  # vertical tab
        "\u000c=1+1",  # form feed
        "\u2028@SUM(A1)",  # line separator
        "\u200e\u00a0 -2+3",  # left-to-right mark, NBSP, space
        "\u2060\u3000＋1",  # word joiner, ideographic space, full-width plus
    ],
)
def test_formula_behind_unicode_spaces_or_format_characters_is_prefixed(payload):
    assert neutralise_cell(payload) == "'" + payload


@pytest.mark.parametrize("text", ["\u00a0plain", "\u200bname", "\u3000", "\ufeff"])
def test_leading_invisible_characters_before_ordinary_text_are_kept_as_they_are(text):
    assert neutralise_cell(text) == text


@pytest.mark.parametrize(
    ("value", "cell"),
    [
        ("plain text", "plain text"),
        ("a=b", "a=b"),
        ("", ""),
        (None, ""),
        (-5, "-5"),
        (2.5, "2.5"),
        (True, "true"),
        (datetime.datetime(2026, 11, 1, 8, 30, tzinfo=datetime.UTC), "2026-11-01T08:30:00+00:00"),
        ({"b": 1, "a": "集群"}, '{"a": "集群", "b": 1}'),
    ],
)
def test_other_values_are_written_as_is(value, cell):
    assert neutralise_cell(value) == cell


@given(st.text())
def test_no_neutralised_cell_starts_with_a_formula_trigger(text):
    cell = neutralise_cell(text)
    stripped = "".join(itertools.dropwhile(lambda c: c.isspace() or unicodedata.category(c) == "Cf", cell))
    assert not stripped or stripped[0] not in FORMULA_TRIGGERS
    assert cell in (text, "'" + text)


def test_iter_csv_writes_a_bom_header_and_round_trips_through_the_csv_module():
    rows = [(1, "=evil", "line\nbreak", "名字"), (2, None, 'quote "x"', "-3")]
    text = "".join(iter_csv(["ID", "Formula", "Text", "Name"], rows))
    assert text.startswith(BOM)
    parsed = list(csv.reader(io.StringIO(text[1:])))
    assert parsed == [
        ["ID", "Formula", "Text", "Name"],
        ["1", "'=evil", "line\nbreak", "名字"],
        ["2", "", 'quote "x"', "'-3"],
    ]


def test_iter_csv_without_bom():
    assert "".join(iter_csv(["a"], [], bom=False)) == "a\r\n"


def test_iter_csv_yields_bounded_chunks_lazily():
    consumed = []

    def rows():
        for i in range(20000):
            consumed.append(i)
            yield (i, "x" * 40)

    chunks = iter_csv(["n", "text"], rows())
    first = next(chunks)
    assert CHUNK_CHARS <= len(first) < CHUNK_CHARS + 200
    assert len(consumed) < 2000, "rows are read only as the consumer asks for more"
    assert sum(len(c) for c in chunks) > 0 and len(consumed) == 20000


def test_stream_csv_is_a_streamed_utf8_attachment():
    response = stream_csv("drift report 2026.csv", ["a"], iter([("é",)]))
    assert response.streaming
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"] == 'attachment; filename="drift report 2026.csv"'
    assert response["Cache-Control"] == "no-store"
    assert b"".join(response.streaming_content).decode("utf-8") == BOM + "a\r\né\r\n"
