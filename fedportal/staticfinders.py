"""Serve plotly.js from the installed plotly package as the static file ``plotly/plotly.min.js``.

A finder (rather than a STATICFILES_DIRS entry) exposes only that one file, not the package's
datasets, and keeps the bundled version in lock-step with the Python package.
"""

from pathlib import Path

import plotly
from django.contrib.staticfiles.finders import BaseFinder
from django.core.files.storage import FileSystemStorage

PLOTLY_JS = "plotly/plotly.min.js"
_PACKAGE_DATA = Path(plotly.__file__).resolve().parent / "package_data"


class PlotlyFinder(BaseFinder):
    def __init__(self, *args, **kwargs):
        self.storage = FileSystemStorage(location=str(_PACKAGE_DATA))
        self.storage.prefix = "plotly"

    def check(self, **kwargs):
        return []

    def find(self, path, find_all=False, **kwargs):
        if path == PLOTLY_JS:
            match = str(_PACKAGE_DATA / "plotly.min.js")
            return [match] if find_all else match
        return [] if find_all else None

    def list(self, ignore_patterns):
        yield "plotly.min.js", self.storage
