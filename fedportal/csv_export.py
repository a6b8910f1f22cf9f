"""Streamed CSV downloads, shared by every app's export (audit log, clusters, drift reports).

    from fedportal.csv_export import stream_csv

    def cluster_export(request):
        rows = Cluster.objects.order_by("name").values_list("name", "state").iterator(chunk_size=2000)
        return stream_csv("clusters.csv", ["Name", "State"], rows)

* ``stream_csv(filename, columns, rows)`` returns a ``StreamingHttpResponse``; ``rows`` is any
  iterable of sequences (use ``queryset.values_list(...).iterator(chunk_size=...)`` so a million
  rows never sit in memory). ``columns`` are header strings, or objects with a ``header``
  attribute (``drift.tables.Column``); fedportal.tables.stream_table_csv
  feeds it from a list table.
* ``iter_csv(columns, rows)`` yields the same text in ~64 KiB chunks, for management commands
  that write a file.
* ``neutralise_cell(value)`` turns one value into safe cell text. Every cell goes through it.

Encoding: UTF-8 with a byte-order mark. The people who open audit and compliance exports are
mostly auditors using Excel, which reads a BOM-less CSV in the machine's legacy code page and
mangles every non-ASCII name (the fleet's operators write Chinese); with the BOM Excel, Numbers
and LibreOffice all read it as UTF-8. Python (``encoding="utf-8-sig"``), pandas and most CSV
tools skip the BOM. Pass ``bom=False`` for a consumer that cannot.

Formula injection (OWASP "CSV Injection"): a text cell whose first character (after any leading
spaces, Unicode spaces such as NBSP or U+3000 included, and invisible format characters such as
ZWSP or a BOM) is ``=``, ``+``, ``-``, ``@``, tab, CR or LF (or their full-width forms, which some
spreadsheet locales also evaluate) is prefixed with a single quote, so a spreadsheet shows it as
text instead of evaluating it. Numbers are written as numbers: they cannot carry a formula.
"""

import csv
import datetime
import decimal
import io
import json
import unicodedata
from collections.abc import Iterable, Iterator, Sequence

from django.core.serializers.json import DjangoJSONEncoder
from django.http import StreamingHttpResponse
from django.utils.http import content_disposition_header

BOM = "\ufeff"
FORMULA_TRIGGERS = frozenset("=+-@\t\r\n＝＋－＠")
CHUNK_CHARS = 64 * 1024


def neutralise_cell(value) -> str:
    """One value as CSV cell text that no spreadsheet will evaluate as a formula."""
    if type(value) is str:  # the common case first: an export runs this for every cell
        text = value
    elif value is None:
        return ""
    elif isinstance(value, bool):
        return "true" if value else "false"
    elif isinstance(value, (int, float, decimal.Decimal)):
        return str(value)
    elif isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    elif isinstance(value, (dict, list, tuple)):
        text = json.dumps(value, sort_keys=True, ensure_ascii=False, cls=DjangoJSONEncoder)
    else:
        text = str(value)
    if text and _starts_like_a_formula(text):
        return "'" + text
    return text


def _starts_like_a_formula(text: str) -> bool:
    """The first character that is not a space (any Unicode space: NBSP, U+3000, VT, FF...) or an
    invisible format character (ZWSP, BOM, bidi marks: category Cf) is a formula trigger."""
    for char in text:
        if char in FORMULA_TRIGGERS:
            return True
        if not (char.isspace() or unicodedata.category(char) == "Cf"):
            return False
    return False


def _headers(columns: Sequence) -> list[str]:
    return [str(getattr(column, "header", column)) for column in columns]


def iter_csv(columns: Sequence, rows: Iterable[Sequence], *, bom: bool = True) -> Iterator[str]:
    """The CSV text (header row first) in chunks of about 64 KiB; every cell neutralised."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    if bom:
        buffer.write(BOM)
    writer.writerow([neutralise_cell(header) for header in _headers(columns)])
    for row in rows:
        writer.writerow([neutralise_cell(cell) for cell in row])
        if buffer.tell() >= CHUNK_CHARS:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    tail = buffer.getvalue()
    if tail:
        yield tail


def stream_csv(
    filename: str, columns: Sequence, rows: Iterable[Sequence], *, bom: bool = True
) -> StreamingHttpResponse:
    """A streamed ``text/csv`` download named ``filename``; ``rows`` is consumed lazily."""
    response = StreamingHttpResponse(iter_csv(columns, rows, bom=bom), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = content_disposition_header(True, filename)
    response["Cache-Control"] = "no-store"
    response["X-Accel-Buffering"] = "no"  # let a proxy pass chunks on instead of buffering them all
    return response
