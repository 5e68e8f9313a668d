"""Properties as pytest collects them, for the benchmarks that run a property's body themselves.

No module imports a test module (``properties/suite/test_layout.py``): a benchmark asks pytest to collect the
property, as a suite run would, and gets the function from the collected item.
"""
from __future__ import annotations

import contextlib
import io


def collect(*args: str) -> list:
    """The items ``pytest --collect-only ARGS`` finds (node ids, ``-k``, paths), the report plugin off."""
    import pytest

    items: list = []

    class _Grab:
        def pytest_collection_finish(self, session):
            items.extend(session.items)

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "-p", "no:reports.plugin", *args],
                         plugins=[_Grab()])
    if rc != 0:
        raise SystemExit(f"error: pytest could not collect {' '.join(args)} (status {rc}):\n{out.getvalue()[-2000:]}")
    return items


def property_function(nodeid: str):
    """The test function of one node id (``path::name``), as pytest collected it."""
    items = collect(nodeid)
    if len(items) != 1:
        raise SystemExit(f"error: {nodeid} collected {len(items)} items, expected 1")
    return items[0].function
